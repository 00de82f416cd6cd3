"""Means and variances of bounded values per key, from ONE vector counter per key (pure).

``ContinualMeanPerKey`` / ``ContinualVariancePerKey`` are metrics of the keyed family
(``beam_dp.drivers.keyed``): every key holds a 2-vector (mean) or a 3-vector (variance) in the
shard's vector counter, the same machinery as a histogram's bins. One record with value x,
clamped to [L, U], with midpoint M = (L + U)/2, half-range r = (U − L)/2, normalised value
u = (x − M)/r ∈ [−1, 1] and grid D = 2**grid_bits adds, in integer grid units,

  coordinate 0: D               (the count, weighted by D)
  coordinate 1: round(u·D)      (the sum of the values centred on the midpoint: |·| ≤ D)
  coordinate 2: round((2u² − 1)·D)  (variance only: the squares centred on the middle of
                                     their range [0, 1] and scaled to [−D, D])

so every coordinate of one record is bounded by the same D. The counter adds independent noise
of the same scale σ_c to every coordinate, and the sensitivity of the vector is what the
counter is calibrated to: per record L1 ≤ 2D (mean) / 3D (variance), L2 ≤ √2·D / √3·D, times
the privacy unit's K·m·S (``PrivacyUnit.sensitivity``). This is exactly PipelineDP's accounting
for MEAN (a noisy count and a noisy normalised sum, the budget split in two equal halves) and
VARIANCE (count, normalised sum, normalised sum of squares, thirds), done as one joint counter,
with the squares centred too (PipelineDP 0.3.1 adds noise to the uncentred Σ(x − M)² with the
half-width of [min², max²] (or [0, max(min², max²)]) as its bound: never less than our r²/2,
4× ours for [0, 100], 12× for [100, 200], equal for [−a, a]):
for pure ε a joint L1 counter with equal per-coordinate bounds is the same as splitting ε into
equal parts; for ρ-zCDP the joint L2 sensitivity √2·D (√3·D) is the same as splitting ρ. The
equal split is the minimax split for the mean's error over the unknown centred mean (the count's
noise enters multiplied by |mean − M| ≤ r, the sum's by r).

``count_share=f`` (``weights``) replaces the equal bounds D by integer weights w_i (the
count's share f, the sums' the rest): the same vector with each coordinate's bound w_i, the
counter calibrated to the weighted norms (so private for any f), each coordinate's noise sd
σ_c/w_i. The statements below are for the default equal weights.

Decoded (``finish``), in records and normalised units, every coordinate's noise has the same
exact standard deviation σ = σ_c / D, the release's public ``noise_stddev`` (the count's):

  n̂ = c / D,   Σu = s / D (sd σ),   Σ(2u² − 1) = q / D (sd σ);   in value units the
  centred sum Σ(x − M) has sd r·σ and the sum Σx = Σ(x − M) + M·n has sd σ·√(r² + M²).

The mean is M + r·clip(Σu / n₊, −1, 1) with n₊ = max(n̂, 1): always in [L, U]. Its error
estimate ``mean_stddev`` is the delta method (first order in the noise, plugged in at the noisy
values): r·σ·√(1 + ū²)/n₊ with ū = clip(Σu/n₊, −1, 1), capped at U − L, the largest error a
value in [L, U] can have. The variance is r²·clip(m₂ − ū², 0, 1) with the mean square
m₂ = clip((1 + Σ(2u² − 1)/n₊)/2, 0, 1) (always in [0, r²], the largest variance of values in
[L, U]); its delta-method sd is r²·σ·√((2ū² − (2m₂ − 1)/2)² + 4ū² + 1/4)/n₊, capped at r².

Tiny counts: the delta method is first order, so it is honest only when n̂ ≫ σ (the relative
noise of the count is small). When n̂ is within a few σ of 0 the ratio is dominated by noise
and the clamp to [L, U] (variance: [0, r²]) is what bounds the error (at most U − L, variance
r²): the clamp also biases the value towards the interval (docs/mean.md measures both).

The release of a key (``Release``): ``value`` is the mean (variance); ``noise_stddev`` is σ, the
exact sd of the count's noise (public: it depends only on the parameters and the step);
``values`` is ``MEAN_VALUES`` / ``VARIANCE_VALUES`` (below), in that order.
"""

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from beam_dp.drivers.clock import StepClock
from beam_dp.io.records import Release

__all__ = [
    'MEAN_VALUES',
    'RATIO_METRICS',
    'VARIANCE_VALUES',
    'coordinates',
    'dimension',
    'finish',
    'record_norms',
    'releases',
    'weights',
]

RATIO_METRICS = ('mean', 'variance')
#: ``Release.values`` of a mean: noisy count, noisy sum Σx, the delta-method sd of the mean.
MEAN_VALUES = ('count', 'sum', 'mean_stddev')
#: ``Release.values`` of a variance: noisy count, sum, mean, the mean's sd, the variance's sd.
VARIANCE_VALUES = ('count', 'sum', 'mean', 'mean_stddev', 'variance_stddev')


def dimension(metric: str) -> int:
    """Counter coordinates per key: 2 for a mean, 3 for a variance."""
    return 2 if metric == 'mean' else 3


