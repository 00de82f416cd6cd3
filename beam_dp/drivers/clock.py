"""The one step clock of every continual transform (a public, data-independent
schedule).

A *step* is a fixed event-time period: step ``s`` (0-based) covers
``[start + s·step, start + (s+1)·step)`` in microseconds since the epoch. Step ``s`` is released
when the watermark passes its end plus the allowed lateness. A public end of the stream (or a
finite mechanism horizon) gives an optional last step; with none, steps go on forever.

Every family uses this clock and this vocabulary: ``step`` is always the 0-based index, the step
*length* is ``step_micros``. A mechanism that counts time from 1 (the paper's t) is driven with
``step + 1`` by its driver, never by a second clock.
"""

import dataclasses
import datetime
import math
import numbers
from typing import Optional, Tuple

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError

__all__ = [
    'MICROS_PER_SECOND',
    'NO_EVENT_TIME_MICROS',
    'StepClock',
    'format_micros',
    'late_reason',
    'refuse_milliseconds',
    'require_public_end',
]

MICROS_PER_SECOND = 1_000_000
#: Beam's minimum timestamp (``apache_beam.utils.timestamp.MIN_TIMESTAMP``) in microseconds:
#: the timestamp of elements that were never given an event time.
NO_EVENT_TIME_MICROS = -9_223_372_036_854_775_000
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_YEAR_3000_SECONDS = 32_503_680_000


def format_micros(micros: int) -> str:
    """An event time for messages: '2024-06-02T00:00:00Z (1717286400 s since the epoch)'."""
    try:
        text = (_EPOCH + datetime.timedelta(microseconds=micros)).isoformat()
        text = text.replace('+00:00', 'Z')
    except OverflowError:
        text = 'out of the calendar range'
    seconds, fraction = divmod(abs(micros), MICROS_PER_SECOND)
    digits = f'.{fraction:06d}'.rstrip('0') if fraction else ''
    return f'{text} ({"-" if micros < 0 else ""}{seconds}{digits} s since the epoch)'


