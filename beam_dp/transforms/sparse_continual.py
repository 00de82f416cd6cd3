"""Continual per-key counts and histograms on private TIME segments (Qiu & Yi C5 = C4 + C2).

Wiring (labels are part of the update contract):

  records
    | 'GlobalWindow'        re-window (timestamps kept; releases are driven by event-time timers)
    | 'ExtractAndValidate'  (key, (tick, payload)); malformed / before start / after end → dead letter
    + 'KeySeeds'            public keys only: one element per key at ``start``, so every public
                            key's partitioner runs from tick 1 whether or not it has data
    | 'ReleaseSegments'     stateful DoFn per key (sparse streams: one instance per key):
                            a Bag of pending (tick, payload), the key's state in one
                            ReadModifyWrite cell, ONE watermark timer re-armed at
                            min(next buffered tick, the partitioner's next halt tick (exact
                            skip-ahead), its forced close)

Ticks: tick t ≥ 1 covers event times [start + (t-1)·Δ, start + t·Δ). The SVT is evaluated on
EVERY tick, including empty ones, through the mechanism's exact geometric skip-ahead
(``TimePartitioner``): the timer wakes only at data ticks and at sampled halting/forced ticks,
and the noisy threshold θ̂_j is drawn once per segment and persisted in the state cell.

What is released and when: one ``Release`` per key at each segment close tick (and only then),
timestamped at that tick's end; ``step`` = close tick - 1 (the 0-based index of the tick, as in
the step transforms), ``value`` the post-processed C5 answer (unchanged until the next close; a
consumer that needs a value per tick fills forward). Nothing is emitted at data ticks: an
emission there would reveal an arrival (spec 001 §17).

Private keys (``keys=PrivateKeys(...)``): a key's instance starts at its first record as a
candidate; its ``ContinualKeySelection`` is advanced on every tick (the timer fires each tick
while it is a candidate: a data-independent schedule). At the selection tick t* the key's
mechanism starts on a local clock (local tick 1 = t*) whose first tick carries everything since
the key's first record; nothing before t* is released.
"""

import dataclasses
import math
import typing
from typing import Any, Callable, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.coders import BooleanCoder
from apache_beam.coders import PickleCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.transforms.userstate import TimerSpec
from apache_beam.transforms.userstate import on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.timestamp import Timestamp

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import Release
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import KeySelectionState
from beam_dp.mechanisms.keyed_release import PrivateKeys
from beam_dp.mechanisms.sparse_counter import SparseCounter
from beam_dp.mechanisms.time_partition import PAPER_C_THETA
from beam_dp.privacy_unit import EventLevel
from beam_dp.transforms._common import DEAD_LETTER
from beam_dp.transforms._common import ContinualOutputs
from beam_dp.transforms._common import dead_letter
from beam_dp.transforms._common import to_micros

__all__ = [
    'KeyDriver',
    'KeyState',
    'SparseContinualCountPerKey',
    'SparseContinualHistogramPerKey',
]

_MAX_MICROS = GlobalWindow().max_timestamp().micros


# --- The pure per-key driver (no Beam): shared by the DoFn, the reference and the benchmarks. --

@dataclasses.dataclass(frozen=True)
class KeyState:
    """One key. ``through``: last global tick processed. ``selection``: the candidate's
    selection state (private keys, before selection). ``origin``: global tick of local tick 1
    (None while a candidate). ``pre``: a candidate's exact data so far (private).
    ``mech``: the mechanism state (primed). ``extra``: driver-specific data (dynamic: live ids)."""
    through: int
    selection: Optional[KeySelectionState] = None
    origin: Optional[int] = None
    pre: Any = None
    mech: Any = None
    extra: Any = None


@dataclasses.dataclass(frozen=True)
class TickOutput:
    """What processing one key up to a tick produced: closes as (global tick, segment(s),
    answer, noise sd), dead letters as (tick, reason, update) and the next wake-up tick."""
    closes: Tuple[Tuple[int, Tuple[int, ...], Tuple[float, ...], float], ...]
    rejected: Tuple[Tuple[int, str, Any], ...]
    wake: Optional[int]


