"""Shared by the count and sum cases: beam_dp's keyed continual release (``KeyedReleaseDriver``,
what ``ContinualCountPerKey`` / ``ContinualSumPerKey`` run per shard) driven without Beam on the
bounded daily totals, and the cases every keyed aggregate reports.

Outputs compared (``--window W``, default 7):
* final: the step-364 cumulative value (the year's total) vs PipelineDP's batch aggregate and
  the fresh-noise-per-step counter;
* per_step: each day's value vs differencing two consecutive cumulative releases;
* window: the last W days' value vs differencing the releases W steps apart.
Errors are RMS over the top keys (and over steps for per_step / window).
"""

import dataclasses
import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.privacy_unit import UserLevel
from benchmarks.aggregations import baselines
from benchmarks.aggregations.data import HORIZON, Bounds, Flights, window_sums


@dataclasses.dataclass
class Config:
    epsilon: float = 1.0
    delta: float = 0.0
    bounds: Bounds = Bounds(K=2, m=5, S=256, C=362)
    window: int = 7
    seeds: int = 20
    pipelinedp_seeds: int = 10
    lower: float = 0.0
    upper: float = 1.0
    grid_bits: int = 10
    #: beam_dp runs with these ``final_share``s too (a one-shot total at the last step).
    final_shares: Tuple[float, ...] = ()


#: The intermediate step whose noise the results report (mid-year: what the continual steps
#: before the end pay for a ``final_share``).
MID_STEP = HORIZON // 2


def mid_year(rel: np.ndarray, daily_bounded: np.ndarray, drv: KeyedReleaseDriver) -> Dict:
    """Measured (RMS over seeds and keys) and predicted noise of the cumulative release at
    ``MID_STEP``; ``rel``: (seeds, steps, keys) releases, ``daily_bounded`` (steps, keys)."""
    truth = daily_bounded[:MID_STEP + 1].sum(axis=0)
    return dict(mid_noise=float(np.sqrt(np.mean((rel[:, MID_STEP] - truth) ** 2))),
                mid_noise_predicted=drv.noise_stddev(MID_STEP))


def driver(metric: str, cfg: Config, data: Flights, mechanism: str = 'auto',
           output=None, final_share=None) -> KeyedReleaseDriver:
    b = cfg.bounds
    unit = UserLevel(unit_fn=len, max_keys_per_unit=b.K, max_contributions_per_step=b.m,
                     max_steps_per_unit=b.S, max_total_contributions=b.C)
    kw = dict(lower=cfg.lower, upper=cfg.upper, grid_bits=cfg.grid_bits) if metric == 'sum' else {}
    if output is not None:
        kw['output'] = output
    if final_share:
        kw['final_share'] = final_share
    budget = (PrivacyBudget(epsilon=cfg.epsilon, delta=cfg.delta)
              if cfg.delta > 0 and mechanism != 'per_step' else PrivacyBudget(epsilon=cfg.epsilon))
    return KeyedReleaseDriver(metric=metric, budget=budget,
                              privacy_unit=unit, clock=StepClock(0, 1, last_step=HORIZON - 1),
                              layout=KeyLayout(list(data.top_keys), 1), mechanism=mechanism,
                              **kw)


def run_driver(drv: KeyedReleaseDriver, daily_units: np.ndarray, seeds: int) -> np.ndarray:
    """(seeds, steps, keys) releases of one shard holding the top keys, in value units."""
    keys = daily_units.shape[1]
    positions = np.arange(keys, dtype=np.int64)
    out = np.zeros((seeds, HORIZON, keys))
    for seed in range(seeds):
        state = drv.init_shard(0)
        rng = noise.seeded(1000 + seed)
        for step in range(HORIZON):
            released, state = drv.release_step(
                0, state, [(positions, daily_units[step].astype(np.int64))], rng.derive(step))
            out[seed, step] = released[:, 0]
    return out


def units_of(metric: str, cfg: Config, data: Flights) -> Optional[np.ndarray]:
    """Per-record values in the sum's grid units (clamped, snapped), None for counts."""
    if metric != 'sum':
        return None
    v = np.clip(data.value, cfg.lower, cfg.upper)
    return np.round(v * (1 << cfg.grid_bits))


