"""PERCENTILE: median and p90 departure delay per origin (EWR, JFK, LGA), planes as units, daily
steps; beam_dp's ``ContinualQuantilesPerKey`` (its driver, ``QuantilesDriver``, run without Beam
on the bounded rows) at the final step beside PipelineDP 0.3.1's batch PERCENTILE (its quantile
tree, Laplace, same ε, bounds and value domain) and the fresh-noise-per-step counter under the
same histogram (``mechanism='per_step'``).

Value: ``dep_delay`` in minutes, clamped to [LOWER, UPPER] = [-32, 224] (both libraries; 0.1% of
flights leave more than 16 min early, 0.5% more than 224 min late), cancelled flights dropped.
beam_dp cuts the domain into 256 buckets of one minute, or 64 of four (``HISTOGRAMS``;
``layout='auto'`` picks the flat or the tree layout in closed form). Outputs (RMS over the three origins): ``p50_value``,
``p90_value`` (minutes) and ``p50_rank``, ``p90_rank`` (records: #{raw values ≤ released} −
p·n). bias: of the user-level bounding (bounded truth − truth); noise: release − bounded truth.
``noise_predicted`` for beam_dp's rank rows: the RMS of the releases' stated
``rank_error_stddev`` (closed form).
"""

import dataclasses
from typing import Dict, List

import numpy as np

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.quantiles import QuantilesDriver
from beam_dp.drivers.quantiles import quantiles_from_buckets
from beam_dp.privacy_unit import UserLevel
from benchmarks.aggregations import baselines
from benchmarks.aggregations.data import HORIZON, Flights
from benchmarks.aggregations.keyed import Config

NAME = 'quantiles'
DESCRIPTION = ('median and p90 departure delay (minutes, clamped to [-32, 224]) per origin, '
               'a plane is the privacy unit')
LOWER, UPPER = -32.0, 224.0
#: (label, branching, depth): 256 buckets of 1 min (the tree wins the closed form) and 64 of
#: 4 min (the flat leaf histogram wins); ``layout='auto'`` decides in both.
HISTOGRAMS = (('256', 2, 8), ('64', 2, 6))
PERCENTILES = (50, 90)


def quantiles_driver(cfg: Config, keys, mechanism: str = 'auto', branching: int = 2,
                     depth: int = 8, final_share=None) -> QuantilesDriver:
    b = cfg.bounds
    unit = UserLevel(unit_fn=len, max_keys_per_unit=b.K, max_contributions_per_step=b.m,
                     max_steps_per_unit=b.S, max_total_contributions=b.C)
    return QuantilesDriver(metric='histogram', budget=PrivacyBudget(epsilon=cfg.epsilon),
                           privacy_unit=unit, clock=StepClock(0, 1, last_step=HORIZON - 1),
                           layout=KeyLayout(list(keys), 1), mechanism=mechanism, lower=LOWER,
                           upper=UPPER, percentiles=PERCENTILES, branching=branching,
                           depth=depth, final_share=final_share)


def daily_buckets(drv: QuantilesDriver, data: Flights, mask: np.ndarray) -> np.ndarray:
    """(steps, keys × M) bucket counts of the masked records of the top keys."""
    pos = np.full(len(data.keys), -1)
    pos[data.top] = np.arange(len(data.top))
    sel = mask & (pos[data.key_index] >= 0)
    width = (UPPER - LOWER) / drv.leaves
    bucket = np.clip(((np.clip(data.value, LOWER, UPPER) - LOWER) / width).astype(int), 0,
                     drv.leaves - 1)
    out = np.zeros((HORIZON, len(data.top) * drv.leaves), dtype=np.int64)
    np.add.at(out, (data.step[sel], pos[data.key_index[sel]] * drv.leaves + bucket[sel]), 1)
    return out


def run_quantiles(drv: QuantilesDriver, daily: np.ndarray, seeds: int):
    """Final-step (seeds, keys, P) values and stated rank sds, from the driver's counter."""
    keys = daily.shape[1] // drv.leaves
    positions = np.arange(daily.shape[1], dtype=np.int64)
    values = np.zeros((seeds, keys, len(PERCENTILES)))
    stated = np.zeros_like(values)
    for seed in range(seeds):
        state = drv.init_shard(0)
        rng = noise.seeded(2000 + seed)
        for step in range(HORIZON):
            est, state = drv.release_step(0, state, [(positions, daily[step])], rng.derive(step))
        _, vals, sds = drv.quantile_rows(est, drv.noise_stddev(HORIZON - 1))
        values[seed], stated[seed] = vals, sds
    return values, stated


