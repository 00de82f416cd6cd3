"""Shared wiring of the per-key segment transforms (``SparseContinualCountPerKey``,
``SparseContinualHistogramPerKey``, ``DynamicCountPerKey``): state, timers and labels only; every
decision is the segmented driver's (``beam_dp.drivers.segmented``).

Wiring (labels are part of the update contract):

  records
    | 'GlobalWindow'        re-window (timestamps kept; releases are driven by event-time timers)
    | 'ExtractAndValidate'  (key, (step, payload)); malformed / before start / after end → dead letter
    + 'KeySeeds'            public keys only: one element per key at ``start``, so every public
                            key's partitioner runs from step 0 whether or not it has data
    | 'ReleaseSegments'     stateful DoFn per key (sparse streams: one instance per key):
                            a Bag of pending (step, payload), the key's ``KeyState`` in one
                            ReadModifyWrite cell, ONE watermark timer re-armed at
                            min(next buffered step, the partitioner's next halt step (exact
                            skip-ahead), its forced close)

Steps: step s ≥ 0 covers event times [start + s·Δ, start + (s+1)·Δ); the mechanisms count ticks
from 1 (tick = step + 1, the papers' clock). The SVT is evaluated on EVERY step, including empty
ones, through the mechanism's exact geometric skip-ahead: the timer wakes only at data steps and
at sampled halting/forced steps, and the noisy threshold θ̂_j is drawn once per segment and
persisted in the state cell.

What is released and when: one ``Release`` per key at each segment close step (and only then),
timestamped at that step's end, ``value`` the post-processed answer (unchanged until the next
close; a consumer that needs a value per step fills forward). Nothing is emitted at data steps:
an emission there would reveal an arrival (docs/privacy_model.md).

Private keys (``keys=PrivateKeys(...)``): a key's instance starts at its first record as a
candidate; its ``ContinualKeySelection`` is advanced on every step (the timer fires each step
while it is a candidate: a data-independent schedule). At the selection step the key's
mechanism starts on a local clock whose first tick carries everything since the key's first
record; nothing before it is released.
"""

import dataclasses
import typing
from typing import Any, Callable, Optional, Sequence, Tuple

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
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.drivers.segmented import KeyDriver
from beam_dp.drivers.segmented import KeyState
from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import Release
from beam_dp.privacy_unit import EventLevel
from beam_dp.transforms._common import DEAD_LETTER
from beam_dp.transforms._common import ContinualOutputs
from beam_dp.transforms._common import dead_letter
from beam_dp.transforms._common import to_micros

__all__ = [
    'SegmentedPerKey',
]

_MAX_MICROS = GlobalWindow().max_timestamp().micros


@dataclasses.dataclass(frozen=True)
class SegmentClock:
    """The public step clock of a transform (step 0 starts at ``start``)."""
    start_micros: int
    step_micros: int
    allowed_lateness_micros: int = 0
    last_step: Optional[int] = None

    def step_of(self, micros: int) -> int:
        return (micros - self.start_micros) // self.step_micros

    def bounds(self, step: int) -> Tuple[int, int]:
        start = self.start_micros + step * self.step_micros
        return start, start + self.step_micros

    def release_micros(self, step: int) -> int:
        return self.bounds(step)[1] + self.allowed_lateness_micros


class _ExtractFn(beam.DoFn):
    """record → (key, (step, payload)) or a dead letter; ``parse(record)`` gives the payload."""

    def __init__(self, label, clock: SegmentClock, key_fn, parse, public_keys):
        self._label = label
        self._clock = clock
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
        step = self._clock.step_of(micros)
        if step < 0:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              'event time is before the release start', record, micros)
            return
        last = self._clock.last_step
        if last is not None and step > last:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              f'event time is after the last step {last}', record, micros)
            return
        try:
            payload = self._parse(record)
        except Exception as e:  # pylint: disable=broad-except
            yield dead_letter(self._label, 'ExtractAndValidate', str(e), record, micros)
            return
        yield key, (step, payload)


