"""MEAN (and VARIANCE, ``variance.py``): arrival delay per carrier (top 10), planes as units,
daily steps.

Value: ``arr_delay`` in minutes, clamped to [−60, 180] (flights without an arrival delay, i.e.
cancelled or diverted, are dropped). beam_dp's ``ContinualMeanPerKey`` /
``ContinualVariancePerKey`` run as what they are: the keyed driver (``KeyedReleaseDriver``,
metric 'mean' / 'variance') with a 2- / 3-vector per key (``beam_dp.drivers.mean``), driven
without Beam on the bounded daily coordinate sums.

Outputs compared:
* final: the step-364 cumulative mean (variance) of the year vs PipelineDP 0.3.1's batch
  MEAN (VARIANCE) on the same rows, ε and bounds, and vs fresh noise per step;
* per_step / window_W: the mean of one day's (the last W days') flights, read off the
  cumulative counter vectors by differencing two prefix releases and decoding the difference
  (``beam_dp.drivers.mean.finish``: the per-step counter values stay accessible), for the
  'auto' counter and for fresh noise per step (whose per-step increments ARE fresh noise).
Errors are RMS over the top keys (and over steps for per_step / window).
"""

import dataclasses
from typing import Dict, List

import numpy as np

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers import mean as ratio
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.privacy_unit import UserLevel
from benchmarks.aggregations import baselines
from benchmarks.aggregations import keyed
from benchmarks.aggregations.data import HORIZON, Flights

NAME = 'mean'
DESCRIPTION = ('mean arrival delay (minutes, clamped to [-60, 180]) per carrier (top 10), a '
               'plane is the privacy unit')
LOWER, UPPER = -60.0, 180.0


#: A public prior for ``count_share`` (mean only): delays average around 0–20 min, so in
#: [−60, 180] the normalised mean is ū ≈ −0.4; the pure-ε optimum of r²(σ_s² + ū²σ_n²) has
#: ε_count/ε_sum = (ū²)^(1/3) ≈ 0.54, a count share of 0.35.
COUNT_SHARE = 0.35


def driver(metric: str, cfg: keyed.Config, data: Flights, mechanism: str,
           count_share=None, final_share=None) -> KeyedReleaseDriver:
    b = cfg.bounds
    unit = UserLevel(unit_fn=len, max_keys_per_unit=b.K, max_contributions_per_step=b.m,
                     max_steps_per_unit=b.S, max_total_contributions=b.C)
    budget = (PrivacyBudget(epsilon=cfg.epsilon, delta=cfg.delta)
              if cfg.delta > 0 and mechanism != 'per_step'   # per-step noise is pure ε
              else PrivacyBudget(epsilon=cfg.epsilon))
    return KeyedReleaseDriver(metric=metric, budget=budget,
                              privacy_unit=unit, clock=StepClock(0, 1, last_step=HORIZON - 1),
                              layout=KeyLayout(list(data.top_keys), 1), mechanism=mechanism,
                              lower=LOWER, upper=UPPER, grid_bits=cfg.grid_bits,
                              count_share=count_share, final_share=final_share or None)


def daily_coordinates(metric: str, data: Flights, mask: np.ndarray, grid_bits: int,
                      w=None) -> np.ndarray:
    """(HORIZON, keys·dim) integer sums of the records' coordinates (what the counter adds)."""
    dim = ratio.dimension(metric)
    pos = np.full(len(data.keys), -1)
    pos[data.top] = np.arange(len(data.top))
    sel = mask & (pos[data.key_index] >= 0)
    w = ratio.weights(metric, grid_bits) if w is None else w
    x = np.clip(data.value[sel], LOWER, UPPER)
    r = (UPPER - LOWER) / 2
    u = np.clip((x - (LOWER + r)) / r, -1.0, 1.0)
    coords = [np.full(u.shape, w[0], dtype=np.int64),
              np.clip(np.round(u * w[1]), -w[1], w[1]).astype(np.int64)]
    if dim == 3:
        coords.append(np.clip(np.round((2 * u * u - 1) * w[2]), -w[2], w[2]).astype(np.int64))
    out = np.zeros((HORIZON, len(data.top) * dim), dtype=np.int64)
    for j, c in enumerate(coords):
        np.add.at(out, (data.step[sel], pos[data.key_index[sel]] * dim + j), c)
    return out


def run_driver(drv: KeyedReleaseDriver, daily: np.ndarray, seeds: int) -> np.ndarray:
    """(seeds, steps, keys, dim) decoded counter estimates (records, normalised units)."""
    dim = drv.bins_per_key
    keys = daily.shape[1] // dim
    positions = np.arange(keys * dim, dtype=np.int64)
    out = np.zeros((seeds, HORIZON, keys, dim))
    for seed in range(seeds):
        state = drv.init_shard(0)
        rng = noise.seeded(1000 + seed)
        for step in range(HORIZON):
            released, state = drv.release_step(0, state, [(positions, daily[step])],
                                               rng.derive(step))
            out[seed, step] = released
    return out


