"""The sparse vector technique (Dwork et al.; Qiu & Yi Algorithm 1 / Theorem 4) on integer
queries with exact discrete-Laplace noise.

Privacy unit and neighbours: add/remove one event; every query f_i has sensitivity 1 (integer
valued). The transform using it states whether the event is one record (event-level) or all of
one user's bounded contributions (user-level, after contribution bounding and group privacy).

Mechanism (one instance): θ̂ = ⌊θ⌋ + Z with Z ~ DLap(2/ε) drawn ONCE and held in the state; for
i = 1, 2, ...: halt and output i iff f_i + Y_i > θ̂ with Y_i ~ DLap(4/ε) fresh per query. Since
f_i + Y_i is an integer, this is exactly the comparison with the real threshold θ + Z. The
classic proof (a shift of Z by 1 and of the halting query's noise by 2) carries over verbatim
to integer noise: the ratios are exp(ε/2)·exp(2ε/4) = exp(ε), so the output is ε-DP.

``monotone=True`` (Lyu, Su, Li 2017, Alg. 7 with c = 1): when neighbouring query sequences move
all in the same direction (prefix counts do: an extra event raises every later count by 1), query
noise DLap(2/ε) suffices. It is an opt-in flag; the default keeps Theorem 4's constants.

Scales are rounded up to the 2**-20 grid before sampling (``beam_dp.noise``), which only adds
noise. θ̂ must never be redrawn during an instance and never reused across instances: the state
holds it, and a caller starting a new instance calls ``init_state()`` again.
"""

import dataclasses
import math
from fractions import Fraction
from typing import Optional, Tuple

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.noise import RandomSource
from beam_dp.noise import discrete_laplace
from beam_dp.noise.geometric import bernoulli_dlap_tail
from beam_dp.noise.samplers import as_rational_up
from beam_dp.noise.samplers import check_noise_scale

__all__ = [
    'SparseVector',
    'SparseVectorState',
    'check_svt_scales',
    'svt_noise_scales',
]


def svt_noise_scales(epsilon: float, monotone: bool = False) -> Tuple[Fraction, Fraction]:
    """(threshold scale 2/ε, query scale 4/ε or 2/ε), rounded up exactly as the samplers do."""
    query = 2.0 / epsilon if monotone else 4.0 / epsilon
    return as_rational_up(2.0 / epsilon), as_rational_up(query)


def check_svt_scales(owner: str, epsilon: float, monotone: bool = False) -> None:
    """InvalidParamsError at construction unless both SVT noises (2/ε, and 4/ε or 2/ε) are in
    the exact samplers' range (``beam_dp.noise.noise_scale_problem``)."""
    for scale in (2.0 / epsilon, 2.0 / epsilon if monotone else 4.0 / epsilon):
        check_noise_scale(owner, scale, 'raise epsilon')


def halting_gap(noisy_threshold: int, count: int) -> int:
    """The integer k with "halt" ⟺ Y ≥ k, i.e. count + Y > noisy_threshold."""
    return noisy_threshold - count + 1


@dataclasses.dataclass(frozen=True)
class SparseVectorState:
    """Immutable SVT state: the noisy threshold (None until first drawn), queries answered, halted."""
    noisy_threshold: Optional[int] = None
    queries: int = 0
    halted: bool = False


@dataclasses.dataclass(frozen=True)
class SparseVector:
    """AboveThreshold (one halt) with discrete Laplace noise; ε-DP for sensitivity-1 queries.

    Args:
      epsilon: the instance's ε (pure DP).
      threshold: the public threshold θ (any real; only ⌊θ⌋ matters for integer queries).
      monotone: use query noise DLap(2/ε) (valid only for monotone query sequences).

    Raises:
      InvalidParamsError: on a non-positive ε or a non-finite threshold.
    """
    epsilon: float
    threshold: float
    monotone: bool = False

    def __post_init__(self):
        owner = type(self).__name__
        object.__setattr__(self, 'epsilon', v.check_positive(owner, 'epsilon', self.epsilon))
        threshold = v.check_real(owner, 'threshold', self.threshold)
        if math.isinf(threshold):
            v._fail(owner, f'threshold must be finite, got {threshold:g}.')
        object.__setattr__(self, 'threshold', threshold)
        if not isinstance(self.monotone, bool):
            v._fail(owner, f'monotone must be a bool, got {self.monotone!r}.')
        check_svt_scales(owner, self.epsilon, self.monotone)

    @property
    def threshold_scale(self) -> Fraction:
        return svt_noise_scales(self.epsilon, self.monotone)[0]

    @property
    def query_scale(self) -> Fraction:
        return svt_noise_scales(self.epsilon, self.monotone)[1]

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon)

    def init_state(self) -> SparseVectorState:
        return SparseVectorState()

    def draw_threshold(self, rng: RandomSource) -> int:
        """⌊θ⌋ + DLap(2/ε): call once per instance and keep the result."""
        return math.floor(self.threshold) + discrete_laplace(rng, self.threshold_scale)

    def with_threshold(self, state: SparseVectorState, rng: RandomSource) -> SparseVectorState:
        """The state with θ̂ drawn (a no-op if it already is: θ̂ is drawn once per instance)."""
        if state.noisy_threshold is not None:
            return state
        return dataclasses.replace(state, noisy_threshold=self.draw_threshold(
            rng.derive('svt-threshold')))

    def halts(self, noisy_threshold: int, value: int, rng: RandomSource) -> bool:
        """One exact test: value + DLap(query scale) > noisy_threshold."""
        return bernoulli_dlap_tail(rng, self.query_scale, halting_gap(noisy_threshold, value))

    def step(self, state: SparseVectorState, value: int,
             rng: RandomSource) -> Tuple[bool, SparseVectorState]:
        """Answers query i = state.queries + 1 with value f_i(D); returns (halted now, state).

        Raises:
          UnsupportedMechanismError: if the instance has already halted (start a new one).
        """
        if state.halted:
            raise UnsupportedMechanismError(
                'SparseVector: this instance has halted; start a new instance (fresh θ̂).')
        state = self.with_threshold(state, rng)
        index = state.queries + 1
        above = self.halts(state.noisy_threshold, int(value), rng.derive('svt-query', index))
        return above, dataclasses.replace(state, queries=index, halted=above)

    # The interactive contract: the query is the already-evaluated f_i(D).
    answer = step
