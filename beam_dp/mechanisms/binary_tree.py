"""C1: the binary-tree counter for a known horizon T (Dwork, Naor, Pitassi, Rothblum 2010;
Chan, Shi, Song 2011), with an optional variance-reduced estimator (Honaker 2015).

Privacy unit and neighbours: the counter protects any change of its input stream whose L1 norm
(summed over all steps and bins) is at most ``l1_sensitivity`` (and, for the Gaussian variant,
whose per-bin totals have L2 norm at most ``l2_sensitivity``). What that change is — one event
(event-level) or everything one user contributes after contribution bounding (user-level) — is
decided by the transform that computes the sensitivity; add/remove neighbours.

Guarantee: L = ⌈log₂T⌉ + 1 levels; each input step lies in exactly one node per level and the
nodes of a level are disjoint, so level h's nodes move by at most l1 in L1 norm. Each level gets
ε/L (discrete Laplace, scale L·l1/ε: ε-DP overall) or ρ/L (discrete Gaussian, σ² = L·l2²/(2ρ):
ρ-zCDP overall).

Releases: after step t (1 ≤ t ≤ T) the estimate of the prefix sum Σ_{s≤t} x_s — an exact integer
sum of ≤ L noisy nodes (textbook) or Honaker's float post-processing of them. Totals never wrap:
they are int64 while a bound proves it exact and Python ints beyond (``_dyadic.exact_add``).
Noisy nodes are drawn once, when they close, and kept in the state.

Not guaranteed: anything past step T (``step`` raises: releasing more would break the accounting).

Cite: Chan, Shi, Song, "Private and continual release of statistics", TISSEC 2011, Sec. 3.2;
Dwork, Naor, Pitassi, Rothblum, "Differential Privacy under Continual Observation", STOC 2010.
"""

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms._counter_params import CounterPrivacy
from beam_dp.noise import RandomSource

__all__ = [
    'BinaryTreeCounter',
    'TreeState',
]


@dataclasses.dataclass(frozen=True)
class TreeState:
    """Immutable state of a tree counter over d bins (arrays are read-only).

    t: steps consumed. open_sums[h]: exact partial sum of the open node of level h.
    noisy[h]: raw noisy value of the last closed node of level h. est_last / est_prev: estimates
    (variance-reduced) of the last two closed nodes of level h (None for the textbook estimator).
    """
    t: int
    open_sums: np.ndarray
    noisy: np.ndarray
    est_last: Optional[np.ndarray] = None
    est_prev: Optional[np.ndarray] = None

    def nbytes(self) -> int:
        arrays = [self.open_sums, self.noisy, self.est_last, self.est_prev]
        return sum(a.nbytes for a in arrays if a is not None)


def _advance_levels(levels: int, t: int, open_sums, noisy, est_last, est_prev, value,
                    node_noise: list, rng: RandomSource):
    """Adds one step (the t-th, 1-based, counted within this tree) and closes finished nodes.

    Works on fresh copies (est_* are updated in place); returns the new (open_sums, noisy), which
    become object arrays of exact Python ints once a total passes the int64 range.
    """
    open_sums = _dyadic.exact_add(open_sums, value)
    d = open_sums.shape[1]
    for h in range(levels):
        if t % (1 << h):
            break   # Level h (and every level above) is still open.
        raw = _dyadic.exact_add(open_sums[h], node_noise[h].sample(rng, d))
        if raw.dtype == object and noisy.dtype != object:
            noisy = noisy.astype(object)
        noisy[h] = raw
        open_sums[h] = 0
        if est_last is not None:
            if h == 0:
                estimate = raw.astype(np.float64)
            else:
                # Children of this node: the last two closed nodes of level h - 1.
                estimate = _dyadic.combine(raw, est_prev[h - 1], est_last[h - 1],
                                           node_noise[h].variance(), _reduced(node_noise)[h - 1])
            est_prev[h] = est_last[h]
            est_last[h] = estimate
    return open_sums, noisy


def _reduced(node_noise: list) -> list:
    return _dyadic.reduced_variances([n.variance() for n in node_noise])