def _value(metric, estimates, sigma=0.0):
    """Decoded estimates (..., keys, dim) → the released values (..., keys)."""
    shape = estimates.shape[:-1]
    values, _ = ratio.finish(metric, LOWER, UPPER, estimates.reshape(-1, estimates.shape[-1]),
                             sigma)
    return values.reshape(shape)


def _window(est: np.ndarray, w: int) -> np.ndarray:
    """Differences of prefix estimates w steps apart along the step axis (-3)."""
    out = est.copy()
    out[..., w:, :, :] -= est[..., :-w, :, :]
    return out


def cases(metric: str, cfg: keyed.Config) -> (Flights, List[Dict]):
    data = Flights('carrier', value='arr_delay')
    mask = data.bounded(cfg.bounds)
    all_records = np.ones(data.records, dtype=bool)
    scale = float(1 << cfg.grid_bits)
    daily_bounded = daily_coordinates(metric, data, mask, cfg.grid_bits)
    daily_all = daily_coordinates(metric, data, all_records, cfg.grid_bits)
    dim = ratio.dimension(metric)
    keys = len(data.top)

    def exact(daily):        # (steps, keys, dim) prefix sums → their noise-free values
        return np.cumsum(daily, axis=0).reshape(HORIZON, keys, dim) / scale

    prefix_true, prefix_bounded = exact(daily_all), exact(daily_bounded)
    final_true = _value(metric, prefix_true[-1])
    final_bounded = _value(metric, prefix_bounded[-1])
    rows: List[Dict] = []
    estimates = {}
    runs = [('beam_dp', 'auto', None, None), ('fresh_noise_per_step', 'per_step', None, None)]
    if metric == 'mean':
        runs.append((f'beam_dp(count_share={COUNT_SHARE})', 'auto', COUNT_SHARE, None))
    runs += [(f'beam_dp(final_share={f:g})', 'auto', None, f) for f in cfg.final_shares]
    for name, mech, share, final_share in runs:
        drv = driver(metric, cfg, data, mech, share, final_share)
        w = ratio.weights(metric, cfg.grid_bits, share, gaussian=drv.budget.is_zcdp)
        est = run_driver(drv, daily_bounded if share is None else daily_coordinates(
            metric, data, mask, cfg.grid_bits, w), cfg.seeds)
        if share is None and final_share is None:
            estimates[name] = est
        mid = keyed.MID_STEP
        mid_value = _value(metric, est[:, mid])
        mid_truth = _value(metric, prefix_bounded[mid])
        sigma = drv.coordinate_stddevs(drv.noise_stddev(HORIZON - 1))
        final = _value(metric, est[:, -1])
        reported = ratio.finish(metric, LOWER, UPPER, est[:, -1].reshape(-1, dim), sigma)[1]
        sd_col = 2 if metric == 'mean' else 4
        rows.append(baselines.summary(
            name, 'final', final, final_true, final_bounded,
            predicted_sd=float(np.sqrt(np.mean(reported[:, sd_col] ** 2))),
            extra=dict(mechanism=drv.mechanism_name, count_noise_sd=sigma[0],
                       mid_noise=float(np.sqrt(np.mean((mid_value - mid_truth) ** 2))),
                       mid_count_noise_sd=drv.noise_stddev(mid))))

    raw = np.clip(data.value, LOWER, UPPER)
    pdp = baselines.pipelinedp_runs(data.rows(values=raw), data.top_keys, metric, cfg.epsilon,
                                    cfg.bounds, cfg.pipelinedp_seeds, min_value=LOWER,
                                    max_value=UPPER, delta=cfg.delta)
    rows.append(baselines.summary('pipelinedp_batch', 'final', pdp, final_true,
                                  extra=dict(mechanism='PipelineDP 0.3.1 ' + ('Gaussian' if cfg.delta else 'Laplace'))))
    # PipelineDP neither clamps its mean to [lower, upper] nor its variance to [0, r²]: its
    # rare releases at a tiny noisy count dominate an RMS. Clamped (post-processing, free):
    r = (UPPER - LOWER) / 2
    clamped = np.clip(pdp, LOWER, UPPER) if metric == 'mean' else np.clip(pdp, 0.0, r * r)
    rows.append(baselines.summary('pipelinedp_batch_clamped', 'final', clamped, final_true,
                                  extra=dict(mechanism='PipelineDP 0.3.1 ' + ('Gaussian' if cfg.delta else 'Laplace') + ', clamped')))
    baselines.ratios(rows, 'pipelinedp_batch', 'final')
    baselines.ratios(rows, 'pipelinedp_batch_clamped', 'final')

    # Per-step and window values: differencing the prefix counter vectors, then decoding.
    for output, w in (('per_step', 1), (f'window_{cfg.window}', cfg.window)):
        truth = _value(metric, _window(prefix_true, w))
        bounded = _value(metric, _window(prefix_bounded, w))
        for name, est in estimates.items():
            rows.append(baselines.summary(
                f'differencing({name})', output, _value(metric, _window(est, w)), truth,
                bounded, extra=dict(mechanism=f'prefix vectors s − s−{w}, decoded')))
        baselines.ratios(rows, 'differencing(beam_dp)', output)
    return data, rows


def run(cfg: keyed.Config):
    return cases('mean', dataclasses.replace(cfg, lower=LOWER, upper=UPPER))
