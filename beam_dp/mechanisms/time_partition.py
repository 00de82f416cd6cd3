"""Private partitioning of TIME into segments (Qiu & Yi: C3 finite, C4 = Algorithm 2 infinite).

Not to be confused with partition (key) *selection* (``key_selection.py``): this cuts the tick
axis into segments s_j = [t_{j-1}+1, t_j] whose boundaries are released.

Privacy unit and neighbours: add/remove one update event (event-level); for user-level privacy
bound each user's events first and apply group privacy to ε. Every update counts — insertions,
deletions, invalid deletions, duplicates, updates with a missing id: the count
of raw events is what moves by exactly 1 between neighbours.

Guarantee: the sequence of boundaries is ε_p-DP (pure). Segment j runs a fresh SVT instance
(``SparseVector``: θ̂_j = ⌊θ_j⌋ + DLap(2/ε_p) drawn once, DLap(4/ε_p) per tick) on the prefix
count of the segment; it reads only ticks in (t_{j-1}, t_j] and declares that set, so by
adaptive parallel composition with declaration (Qiu & Yi Theorem 6) the whole infinite sequence
is ε_p-DP. Thresholds θ_j, forced deadlines and β_j are public functions of j and t_{j-1} only.

C4 (``horizon=None``), Qiu & Yi Algorithm 2: T_1 = 2, T_j = t_{j-1}² (absolute tick, Python int: no
overflow), β_j = 6β/(π² j²) (Basel series, Σβ_j = β), θ_j = (c_θ/ε_p)·ln(2T_j/β_j) computed in
log space (ln 2 + 2 ln t_{j-1} - ln β_j). Segment j is closed by the SVT or forced at tick
max(T_j, t_{j-1}+1) — or earlier at t_{j-1} + ``max_segment_ticks`` (a public freshness cap;
privacy-neutral, costs utility). With no data at all the boundaries are 2, 4, 16, 256, 65536,
2^32, ... ``c_theta`` is privacy-neutral; 7 is the paper's preset (Lemma 7's guarantees).
C3 (``horizon=T``): the finite baseline with T_j ≡ T and β_j ≡ β/T; it refuses ticks > T.

Lemma 7 (w.p. 1-β, all j): segment j holds ≤ θ_j + (6/ε_p)·ln(2/β_j) updates (+ per-tick batch
slack), and an SVT-closed segment holds ≥ θ_j - (6/ε_p)·ln(2T_j/β_j) = ((c_θ-6)/ε_p)·ln(2T_j/β_j).

Evaluation: the SVT is evaluated on EVERY tick, including empty ones (a halt only at arrival
ticks would reveal an arrival). ``skip_ahead=True`` replaces the per-tick loop over a
stretch of constant count by one exact geometric draw of the halting tick
(``beam_dp.noise.geometric``), which is equal in distribution (memorylessness; the test at an
arrival tick is a fresh exact Bernoulli). ``skip_ahead=False`` draws every tick.

Driving it from a DoFn with one watermark timer: buffer (tick, count); in the timer, call
``advance(state, tick, count, rng)`` for each buffered tick ≤ the firing tick in order, then
``advance(state, firing_tick, 0, rng)``; re-arm at min(next buffered tick,
``next_event_tick(state)``). Noise is drawn from ``rng.derive(label, j, tick)`` so the draws do
not depend on how ticks are batched (a seeded run is reproducible across runners and retries).
"""

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Iterable, List, Mapping, Optional, Tuple, Union

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import basel_weight
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms.sparse_vector import SparseVector
from beam_dp.mechanisms.sparse_vector import halting_gap
from beam_dp.mechanisms.sparse_vector import check_svt_scales
from beam_dp.mechanisms.sparse_vector import svt_noise_scales
from beam_dp.noise import RandomSource
from beam_dp.noise.geometric import bernoulli_dlap_tail
from beam_dp.noise.geometric import geometric_dlap_tail

__all__ = [
    'PAPER_C_THETA',
    'PartitionerState',
    'SegmentClose',
    'TimePartitioner',
]

