"""C2: the infinite-horizon counter (Chan, Shi, Song 2011, "hybrid"/two-level mechanism), so a
stream with no end stays private forever, with the optional variance-reduced estimator.

Privacy unit and neighbours: as ``BinaryTreeCounter`` — any change of the input stream of L1 norm
≤ ``l1_sensitivity`` (L2 of per-bin totals ≤ ``l2_sensitivity`` for the Gaussian variant);
event- or user-level is fixed by the transform; add/remove neighbours.

Construction: steps are cut into blocks B_i = [2^i, 2^{i+1}). Every block's total
is released at its last step with half the budget (blocks are disjoint: one "level"). Inside
block i a binary tree of i levels (0..i-1) gets the other half, ε/(2i) per level (ρ/(2i) for
zCDP); the block release plays the tree's root. A unit's change c_b in block b costs
Σ_b c_b·(ε/2)/l1 ≤ ε/2 on the block level and Σ_b i_b·c_b·(ε/(2 i_b))/l1 ≤ ε/2 in the trees, so
the whole unbounded stream is ε-DP (ρ-zCDP likewise, since Σ_b c_b² ≤ (Σ_b c_b)²). No split
depends on an unknown horizon.

Releases: after step s the estimate of Σ_{u≤s} x_u: the sum of completed block releases plus the
dyadic decomposition of the open block. Nodes and block releases are drawn once, when they
close, and kept in the state. State: O(log s) rows of d values. Exact totals (and the textbook
estimator's released sums) never wrap: int64 while a bound proves it exact, Python ints beyond.

Range: the tree noise grows with the block index (ε/(2i) per level), so every noise scale of the
first ``MAX_STEPS`` = 2^40 steps is checked against the samplers' range at construction (2^40
steps: 35,000 years of one-second steps, 12 days at the 1-µs minimum); ``step`` refuses to go
further rather than fail inside a sampler.

Cite: Chan, Shi, Song, TISSEC 2011, Sec. 4 ("hybrid mechanism"); docs/continual_counts.md.
"""

import dataclasses
from typing import Optional, Tuple

import numpy as np

from beam_dp.accounting import PrivacyCost
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms._counter_params import CounterPrivacy
from beam_dp.mechanisms.binary_tree import _advance_levels
from beam_dp.noise import RandomSource

__all__ = [
    'InfiniteTreeCounter',
    'InfiniteTreeState',
    'MAX_STEPS',
]

#: Steps whose noise scales are validated at construction (see the module docstring).
MAX_STEPS = 2 ** 40


