"""C5: insertion-only continual counts and histograms over an unbounded stream, on private time
segments (Qiu & Yi Theorem 8: the C4 partitioner + the C2 counter on the segment clock).

Privacy unit and neighbours: add/remove one insertion event (event-level; for user-level, bound
each user's events and apply group privacy to ε first). A tick's value is a count (dimension 1)
or a vector of per-bin counts; one event adds 1 to one bin (L1 sensitivity 1).

Guarantee: ε-DP (pure) with ε = ε_p + ε_a: the partitioner (``TimePartitioner``, ε_p) releases
the segment boundaries; when segment j closes, C2 (``InfiniteTreeCounter``, ε_a, discrete
Laplace) takes ONE step whose batch is the segment's exact total. C2 runs on boundaries C4 already
released, so the two compose sequentially and adaptively. ``partition_fraction`` sets ε_p/ε
(default ½) and ``c_theta`` the threshold constant (7 = paper preset; smaller values are far
more accurate and privacy-neutral: measured in docs/partitioning.md).

Releases happen only at segment closes; between closes the answer is the last close's answer
(post-processing). The error is C2's error at step j plus the open segment's lag (≤ θ_j-ish,
Lemma 7). State: the partitioner's O(1), C2's O(log m) rows, and the open segment's exact total.
"""

import dataclasses
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeState
from beam_dp.mechanisms.time_partition import PAPER_C_THETA
from beam_dp.mechanisms.time_partition import PartitionerState
from beam_dp.mechanisms.time_partition import SegmentClose
from beam_dp.mechanisms.time_partition import TimePartitioner
from beam_dp.noise import RandomSource

__all__ = [
    'SparseCounter',
    'SparseCounterRelease',
    'SparseCounterState',
]


@dataclasses.dataclass(frozen=True)
class SparseCounterState:
    """Immutable state. ``open_total`` is the open segment's exact total (private)."""
    partition: PartitionerState
    counter: InfiniteTreeState
    open_total: Tuple[int, ...]
    answer: Tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class SparseCounterRelease:
    """What a tick releases: the boundaries closed at or before it (since the previous call) and
    the current answer (unchanged between closes)."""
    tick: int
    closes: Tuple[SegmentClose, ...]
    answer: Tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class SegmentedParams:
    """The parameters of every counter on private time segments (C5, C6, C9): ``epsilon`` is
    the total ε, ``partition_fraction`` = ε_p/ε, the rest are the partitioner's (public)."""
    epsilon: float
    partition_fraction: float = 0.5
    beta: float = 0.1
    c_theta: float = PAPER_C_THETA
    dimension: int = 1
    max_segment_ticks: Optional[int] = None
    monotone: bool = False
    skip_ahead: bool = True

    @property
    def epsilon_partition(self) -> float:
        return self.epsilon * self.partition_fraction

    def segment_partitioner(self, beta: float) -> TimePartitioner:
        """The C4 partitioner at ε_p with failure probability ``beta``."""
        return TimePartitioner(self.epsilon_partition, beta, self.c_theta, None,
                               self.max_segment_ticks, self.monotone, self.skip_ahead)

    # The continual contract of a counter with one partitioner (``self.partitioner``, its state
    # in ``state.partition``) and an ``advance(state, tick, value, rng, prime)``.

    def step(self, state, value, rng: RandomSource):
        """One tick: ``advance`` to the tick after the partitioner's."""
        return self.advance(state, state.partition.tick + 1, value, rng, prime=False)

    def prime(self, state, rng: RandomSource):
        return dataclasses.replace(state, partition=self.partitioner.prime(
            state.partition, rng.derive('partition')))

    def next_event_tick(self, state) -> int:
        return self.partitioner.next_event_tick(state.partition)


@dataclasses.dataclass(frozen=True)
class SparseCounter(SegmentedParams):
    """Continual insertion-only counts/histograms on private time segments (C5).

    Args:
      epsilon: total ε (pure), split into ε_p = partition_fraction·ε and ε_a = the rest.
      partition_fraction: ε_p/ε in (0, 1).
      beta, c_theta, max_segment_ticks, monotone, skip_ahead: the partitioner's (public).
      dimension: 1 for a count, d for a histogram over d bins.
      estimator: C2's estimator ('variance_reduced' or 'textbook').

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    estimator: str = 'variance_reduced'

    def __post_init__(self):
        owner = type(self).__name__
        object.__setattr__(self, 'epsilon', v.check_positive(owner, 'epsilon', self.epsilon))
        f = v.check_probability(owner, 'partition_fraction', self.partition_fraction,
                                allow_zero=False)
        object.__setattr__(self, 'partition_fraction', f)
        object.__setattr__(self, 'dimension', v.check_positive_int(owner, 'dimension',
                                                                   self.dimension))
        # Constructing the parts validates their parameters (with their own messages).
        self.partitioner
        self.counter

    @property
    def epsilon_aggregate(self) -> float:
        return self.epsilon - self.epsilon_partition

    @property
    def partitioner(self) -> TimePartitioner:
        return self.segment_partitioner(self.beta)

    @property
    def counter(self) -> InfiniteTreeCounter:
        return InfiniteTreeCounter(epsilon=self.epsilon_aggregate, dimension=self.dimension,
                                   estimator=self.estimator)

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon)

    def init_state(self) -> SparseCounterState:
        zeros = (0,) * self.dimension
        return SparseCounterState(self.partitioner.init_state(), self.counter.init_state(),
                                  zeros, (0.0,) * self.dimension)

    def _as_vector(self, value) -> Tuple[int, ...]:
        arr = np.asarray(value, dtype=np.int64).reshape(-1)
        if arr.size != self.dimension:
            raise InvalidParamsError(f'SparseCounter: value must have {self.dimension} bins, '
                                     f'got {arr.size}.')
        if np.any(arr < 0):
            raise InvalidParamsError('SparseCounter: insertion counts must be non-negative.')
        return tuple(int(x) for x in arr)

    def advance(self, state: SparseCounterState, tick: int, value, rng: RandomSource,
                prime: bool = True) -> Tuple[SparseCounterRelease, SparseCounterState]:
        """Processes ticks (state tick, ``tick``]; earlier ones are empty, ``tick`` carries
        ``value``. The C2 step of segment j draws from ``rng.derive('c2', j)``."""
        vec = self._as_vector(value)
        closes, part = self.partitioner.advance(state.partition, tick, sum(vec),
                                                rng.derive('partition'), prime=prime)
        counter_state, answer, open_total = state.counter, state.answer, state.open_total
        for close in closes:
            batch = open_total
            if close.close_tick == tick:
                batch = tuple(a + b for a, b in zip(open_total, vec))
            estimate, counter_state = self.counter.step(counter_state, batch,
                                                        rng.derive('c2', close.segment))
            answer = tuple(float(x) for x in np.asarray(estimate).reshape(-1))
            open_total = (0,) * self.dimension
        if not closes or closes[-1].close_tick < tick:
            open_total = tuple(a + b for a, b in zip(open_total, vec))
        release = SparseCounterRelease(tick, tuple(closes), answer)
        return release, SparseCounterState(part, counter_state, open_total, answer)
