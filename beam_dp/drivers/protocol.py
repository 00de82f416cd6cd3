"""The ``Driver`` protocol: what every family's pure driver gives the one release loop
(``beam_dp.transforms.release_loop``) and ``beam_dp.testing.replay``. No Beam here.

A driver runs one *loop key* (a shard of public keys, a private-keys shard, one key, one ERM
stream): its state is one value, its inputs are named payloads (NamedTuples) that the
transform's entry stages build, and its clock is the public ``StepClock``. The loop calls it at
four points and does exactly what the returned ``Outcome`` says:

* ``start(key, noise)`` — the key's first element (its seed at ``start``, or its first payload):
  the initial state (None: the state is created later, by ``close``), and the first timer.
* ``fold(state, key, payload)`` — one payload: keep it (in the state, or in the loop's pending
  bag with ``keep=True``) or dead-letter it (late: its step was already released).
* ``close(state, key, fired_micros, pending, noise)`` — the release timer fired: release what
  is due, arm the next timer, say what stays pending.
* end of input (a timer at the end of time, armed only when the clock has no last step): the
  loop stops (the buffered loop keeps a flag and calls the driver's optional
  ``end_of_input(state, key, pending, noise)``; a single-cell driver's ``end_of_input(state)``).

What a driver emits is plain values: ``Release`` records (or the family's own release records),
``Dead`` letters (stage, reason, record, event time; the loop adds the transform label and
renders the record), and ``tagged`` extra outputs. ``noise`` is a ``NoiseRoot``: the
transform's random source at its noise label, so that the driver names the rest of every noise
address and the Beam job and ``replay`` draw the same noise.
"""

from typing import Any, NamedTuple, Optional, Protocol, Sequence, Tuple

from beam_dp.drivers.clock import StepClock

__all__ = [
    'BufferedDriver',
    'Dead',
    'END_OF_TIME_MICROS',
    'NoiseRoot',
    'Outcome',
    'SingleCellDriver',
    'UNCHANGED',
    'late_letter',
]

#: The largest event time a timer can be set to: the end of Beam's global window
#: (``GlobalWindow().max_timestamp().micros``; a test checks they agree).
END_OF_TIME_MICROS = 9223371950454774999


class _Unchanged:
    """The state an ``Outcome`` leaves as it is (nothing is written)."""

    def __repr__(self):
        return 'UNCHANGED'

    def __reduce__(self):
        return 'UNCHANGED'


UNCHANGED = _Unchanged()


class Dead(NamedTuple):
    """A dead letter as a plain value: the loop turns it into a ``DeadLetter`` of the transform
    (its label, ``record`` rendered)."""
    stage: str
    reason: str
    record: Any
    event_time_micros: Optional[int] = None


class Outcome(NamedTuple):
    """What the loop does after a driver call.

    state: the new state to write (``UNCHANGED``: none).
    releases: records for the main output, in order.
    dead_letters: ``Dead`` values.
    timer_micros: arm the release timer at this event time (None: leave it as it is).
    keep: after ``fold``: add the payload to the pending bag (buffered loop).
    pending: after ``close``: the new pending list (None: the bag stays as it is).
    tagged: (tag, value) pairs for the transform's extra outputs.
    """
    state: Any = UNCHANGED
    releases: Sequence = ()
    dead_letters: Sequence[Dead] = ()
    timer_micros: Optional[int] = None
    keep: bool = False
    pending: Optional[Sequence] = None
    tagged: Sequence[Tuple[str, Any]] = ()
    #: with ``keep``: the item the bag stores instead of the payload (the payload without the
    #: records it carried in flight for a late dead letter: those never enter state).
    stored: Any = None
    #: after ``close`` (buffered loop): the key's work is done: the loop clears its state cell,
    #: pending bag, flag and timers (a finished per-period instance; nothing of it is kept).
    expire: bool = False


class NoiseRoot(NamedTuple):
    """The random source of a transform at its noise label: ``derive(*parts)`` is the draw at
    address (label, *parts), the same in the Beam job and in ``replay``."""
    rng: Any
    label: str

    def derive(self, *parts):
        return self.rng.derive(self.label, *parts)


class RecordText(str):
    """An already rendered input record: a dead letter shows it as it is (its repr is itself)."""

    def __repr__(self):
        return str(self)


def late_records(clock: StepClock, stage: str, step: int, packed) -> list:
    """One ``Dead`` per record a late pre-aggregated contribution to ``step`` carried
    (``packed``: renderings joined, their lengths, their event times µs), each at its own time."""
    joined, lengths, micros = packed
    out, end = [], 0
    reason = clock.late_reason(step)
    for length, at in zip(list(map(int, lengths)), list(map(int, micros))):
        out.append(Dead(stage, reason, RecordText(joined[end:end + length]), at))
        end += length
    return out


def late_letter(clock: StepClock, stage: str, step: int, record) -> Dead:
    """The dead letter of a contribution to ``step`` that arrived after the step's release."""
    return Dead(stage, clock.late_reason(step), record, clock.step_end(step) - 1)


class SingleCellDriver(Protocol):
    """A driver whose whole state (pending contributions included) is one cell (the keyed
    fast path: one state read and one write per element)."""

    clock: StepClock

    def start(self, key, noise: NoiseRoot) -> Outcome:
        """The initial state (always set) and the first timer."""

    def fold(self, state, key, payload) -> Outcome:
        """The state with the payload pending, or its late dead letters."""

    def close(self, state, key, fired_micros: int, pending: Sequence,
              noise: NoiseRoot) -> Outcome:
        """Releases what is due (``pending`` is always empty here)."""

    def end_of_input(self, state) -> Any:
        """The state after the input ended (nothing is released after)."""


class BufferedDriver(Protocol):
    """A driver whose payloads wait in the loop's pending bag (state too large to rewrite per
    element): ``fold`` says ``keep``, ``close`` gets the pending payloads."""

    clock: StepClock

    def start(self, key, noise: NoiseRoot) -> Outcome:
        """The initial state (or None, created at the first close) and the first timer."""

    def fold(self, state, key, payload) -> Outcome:
        """``keep=True`` (and possibly an earlier timer), or late dead letters."""

    def close(self, state, key, fired_micros: int, pending: Sequence,
              noise: NoiseRoot) -> Outcome:
        """Releases what is due from ``pending``; ``Outcome.pending`` is what stays."""

    # Optional: ``end_of_input(state, key, pending, noise) -> Outcome``, called once when the
    # input ends (the timers are cleared; nothing is released after), with the payloads still
    # pending: refuse them, or process them as a firing at the end of time would.
