"""The arrival-time lateness rule (pure; ``beam_dp.ArrivalTimeLateness`` runs it in Beam).

A record carries two times: its *claimed event time* (a field of the record: when the ride, the
click, the reading happened, as the sender says) and its *arrival time* (when the message
service accepted it: Pub/Sub's publish time, Kafka's LogAppendTime), set by the service, not by
the sender and not by any other record. The rule:

* the record's step is the step of its claimed event time on the public ``StepClock``;
* it is **on time** iff it arrived strictly before that step's release time
  (``clock.release_time_micros(step)`` = step end + allowed lateness); otherwise it is late.

Both inputs are the record's own, and the clock is public, so whether a record is counted is a
function of that record alone: no other record's claimed time, and no watermark estimated from
other records, enters the decision (docs/privacy_model.md, "What the release schedule assumes of
the watermark").
"""

import datetime
import math
import numbers

from beam_dp.drivers.clock import MICROS_PER_SECOND
from beam_dp.drivers.clock import NO_EVENT_TIME_MICROS
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.clock import format_micros
from beam_dp.errors import InvalidRecordError

__all__ = [
    'arrival_step',
    'event_time_micros',
    'late_by_arrival_reason',
]

#: Claimed event times outside Beam's timestamp range are refused (year ±292277).
_MAX_ABS_MICROS = 9_223_371_950_400_000_000


def event_time_micros(value) -> int:
    """A claimed event time → integer microseconds since the epoch: seconds (int/float, not
    bool), a Beam ``Timestamp`` (anything with an int ``micros``) or a timezone-aware
    ``datetime``.

    Raises:
      InvalidRecordError: with the dead-letter reason, for anything else (naive datetime,
        NaN, out of range, another type).
    """
    try:
        micros = _to_micros(value)
    except InvalidRecordError:
        raise
    except (ArithmeticError, ValueError, TypeError) as e:   # e.g. float(10**400)
        raise InvalidRecordError(f'event time out of range: {e!r}') from e
    if abs(micros) > _MAX_ABS_MICROS:
        raise InvalidRecordError(f'event time out of range: {micros} µs')
    return micros


def _to_micros(value) -> int:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidRecordError(f'event time is a naive datetime: {value!r}')
        micros = round(value.timestamp() * MICROS_PER_SECOND)
    elif isinstance(getattr(value, 'micros', None), int) and not isinstance(value, numbers.Real):
        micros = value.micros                     # apache_beam.utils.timestamp.Timestamp
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidRecordError(f'event time is not finite: {value!r}')
        micros = round(float(value) * MICROS_PER_SECOND)
    else:
        raise InvalidRecordError(
            f'event_time_fn must return seconds since the epoch, a Beam Timestamp or an aware '
            f'datetime, got {type(value).__name__}')
    return micros


def late_by_arrival_reason(clock: StepClock, step: int, arrival_micros: int) -> str:
    """The dead-letter reason of a record that arrived at or after its step's release time."""
    deadline = clock.release_time_micros(step)
    return (f'late: step {step} was already released (allowed lateness '
            f'{clock.allowed_lateness_micros / MICROS_PER_SECOND:g}s): by arrival time, the '
            f'record had to arrive before {format_micros(deadline)} and arrived at '
            f'{format_micros(arrival_micros)}')


def arrival_step(clock: StepClock, event_micros: int, arrival_micros: int) -> int:
    """The step a record is counted in under the arrival-time rule.

    Args:
      clock: the public schedule (the downstream transform's start, step, end and lateness).
      event_micros: the record's claimed event time.
      arrival_micros: when the message service accepted it (the element timestamp of a source
        that stamps records on arrival).

    Returns:
      ``clock.step_of(event_micros)``, when that step is on the clock and the record arrived
      before its release time.

    Raises:
      InvalidRecordError: with the dead-letter reason: no arrival time, an event time outside
        the clock's steps, or late (arrival ≥ the step's release time).
    """
    if arrival_micros <= NO_EVENT_TIME_MICROS:
        raise InvalidRecordError(
            'record has no arrival time (it carries Beam\'s minimum timestamp): '
            'ArrivalTimeLateness needs a source that stamps each record when it arrives, e.g. '
            'ReadFromPubSub without timestamp_attribute (the publish time)')
    step = clock.checked_step(event_micros)
    if arrival_micros >= clock.release_time_micros(step):
        raise InvalidRecordError(late_by_arrival_reason(clock, step, arrival_micros))
    return step
