"""The k-ary tree counter for a known horizon, with the online variance-reduced estimator
generalised from Honaker (2015) to k children (pure ε with discrete Laplace, or ρ-zCDP).

Privacy unit and neighbours: as ``BinaryTreeCounter`` — any change of the input stream whose L1
norm (summed over all steps and bins) is at most ``l1_sensitivity`` (and, for the Gaussian
variant, whose per-bin totals have L2 norm at most ``l2_sensitivity``); event- or user-level is
fixed by the transform that computes the bounds; add/remove neighbours.

Construction: level h ∈ [0, L) holds the aligned intervals of k^h steps, with L the number of
base-k digits of T (k^(L-1) ≤ T < k^L). Every step lies in exactly one node per level and the
nodes of a level are disjoint, so each level gets ε/L (discrete Laplace of scale L·l1/ε: ε-DP)
or ρ/L (discrete Gaussian σ² = L·l2²/(2ρ): ρ-zCDP). A node's noisy sum is drawn once, when it
closes. The prefix [1, t] is the disjoint union of a_h(t) closed level-h nodes per level, a_h
the base-k digits of t; they are exactly the closed children of the open level-(h+1) node, so the
state keeps, per level, the exact sum of the open node and the running sum of the estimates of
its closed children: O(L) rows of d values, whatever k is.

Variance reduction (post-processing only): when a level-h node closes with raw value z (noise
variance σ²), the sum of its k children's estimates (variance k·v_(h-1), independent) is combined
by inverse variance: ẑ = (v_h/σ²)·z + (v_h/(k·v_(h-1)))·Σ children, 1/v_h = 1/σ² + 1/(k v_(h-1)).
The estimates used by a prefix come from disjoint subtrees, so Var[release_t] = Σ_h a_h(t)·v_h.
k = 2 is Honaker's online estimator (``BinaryTreeCounter``'s); larger k trades fewer levels
(less noise per node) against more nodes per prefix — ``best_k`` picks the k with the lowest
mean variance for a horizon. The Laplace noise is exact; the variance-reduced releases are float.

Cite: Dwork, Naor, Pitassi, Rothblum 2010; Chan, Shi, Song 2011 (trees); Honaker, "Efficient use
of differentially private binary trees", TPDP 2015 (estimator); Qardaji, Yang, Li 2013
("Understanding hierarchical methods", optimal branching ≈ 16 offline).
"""

import dataclasses
import functools
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms._counter_params import CounterPrivacy
from beam_dp.noise import RandomSource

__all__ = [
    'KaryTreeCounter',
    'KaryTreeState',
    'best_k',
]

_MAX_K = 64


@dataclasses.dataclass(frozen=True)
class KaryTreeState:
    """Immutable state over d bins: t steps consumed; ``open_sums[h]`` the exact sum of the open
    level-h node; ``closed[h]`` the sum of the estimates (raw noisy values for the textbook
    estimator) of the closed children of the open level-(h+1) node. Arrays are read-only."""
    t: int
    open_sums: np.ndarray
    closed: np.ndarray

    def nbytes(self) -> int:
        return self.open_sums.nbytes + self.closed.nbytes + 8


def _levels(horizon: int, k: int) -> int:
    levels, span = 1, k
    while span <= horizon:
        levels += 1
        span *= k
    return levels


