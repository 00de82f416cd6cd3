"""The segmented-release driver (pure, no Beam): what the sparse and dynamic per-key DoFns call.

One key's continual mechanism (C5 ``SparseCounter``, C6 ``TwoStreamCounter``, C9
``FullyDynamicCounter``) is driven over (step, payload) batches on the exact skip-ahead schedule
of its private time partitioner: ``KeyDriver.process`` advances the mechanism to each data tick
and to each halting/forced tick the partitioner samples, and returns the segment closes (the only
releases) with the next wake-up step. Private keys (``PrivateKeys``) run their
``ContinualKeySelection`` until selected, lazily (``advance_lazy``: the law of a test on every
tick, but the driver only visits data ticks and the ticks the selection's schedule draws, so a
candidate's timer no longer fires every tick); the mechanism then starts on a local clock whose
first tick carries everything since the key's first record.

``SegmentLoop`` is what the release loop runs per key; ``beam_dp.testing.replay`` drives it
exactly as the job does, so a notebook, a benchmark and the Beam job release the same values
under a seed (the seeded parity tests).
"""

import bisect
import dataclasses
import math
from typing import Any, NamedTuple, Optional, Sequence, Tuple

from beam_dp import noise
from beam_dp.drivers import rows
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.protocol import END_OF_TIME_MICROS
from beam_dp.drivers.protocol import Dead
from beam_dp.drivers.protocol import Outcome
from beam_dp.drivers.protocol import late_letter
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import KeySelectionState

__all__ = [
    'CounterDriver',
    'KeyDriver',
    'KeyState',
    'Rejected',
    'SegmentClose',
    'SegmentItem',
    'SegmentLoop',
    'StepOutput',
    'mechanism_tick',
]


@dataclasses.dataclass(frozen=True)
class KeyState:
    """One key's state between timer firings.

    ``last_step``: the last global step processed (-1: none). ``selection``: a private key's
    selection state while it is a candidate. ``origin_step``: the global step that is the
    mechanism's tick 1 (None while a candidate). ``candidate_input``: a candidate's exact input
    since its first record (private). ``mechanism_state``: the mechanism's state (primed).
    ``registry``: driver-specific data (dynamic: the live record ids → bin)."""
    last_step: int
    selection: Optional[KeySelectionState] = None
    origin_step: Optional[int] = None
    candidate_input: Any = None
    mechanism_state: Any = None
    registry: Any = None


class SegmentClose(NamedTuple):
    """A release: the segment(s) closed at global ``step``, the answer and its noise sd."""
    step: int
    segments: Tuple[int, ...]
    answer: Tuple[float, ...]
    noise_stddev: float


class Rejected(NamedTuple):
    """An update the driver did not apply (counted by the partitioner): step, reason, update."""
    step: int
    reason: str
    update: Any


@dataclasses.dataclass(frozen=True)
class StepOutput:
    """What processing one key up to a step produced: the closes and the rejected updates."""
    closes: Tuple[SegmentClose, ...]
    rejected: Tuple[Rejected, ...]


def mechanism_tick(step: int, origin_step: int = 0) -> int:
    """The mechanism's tick (from 1, the papers' clock) of a global step (from 0)."""
    return step - origin_step + 1