class KeyDriver:
    """Drives one key's continual mechanism over (tick, payload) batches on the exact skip-ahead
    schedule. Subclasses say how payloads merge and what the mechanism consumes."""

    def __init__(self, mechanism, selection: Optional[ContinualKeySelection]):
        self.mechanism = mechanism
        self.selection = selection

    # Payload plumbing (overridden).
    def empty(self):
        raise NotImplementedError

    def merge(self, a, b):
        raise NotImplementedError

    def units(self, payload) -> int:
        raise NotImplementedError

    def prepare(self, state: KeyState, tick: int, payload):
        """(mechanism input, rejected [(reason, update)], new extra) for one tick's payload."""
        return payload, (), state.extra

    def first_input(self, state: KeyState, pre):
        """The mechanism input of the selection tick (everything since the first record)."""
        return pre

    def noise_sd(self, mech_state) -> float:
        return float('nan')

    def answer(self, release) -> Tuple[float, ...]:
        return tuple(release.answer)

    # The schedule.
    def init_state(self, first_tick: Optional[int], rng: noise.RandomSource,
                   private: bool) -> KeyState:
        """A public key (mechanism from tick 1) or a private candidate first seen at
        ``first_tick``."""
        if not private:
            return KeyState(0, origin=1, mech=self.mechanism.prime(self.mechanism.init_state(),
                                                                    rng))
        return KeyState(first_tick - 1, selection=self.selection.init_state(first_tick),
                        pre=self.empty())

    def next_wake(self, state: KeyState, buffered: Sequence[int]) -> int:
        later = [t for t in buffered if t > state.through]
        if state.origin is None:
            return state.through + 1        # a candidate is evaluated on every tick
        event = self.mechanism.next_event_tick(state.mech) + state.origin - 1
        return min([event] + later)

    def process(self, state: KeyState, batches: Sequence[Tuple[int, Any]], until: int,
                rng: noise.RandomSource, selection_rng: noise.RandomSource
                ) -> Tuple[TickOutput, KeyState]:
        """Processes ticks (state.through, until]; ``batches`` are the (tick, payload) with
        tick in that range (any order, duplicates merged)."""
        merged = {}
        for tick, payload in batches:
            merged[tick] = payload if tick not in merged else self.merge(merged[tick], payload)
        data = sorted(merged.items())
        closes, rejected = [], []
        i = 0
        mech = self.mechanism
        while state.origin is None and state.through < until:   # candidate: every tick
            t = state.through + 1
            payload = self.empty()
            if i < len(data) and data[i][0] == t:
                payload = data[i][1]
                i += 1
            fed, bad, extra = self.prepare(state, t, payload)
            rejected.extend((t, reason, u) for reason, u in bad)
            pre = self.merge(state.pre, fed)
            chosen, sel = self.selection.advance(state.selection, t, self.units(payload),
                                                 selection_rng)
            if not chosen:
                state = dataclasses.replace(state, through=t, selection=sel, pre=pre,
                                            extra=extra)
                continue
            ms = mech.init_state()
            release, ms = mech.advance(ms, 1, self.first_input(
                dataclasses.replace(state, extra=extra), pre), rng, prime=True)
            state = KeyState(t, None, t, None, ms, extra)
            if release.closes:
                closes.append(self._close(t, release, ms))
        while state.origin is not None:
            event = mech.next_event_tick(state.mech) + state.origin - 1
            nxt = min(event, data[i][0] if i < len(data) else math.inf)
            if nxt > until:
                break
            payload = self.empty()
            if i < len(data) and data[i][0] == nxt:
                payload = data[i][1]
                i += 1
            fed, bad, extra = self.prepare(state, nxt, payload)
            rejected.extend((nxt, reason, u) for reason, u in bad)
            release, ms = mech.advance(state.mech, nxt - state.origin + 1, fed, rng, prime=True)
            state = dataclasses.replace(state, through=nxt, mech=ms, extra=extra)
            if release.closes:
                closes.append(self._close(nxt, release, ms))
        if state.through < until:
            state = dataclasses.replace(state, through=until)
        return TickOutput(tuple(closes), tuple(rejected), None), state

    def _close(self, tick, release, mech_state):
        return (tick, tuple(c.segment for c in release.closes), self.answer(release),
                self.noise_sd(mech_state))