#: Qiu & Yi's constant in θ_j = (c_θ/ε)·ln(2T_j/β_j); privacy-neutral, utility only.
PAPER_C_THETA = 7.0


@dataclasses.dataclass(frozen=True)
class SegmentClose:
    """A released boundary: segment ``segment`` = [start_tick, close_tick] closed at close_tick.

    ``forced`` says the close tick is the public deadline (a function of earlier boundaries),
    so it is public too. No count is ever released here.
    """
    segment: int
    start_tick: int
    close_tick: int
    forced: bool


@dataclasses.dataclass(frozen=True)
class PartitionerState:
    """Immutable partitioner state. ``count`` is private (never released); ``noisy_threshold``
    is θ̂_j, drawn once per segment; ``halt_tick`` is the skip-ahead's sampled halting tick
    (> ``tick``, ≤ ``deadline``) for the current count, or None when not sampled yet."""
    segment: int
    start_tick: int
    deadline: int
    tick: int = 0
    count: int = 0
    noisy_threshold: Optional[int] = None
    halt_tick: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class TimePartitioner:
    """SVT-based private partitioning of time (C4 infinite; C3 with ``horizon``).

    Args:
      epsilon: ε_p, the partitioner's whole (pure) budget.
      beta: failure probability of Lemma 7 (utility only; public).
      c_theta: threshold constant (privacy-neutral; 7 = ``PAPER_C_THETA``).
      horizon: None for C4 (unbounded); an int T for the finite C3 baseline.
      max_segment_ticks: optional public cap on a segment's length (freshness).
      monotone: SVT query noise DLap(2/ε_p) (prefix counts are monotone); opt-in.
      skip_ahead: exact geometric skip-ahead over empty stretches (default) or per-tick draws.

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    epsilon: float
    beta: float = 0.1
    c_theta: float = PAPER_C_THETA
    horizon: Optional[int] = None
    max_segment_ticks: Optional[int] = None
    monotone: bool = False
    skip_ahead: bool = True

    def __post_init__(self):
        owner = type(self).__name__
        object.__setattr__(self, 'epsilon', v.check_positive(owner, 'epsilon', self.epsilon))
        object.__setattr__(self, 'beta', v.check_probability(owner, 'beta', self.beta,
                                                             allow_zero=False))
        object.__setattr__(self, 'c_theta', v.check_positive(owner, 'c_theta', self.c_theta))
        object.__setattr__(self, 'horizon',
                           v.check_optional_positive_int(owner, 'horizon', self.horizon))
        object.__setattr__(self, 'max_segment_ticks', v.check_optional_positive_int(
            owner, 'max_segment_ticks', self.max_segment_ticks))
        for name in ('monotone', 'skip_ahead'):
            if not isinstance(getattr(self, name), bool):
                v._fail(owner, f'{name} must be a bool, got {getattr(self, name)!r}.')
        check_svt_scales(owner, self.epsilon, self.monotone)

    # --- Public schedule: functions of (j, t_{j-1}) only. -------------------------------------

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon)

    def log_segment_beta(self, j: int) -> float:
        """ln β_j: β·6/(π² j²) for C4, β/T for C3."""
        if self.horizon is not None:
            return math.log(self.beta) - math.log(self.horizon)
        return math.log(self.beta) + math.log(basel_weight(1)) - 2 * math.log(j)

    def log_deadline(self, j: int, t_prev: int) -> float:
        """ln T_j (log space, so T_j = t² never overflows a float)."""
        if self.horizon is not None:
            return math.log(self.horizon)
        if j == 1:
            return math.log(2)
        return 2 * math.log(t_prev)

    def log_term(self, j: int, t_prev: int) -> float:
        """ln(2 T_j / β_j)."""
        return math.log(2) + self.log_deadline(j, t_prev) - self.log_segment_beta(j)

    def threshold(self, j: int, t_prev: int) -> float:
        """θ_j = (c_θ/ε)·ln(2T_j/β_j)."""
        return self.c_theta / self.epsilon * self.log_term(j, t_prev)

    def segment_upper_bound(self, j: int, t_prev: int) -> float:
        """Lemma 7: updates in segment j ≤ θ_j + (6/ε)·ln(2/β_j) (plus per-tick batch slack)."""
        return self.threshold(j, t_prev) + 6 / self.epsilon * (
            math.log(2) - self.log_segment_beta(j))

    def segment_lower_bound(self, j: int, t_prev: int) -> float:
        """Lemma 7: an SVT-closed segment holds ≥ θ_j - (6/ε)·ln(2T_j/β_j) updates."""
        return (self.c_theta - 6) / self.epsilon * self.log_term(j, t_prev)

    def deadline(self, j: int, t_prev: int) -> int:
        """The tick at which segment j (starting at t_prev + 1) is force-closed (Python int)."""
        if self.horizon is not None:
            close = self.horizon
        else:
            t_j = 2 if j == 1 else t_prev * t_prev
            close = max(t_j, t_prev + 1)
        if self.max_segment_ticks is not None:
            close = min(close, t_prev + self.max_segment_ticks)
        return close

    @functools.cached_property
    def query_scale(self) -> Fraction:
        """The SVT query-noise scale (4/ε_p, or 2/ε_p when monotone), rounded up."""
        return svt_noise_scales(self.epsilon, self.monotone)[1]

    def svt(self, j: int, t_prev: int) -> SparseVector:
        """The SVT instance of segment j (its public threshold θ_j)."""
        return SparseVector(self.epsilon, self.threshold(j, t_prev), self.monotone)

    # --- State machine. ------------------------------------------------------------------------

    def init_state(self) -> PartitionerState:
        return PartitionerState(segment=1, start_tick=1, deadline=self.deadline(1, 0))

    def _with_threshold(self, state: PartitionerState, rng: RandomSource) -> PartitionerState:
        if state.noisy_threshold is not None:
            return state
        svt = self.svt(state.segment, state.start_tick - 1)
        noisy = svt.draw_threshold(rng.derive('partitioner-threshold', state.segment))
        return dataclasses.replace(state, noisy_threshold=noisy)

    def _close(self, state: PartitionerState, tick: int,
               rng: RandomSource) -> Tuple[SegmentClose, PartitionerState]:
        close = SegmentClose(state.segment, state.start_tick, tick, tick == state.deadline)
        j = state.segment + 1
        fresh = PartitionerState(segment=j, start_tick=tick + 1, deadline=self.deadline(j, tick),
                                 tick=tick)
        return close, self._with_threshold(fresh, rng)

    def _sample_halt(self, state: PartitionerState, rng: RandomSource) -> PartitionerState:
        """Skip-ahead: the first tick ≥ tick+1 at which the SVT halts if the count stays."""
        u = state.tick + 1
        gap = geometric_dlap_tail(rng.derive('partitioner-gap', state.segment, u),
                                  self.query_scale,
                                  halting_gap(state.noisy_threshold, state.count),
                                  limit=state.deadline - u)
        return dataclasses.replace(state, halt_tick=u + gap)

    def _tick_test(self, state: PartitionerState, tick: int, count: int,
                   rng: RandomSource) -> bool:
        if tick >= state.deadline:
            return True                 # Forced: the noise at T_j is irrelevant.
        return bernoulli_dlap_tail(rng.derive('partitioner-tick', state.segment, tick),
                                   self.query_scale,
                                   halting_gap(state.noisy_threshold, count))

    def prime(self, state: PartitionerState, rng: RandomSource) -> PartitionerState:
        """Draws what ``next_event_tick`` needs (θ̂ and, with skip-ahead, the halting tick)."""
        state = self._with_threshold(state, rng)
        if self.skip_ahead and state.halt_tick is None:
            state = self._sample_halt(state, rng)
        return state

    def next_event_tick(self, state: PartitionerState) -> int:
        """The next tick at which a boundary may be released if no data arrives before it.

        With skip-ahead and a primed state this is the sampled halting tick (≤ the deadline);
        otherwise the next tick (per-tick evaluation must visit every tick).
        """
        if self.skip_ahead and state.halt_tick is not None:
            return state.halt_tick
        return state.tick + 1

    def advance(self, state: PartitionerState, tick: int, count: int, rng: RandomSource,
                prime: bool = True) -> Tuple[Tuple[SegmentClose, ...], PartitionerState]:
        """Processes every tick in (state.tick, tick]: the ones before ``tick`` are empty,
        ``tick`` carries ``count`` updates. Returns the boundaries released, in order.

        Raises:
          InvalidParamsError: if ``tick`` was already processed or ``count`` is negative.
          UnsupportedMechanismError: for a finite horizon, past it.
        """
        tick, count = int(tick), int(count)
        if tick <= state.tick:
            raise InvalidParamsError(f'TimePartitioner: tick must be after the last processed '
                                     f'tick {state.tick}, got {tick}.')
        if count < 0:
            raise InvalidParamsError(f'TimePartitioner: count must be non-negative, got {count}.')
        if self.horizon is not None and tick > self.horizon:
            raise UnsupportedMechanismError(
                f'TimePartitioner: tick {tick} is past the finite horizon {self.horizon}; '
                f'C3 must not run past T (use the infinite partitioner).')
        closes: List[SegmentClose] = []
        state = self._with_threshold(state, rng)
        if not self.skip_ahead:
            for t in range(state.tick + 1, tick):
                state = dataclasses.replace(state, tick=t - 1)
                if self._tick_test(state, t, state.count, rng):
                    close, state = self._close(state, t, rng)
                    closes.append(close)
            state = dataclasses.replace(state, tick=tick - 1)
        else:
            while state.tick < tick - 1:
                if state.halt_tick is None:
                    state = self._sample_halt(state, rng)
                if state.halt_tick <= tick - 1:
                    close, state = self._close(state, state.halt_tick, rng)
                    closes.append(close)
                else:
                    state = dataclasses.replace(state, tick=tick - 1)
        # The tick that carries the data (the count includes this tick's arrivals).
        new_count = state.count + count
        if count == 0 and state.halt_tick is not None:
            halted, halt_tick = state.halt_tick == tick, state.halt_tick
        else:
            # A fresh test: exact by memorylessness (the sampled halt only said "not before").
            halted, halt_tick = self._tick_test(state, tick, new_count, rng), None
        if halted:
            close, state = self._close(dataclasses.replace(state, count=new_count), tick, rng)
            closes.append(close)
        else:
            state = dataclasses.replace(state, tick=tick, count=new_count, halt_tick=halt_tick)
        if prime:
            state = self.prime(state, rng)
        return tuple(closes), state

    def step(self, state: PartitionerState, value: int,
             rng: RandomSource) -> Tuple[Optional[SegmentClose], PartitionerState]:
        """The continual contract: one tick with ``value`` updates; the boundary closed at this
        tick or None."""
        closes, state = self.advance(state, state.tick + 1, value, rng, prime=False)
        return (closes[-1] if closes else None), state

    def run(self, arrivals: Union[Mapping[int, int], Iterable[Tuple[int, int]]], until: int,
            rng: RandomSource,
            state: Optional[PartitionerState] = None) -> Tuple[List[SegmentClose],
                                                               PartitionerState]:
        """Drives the partitioner over sparse arrivals {tick: count} up to tick ``until``
        (simulation and benchmarks; a DoFn calls ``advance`` itself)."""
        items = sorted(arrivals.items() if isinstance(arrivals, Mapping) else arrivals)
        state = self.init_state() if state is None else state
        closes: List[SegmentClose] = []
        for tick, count in items:
            if tick > until:
                break
            if count:
                new, state = self.advance(state, tick, count, rng, prime=False)
                closes.extend(new)
        if until > state.tick:
            new, state = self.advance(state, until, 0, rng, prime=False)
            closes.extend(new)
        return closes, state