def pipelinedp_percentiles(rows, keys, cfg: Config, runs: int) -> np.ndarray:
    """(runs, keys, P) PipelineDP 0.3.1 batch PERCENTILE releases."""
    import pipeline_dp   # pylint: disable=import-outside-toplevel
    out = np.zeros((runs, len(keys), len(PERCENTILES)))
    for i in range(runs):
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=cfg.epsilon, total_delta=0)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        params = pipeline_dp.AggregateParams(
            metrics=[pipeline_dp.Metrics.PERCENTILE(p) for p in PERCENTILES],
            noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            max_partitions_contributed=cfg.bounds.K,
            max_contributions_per_partition=cfg.bounds.per_key_total(),
            min_value=LOWER, max_value=UPPER)
        extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                                partition_extractor=lambda r: r[1],
                                                value_extractor=lambda r: r[2])
        result = engine.aggregate(rows, params, extractors, public_partitions=list(keys))
        accountant.compute_budgets()
        got = dict(result)
        for k, key in enumerate(keys):
            out[i, k] = [getattr(got[key], f'percentile_{p}') for p in PERCENTILES]
    return out


def _truth(values_by_key):
    return np.array([[np.percentile(v, p) for p in PERCENTILES] for v in values_by_key])


def _ranks(sorted_by_key, released: np.ndarray) -> np.ndarray:
    """#{raw values ≤ released} − p·n, same shape as ``released`` (..., keys, P)."""
    out = np.zeros_like(released)
    for k, v in enumerate(sorted_by_key):
        for i, p in enumerate(PERCENTILES):
            out[..., k, i] = np.searchsorted(v, released[..., k, i], side='right') - p / 100 * len(v)
    return out


def run(cfg: Config):
    data = Flights('origin', value='dep_delay', top=3)
    cfg = dataclasses.replace(cfg, lower=LOWER, upper=UPPER)
    keys = data.top_keys
    mask = data.bounded(cfg.bounds)
    clamped = np.clip(data.value, LOWER, UPPER)
    pos = {int(i): k for k, i in enumerate(data.top)}
    raw = [np.sort(clamped[data.key_index == i]) for i in data.top]
    bounded = [np.sort(clamped[mask & (data.key_index == i)]) for i in data.top]
    truth, bounded_truth = _truth(raw), _truth(bounded)
    rank_bounded = _ranks(raw, bounded_truth)
    del pos

    releases: Dict[str, np.ndarray] = {}
    mechanisms: Dict[str, str] = {}
    stated: Dict[str, np.ndarray] = {}
    for label, branching, depth in HISTOGRAMS:
        methods = [('beam_dp', 'auto', None), ('fresh_noise_per_step', 'per_step', None)]
        methods += [(f'beam_dp(final_share={f:g})', 'auto', f) for f in cfg.final_shares]
        for method, mech, share in methods:
            name = f'{method}[{label} buckets]'
            drv = quantiles_driver(cfg, keys, mechanism=mech, branching=branching, depth=depth,
                                   final_share=share)
            daily = daily_buckets(drv, data, mask)
            releases[name], stated[name] = run_quantiles(drv, daily, cfg.seeds)
            mechanisms[name] = (f'{drv.mechanism_name}, {drv.resolved_layout} layout, '
                                f'{drv.leaves} buckets')
    rows_in = data.rows(mask, clamped)
    releases['pipelinedp_batch'] = pipelinedp_percentiles(rows_in, keys, cfg,
                                                          cfg.pipelinedp_seeds)
    mechanisms['pipelinedp_batch'] = 'PipelineDP 0.3.1 PERCENTILE (quantile tree), Laplace'

    rows: List[Dict] = []
    for i, p in enumerate(PERCENTILES):
        for name, rel in releases.items():
            rows.append(baselines.summary(
                name, f'p{p}_value', rel[..., i], truth[:, i], bounded_truth[:, i],
                extra=dict(mechanism=mechanisms[name])))
        for name, rel in releases.items():
            predicted = None
            if name in stated:
                predicted = float(np.sqrt(np.mean(stated[name][..., i] ** 2)))
            rows.append(baselines.summary(
                name, f'p{p}_rank', _ranks(raw, rel)[..., i], np.zeros(len(keys)),
                rank_bounded[:, i], predicted_sd=predicted,
                extra=dict(mechanism=mechanisms[name],
                           records=int(np.mean([len(v) for v in raw])))))
        for output in (f'p{p}_value', f'p{p}_rank'):
            baselines.ratios(rows, 'pipelinedp_batch', output)
    return data, rows