class CounterDriver(KeyDriver):
    """C5 (``SparseCounter``): payloads are per-bin count tuples."""

    def empty(self):
        return (0,) * self.mechanism.dimension

    def merge(self, a, b):
        return tuple(x + y for x, y in zip(a, b))

    def units(self, payload) -> int:
        return sum(payload)

    def noise_sd(self, mech_state) -> float:
        return math.sqrt(self.mechanism.counter.release_variance(mech_state.counter.s))


def reference_releases(driver: KeyDriver, key: str, label: str, seed: int,
                       events: Sequence[Tuple[int, Any]], until: int, private: bool = False):
    """Pure reference of one key: the TickOutput of driving ``driver`` over ``events`` (tick,
    payload) up to ``until`` in one go, with the transform's noise derivation."""
    base = noise.seeded(seed)
    rng, sel_rng = base.derive(label, key), base.derive(label, 'select', key)
    first = min((t for t, _ in events), default=None)
    if private and first is None:
        return TickOutput((), (), None), None
    state = driver.init_state(first, rng, private)
    return driver.process(state, events, until, rng, sel_rng)


# --- Beam. ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TickSchedule:
    """The public tick clock of a transform."""
    start_micros: int
    tick_micros: int
    allowed_lateness_micros: int = 0
    last_tick: Optional[int] = None

    def tick_of(self, micros: int) -> int:
        return (micros - self.start_micros) // self.tick_micros + 1

    def bounds(self, tick: int) -> Tuple[int, int]:
        start = self.start_micros + (tick - 1) * self.tick_micros
        return start, start + self.tick_micros

    def release_micros(self, tick: int) -> int:
        return self.bounds(tick)[1] + self.allowed_lateness_micros


class _ExtractFn(beam.DoFn):
    """record → (key, (tick, payload)) or a dead letter; ``parse(record)`` gives the payload."""

    def __init__(self, label, schedule: TickSchedule, key_fn, parse, public_keys):
        self._label = label
        self._schedule = schedule
        self._key_fn = key_fn
        self._parse = parse
        self._public = public_keys

    def setup(self):
        self._public_set = None if self._public is None else frozenset(self._public)

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        try:
            key = self._key_fn(record)
        except Exception as e:  # pylint: disable=broad-except
            yield dead_letter(self._label, 'ExtractAndValidate', f'key_fn raised {e!r}', record,
                              micros)
            return
        if self._public_set is not None and key not in self._public_set:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              f'key {key!r} is not in the public key set', record, micros)
            return
        if not isinstance(key, str):
            yield dead_letter(self._label, 'ExtractAndValidate',
                              f'key must be a string, got {key!r}', record, micros)
            return
        tick = self._schedule.tick_of(micros)
        if tick < 1:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              'event time is before the release start', record, micros)
            return
        last = self._schedule.last_tick
        if last is not None and tick > last:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              f'event time is after the last tick {last}', record, micros)
            return
        try:
            payload = self._parse(record)
        except Exception as e:  # pylint: disable=broad-except
            yield dead_letter(self._label, 'ExtractAndValidate', str(e), record, micros)
            return
        yield key, (tick, payload)


