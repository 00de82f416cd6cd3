"""``ArrivalTimeLateness``: lateness decided by each record's own arrival time (a public clock),
for sources whose event-time watermark would be estimated from other people's records.

Wiring (labels inside the transform's own label)::

  records, element timestamp = arrival time (e.g. Pub/Sub publish time)
    | 'JudgeArrival'   stateless: step of event_time_fn(record); late (dead letter) iff the
                       arrival time is not before that step's release time; else the record
                       re-timestamped at its claimed event time, in the global window
  → ArrivalOutputs(records, dead_letter)

Then apply the release transform (``ContinualCountPerKey`` etc.) to ``records`` with the same
``start``, ``step``, ``end`` and an ``allowed_lateness`` at least this one's.
"""

from typing import Any, Callable, NamedTuple, Optional

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp.drivers.arrival import arrival_step
from beam_dp.drivers.arrival import event_time_micros
from beam_dp.drivers.clock import StepClock
from beam_dp.errors import InvalidRecordError
from beam_dp.io.records import DeadLetter
from beam_dp.transforms import shell
from beam_dp.transforms.shell import DEAD_LETTER

__all__ = [
    'ArrivalOutputs',
    'ArrivalTimeLateness',
]

STAGE = 'ArrivalTimeLateness'


class ArrivalOutputs(NamedTuple):
    """The outputs of ``ArrivalTimeLateness``: ``records`` (the on-time input records, each
    timestamped at its claimed event time, in the global window) and ``dead_letter``
    (``DeadLetter``: late by arrival, bad or out-of-range event time, no arrival time; each
    holds the input record itself)."""
    records: beam.PCollection
    dead_letter: beam.PCollection


class _JudgeArrivalFn(beam.DoFn):
    """Stateless: one record in, the record (on time) or its dead letter (late, bad) out."""

    def __init__(self, clock: StepClock, event_time_fn: Callable[[Any], Any], label: str):
        self._clock = clock
        self._event_time_fn = event_time_fn
        self._label = label

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        arrival = timestamp.micros
        event = None
        try:
            try:
                claimed = self._event_time_fn(record)
            except Exception as e:  # pylint: disable=broad-except  (a user function)
                raise InvalidRecordError(f'event_time_fn raised {e!r}') from e
            event = event_time_micros(claimed)
            arrival_step(self._clock, event, arrival)
        except InvalidRecordError as e:
            yield shell.dead_letter(self._label, STAGE, str(e), record, event)
            return
        yield WindowedValue(record, Timestamp(micros=event), [GlobalWindow()])


class ArrivalTimeLateness(beam.PTransform):
    """Decides lateness by each record's own arrival time, so that whether a record is counted
    never depends on other records, whatever the source's event-time watermark would be.

    Why: a continual transform releases step s when the watermark passes end(s) +
    ``allowed_lateness`` and dead-letters a record of step s that comes after that. When the
    element timestamp is the sender's claimed event time, the watermark of many sources is
    *estimated from the claimed times of the records read* (Pub/Sub with
    ``timestamp_attribute`` on Dataflow, Kafka with ``CreateTime``, any custom watermark
    estimator): one person's record with an early claimed time holds the watermark back (another
    person's record that would have been late is counted), one with a late claimed time pushes
    it forward (another's record becomes late). Then one unit decides whether another's records
    are counted, which the calibrated sensitivity does not cover (docs/privacy_model.md, "What
    the release schedule assumes of the watermark").

    The rule: read the source so that the element timestamp is the **arrival time** set by the
    message service (Pub/Sub: ``ReadFromPubSub`` *without* ``timestamp_attribute`` — the
    publish time; Kafka: ``LogAppendTime`` or processing time), and give the claimed event time
    with ``event_time_fn``. A record's step is the step of its claimed event time; it is counted
    iff it arrived strictly before that step's release time (end + ``allowed_lateness``, the
    delay the sender has to get a record in); otherwise it goes to the dead-letter output with
    reason ``late: ... by arrival time ...``. Both times are the record's own and the clock is
    public, so the decision is a function of the record alone.

    What the release transform after it needs: give it the same ``start``, ``step``, ``end``
    and an ``allowed_lateness`` ≥ this one's. Its steps come from the claimed event time (the
    output timestamp) and its release timers from the watermark, which is now the arrival-time
    watermark: computed by the service from arrival times (Pub/Sub tracks the oldest
    unacknowledged publish time), not from any sender's claim. A record passed here arrived at
    a < end(s) + D; a correct source watermark is ≤ a until the record is read, and the
    pending record holds every downstream watermark there, so the release of step s (at
    end(s) + L, L ≥ D) cannot fire before the record is in the release stage's state: the
    release stage's own late check never fires for a passed record. Hence the releases are a
    function of the set {records: arrival < end(step(claimed time)) + D} and the noise, i.e.
    of per-record decisions. (If the source's watermark is *not* a lower bound of the arrival
    times still to come — data late with respect to its own watermark, which a publish-time
    watermark does not produce — the release stage dead-letters such a record with its own
    late reason; see the docs.)

    Input: any records, element timestamp = arrival time, any windowing. Output:
    ``ArrivalOutputs(records, dead_letter)``: on-time records unchanged but re-timestamped at
    their claimed event time in the global window; dead letters (stage
    ``'ArrivalTimeLateness'``) holding the input record: late by arrival, an event time before
    ``start`` or after the last step, ``event_time_fn`` raising or returning something that is
    not a time, a record without an arrival time. Stateless and per record: no state, no
    timers, no shuffle; nothing here raises on a record.

    Privacy unit: any (it decides per record, before bounding). It spends no budget.

    Args:
      event_time_fn: record → its claimed event time: seconds since the epoch (int/float), a
        Beam ``Timestamp`` or a timezone-aware ``datetime``.
      start, step, end: the release transform's (seconds since the epoch / seconds, or
        ``Timestamp``/``Duration``/``datetime``); ``end`` optional.
      allowed_lateness: D, how long after its step's end a record may arrive and still count
        (seconds, default 0). Give the release transform at least this.
      label: optional transform label.

    Raises:
      InvalidParamsError: on a bad parameter, at construction.

    Example::

        messages = p | beam.io.ReadFromPubSub(subscription=..., with_attributes=True)
        # no timestamp_attribute: element timestamp = publish time
        schedule = dict(start=start, step=300, end=end, allowed_lateness=120)
        on_time = (messages | beam.Map(parse)
                   | beam_dp.ArrivalTimeLateness(event_time_fn=lambda r: r.event_time,
                                                 **schedule))
        counts = on_time.records | beam_dp.ContinualCountPerKey(..., **schedule)
        dead = (on_time.dead_letter, counts.dead_letter) | beam.Flatten()
    """

    def __init__(self, *, event_time_fn: Callable[[Any], Any], start, step, end=None,
                 allowed_lateness=0, label: Optional[str] = None):
        super().__init__(label)
        owner = type(self).__name__
        shell.check_callable(owner, 'event_time_fn', event_time_fn)
        self._clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                        allowed_lateness=allowed_lateness)
        self._event_time_fn = event_time_fn

    @property
    def clock(self) -> StepClock:
        """The public schedule the rule judges against."""
        return self._clock

    def display_data(self):
        return {name: str(value) for name, value in self._clock.describe().items()}

    def expand(self, records):
        judged = records | 'JudgeArrival' >> beam.ParDo(_JudgeArrivalFn(
            self._clock, self._event_time_fn, self.label)).with_outputs(
                DEAD_LETTER, main='records')
        dead = judged[DEAD_LETTER]
        dead.element_type = DeadLetter
        return ArrivalOutputs(judged.records, dead)