@dataclasses.dataclass(frozen=True, kw_only=True)
class BinaryTreeCounter(CounterPrivacy):
    """Continual prefix sums of a vector stream over a known horizon (C1).

    Args:
      horizon: T, the number of steps; public.
      epsilon: total ε for pure DP (discrete Laplace); or
      rho: total ρ for ρ-zCDP (discrete Gaussian). Exactly one of the two.
      l1_sensitivity: max L1 change of the whole input stream by one privacy unit.
      l2_sensitivity: max L2 norm of one unit's per-bin totals (Gaussian only; default l1).
      dimension: d, bins per step (1 for a scalar count; a histogram or a shard of keys otherwise).
      estimator: 'textbook' (sum of raw nodes) or 'variance_reduced' (Honaker bottom-up).

    Raises:
      InvalidParamsError: on a bad parameter, with the argument named.
    """
    horizon: int
    estimator: str = 'variance_reduced'

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive_int(owner, 'horizon', self.horizon)
        _dyadic.check_counter_fields(self)
        _dyadic.check_node_noise(owner, self.node_noise)

    @property
    def levels(self) -> int:
        """L = ⌈log₂T⌉ + 1."""
        return max(1, math.ceil(math.log2(self.horizon)) + 1) if self.horizon > 1 else 1

    @property
    def node_noise(self) -> _dyadic.NodeNoise:
        return _dyadic.node_noise(self.epsilon, self.rho, 1.0 / self.levels, self.l1_sensitivity,
                                  self.l2_sensitivity)

    def privacy_cost(self) -> PrivacyCost:
        return _dyadic.cost(self.epsilon, self.rho)

    def init_state(self) -> TreeState:
        shape = (self.levels, self.dimension)
        reduced = self.estimator == 'variance_reduced'
        return TreeState(
            t=0,
            open_sums=_dyadic.readonly(np.zeros(shape, dtype=np.int64)),
            noisy=_dyadic.readonly(np.zeros(shape, dtype=np.int64)),
            est_last=_dyadic.readonly(np.zeros(shape)) if reduced else None,
            est_prev=_dyadic.readonly(np.zeros(shape)) if reduced else None)

    def step(self, state: TreeState, value, rng: RandomSource) -> Tuple[np.ndarray, TreeState]:
        """Consumes step t+1's integer vector (already bounded) and returns the prefix estimate."""
        if state.t >= self.horizon:
            raise UnsupportedMechanismError(
                f'{type(self).__name__}: horizon {self.horizon} reached; releasing step '
                f'{state.t + 1} would exceed the declared privacy cost.')
        value = _dyadic.exact_ints(value, self.dimension)
        t = state.t + 1
        open_sums, noisy = state.open_sums.copy(), state.noisy.copy()
        est_last = None if state.est_last is None else state.est_last.copy()
        est_prev = None if state.est_prev is None else state.est_prev.copy()
        open_sums, noisy = _advance_levels(self.levels, t, open_sums, noisy, est_last, est_prev,
                                           value, [self.node_noise] * self.levels, rng)
        new_state = TreeState(t, _dyadic.readonly(open_sums), _dyadic.readonly(noisy),
                              None if est_last is None else _dyadic.readonly(est_last),
                              None if est_prev is None else _dyadic.readonly(est_prev))
        return self.estimate(new_state), new_state

    def estimate(self, state: TreeState) -> np.ndarray:
        """The prefix estimate at the state's step (post-processing of released nodes only)."""
        source = state.noisy if state.est_last is None else state.est_last
        bits = [h for h in range(self.levels) if state.t >> h & 1]
        if not bits:
            return np.zeros(self.dimension, dtype=source.dtype)
        if source.dtype.kind == 'f':
            return source[bits].sum(axis=0)
        return _dyadic.exact_sum([source[h] for h in bits])

    def release_variance(self, t: int) -> float:
        """Exact noise variance of the estimate after step t (per bin)."""
        s2 = self.node_noise.variance()
        bits = [h for h in range(self.levels) if t >> h & 1]
        if self.estimator == 'textbook':
            return len(bits) * s2
        reduced = _dyadic.reduced_variances([s2] * self.levels)
        return sum(reduced[h] for h in bits)
