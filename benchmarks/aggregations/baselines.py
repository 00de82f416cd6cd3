"""What every aggregate is compared with, on the same rows, ε and bounds.

* ``pipelinedp_batch``: PipelineDP 0.3.1's batch aggregate (``DPEngine.aggregate`` on its
  ``LocalBackend``, public partitions = the top keys, Laplace noise at the same pure ε) with the
  same L1 sensitivity as beam_dp's bounds: ``max_contributions = C`` when C < K·m·S (both
  libraries' L1 is then C), else K partitions per unit and m·S contributions per partition
  (PipelineDP samples which contributions it keeps; beam_dp keeps the first).
  One release of the whole year: the best a one-shot release can do.
* ``fresh_noise_per_step``: the naive continual counter, fresh discrete Laplace of scale Δ/ε on
  each step's value, cumulated (``PerStepCounter``: its per-step value is its noisy increment).
* ``differencing``: a per-step or window value read off a cumulative release as the difference
  of two prefix releases (what a user does without a per-step output).
"""

import time
from typing import Dict, List, Sequence

import numpy as np

from benchmarks.aggregations.data import Bounds


def pipelinedp_batch(rows, keys: Sequence[str], metric: str, epsilon: float, bounds: Bounds,
                     min_value: float = 0.0, max_value: float = 1.0, delta: float = 0.0
                     ) -> Dict[str, float]:
    """One PipelineDP release: {key: value} over ``keys`` (public partitions); Laplace noise
    for δ = 0, Gaussian for δ > 0."""
    import pipeline_dp   # pylint: disable=import-outside-toplevel
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=epsilon, total_delta=delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    kind = {'count': pipeline_dp.Metrics.COUNT, 'sum': pipeline_dp.Metrics.SUM,
            'mean': pipeline_dp.Metrics.MEAN, 'variance': pipeline_dp.Metrics.VARIANCE}[metric]
    # PipelineDP 0.3.1 refuses max_contributions for VARIANCE: K partitions and min(m·S, C)
    # per partition there (its L1 is then up to K× beam_dp's when C binds).
    if metric != 'variance' and bounds.C is not None and bounds.C < bounds.K * bounds.m * bounds.S:
        # C is the binding bound (beam_dp's L1 = C): PipelineDP's total bound per unit.
        contribution = dict(max_contributions=bounds.C)
    else:
        contribution = dict(max_partitions_contributed=bounds.K,
                            max_contributions_per_partition=bounds.per_key_total()
                            if metric == 'variance' else bounds.m * bounds.S)
    params = pipeline_dp.AggregateParams(
        metrics=[kind], noise_kind=(pipeline_dp.NoiseKind.GAUSSIAN if delta > 0
                                    else pipeline_dp.NoiseKind.LAPLACE), **contribution,
        min_value=min_value if metric != 'count' else None,
        max_value=max_value if metric != 'count' else None)
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[1],
                                            value_extractor=lambda r: r[2])
    result = engine.aggregate(rows, params, extractors, public_partitions=list(keys))
    accountant.compute_budgets()
    return {k: float(getattr(v, metric)) for k, v in result}


def pipelinedp_runs(rows, keys, metric, epsilon, bounds, seeds: int, **kw) -> np.ndarray:
    """(seeds, keys) PipelineDP releases (its noise is not seedable: independent runs)."""
    out = np.zeros((seeds, len(keys)))
    for i in range(seeds):
        got = pipelinedp_batch(rows, keys, metric, epsilon, bounds, **kw)
        out[i] = [got[k] for k in keys]
    return out


def summary(name: str, output: str, releases: np.ndarray, truth: np.ndarray,
            bounded_truth: np.ndarray = None, predicted_sd: float = None,
            extra: Dict = None) -> Dict:
    """One results row. ``releases``: (seeds, keys) or (seeds, steps, keys) values of one
    output; ``truth`` / ``bounded_truth``: the unbounded / bounded true values of the same shape
    without the seed axis. bias = RMS over cells of (bounded truth − truth) when the bounded
    truth is known, else of (mean over seeds − truth); noise = RMS over cells of the spread
    over seeds around the bounded truth (else around the seed mean); total = RMS of release −
    truth."""
    releases = np.asarray(releases, dtype=float)
    if bounded_truth is not None:
        bias = float(np.sqrt(np.mean((bounded_truth - truth) ** 2)))
        noise = float(np.sqrt(np.mean((releases - bounded_truth) ** 2)))
    else:
        mean = releases.mean(axis=0)
        bias = float(np.sqrt(np.mean((mean - truth) ** 2)))
        noise = float(np.sqrt(np.mean(releases.var(axis=0, ddof=1))))
    total = float(np.sqrt(np.mean((releases - truth) ** 2)))
    row = dict(method=name, output=output, seeds=int(releases.shape[0]), bias=bias,
               noise=noise, noise_predicted=predicted_sd, total=total)
    row.update(extra or {})
    return row


def ratios(rows: List[Dict], reference: str, output: str) -> None:
    """Adds ``vs_<reference>`` = total / the reference's total (same output) to every row."""
    ref = [r for r in rows if r['method'] == reference and r['output'] == output]
    if not ref:
        return
    for r in rows:
        if r['output'] == output:
            r[f'vs_{reference}'] = r['total'] / ref[0]['total'] if ref[0]['total'] else None


class Timer:
    def __enter__(self):
        self.start = time.time()
        return self

    def __exit__(self, *a):
        self.seconds = time.time() - self.start