class _SegmentReleaseFn(beam.DoFn):
    """Keyed by key: pending (step, payload) in a Bag, the KeyState in one cell, one timer."""

    KEY_STATE = ReadModifyWriteStateSpec('key_state', PickleCoder())
    PENDING = BagStateSpec('pending', PickleCoder())
    FINISHED = ReadModifyWriteStateSpec('finished', BooleanCoder())
    RELEASE_TIMER = TimerSpec('release', TimeDomain.WATERMARK)
    END_TIMER = TimerSpec('end_of_input', TimeDomain.WATERMARK)

    def __init__(self, driver: KeyDriver, clock: SegmentClock, label: str,
                 rng: noise.RandomSource, private: bool, metadata: dict, histogram: bool):
        self._driver = driver
        self._clock = clock
        self._label = label
        self._rng = rng
        self._private = private
        self._metadata = metadata
        self._histogram = histogram

    def _arm(self, timer, state: KeyState, wake: Optional[int]):
        last = self._clock.last_step
        if wake is None or (last is not None and wake > last):
            return state, None
        micros = self._clock.release_micros(wake)
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
        if stored is None and self._clock.last_step is None:
            end_timer.set(GlobalWindow().max_timestamp())
        if stored is None and item is None:          # a public key's seed at ``start``
            state = self._driver.init_state(None, self._rng.derive(self._label, key), False)
            state, wake = self._arm(release_timer, state, self._driver.next_wake(state, []))
            key_state.write((state, wake))
            return
        state, wake = stored if stored is not None else (None, None)
        step, payload = item
        if state is not None and step <= state.last_step:
            yield dead_letter(self._label, 'ReleaseSegments',
                              f'late: step {step} was already processed (allowed lateness '
                              f'{self._clock.allowed_lateness_micros / 1e6:g}s)',
                              {'key': key, 'step': step, 'payload': payload},
                              self._clock.bounds(step)[1] - 1)
            return
        pending.add(item)
        # A private key's candidate state is created at its first firing, from the earliest
        # buffered step (elements arrive in any order).
        if wake is None or step < wake:
            if state is None:
                state, wake = self._arm(release_timer, None, step)
            else:
                state, wake = self._arm(release_timer, state,
                                        self._driver.next_wake(state, [step]))
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
        for step, reason, update in out.rejected:
            yield dead_letter(self._label, 'ReleaseSegments', reason, update,
                              self._clock.bounds(step)[1] - 1)
        for step, _, answer, sd in out.closes:
            start, end = self._clock.bounds(step)
            yield Release(key=key, step=step, step_start_micros=start, step_end_micros=end,
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
        step_micros = to_micros(owner, 'tick', tick, allow_zero=False, duration=True)
        last_step = None
        if end is not None:
            end_micros = to_micros(owner, 'end', end)
            if end_micros <= start_micros:
                raise InvalidParamsError(f'{owner}: end must be after start, got {end!r}.')
            last_step = -(-(end_micros - start_micros) // step_micros) - 1
        self._clock = SegmentClock(start_micros, step_micros, to_micros(
            owner, 'allowed_lateness', allowed_lateness, duration=True), last_step)
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
    def clock(self) -> SegmentClock:
        return self._clock

    def _parse(self, record):
        raise NotImplementedError

    def _mechanism_name(self) -> str:
        raise NotImplementedError

    def display_data(self):
        return {'mechanism': self._mechanism_name(), 'budget': str(self._budget),
                'tick_seconds': self._clock.step_micros / 1e6,
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
        clock = self._clock
        extracted = (
            records
            | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
            | 'ExtractAndValidate' >> beam.ParDo(
                _ExtractFn(label, clock, self._key_fn, self._parse,
                           self._public_keys)).with_outputs(DEAD_LETTER, main='valid'))
        inputs = (extracted.valid,)
        if self._public_keys is not None:
            seeds = (
                records.pipeline
                | 'KeySeeds' >> beam.Create(sorted(self._public_keys))
                | 'SeedAtStart' >> beam.Map(lambda k: beam.window.TimestampedValue(
                    (k, None), Timestamp(micros=clock.start_micros))))
            inputs = (extracted.valid, seeds)
        inputs = inputs | 'MergeSeeds' >> beam.Flatten().with_output_types(
            typing.Tuple[str, typing.Any])
        released = inputs | 'ReleaseSegments' >> beam.ParDo(_SegmentReleaseFn(
            self.driver, clock, label, self._rng, self._private is not None,
            self._metadata(), self._metric == 'histogram')).with_outputs(DEAD_LETTER,
                                                                        main='releases')
        dead_letters = (extracted[DEAD_LETTER], released[DEAD_LETTER]) | (
            'MergeDeadLetters' >> beam.Flatten().with_output_types(DeadLetter))
        releases = released.releases
        releases.element_type = Release
        return ContinualOutputs(releases, dead_letters)