def weights(metric: str, grid_bits: int, count_share: Optional[float] = None,
            gaussian: bool = False) -> Tuple[int, ...]:
    """Integer bound of each coordinate of one record (the count's weight first).

    Default (``count_share=None``): D = 2**grid_bits for every coordinate, the equal split.
    With ``count_share`` f the count gets the share f of the budget and the sums share the
    rest equally: a pure counter (L1) spends ε_i ∝ w_i, a Gaussian one (L2) ρ_i ∝ w_i², so
    w_i ∝ share_i (``gaussian=False``) or √share_i, scaled so that the largest weight is D.
    Any weights are private (the counter is calibrated to the record's actual norms,
    ``record_norms``): the share only moves accuracy between the count and the sums."""
    d = dimension(metric)
    scale = 1 << grid_bits
    if count_share is None:
        return (scale,) * d
    shares = [count_share] + [(1 - count_share) / (d - 1)] * (d - 1)
    if gaussian:
        shares = [math.sqrt(x) for x in shares]
    top = max(shares)
    return tuple(max(1, int(round(scale * x / top))) for x in shares)


def record_norms(metric: str, grid_bits: int, w: Optional[Sequence[int]] = None
                 ) -> Tuple[int, float]:
    """(L1, L2) norm bound of one record's vector, in grid units (equal weights D =
    2**grid_bits: L1 = 2D / 3D, L2 = √2·D / √3·D)."""
    w = weights(metric, grid_bits) if w is None else w
    return int(sum(w)), math.sqrt(sum(x * x for x in w))


def coordinates(metric: str, lower: float, upper: float, grid_bits: int, x: float,
                w: Optional[Sequence[int]] = None) -> Tuple[int, ...]:
    """One record's integer vector (module docstring; ``w``: the coordinates' weights,
    ``weights``, default D each) for a value already known to be a non-NaN float: clamped to
    [lower, upper] first.

    Raises:
      ValueError: for NaN (the transform dead-letters the record).
    """
    if math.isnan(x):
        raise ValueError('value is NaN')
    x = min(max(x, lower), upper)
    r = (upper - lower) / 2
    u = min(max((x - (lower + r)) / r, -1.0), 1.0)
    w = weights(metric, grid_bits) if w is None else w
    s = min(max(int(round(u * w[1])), -w[1]), w[1])
    if metric == 'mean':
        return w[0], s
    return w[0], s, min(max(int(round((2 * u * u - 1) * w[2])), -w[2]), w[2])


def finish(metric: str, lower: float, upper: float, estimates: np.ndarray, sigma
           ) -> Tuple[np.ndarray, np.ndarray]:
    """Counter estimates decoded to n̂, Σu (, Σ(2u² − 1)) → (values of shape (keys,), extra of shape
    (keys, len(MEAN_VALUES or VARIANCE_VALUES))). ``estimates`` has shape (keys, dimension) in
    records / normalised units (each coordinate divided by its weight); ``sigma`` is their
    noise sd (one number: every coordinate's; or one per coordinate, count first: with a
    ``count_share``). Pure post-processing: also what a per-step or window output applies to
    a difference of counter estimates (with that difference's sd)."""
    dim = dimension(metric)
    est = np.asarray(estimates, dtype=np.float64).reshape(-1, dim)
    sd = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (dim,))
    r = (upper - lower) / 2
    mid = lower + r
    n = est[:, 0]
    n_pos = np.maximum(n, 1.0)
    u_bar = np.clip(est[:, 1] / n_pos, -1.0, 1.0)
    mean = mid + r * u_bar
    total = r * est[:, 1] + mid * n
    mean_sd = np.minimum(r * np.sqrt(sd[1] ** 2 + (u_bar * sd[0]) ** 2) / n_pos, upper - lower)
    if metric == 'mean':
        return mean, np.stack([n, total, mean_sd], axis=1)
    m2 = np.clip((1.0 + est[:, 2] / n_pos) / 2, 0.0, 1.0)
    var_u = np.clip(m2 - u_bar * u_bar, 0.0, 1.0)
    grad = np.sqrt(((2 * u_bar * u_bar - (2 * m2 - 1) / 2) * sd[0]) ** 2
                   + 4 * u_bar * u_bar * sd[1] ** 2 + 0.25 * sd[2] ** 2)
    var_sd = np.minimum(r * r * grad / n_pos, r * r)
    return r * r * var_u, np.stack([n, total, mean, mean_sd, var_sd], axis=1)


def releases(metric: str, lower: float, upper: float, clock: StepClock, step: int,
             keys: Sequence[str], estimates: np.ndarray, sigma, fields: tuple
             ) -> List[Release]:
    """``Release`` records of one step (``rows.release_fields`` ``fields``): the ratio's
    value, its ``values`` (module docstring) and the count's σ as ``noise_stddev`` (``sigma``:
    as ``finish``)."""
    start, end = clock.step_bounds(step)
    values, extra = finish(metric, lower, upper, estimates, sigma)
    sigma = float(np.ravel(sigma)[0])
    new = tuple.__new__
    return [new(Release, (key, step, start, end, value, row, *fields, sigma))
            for key, value, row in zip(keys, (values + 0.0).tolist(), extra.tolist())]