@dataclasses.dataclass(frozen=True)
class KaryTreeCounter(CounterPrivacy):
    """Continual prefix sums of a vector stream over a known horizon with a k-ary tree.

    Args:
      horizon: T, the number of steps; public.
      epsilon: total ε for pure DP (discrete Laplace); or (keyword-only)
      rho: total ρ for ρ-zCDP (discrete Gaussian). Exactly one of the two.
      k: the branching factor, 2 ≤ k ≤ 64 (default: ``best_k(horizon)``).
      l1_sensitivity, l2_sensitivity, dimension: as ``BinaryTreeCounter``.
      estimator: 'variance_reduced' (default) or 'textbook' (exact integer sums of raw nodes).

    Raises:
      InvalidParamsError: on a bad parameter, with the argument named, or a node noise outside
        the exact samplers' range (``beam_dp.noise.noise_scale_problem``).
    """
    horizon: int
    k: Optional[int] = None
    estimator: str = 'variance_reduced'

    def __post_init__(self):
        self.check_horizon_counter('estimator', _dyadic.ESTIMATORS)
        owner = type(self).__name__
        if self.k is None:
            object.__setattr__(self, 'k', best_k(self.horizon, self.estimator))
        v.check_positive_int(owner, 'k', self.k)
        if not 2 <= self.k <= _MAX_K:
            raise InvalidParamsError(f'{owner}: k must be in [2, {_MAX_K}], got {self.k}.')
        self.check_noise_scales()

    def noises(self) -> Tuple[_dyadic.NodeNoise, ...]:
        return (self.node_noise,)

    @property
    def levels(self) -> int:
        """L: the number of base-k digits of T."""
        return _levels(self.horizon, self.k)

    @property
    def node_noise(self) -> _dyadic.NodeNoise:
        return self.noise_for_share(1.0 / self.levels)

    @functools.cached_property
    def level_variances(self) -> Tuple[float, ...]:
        """v_h: the noise variance of one level-h estimate (σ² for the textbook estimator)."""
        s2 = self.node_noise.variance()
        out = [s2]
        for _ in range(1, self.levels):
            if self.estimator == 'textbook' or s2 <= 0:
                out.append(s2)
            else:
                out.append(1.0 / (1.0 / s2 + 1.0 / (self.k * out[-1])))
        return tuple(out)

    def privacy_cost(self) -> PrivacyCost:
        return _dyadic.cost(self.epsilon, self.rho)

    def init_state(self) -> KaryTreeState:
        shape = (self.levels, self.dimension)
        closed_dtype = np.int64 if self.estimator == 'textbook' else np.float64
        return KaryTreeState(0, _dyadic.readonly(np.zeros(shape, dtype=np.int64)),
                             _dyadic.readonly(np.zeros(shape, dtype=closed_dtype)))

    def step(self, state: KaryTreeState, value,
             rng: RandomSource) -> Tuple[np.ndarray, KaryTreeState]:
        """Consumes step t+1's integer vector (already bounded); returns the prefix estimate."""
        t, value = self.next_step(state.t, value)
        open_sums = state.open_sums + value
        closed = state.closed.copy()
        noise = self.node_noise
        s2 = noise.variance()
        span = 1
        for h in range(self.levels):
            if t % span:
                break                                   # Level h and above stay open.
            raw = open_sums[h] + noise.sample(rng, self.dimension)
            open_sums[h] = 0
            if h == 0 or self.estimator == 'textbook' or s2 <= 0:
                estimate = raw
            else:
                children = closed[h - 1]
                v_child = self.level_variances[h - 1]
                v_node = self.level_variances[h]
                estimate = (v_node / s2) * raw + (v_node / (self.k * v_child)) * children
            if h > 0:
                closed[h - 1] = 0                       # Its children are now summarised.
            closed[h] = closed[h] + estimate
            span *= self.k
        new_state = KaryTreeState(t, _dyadic.readonly(open_sums), _dyadic.readonly(closed))
        return new_state.closed.sum(axis=0), new_state

    def digits(self, t: int):
        """a_h(t): the base-k digits of t (h = 0 .. L-1)."""
        out = []
        for _ in range(self.levels):
            t, digit = divmod(t, self.k)
            out.append(digit)
        return out

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after step t: Σ_h a_h(t)·v_h."""
        return float(sum(a * v_h for a, v_h in zip(self.digits(t), self.level_variances)))

    def variances(self, horizon: Optional[int] = None) -> np.ndarray:
        """release_variance(t) for t = 1..T, vectorised."""
        t = np.arange(1, (horizon or self.horizon) + 1, dtype=np.int64)
        total = np.zeros(t.shape)
        for v_h in self.level_variances:
            total += (t % self.k) * v_h
            t = t // self.k
        return total


@functools.lru_cache(maxsize=256)
def best_k(horizon: int, estimator: str = 'variance_reduced') -> int:
    """The branching factor with the lowest mean release variance over t = 1..T (any ε: the
    variance scales as 1/ε²); ties go to the smaller k."""
    best, best_mean = 2, math.inf
    for k in range(2, _MAX_K + 1):
        m = KaryTreeCounter(horizon=horizon, epsilon=1.0, k=k, estimator=estimator)
        mean = _mean_variance(m)
        if mean < best_mean * (1 - 1e-12):
            best, best_mean = k, mean
    return best


def _mean_variance(m: KaryTreeCounter) -> float:
    """Mean of Σ_h a_h(t) v_h over t = 1..T via digit sums (exact; no per-t loop)."""
    total = 0.0
    span = 1
    for v_h in m.level_variances:
        total += v_h * _digit_sum(m.horizon, span, m.k)
        span *= m.k
    return total / m.horizon


def _digit_sum(horizon: int, span: int, k: int) -> int:
    """Σ_{t=1..T} ⌊t/span⌋ mod k, in O(1)."""
    period = span * k
    full, rest = divmod(horizon + 1, period)       # t = 0..T (t = 0 adds nothing)
    per_period = span * (k * (k - 1) // 2)
    partial_blocks, partial_rest = divmod(rest, span)
    partial = span * (partial_blocks * (partial_blocks - 1) // 2) + partial_rest * partial_blocks
    return full * per_period + partial