@dataclasses.dataclass(frozen=True)
class InfiniteTreeState:
    """Immutable state: s steps consumed; ``completed`` = estimate of the sum of all completed
    blocks; ``completed_variance`` its noise variance (public: a function of s only); ``block_sum``
    the exact running total of the open block; the open block's tree as in ``TreeState``
    (i = block index rows)."""
    s: int
    completed: np.ndarray
    completed_variance: float
    block_sum: np.ndarray
    open_sums: np.ndarray
    noisy: np.ndarray
    est_last: Optional[np.ndarray] = None
    est_prev: Optional[np.ndarray] = None

    def nbytes(self) -> int:
        arrays = [self.completed, self.block_sum, self.open_sums, self.noisy, self.est_last,
                  self.est_prev]
        return sum(a.nbytes for a in arrays if a is not None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class InfiniteTreeCounter(CounterPrivacy):
    """Continual prefix sums over an unbounded stream (C2).

    Args:
      epsilon / rho: total budget (exactly one); ε → discrete Laplace, ρ → discrete Gaussian.
      l1_sensitivity, l2_sensitivity, dimension, estimator: as ``BinaryTreeCounter``.

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    estimator: str = 'variance_reduced'

    def __post_init__(self):
        owner = type(self).__name__
        _dyadic.check_counter_fields(self)
        _dyadic.check_node_noise(owner, self.block_noise())
        _dyadic.check_node_noise(owner, self.tree_noise(MAX_STEPS.bit_length() - 1))

    def privacy_cost(self) -> PrivacyCost:
        return _dyadic.cost(self.epsilon, self.rho)

    def block_noise(self) -> _dyadic.NodeNoise:
        return _dyadic.node_noise(self.epsilon, self.rho, 0.5, self.l1_sensitivity,
                                  self.l2_sensitivity)

    def tree_noise(self, block: int) -> _dyadic.NodeNoise:
        """Noise of every tree node inside block i ≥ 1: budget/(2i) per level."""
        return _dyadic.node_noise(self.epsilon, self.rho, 0.5 / block, self.l1_sensitivity,
                                  self.l2_sensitivity)

    def _empty_tree(self, block: int):
        shape = (block, self.dimension)
        reduced = self.estimator == 'variance_reduced'
        return (np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64),
                np.zeros(shape) if reduced else None, np.zeros(shape) if reduced else None)

    def init_state(self) -> InfiniteTreeState:
        open_sums, noisy, est_last, est_prev = self._empty_tree(0)
        # Textbook: the completed blocks' total is an exact integer; reduced: a float estimate.
        zeros = np.zeros(self.dimension, dtype=np.int64 if self.estimator == 'textbook'
                         else np.float64)
        return InfiniteTreeState(
            0, _dyadic.readonly(zeros), 0.0,
            _dyadic.readonly(np.zeros(self.dimension, dtype=np.int64)),
            _dyadic.readonly(open_sums), _dyadic.readonly(noisy),
            None if est_last is None else _dyadic.readonly(est_last),
            None if est_prev is None else _dyadic.readonly(est_prev))

    def step(self, state: InfiniteTreeState, value,
             rng: RandomSource) -> Tuple[np.ndarray, InfiniteTreeState]:
        """Consumes step s+1's integer vector (already bounded); returns the prefix estimate."""
        if state.s >= MAX_STEPS:
            raise UnsupportedMechanismError(f'{type(self).__name__}: {MAX_STEPS} steps reached; '
                                            f'later noise scales were not validated.')
        value = _dyadic.exact_ints(value, self.dimension)
        s = state.s + 1
        block = s.bit_length() - 1            # i with 2^i <= s < 2^(i+1)
        pos = s - (1 << block)                 # 0 <= pos < 2^i
        if pos == 0:
            open_sums, noisy, est_last, est_prev = self._empty_tree(block)
            block_sum = np.zeros(self.dimension, dtype=np.int64)
        else:
            open_sums, noisy = state.open_sums.copy(), state.noisy.copy()
            est_last = None if state.est_last is None else state.est_last.copy()
            est_prev = None if state.est_prev is None else state.est_prev.copy()
            block_sum = state.block_sum.copy()
        block_sum = _dyadic.exact_add(block_sum, value)
        tree_noise = [self.tree_noise(block)] * block if block else []
        open_sums, noisy = _advance_levels(block, pos + 1, open_sums, noisy, est_last, est_prev,
                                           value, tree_noise, rng)
        completed, completed_var = state.completed, state.completed_variance
        if pos == (1 << block) - 1:            # Block i is complete: release its total.
            noise = self.block_noise()
            raw = _dyadic.exact_add(block_sum, noise.sample(rng, self.dimension))
            s2 = noise.variance()
            if est_last is not None and block >= 1:
                v_child = _dyadic.reduced_variances([tree_noise[0].variance()] * block)[-1]
                estimate = _dyadic.combine(raw, est_prev[block - 1], est_last[block - 1], s2,
                                           v_child)
                s2 = _dyadic._combined_variance(s2, v_child)
            else:
                estimate = raw
            completed = _dyadic.exact_add(completed, estimate)
            completed_var = completed_var + s2
        new_state = InfiniteTreeState(
            s, _dyadic.readonly(np.array(completed)), completed_var,
            _dyadic.readonly(block_sum), _dyadic.readonly(open_sums), _dyadic.readonly(noisy),
            None if est_last is None else _dyadic.readonly(est_last),
            None if est_prev is None else _dyadic.readonly(est_prev))
        return self.estimate(new_state), new_state

    def estimate(self, state: InfiniteTreeState) -> np.ndarray:
        """Prefix estimate at the state's step: completed blocks + open block's decomposition."""
        s = state.s
        total = np.array(state.completed)
        if s == 0:
            return total
        block = s.bit_length() - 1
        r = s - (1 << block) + 1               # steps consumed in block i, 1..2^i
        if r < (1 << block):
            source = state.noisy if state.est_last is None else state.est_last
            for h in range(block):
                if r >> h & 1:
                    total = _dyadic.exact_add(total, source[h])
        return total

    def release_variance(self, s: int) -> float:
        """Exact noise variance of the estimate after step s (per bin)."""
        if s <= 0:
            return 0.0
        reduced = self.estimator == 'variance_reduced'
        total = 0.0
        block = s.bit_length() - 1
        for b in range(block + 1):
            complete = s >= (1 << (b + 1)) - 1
            if not complete:
                continue
            s2 = self.block_noise().variance()
            if reduced and b >= 1:
                v_child = _dyadic.reduced_variances([self.tree_noise(b).variance()] * b)[-1]
                s2 = _dyadic._combined_variance(s2, v_child)
            total += s2
        r = s - (1 << block) + 1
        if r < (1 << block):
            node = self.tree_noise(block).variance() if block else 0.0
            per_level = (_dyadic.reduced_variances([node] * block) if reduced else [node] * block)
            total += sum(per_level[h] for h in range(block) if r >> h & 1)
        return total
