"""Post-processing of published ERM models: weighted averages with data-independent weights.

Every release of ``ERMRelease`` (Alg 2/4/5, the baselines) is a noised model w_i + ν_i with
ν_i ~ L2-Laplace(b_i) on R^D (``ReleasedModel.noise_scale`` b_i is a public function of the
schedule, n_nominal, μ and ε — never of the data). A weighted average Σ a_i·ŵ_i of published models
whose weights a_i are computed from public quantities only (the noise scales, the centre ids)
is post-processing of the published sequence: it costs no privacy beyond the releases it reads
(Dwork & Roth, Prop. 2.1; the whole sequence is ε-DP, so any fixed function of it is too). The
weights below never look at a weight vector, a label or a count of the data.

Per coordinate, ν_i has variance E‖ν_i‖²/D = (D + 1)·b_i² (‖ν‖ ~ Gamma(D, b): E‖ν‖² =
D(D + 1)b²; the direction is uniform, so every coordinate carries 1/D of it). Two variance models:

* ``'own'``: each release's own noise, v_i = (D + 1)·b_i². Right when the releases' noises are
  independent (the independent-block baseline: then the inverse-variance weights are equal and
  the average is the running mean).
* ``'chain'``: a PBERM release regularised toward a released centre moves little from it when
  μ is large, so it carries the centre's noise too; v_i = (D + 1)·Σ_{a ∈ chain(i)} b_a², the sum
  over the release and every centre it rests on (``scales`` must name them all, published or
  not: their scales are public schedule constants).

Models: ``ReleasedModel`` (the pure mechanism's output) or a record with the fields of
``beam_dp.io.erm.ModelRelease`` (what ``ContinualERM`` / ``SlidingWindowERM`` emit; its
``center_release_id`` '' means none). ``scales_of`` builds the 'chain' lookup from every emitted
release, the internal (``published=False``) chain models included.

Inverse-variance weights a_i = (1/v_i) / Σ_j (1/v_j) minimise the variance of the average of
independent unbiased estimates of one model. The releases here are neither independent (shared
centres) nor unbiased for one model (different data ranges), so these weights are a heuristic:
measured on the digits benchmark (``benchmarks/erm/README.md``) they match the plain running
mean within 0.002 at ε = 100. They are still exactly post-processing whatever their quality.
"""

import dataclasses
import math
from typing import Mapping, Optional, Sequence, Tuple

import numpy as np

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm.psgd import ReleasedModel

__all__ = [
    'RunningCombination',
    'chain_scales',
    'combine_releases',
    'inverse_variance_weights',
    'noise_variance',
    'scales_of',
]

COVARIANCES = ('own', 'chain')


def noise_variance(noise_scale: float, n_params: int) -> float:
    """Per-coordinate variance (D + 1)·b² of L2-Laplace(b) noise on R^D."""
    if not noise_scale >= 0 or not math.isfinite(noise_scale):
        raise InvalidParamsError(f'noise_variance: noise_scale must be finite and ≥ 0, got '
                                 f'{noise_scale!r}.')
    if isinstance(n_params, bool) or not isinstance(n_params, int) or n_params < 1:
        raise InvalidParamsError(f'noise_variance: n_params must be a positive int, got '
                                 f'{n_params!r}.')
    return (n_params + 1) * noise_scale ** 2


def inverse_variance_weights(variances: Sequence[float]) -> np.ndarray:
    """a_i ∝ 1/v_i, Σ a_i = 1. Zero variances (non-private releases) share all the weight
    equally; an empty sequence or a negative / non-finite variance raises."""
    v = np.asarray(variances, dtype=np.float64).reshape(-1)
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise InvalidParamsError(f'inverse_variance_weights: variances must be a non-empty '
                                 f'sequence of finite values ≥ 0, got {variances!r}.')
    exact = v == 0
    if exact.any():
        return exact / exact.sum()
    inv = 1.0 / v
    return inv / inv.sum()


def _fields(model):
    """(release_id, weights as a flat float array, noise_scale, center id or None)."""
    if isinstance(model, ReleasedModel):
        return model.release_id, model.weights, model.noise_scale, model.center_id
    try:
        return (model.release_id, model.weights, float(model.noise_scale),
                model.center_release_id or None)
    except (AttributeError, TypeError, ValueError):
        raise InvalidParamsError(f'combine: expected a ReleasedModel or a ModelRelease record '
                                 f'(a noised release), got {type(model).__name__}.') from None