@dataclasses.dataclass(frozen=True)
class StepClock:
    """Public step schedule: step index ↔ event time, and when each step is released.

    Args:
      start_micros: event time of the start of step 0.
      step_micros: the step length (> 0).
      allowed_lateness_micros: a step is released once the watermark passes its end plus this.
      last_step: the last step released (inclusive), or None for an unbounded stream.

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    start_micros: int
    step_micros: int
    allowed_lateness_micros: int = 0
    last_step: Optional[int] = None

    def __post_init__(self):
        owner = 'StepClock'
        v.check_non_negative_int(owner, 'start_micros', self.start_micros)
        v.check_positive_int(owner, 'step_micros', self.step_micros)
        v.check_non_negative_int(owner, 'allowed_lateness_micros', self.allowed_lateness_micros)
        if self.last_step is not None:
            v.check_non_negative_int(owner, 'last_step', self.last_step)

    @classmethod
    def ending_at(cls, start_micros: int, step_micros: int, end_micros: Optional[int],
                  allowed_lateness_micros: int = 0) -> 'StepClock':
        """A clock whose last step is the last one starting before ``end_micros`` (None: no end).

        Raises:
          InvalidParamsError: if the end is not after the start.
        """
        if end_micros is None:
            return cls(start_micros, step_micros, allowed_lateness_micros)
        if end_micros <= start_micros:
            raise InvalidParamsError(f'StepClock: end must be after start, got {end_micros}.')
        steps = -(-(end_micros - start_micros) // step_micros)
        return cls(start_micros, step_micros, allowed_lateness_micros, steps - 1)

    def limited_to(self, num_steps: Optional[int]) -> 'StepClock':
        """This clock with at most ``num_steps`` steps (a finite mechanism horizon)."""
        if num_steps is None:
            return self
        last = num_steps - 1 if self.last_step is None else min(self.last_step, num_steps - 1)
        return dataclasses.replace(self, last_step=last)

    def step_of(self, micros: int) -> int:
        """The step index of an event time (negative before the start)."""
        return (micros - self.start_micros) // self.step_micros

    def step_bounds(self, step: int) -> Tuple[int, int]:
        """[start, end) of ``step`` in microseconds."""
        start = self.start_micros + step * self.step_micros
        return start, start + self.step_micros

    def step_end(self, step: int) -> int:
        return self.start_micros + (step + 1) * self.step_micros

    def release_time_micros(self, step: int) -> int:
        """When the watermark passes this, ``step`` is released (data-independent)."""
        return self.step_end(step) + self.allowed_lateness_micros

    def is_released(self, step: int) -> bool:
        """Whether ``step`` is ever released (0 ≤ step ≤ last step)."""
        return step >= 0 and (self.last_step is None or step <= self.last_step)

    def next_release_time_micros(self, step: int) -> Optional[int]:
        """The release time of the step after ``step``, or None past the last step."""
        if self.last_step is not None and step + 1 > self.last_step:
            return None
        return self.release_time_micros(step + 1)

    def checked_step(self, micros: int) -> int:
        """The step of a record's event time.

        Raises:
          InvalidRecordError: with the dead-letter reason, before the start or after the last
            step.
        """
        step = self.step_of(micros)
        if micros <= NO_EVENT_TIME_MICROS:
            raise InvalidRecordError(
                f'record has no event timestamp (it carries Beam\'s minimum timestamp, as '
                f'elements of beam.Create or of a file read do); the release start is '
                f'{format_micros(self.start_micros)}: give each record its event time, e.g. '
                f'beam.Map(lambda r: beam.window.TimestampedValue(r, <its time in seconds>))')
        if step < 0:
            raise InvalidRecordError(
                f'event time is before the release start: the record is at '
                f'{format_micros(micros)}, the start is {format_micros(self.start_micros)}')
        if self.last_step is not None and step > self.last_step:
            raise InvalidRecordError(
                f'event time is after the last released step {self.last_step}: the record is '
                f'at {format_micros(micros)}, step {self.last_step} ends at '
                f'{format_micros(self.step_end(self.last_step))}')
        return step

    def late_reason(self, step: int) -> str:
        """The dead-letter reason of a contribution whose step was already released."""
        return late_reason(step, self.allowed_lateness_micros)

    def describe(self) -> dict:
        """Public facts for display data."""
        return {
            'step_seconds': self.step_micros / MICROS_PER_SECOND,
            'allowed_lateness_seconds': self.allowed_lateness_micros / MICROS_PER_SECOND,
        }


def late_reason(step: int, allowed_lateness_micros: int) -> str:
    """THE phrasing of a late record in every family (one reason, one wording): its step (a
    Boost block, an ERM block) was already released."""
    return (f'late: step {step} was already released (allowed lateness '
            f'{allowed_lateness_micros / MICROS_PER_SECOND:g}s)')


def refuse_milliseconds(owner: str, name: str, value) -> None:
    """At construction: a time in seconds after the year 3000 is almost surely milliseconds.

    Raises:
      InvalidParamsError: naming ``owner`` and ``name``, with the value in seconds.
    """
    if (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value) and value > _YEAR_3000_SECONDS):
        raise InvalidParamsError(
            f'{owner}: {name}={value!r} is after the year 3000 as seconds since the epoch: it '
            f'looks like milliseconds. Pass seconds ({name}={value / 1000:.17g} if it is '
            f'milliseconds), a Beam Timestamp or a timezone-aware datetime.')


def require_public_end(owner: str, bounded: bool, clock: StepClock) -> None:
    """At expand: a bounded (batch) input needs a public last step (``end=``).

    Without one, the release loop would stop when the input ends, i.e. at a time set by the
    data; the schedule must be public, so the transform refuses instead.

    Raises:
      InvalidParamsError: if the input is ``bounded`` and ``clock`` has no last step.
    """
    if bounded and clock.last_step is None:
        raise InvalidParamsError(
            f'{owner}: the input PCollection is bounded (batch) but no end was given: pass '
            f'end=<the public end of the period to release, in seconds since the epoch>. The '
            f'release schedule must not depend on the data, so it cannot be "until the last '
            f'record"; without an end a bounded input would release only the steps that end '
            f'before the input does.')