class KeyDriver:
    """Drives one key's continual mechanism over (step, payload) batches on the exact skip-ahead
    schedule. Subclasses say how payloads merge and what the mechanism consumes.

    Steps are the transform's 0-based clock; the mechanisms count ticks from 1 (the papers'
    clock), so step s is tick s + 1 — for the selection (global) and, shifted by the origin, for
    the mechanism. Every noise address is the mechanism's own, at that tick."""

    def __init__(self, mechanism, selection: Optional[ContinualKeySelection],
                 clock: Optional[StepClock] = None):
        self.mechanism = mechanism
        self.selection = selection
        self.clock = clock

    # Payload plumbing (overridden).
    def empty(self):
        raise NotImplementedError

    def merge(self, a, b):
        raise NotImplementedError

    def units(self, payload) -> int:
        raise NotImplementedError

    def prepare(self, state: KeyState, step: int, payload):
        """(mechanism input, rejected [(reason, update)], new registry) for one step's payload."""
        return payload, (), state.registry

    def first_input(self, state: KeyState, candidate_input):
        """The mechanism input of the selection step (everything since the first record)."""
        return candidate_input

    def noise_sd(self, mechanism_state) -> float:
        return float('nan')

    def answer(self, release) -> Tuple[float, ...]:
        return tuple(release.answer)

    # The schedule.
    def init_state(self, first_step: Optional[int], rng: noise.RandomSource,
                   private: bool) -> KeyState:
        """A public key (mechanism from step 0) or a private candidate first seen at
        ``first_step``."""
        if not private:
            mech = self.mechanism
            return KeyState(-1, origin_step=0, mechanism_state=mech.prime(mech.init_state(), rng))
        return KeyState(first_step - 1,
                        selection=self.selection.init_state(mechanism_tick(first_step)),
                        candidate_input=self.empty())

    def next_wake(self, state: KeyState, buffered: Sequence[int]) -> int:
        """The next step whose end must fire the key's timer."""
        later = [s for s in buffered if s > state.last_step]
        if state.origin_step is None:
            # A candidate: its next data step or the next step its selection schedule draws a
            # test for (``ContinualKeySelection.advance_lazy``); no timer for the steps between.
            due = state.selection.due
            if due is None:
                return state.last_step + 1    # a fresh candidate: no schedule drawn yet
            return min([due[0] - 1] + later)
        return min([self._next_event(state)] + later)

    def wake_micros(self, wake: Optional[int]) -> Optional[int]:
        """When the timer of step ``wake`` fires (its release time on the clock), or None if
        there is nothing to wake for (no step, or past the clock's last step)."""
        if wake is None or not self.clock.is_released(wake):
            return None
        return self.clock.release_time_micros(wake)

    @staticmethod
    def split_due(pending: Sequence[Tuple[int, Any]], wake: int):
        """(due, rest): the buffered (step, payload) up to ``wake``, and the later ones."""
        due, rest = [], []
        for item in pending:
            (due if item[0] <= wake else rest).append(item)
        return due, rest

    def _next_event(self, state: KeyState) -> int:
        return self.mechanism.next_event_tick(state.mechanism_state) + state.origin_step - 1

    def process(self, state: KeyState, batches: Sequence[Tuple[int, Any]], until: int,
                rng: noise.RandomSource, selection_rng: noise.RandomSource
                ) -> Tuple[StepOutput, KeyState]:
        """Processes steps (state.last_step, until]; ``batches`` are the (step, payload) with
        step in that range (any order, duplicates merged)."""
        merged = {}
        for step, payload in batches:
            merged[step] = payload if step not in merged else self.merge(merged[step], payload)
        data_steps = sorted(merged)
        closes, rejected = [], []
        mech = self.mechanism

        def take(state, step):
            """The step's payload (empty if none) and what the mechanism is fed."""
            payload = merged.pop(step, None)
            payload = self.empty() if payload is None else payload
            fed, bad, registry = self.prepare(state, step, payload)
            rejected.extend(Rejected(step, reason, u) for reason, u in bad)
            return payload, fed, registry

        while state.origin_step is None and state.last_step < until:   # candidate
            # Lazy selection (``advance_lazy``: the law of a test on every step): only data
            # steps and the steps its schedule draws are visited.
            j = bisect.bisect_right(data_steps, state.last_step)
            s = min(until, data_steps[j] if j < len(data_steps) else until)
            if s - 1 > state.last_step:                # the empty steps before s
                chosen, sel = self.selection.advance_lazy(state.selection, mechanism_tick(s - 1),
                                                          0, selection_rng)
                state = dataclasses.replace(state, selection=sel)
                if chosen:
                    state = self._select(state, sel.selected_step - 1, state.candidate_input,
                                         state.registry, rng, closes)
                    continue
                state = dataclasses.replace(state, last_step=s - 1)
            payload, fed, registry = take(state, s)
            candidate_input = self.merge(state.candidate_input, fed)
            chosen, sel = self.selection.advance_lazy(state.selection, mechanism_tick(s),
                                                      self.units(payload), selection_rng)
            if not chosen:
                state = dataclasses.replace(state, last_step=s, selection=sel,
                                            candidate_input=candidate_input, registry=registry)
                continue
            state = self._select(state, s, candidate_input, registry, rng, closes)
        if state.origin_step is None:
            # The next step a candidate must wake for (``next_wake``), drawn now.
            state = dataclasses.replace(state, selection=self.selection.schedule(state.selection,
                                                                                 selection_rng))
        while state.origin_step is not None:
            j = bisect.bisect_right(data_steps, state.last_step)
            nxt = min(self._next_event(state), data_steps[j] if j < len(data_steps) else math.inf)
            if nxt > until:
                break
            _, fed, registry = take(state, nxt)
            release, ms = mech.advance(state.mechanism_state,
                                       mechanism_tick(nxt, state.origin_step), fed, rng,
                                       prime=True)
            state = dataclasses.replace(state, last_step=nxt, mechanism_state=ms,
                                        registry=registry)
            if release.closes:
                closes.append(self._close(nxt, release, ms))
        if state.last_step < until:
            state = dataclasses.replace(state, last_step=until)
        return StepOutput(tuple(closes), tuple(rejected)), state

    def _select(self, state: KeyState, s: int, candidate_input, registry, rng, closes) -> KeyState:
        """A candidate selected at global step s: its mechanism starts there (tick 1 carries
        everything since the first record)."""
        mech = self.mechanism
        ms = mech.init_state()
        release, ms = mech.advance(ms, 1, self.first_input(
            dataclasses.replace(state, registry=registry), candidate_input), rng, prime=True)
        if release.closes:
            closes.append(self._close(s, release, ms))
        return KeyState(s, None, s, None, ms, registry)

    def _close(self, step, release, mechanism_state) -> SegmentClose:
        return SegmentClose(step, tuple(c.segment for c in release.closes), self.answer(release),
                            self.noise_sd(mechanism_state))