class _SegmentReleaseFn(beam.DoFn):
    """Keyed by key: pending (tick, payload) in a Bag, the KeyState in one cell, one timer."""

    KEY_STATE = ReadModifyWriteStateSpec('key_state', PickleCoder())
    PENDING = BagStateSpec('pending', PickleCoder())
    FINISHED = ReadModifyWriteStateSpec('finished', BooleanCoder())
    RELEASE_TIMER = TimerSpec('release', TimeDomain.WATERMARK)
    END_TIMER = TimerSpec('end_of_input', TimeDomain.WATERMARK)

    def __init__(self, driver: KeyDriver, schedule: TickSchedule, label: str,
                 rng: noise.RandomSource, private: bool, metadata: dict, histogram: bool):
        self._driver = driver
        self._schedule = schedule
        self._label = label
        self._rng = rng
        self._private = private
        self._metadata = metadata
        self._histogram = histogram

    def _arm(self, timer, state: KeyState, wake: Optional[int]):
        last = self._schedule.last_tick
        if wake is None or (last is not None and wake > last):
            return state, None
        micros = self._schedule.release_micros(wake)
        if micros >= _MAX_MICROS:
            return state, None
        timer.set(Timestamp(micros=micros))
        return state, wake

    def process(self, element, key_state=beam.DoFn.StateParam(KEY_STATE),
                pending=beam.DoFn.StateParam(PENDING),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER),
                end_timer=beam.DoFn.TimerParam(END_TIMER)):
        key, item = element
        stored = key_state.read()
        if stored is None and self._schedule.last_tick is None:
            end_timer.set(GlobalWindow().max_timestamp())
        if stored is None and item is None:          # a public key's seed at ``start``
            state = self._driver.init_state(None, self._rng.derive(self._label, key), False)
            state, wake = self._arm(release_timer, state, self._driver.next_wake(state, []))
            key_state.write((state, wake))
            return
        state, wake = stored if stored is not None else (None, None)
        tick, payload = item
        if state is not None and tick <= state.through:
            yield dead_letter(self._label, 'ReleaseSegments',
                              f'late: tick {tick} was already processed (allowed lateness '
                              f'{self._schedule.allowed_lateness_micros / 1e6:g}s)',
                              {'key': key, 'tick': tick, 'payload': payload},
                              self._schedule.bounds(tick)[1] - 1)
            return
        pending.add(item)
        # A private key's candidate state is created at its first firing, from the earliest
        # buffered tick (elements arrive in any order).
        if wake is None or tick < wake:
            if state is None:
                state, wake = self._arm(release_timer, None, tick)
            else:
                state, wake = self._arm(release_timer, state,
                                        self._driver.next_wake(state, [tick]))
        key_state.write((state, wake))

    @on_timer(RELEASE_TIMER)
    def release(self, key=beam.DoFn.KeyParam, key_state=beam.DoFn.StateParam(KEY_STATE),
                pending=beam.DoFn.StateParam(PENDING), finished=beam.DoFn.StateParam(FINISHED),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        if finished.read():
            return
        state, wake = key_state.read()
        if wake is None:
            return
        due, rest = [], []
        for item in pending.read():
            (due if item[0] <= wake else rest).append(item)
        if state is None:
            state = self._driver.init_state(min(t for t, _ in due), None, True)
        pending.clear()
        for item in rest:
            pending.add(item)
        out, state = self._driver.process(state, due, wake, self._rng.derive(self._label, key),
                                          self._rng.derive(self._label, 'select', key))
        state, wake = self._arm(release_timer, state,
                                self._driver.next_wake(state, [t for t, _ in rest]))
        key_state.write((state, wake))
        for tick, reason, update in out.rejected:
            yield dead_letter(self._label, 'ReleaseSegments', reason, update,
                              self._schedule.bounds(tick)[1] - 1)
        for tick, _, answer, sd in out.closes:
            start, end = self._schedule.bounds(tick)
            yield Release(key=key, step=tick - 1, step_start_micros=start, step_end_micros=end,
                          value=float(sum(answer)),
                          values=list(answer) if self._histogram else [], noise_stddev=sd,
                          **self._metadata)

    @on_timer(END_TIMER)
    def end_of_input(self, finished=beam.DoFn.StateParam(FINISHED),
                     release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        finished.write(True)
        release_timer.clear()


class SegmentedPerKey(beam.PTransform):
    """Shared wiring of the per-key segment transforms (sparse and dynamic)."""

    _metric = ''

    def __init__(self, *, start, tick, budget: PrivacyBudget,
                 public_keys: Optional[Sequence[str]] = None, keys=None,
                 key_fn: Callable[[Any], Any] = lambda r: r[0],
                 accountant: Optional[BudgetAccountant] = None, allowed_lateness=0, end=None,
                 privacy_unit=None, testing_seed: Optional[int] = None,
                 label: Optional[str] = None):
        super().__init__(label)
        owner = type(self).__name__
        self._owner = owner
        private = None
        if keys is not None:
            if public_keys is not None:
                raise InvalidParamsError(f'{owner}: give either public_keys or keys, not both.')
            if isinstance(keys, PrivateKeys):
                private = keys
            else:
                public_keys = keys
        if private is None:
            if isinstance(public_keys, (str, bytes)) or public_keys is None:
                raise InvalidParamsError(f'{owner}: public_keys must be a collection of strings '
                                         f'(or keys=PrivateKeys(...)), got {public_keys!r}.')
            public_keys = list(public_keys)
            if not public_keys:
                raise InvalidParamsError(f'{owner}: public_keys must not be empty.')
            if any(not isinstance(k, str) for k in public_keys):
                raise InvalidParamsError(f'{owner}: public keys must be strings.')
            if len(set(public_keys)) != len(public_keys):
                raise InvalidParamsError(f'{owner}: public keys must be distinct.')
        if not isinstance(budget, PrivacyBudget):
            raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got {budget!r}.')
        if budget.is_zcdp:
            raise InvalidParamsError(f'{owner}: budget must be a pure epsilon budget (the SVT '
                                     f'partitioner is epsilon-DP), got {budget}.')
        if privacy_unit is not None and not isinstance(privacy_unit, EventLevel):
            raise InvalidParamsError(f'{owner}: only privacy_unit=EventLevel() is supported '
                                     f'(bound users and apply group privacy to epsilon first), '
                                     f'got {privacy_unit!r}.')
        if not callable(key_fn):
            raise InvalidParamsError(f'{owner}: key_fn must be callable, got {key_fn!r}.')
        if accountant is not None and not isinstance(accountant, BudgetAccountant):
            raise InvalidParamsError(f'{owner}: accountant must be a BudgetAccountant, got '
                                     f'{accountant!r}.')
        if testing_seed is not None and (isinstance(testing_seed, bool)
                                         or not isinstance(testing_seed, int)):
            raise InvalidParamsError(f'{owner}: testing_seed must be an int or None, got '
                                     f'{testing_seed!r}.')
        start_micros = to_micros(owner, 'start', start)
        tick_micros = to_micros(owner, 'tick', tick, allow_zero=False, duration=True)
        last_tick = None
        if end is not None:
            end_micros = to_micros(owner, 'end', end)
            if end_micros <= start_micros:
                raise InvalidParamsError(f'{owner}: end must be after start, got {end!r}.')
            last_tick = -(-(end_micros - start_micros) // tick_micros)
        self._schedule = TickSchedule(start_micros, tick_micros, to_micros(
            owner, 'allowed_lateness', allowed_lateness, duration=True), last_tick)
        self._budget = budget
        self._public_keys = public_keys if private is None else None
        self._private = private
        self._key_fn = key_fn
        self._accountant = accountant
        self._rng = noise.seeded(testing_seed) if testing_seed is not None else noise.secure_rng()

    def _finish_init(self):
        """After the subclass built ``self._mechanism``: check the budget at construction."""
        owner = self._owner
        if self._accountant is not None:
            scratch = BudgetAccountant(self._accountant.budget)
            for entry in self._accountant.ledger:
                scratch.spend(entry.label, entry.cost)
            for name, cost in self._costs(owner):
                scratch.spend(name, cost)

    def _costs(self, label):
        costs = []
        if self._private is not None:
            costs.append((f'{label}/SelectKeys', self._private.privacy_cost()))
        costs.append((label, self.release_cost()))
        return costs

    def release_cost(self) -> PrivacyCost:
        return self._mechanism.privacy_cost()

    def privacy_cost(self) -> PrivacyCost:
        total = self.release_cost()
        if self._private is not None:
            total = self._private.privacy_cost() + total
        return total

    @property
    def driver(self) -> KeyDriver:
        selection = None if self._private is None else self._private.selection(1)
        return self._driver_class(self._mechanism, selection)

    @property
    def schedule(self) -> TickSchedule:
        return self._schedule

    def _parse(self, record):
        raise NotImplementedError

    def _mechanism_name(self) -> str:
        raise NotImplementedError

    def display_data(self):
        return {'mechanism': self._mechanism_name(), 'budget': str(self._budget),
                'tick_seconds': self._schedule.tick_micros / 1e6,
                'keys': 'private' if self._private is not None else len(self._public_keys)}

    def _metadata(self):
        cost = self.privacy_cost()
        return dict(metric=self._metric, mechanism=self._mechanism_name(),
                    epsilon=float(cost.epsilon), delta=float(cost.delta), rho=0.0,
                    privacy_unit=EventLevel().describe())

    def expand(self, records):
        label = self.label
        if self._accountant is not None:
            for name, cost in self._costs(label):
                self._accountant.spend(name, cost)
        schedule = self._schedule
        extracted = (
            records
            | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
            | 'ExtractAndValidate' >> beam.ParDo(
                _ExtractFn(label, schedule, self._key_fn, self._parse,
                           self._public_keys)).with_outputs(DEAD_LETTER, main='valid'))
        inputs = (extracted.valid,)
        if self._public_keys is not None:
            seeds = (
                records.pipeline
                | 'KeySeeds' >> beam.Create(sorted(self._public_keys))
                | 'SeedAtStart' >> beam.Map(lambda k: beam.window.TimestampedValue(
                    (k, None), Timestamp(micros=schedule.start_micros))))
            inputs = (extracted.valid, seeds)
        inputs = inputs | 'MergeSeeds' >> beam.Flatten().with_output_types(
            typing.Tuple[str, typing.Any])
        released = inputs | 'ReleaseSegments' >> beam.ParDo(_SegmentReleaseFn(
            self.driver, schedule, label, self._rng, self._private is not None,
            self._metadata(), self._metric == 'histogram')).with_outputs(DEAD_LETTER,
                                                                        main='releases')
        dead_letters = (extracted[DEAD_LETTER], released[DEAD_LETTER]) | (
            'MergeDeadLetters' >> beam.Flatten().with_output_types(DeadLetter))
        releases = released.releases
        releases.element_type = Release
        return ContinualOutputs(releases, dead_letters)


class SparseContinualCountPerKey(SegmentedPerKey):
    """Continual per-key counts on private time segments (C5), for sparse streams.

    Per key, the C4 partitioner (SVT on the segment's running count, exact skip-ahead over
    empty ticks, θ̂ drawn once per segment and kept in state) cuts event time into segments; at
    each close the C2 counter takes one step with the segment's exact total. Between closes
    nothing is released.

    Privacy unit and neighbours: event level (add/remove one record); keys are parallel (each
    record goes to one key). Guarantee: ε-DP with ``budget=PrivacyBudget(epsilon=ε)``, split
    ε_p = ``partition_fraction``·ε for the boundaries (Qiu & Yi Thm 6) and the rest for C2
    (Thm 8); with ``keys=PrivateKeys(...)`` plus the selection's (ε_s, δ).

    Released: one ``Release`` per key and segment close (``step`` = close tick - 1), value = the
    C5 answer (noisy count up to the close), ``noise_stddev`` = C2's exact sd (the open
    segment's lag is not included). Accuracy (Thm 8): C2 error at the segment count plus the
    open segment's lag ≤ θ_j + (6/ε_p)·ln(2/β_j) w.p. 1-β; ``c_theta`` (privacy-neutral, 7 =
    paper) trades lag for segments; spec 001 §16.

    Not guaranteed: records for an already processed tick are dead-lettered (late); a key's
    releases are as fresh as its segments (``max_segment_ticks`` caps staleness publicly).

    Cite: Qiu & Yi, "Differential privacy on dynamic data", Algorithm 2, Theorem 8.

    Args:
      public_keys / keys: public key list, or ``keys=PrivateKeys(...)``.
      start, tick: the public tick clock (tick t covers [start+(t-1)·tick, start+t·tick)).
      budget: ``PrivacyBudget(epsilon=ε)`` (pure).
      partition_fraction, beta, c_theta, max_segment_ticks, monotone: the partitioner's.
      key_fn: record → key (default ``record[0]``).
      accountant, allowed_lateness, end, testing_seed: as ``ContinualCountPerKey``.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter; BudgetExceededError: over budget.
    """

    _metric = 'count'
    _driver_class = CounterDriver

    def __init__(self, *, budget: PrivacyBudget, partition_fraction: float = 0.5,
                 beta: float = 0.1, c_theta: float = PAPER_C_THETA,
                 max_segment_ticks: Optional[int] = None, monotone: bool = False,
                 bins: Sequence[str] = (), value_fn: Optional[Callable[[Any], Any]] = None,
                 **kwargs):
        super().__init__(budget=budget, **kwargs)
        self._bins = tuple(bins)
        self._value_fn = value_fn
        try:
            self._mechanism = SparseCounter(budget.epsilon, partition_fraction, beta, c_theta,
                                            max(1, len(self._bins)), max_segment_ticks,
                                            monotone)
        except InvalidParamsError as e:
            raise InvalidParamsError(f'{self._owner}: {str(e).split(": ", 1)[-1]}') from e
        self._finish_init()

    @property
    def mechanism(self) -> SparseCounter:
        return self._mechanism

    def _parse(self, record):
        return (1,)

    def _mechanism_name(self) -> str:
        m = self._mechanism
        return (f'sparse_counter_c5/c_theta={m.c_theta:g}/partition_fraction='
                f'{m.partition_fraction:g}')


class SparseContinualHistogramPerKey(SparseContinualCountPerKey):
    """As ``SparseContinualCountPerKey`` over public ``bins``: one record adds 1 to the bin
    ``value_fn(record)`` (default ``record[1]``; other labels are dead-lettered); the
    partitioner counts all records of the key (L1 sensitivity 1 either way)."""

    _metric = 'histogram'

    def __init__(self, *, bins: Sequence[str], value_fn: Callable[[Any], Any] = lambda r: r[1],
                 **kwargs):
        owner = type(self).__name__
        if isinstance(bins, str) or not bins or len(set(bins)) != len(bins):
            raise InvalidParamsError(f'{owner}: bins must be a non-empty list of distinct '
                                     f'labels, got {bins!r}.')
        if not callable(value_fn):
            raise InvalidParamsError(f'{owner}: value_fn must be callable, got {value_fn!r}.')
        super().__init__(bins=bins, value_fn=value_fn, **kwargs)
        self._index = {b: i for i, b in enumerate(self._bins)}

    def _parse(self, record):
        label = self._value_fn(record)
        if label not in self._index:
            raise ValueError(f'bin is not one of the public bins: {label!r}')
        vec = [0] * len(self._bins)
        vec[self._index[label]] = 1
        return tuple(vec)