def cases(metric: str, data: Flights, cfg: Config) -> List[Dict]:
    mask = data.bounded(cfg.bounds)
    units = units_of(metric, cfg, data)
    scale = 1.0 if units is None else float(1 << cfg.grid_bits)
    raw_values = None if metric == 'count' else np.clip(data.value, cfg.lower, cfg.upper)
    daily_true = data.daily(values=raw_values)
    daily_bounded_units = data.daily(mask, units)
    daily_bounded = daily_bounded_units / scale
    final_true, final_bounded = daily_true.sum(axis=0), daily_bounded.sum(axis=0)
    rows: List[Dict] = []

    # beam_dp's cumulative release (the counter 'auto' picks) and the fresh-noise baseline.
    cumulative = {}
    runs = [('beam_dp', 'auto', None), ('fresh_noise_per_step', 'per_step', None)]
    runs += [(f'beam_dp(final_share={f:g})', 'auto', f) for f in cfg.final_shares]
    for name, mech, share in runs:
        drv = driver(metric, cfg, data, mechanism=mech, final_share=share)
        rel = run_driver(drv, daily_bounded_units, cfg.seeds)
        if share is None:
            cumulative[name] = rel
        rows.append(baselines.summary(
            name, 'final', rel[:, -1], final_true, final_bounded,
            predicted_sd=drv.noise_stddev(HORIZON - 1),
            extra=dict(mechanism=drv.mechanism_name,
                       **mid_year(rel, daily_bounded, drv))))

    # PipelineDP 0.3.1, batch, same budget and bounds. Like for like: on the rows beam_dp's
    # bounding keeps (its own bounding is then a no-op: every unit is within the bounds), so
    # both have the same bias and the same L1 sensitivity; and on the raw rows with its own
    # bounding (it samples which contributions it keeps), for reference.
    noise_name = 'Gaussian' if cfg.delta > 0 else 'Laplace'
    for name, mask_rows in (('pipelinedp_batch', mask), ('pipelinedp_own_bounding', None)):
        pdp = baselines.pipelinedp_runs(
            data.rows(mask_rows, values=raw_values), data.top_keys, metric, cfg.epsilon,
            cfg.bounds, cfg.pipelinedp_seeds, min_value=cfg.lower, max_value=cfg.upper,
            delta=cfg.delta)
        rows.append(baselines.summary(
            name, 'final', pdp, final_true, final_bounded if mask_rows is not None else None,
            extra=dict(mechanism=f'PipelineDP 0.3.1 {noise_name}')))
    baselines.ratios(rows, 'pipelinedp_batch', 'final')
    for r in rows:
        if r['output'] == 'final':
            ref = [x for x in rows if x['method'] == 'pipelinedp_batch'][0]
            r['noise_vs_pipelinedp_batch'] = r['noise'] / ref['noise']

    # Per-step and window values: differencing the cumulative releases (the baseline).
    for output, w in (('per_step', 1), (f'window_{cfg.window}', cfg.window)):
        truth = window_sums(daily_true, w)
        bounded = window_sums(daily_bounded, w)
        for name, rel in cumulative.items():
            diff = rel.copy()
            diff[:, w:] -= rel[:, :-w]
            rows.append(baselines.summary(f'differencing({name})', output, diff, truth, bounded,
                                          extra=dict(mechanism=f'prefix release s − prefix '
                                                               f'release s−{w}')))
        rows.extend(direct_outputs(metric, data, cfg, daily_bounded_units, truth, bounded, w,
                                   output))
        baselines.ratios(rows, f'differencing(beam_dp)', output)
    return rows


def direct_outputs(metric, data, cfg, daily_units, truth, bounded, w, output) -> List[Dict]:
    """beam_dp's own per-step / window output, when the driver has one (issue 25.4)."""
    if 'output' not in {f.name for f in dataclasses.fields(KeyedReleaseDriver)}:
        return []
    drv = driver(metric, cfg, data, output=('per_step' if w == 1 else ('window', w)))
    rel = run_driver(drv, daily_units, cfg.seeds)
    sds = np.array([drv.noise_stddev(s) for s in range(HORIZON)])
    return [baselines.summary('beam_dp', output, rel, truth, bounded,
                              predicted_sd=float(math.sqrt(np.mean(sds ** 2))),
                              extra=dict(mechanism=drv.mechanism_name))]