def scales_of(releases) -> dict:
    """release id → (noise_scale, center id or None) for every release given."""
    return {rid: (scale, center) for rid, _, scale, center in map(_fields, releases)}


def chain_scales(model, scales: Mapping[str, Tuple[float, Optional[str]]]) -> Tuple[float, ...]:
    """The noise scales of ``model`` and of every centre it rests on, nearest first.
    ``scales``: release id → (noise_scale, center_id) of every release of the run."""
    rid, _, scale, center = _fields(model)
    out = [scale]
    while center is not None:
        if center not in scales or len(out) > len(scales):
            raise InvalidParamsError(f'chain_scales: centre {center!r} of {rid!r} is not in '
                                     f'scales (or the centres form a cycle).')
        scale, center = scales[center]
        out.append(scale)
    return tuple(out)


def _variance(model, n_params: int, covariance: str, scales) -> float:
    if covariance == 'own':
        return noise_variance(_fields(model)[2], n_params)
    return sum(noise_variance(b, n_params) for b in chain_scales(model, scales or {}))


def _flat(model) -> np.ndarray:
    return np.asarray(_fields(model)[1], dtype=np.float64).reshape(-1)


def _check_covariance(covariance: str, scales) -> None:
    if covariance not in COVARIANCES:
        raise InvalidParamsError(f'combine_releases: covariance must be one of {COVARIANCES}, '
                                 f'got {covariance!r}.')
    if covariance == 'chain' and scales is None:
        raise InvalidParamsError("combine_releases: covariance='chain' needs scales (release "
                                 "id -> (noise_scale, center_id)).")


def combine_releases(models: Sequence, covariance: str = 'own',
                     scales: Optional[Mapping[str, Tuple[float, Optional[str]]]] = None
                     ) -> Tuple[np.ndarray, np.ndarray]:
    """(Σ a_i·ŵ_i, a): the inverse-variance weighted average of released models and its
    weights. Post-processing (module docstring): no privacy cost beyond the releases.

    Raises:
      InvalidParamsError: no models, models of different sizes, a model that is not a
        release, or a bad ``covariance`` / missing ``scales``.
    """
    _check_covariance(covariance, scales)
    if not models:
        raise InvalidParamsError('combine_releases: models must be a non-empty sequence of '
                                 'released (noised) models.')
    flat = [_flat(m) for m in models]
    stacked = np.stack(flat) if len({w.size for w in flat}) == 1 else None
    if stacked is None:
        raise InvalidParamsError('combine_releases: every model must have the same number of '
                                 'parameters.')
    dim = stacked.shape[1]
    weights = inverse_variance_weights([_variance(m, dim, covariance, scales) for m in models])
    return weights @ stacked, weights


@dataclasses.dataclass(frozen=True)
class RunningCombination:
    """The same average kept online over a stream of releases, in O(D) state: ``add`` one
    released model, ``average`` the inverse-variance weighted mean of all added so far (equal
    to ``combine_releases`` over them with the same covariance; with zero-variance releases
    only those count). Immutable: ``add`` returns a new value. ``scales`` as for 'chain'."""
    covariance: str = 'own'
    total: Optional[np.ndarray] = None
    weight: float = 0.0
    exact_total: Optional[np.ndarray] = None
    exact_count: int = 0

    def __post_init__(self):
        if self.covariance not in COVARIANCES:
            raise InvalidParamsError(f'RunningCombination: covariance must be one of '
                                     f'{COVARIANCES}, got {self.covariance!r}.')

    def add(self, model, scales=None) -> 'RunningCombination':
        _check_covariance(self.covariance, scales if self.covariance == 'chain' else {})
        w = _flat(model)
        for total in (self.total, self.exact_total):
            if total is not None and total.size != w.size:
                raise InvalidParamsError('RunningCombination.add: every model must have the '
                                         'same number of parameters.')
        var = _variance(model, w.size, self.covariance, scales)
        if var == 0:
            exact = w if self.exact_total is None else self.exact_total + w
            return dataclasses.replace(self, exact_total=exact, exact_count=self.exact_count + 1)
        total = w / var if self.total is None else self.total + w / var
        return dataclasses.replace(self, total=total, weight=self.weight + 1.0 / var)

    def average(self) -> np.ndarray:
        if self.exact_count:
            return self.exact_total / self.exact_count
        if self.total is None:
            raise InvalidParamsError('RunningCombination.average: no model added yet.')
        return self.total / self.weight