class CounterDriver(KeyDriver):
    """C5 (``SparseCounter``): payloads are per-bin count tuples."""

    def empty(self):
        return (0,) * self.mechanism.dimension

    def merge(self, a, b):
        return tuple(x + y for x, y in zip(a, b))

    def units(self, payload) -> int:
        return sum(payload)

    def noise_sd(self, mechanism_state) -> float:
        return math.sqrt(self.mechanism.counter.release_variance(mechanism_state.counter.s))


class SegmentItem(NamedTuple):
    """One record's payload for one key: its step and what the key's mechanism consumes."""
    step: int
    payload: Any


_STAGE = 'ReleaseSegments'


class SegmentLoop:
    """``BufferedDriver`` of one key (``beam_dp.drivers.protocol``): the cell holds
    ``(KeyState or None, armed wake step)``, ``SegmentItem``s wait in the pending bag, the timer
    wakes at data steps and at the partitioner's sampled halting/forced steps (exact skip-ahead).
    Noise at (label, 'key', key) and, for a private key's selection, (label, 'select', key): the
    second label tells a key's counter from its selection whatever the key is (a key named
    'select' included).

    A public key runs from step 0 whether its seed or its data arrives first; a private key's
    candidate state is created at its first firing, from the earliest buffered step (elements
    arrive in any order). The late check (a step at or before the key's last processed step) is
    a backstop behind the transform's lateness gate."""

    LOOP = 'buffered'

    def __init__(self, driver: KeyDriver, metadata: dict, histogram: bool):
        self.driver = driver
        self.clock = driver.clock
        self._fields = rows.release_fields(metadata)
        self._histogram = histogram

    def _arm(self, wake: Optional[int]) -> Tuple[Optional[int], Optional[int]]:
        """(armed step, timer micros) for step ``wake`` (None, None: nothing armed)."""
        micros = self.driver.wake_micros(wake)
        if micros is None or micros >= END_OF_TIME_MICROS:
            return None, None
        return wake, micros

    def start(self, key: str, noise_root) -> Outcome:
        driver = self.driver
        if driver.selection is not None:
            return Outcome(None)
        state = driver.init_state(None, noise_root.derive('key', key), False)
        wake, micros = self._arm(driver.next_wake(state, []))
        return Outcome((state, wake), timer_micros=micros)

    def fold(self, stored, key: str, item: SegmentItem) -> Outcome:
        state, wake = stored if stored is not None else (None, None)
        step, payload = item
        if state is not None and step <= state.last_step:
            return Outcome(dead_letters=[late_letter(
                self.clock, _STAGE, step, {'key': key, 'step': step, 'payload': payload})])
        micros = None
        if wake is None or step < wake:
            wake, micros = self._arm(step if state is None
                                     else self.driver.next_wake(state, [step]))
        return Outcome((state, wake), timer_micros=micros, keep=True)

    def close(self, stored, key: str, fired_micros: int, pending, noise_root) -> Outcome:
        state, wake = stored
        if wake is None:
            return Outcome()
        driver = self.driver
        due, rest = driver.split_due(pending, wake)
        if state is None:
            state = driver.init_state(min(s for s, _ in due), None, True)
        out, state = driver.process(state, due, wake, noise_root.derive('key', key),
                                    noise_root.derive('select', key))
        wake, micros = self._arm(driver.next_wake(state, [s for s, _ in rest]))
        clock = self.clock
        dead = [Dead(_STAGE, reason, update, clock.step_end(step) - 1)
                for step, reason, update in out.rejected]
        releases = []
        for close in out.closes:
            releases += rows.releases(clock, close.step,
                                      [(key, list(close.answer), close.noise_stddev)],
                                      self._fields, self._histogram)
        return Outcome((state, wake), releases, dead, timer_micros=micros, pending=rest)
