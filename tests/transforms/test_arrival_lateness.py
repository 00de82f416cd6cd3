"""``ArrivalTimeLateness`` on TestStream (streaming, ``runners.DIRECT_RUNNER``): a record's fate
depends on its own arrival time, not on the watermark a source estimates from other records.

Two models of the same messages (``(arrival time, record)``, records ``(key, unit, claimed
event time)``):

* **event-time source** (today's default: the element timestamp is the claimed event time, the
  watermark estimated from the claims read so far, as Kafka's ``CreateTime`` with a limited
  delay computes it: max claimed time − ``MAX_DELAY``);
* **arrival-time source** (Pub/Sub without ``timestamp_attribute``, Kafka ``LogAppendTime``):
  the element timestamp is the arrival time and the watermark follows the arrival times,
  then ``ArrivalTimeLateness`` judges each record.

u claims a time four steps ahead; v's record of step 0 arrives in time by the arrival rule. On
the event-time source u's claim pushes the watermark past step 0's release, so v is
dead-lettered with u and counted without: u decides v's fate. Under ``ArrivalTimeLateness`` v
is counted with and without u, and w (arriving after its step's release time) is dead-lettered
in both, with the input record itself. On random streams (deadline edges included) the releases
count exactly the records the closed-form rule accepts, and before the sparse transform (whose
own gate judges lateness by its watermark chain) no record the rule passed is dropped.
"""

import random

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

import beam_dp
from beam_dp import ArrivalTimeLateness
from beam_dp import ContinualCountPerKey
from beam_dp import EventLevel
from beam_dp import InvalidParamsError
from beam_dp import UserLevel
from beam_dp.drivers.arrival import late_by_arrival_reason
from tests import runners
from tests.helpers import NOISE_FREE

pytestmark = pytest.mark.pipeline

START, STEP, STEPS, LATENESS = 600, 60, 6, 30
END = START + STEPS * STEP
MAX_DELAY = 30                             # the event-time source's watermark delay
SCHEDULE = dict(start=START, step=STEP, end=END, allowed_lateness=LATENESS)
CLOCK = ArrivalTimeLateness(event_time_fn=lambda r: r[2], **SCHEDULE).clock

#: (arrival time s, (key, unit, claimed event time s)).
U = (665, ('b', 'u', START + 4 * STEP + 10))   # claims step 4, arrives early in step 1
V = (670, ('a', 'v', START + 50))              # step 0, arrives 20 s before its release (690)
X = (680, ('b', 'x', START + 10))              # step 0, an old claim, arrives in time
W = (815, ('a', 'w', START + STEP + 40))       # step 1 (released at 750): late by arrival
Y = (700, ('a', 'y', START + 3 * STEP + 5))    # step 3, arrives two steps early


def _messages(with_u):
    return sorted(([U] if with_u else []) + [V, X, W, Y])


def _arrival_source(messages):
    """Element timestamp = arrival time, watermark = the arrival clock."""
    stream = TestStream().advance_watermark_to(START - 1)
    for arrival, record in messages:
        stream = stream.advance_watermark_to(arrival).add_elements(
            [TimestampedValue(record, arrival)])
    return stream.advance_watermark_to(END + LATENESS + 1).advance_watermark_to_infinity()


def _event_time_source(messages):
    """Element timestamp = claimed event time, watermark = max claim read − MAX_DELAY."""
    stream = TestStream().advance_watermark_to(START - 1)
    watermark = START - 1
    for _, record in messages:
        stream = stream.add_elements([TimestampedValue(record, record[2])])
        if record[2] - MAX_DELAY > watermark:
            watermark = record[2] - MAX_DELAY
            stream = stream.advance_watermark_to(watermark)
    return stream.advance_watermark_to(END + LATENESS + 1).advance_watermark_to_infinity()


def _counts(privacy_unit):
    return ContinualCountPerKey(public_keys=['a', 'b'], budget=NOISE_FREE,
                                privacy_unit=privacy_unit, **SCHEDULE)


def _cumulative(counted):
    """Expected releases: (key, step, running count) from [(key, step)] of counted records."""
    return [(key, step, float(sum(1 for k, s in counted if k == key and s <= step)))
            for key in ('a', 'b') for step in range(STEPS)]


def _pipeline():
    return beam.Pipeline(runner=runners.DIRECT_RUNNER, options=runners.streaming_options())


def _check(p, releases, dead, expected_releases, expected_dead):
    assert_that(releases | 'Values' >> beam.Map(lambda r: (r.key, r.step, round(r.value, 6))),
                equal_to(expected_releases), label='CheckReleases')
    assert_that(dead | 'Dead' >> beam.Map(lambda d: (d.stage, d.reason, d.record)),
                equal_to(expected_dead), label='CheckDeadLetters')
    del p


@pytest.mark.parametrize('with_u', [False, True])
def test_on_an_event_time_watermark_another_record_decides_who_is_late(with_u):
    """Today's default on a watermark estimated from the claims: with u, v (and x) are late at
    'ReleaseNoisyValues'; without u they are counted. This is the dependence the option
    removes (the test shows it exists, so the next one shows something)."""
    with _pipeline() as p:
        out = p | _event_time_source(_messages(with_u)) | _counts(EventLevel())
        if with_u:
            # u's claim (step 4) moves the watermark to 880 − 30 = 850 > 690, 750, 810: steps
            # 0-2 are released before v, x and w are read; y (step 3) and u are counted.
            counted = [('a', 3), ('b', 4)]
            late = [('ReleaseNoisyValues', CLOCK.late_reason(0))] * 2 + [
                ('ReleaseNoisyValues', CLOCK.late_reason(1))]
        else:
            # Without u, v and x are counted; w (step 1, released at 750) is late all the same,
            # because y's claim (785) moved the watermark to 755 before w was read.
            counted = [('a', 0), ('b', 0), ('a', 3)]
            late = [('ReleaseNoisyValues', CLOCK.late_reason(1))]
        _check(p, out.releases, out.dead_letter | beam.Map(lambda d: d._replace(record='')),
               _cumulative(counted), [(stage, reason, '') for stage, reason in late])


@pytest.mark.parametrize('privacy_unit', [
    EventLevel(), UserLevel(unit_fn=lambda r: r[1], max_steps_per_unit=1)],
    ids=['event_level', 'user_level'])
@pytest.mark.parametrize('with_u', [False, True])
def test_with_arrival_time_lateness_no_record_decides_another_ones_fate(with_u, privacy_unit):
    """The same messages on an arrival-time source through ``ArrivalTimeLateness``: v, x and y
    are counted and w is dead-lettered (with the record) whether or not u is there; u itself is
    counted in its claimed step 4. Nothing else is late anywhere downstream."""
    with _pipeline() as p:
        judged = p | _arrival_source(_messages(with_u)) | ArrivalTimeLateness(
            event_time_fn=lambda r: r[2], **SCHEDULE)
        out = judged.records | _counts(privacy_unit)
        dead = (judged.dead_letter, out.dead_letter) | beam.Flatten()
        counted = [('a', 0), ('b', 0), ('a', 3)] + ([('b', 4)] if with_u else [])
        _check(p, out.releases, dead, _cumulative(counted),
               [('ArrivalTimeLateness', late_by_arrival_reason(CLOCK, 1, W[0] * 1_000_000),
                 repr(W[1]))])


def test_dead_letters_for_bad_event_times_and_out_of_range_claims():
    """Per record, nothing raises: ``event_time_fn`` raising or returning a non-time, a claim
    before ``start`` or after the last step each give a dead letter holding the record."""
    records = [(601, ('a', 'ok', START + 1)), (602, ('a', 'raises', None)),
               (603, ('a', 'text', 'soon')), (604, ('a', 'early', START - 5)),
               (605, ('a', 'after', END + 5))]

    def event_time(record):
        if record[1] == 'raises':
            raise KeyError('event_time')
        return record[2]

    with _pipeline() as p:
        judged = p | _arrival_source(records) | ArrivalTimeLateness(
            event_time_fn=event_time, **SCHEDULE)
        assert_that(judged.records | beam.Map(lambda r: r[1]), equal_to(['ok']),
                    label='Passed')
        assert_that(judged.dead_letter | beam.Map(lambda d: (d.record, d.reason.split(':')[0])),
                    equal_to([(repr(records[1][1]),
                               "event_time_fn raised KeyError('event_time')"),
                              (repr(records[2][1]), 'event_time_fn must return seconds since '
                                                     'the epoch, a Beam Timestamp or an aware '
                                                     'datetime, got str'),
                              (repr(records[3][1]), 'event time is before the release start'),
                              (repr(records[4][1]), 'event time is after the last released '
                                                     'step 5')]), label='Dead')


def test_passed_records_carry_their_claimed_event_time():
    """The output timestamp is the claim (the release transform's step), not the arrival."""
    with _pipeline() as p:
        judged = p | _arrival_source([V, Y]) | ArrivalTimeLateness(
            event_time_fn=lambda r: r[2], **SCHEDULE)
        stamped = judged.records | beam.Map(
            lambda r, t=beam.DoFn.TimestampParam: (r[1], t.micros // 1_000_000))
        assert_that(stamped, equal_to([('v', V[1][2]), ('y', Y[1][2])]))


def test_construction_checks():
    with pytest.raises(InvalidParamsError, match='ArrivalTimeLateness: event_time_fn must be '
                                                 'callable'):
        ArrivalTimeLateness(event_time_fn=None, **SCHEDULE)
    with pytest.raises(InvalidParamsError, match='ArrivalTimeLateness: allowed_lateness'):
        ArrivalTimeLateness(event_time_fn=lambda r: 0, start=START, step=STEP,
                            allowed_lateness=-1)
    with pytest.raises(InvalidParamsError, match='looks like milliseconds'):
        ArrivalTimeLateness(event_time_fn=lambda r: 0, start=START * 1e9, step=STEP)
    assert beam_dp.ArrivalTimeLateness is ArrivalTimeLateness


def _random_messages(seed, n=48):
    """n records with random keys and claims over all steps; a third arrive exactly at their
    deadline or one millisecond before it (TestStream's resolution), the rest anywhere from
    start to past the end. Times in µs: (arrival, (key, unit, claimed µs))."""
    rng = random.Random(seed)
    micros = 1_000_000
    out = []
    for i in range(n):
        step = rng.randrange(STEPS)
        claim = (START + step * STEP) * micros + rng.randrange(STEP * micros)
        deadline = CLOCK.release_time_micros(step)
        edge = rng.random()
        if edge < 1 / 6:
            arrival = deadline - 1000
        elif edge < 1 / 3:
            arrival = deadline
        else:
            arrival = 1000 * rng.randrange(START * 1000, (END + LATENESS + STEP) * 1000)
        out.append((arrival, (rng.choice('ab'), f'r{i}', claim)))
    return sorted(out)


def _arrival_source_micros(messages):
    """``_arrival_source`` with times in µs (millisecond multiples)."""
    stream = TestStream().advance_watermark_to(Timestamp(START - 1))
    watermark = None
    for arrival, record in messages:
        if watermark is None or arrival > watermark:
            stream = stream.advance_watermark_to(Timestamp(micros=arrival))
            watermark = arrival
        stream = stream.add_elements([TimestampedValue(record, Timestamp(micros=arrival))])
    return (stream.advance_watermark_to(END + LATENESS + STEP + 1)
            .advance_watermark_to_infinity())


@pytest.mark.parametrize('seed', [1, 2])
def test_random_streams_release_exactly_the_records_the_rule_accepts(seed):
    """Random claims (old, current, far ahead) and arrivals (at the deadline, 1 ms before,
    anywhere): the releases are the running counts of exactly the records with arrival <
    end(step(claim)) + D, and the dead letters exactly the others — each record's fate is the
    closed-form rule on its own two times (a record arriving 1 ms before its deadline counts,
    one arriving at it does not), so adding or removing any record changes no other
    record's fate. Nothing is dropped downstream (no other dead letter)."""
    messages = _random_messages(seed)
    stream = _arrival_source_micros(messages)
    counted, rejected = [], []
    for arrival, record in messages:
        step = CLOCK.step_of(record[2])
        if arrival < CLOCK.release_time_micros(step):
            counted.append((record[0], step))
        else:
            rejected.append(record)
    assert counted and rejected and any(
        a == CLOCK.release_time_micros(CLOCK.step_of(r[2])) - 1000 for a, r in messages)
    with _pipeline() as p:
        judged = p | stream | ArrivalTimeLateness(
            event_time_fn=lambda r: Timestamp(micros=r[2]), **SCHEDULE)
        out = judged.records | _counts(EventLevel())
        dead = (judged.dead_letter, out.dead_letter) | beam.Flatten()
        assert_that(out.releases | 'Values' >> beam.Map(
            lambda r: (r.key, r.step, round(r.value, 6))), equal_to(_cumulative(counted)),
            label='CheckReleases')
        assert_that(dead | 'Dead' >> beam.Map(lambda d: (d.stage, d.record)),
                    equal_to([('ArrivalTimeLateness', repr(r)) for r in rejected]),
                    label='CheckDeadLetters')


def test_the_sparse_transforms_gate_drops_no_record_the_rule_passed():
    """Through ``SparseContinualCountPerKey`` (its 'GateLateRecords' and 'ReleaseSegments'
    judge lateness by their own watermark chains): records the rule passed are re-timestamped
    behind the arrival watermark, yet none is dead-lettered downstream — the only dead letters
    are the rule's."""
    from beam_dp import SparseContinualCountPerKey  # pylint: disable=import-outside-toplevel
    messages = _random_messages(3)
    stream = _arrival_source_micros(messages)
    rejected = [r for a, r in messages if a >= CLOCK.release_time_micros(CLOCK.step_of(r[2]))]
    assert 0 < len(rejected) < len(messages)
    with _pipeline() as p:
        judged = p | stream | ArrivalTimeLateness(
            event_time_fn=lambda r: Timestamp(micros=r[2]), **SCHEDULE)
        out = judged.records | SparseContinualCountPerKey(
            public_keys=['a', 'b'], budget=NOISE_FREE, **SCHEDULE)
        dead = (judged.dead_letter, out.dead_letter) | beam.Flatten()
        assert_that(dead | 'Dead' >> beam.Map(lambda d: (d.stage, d.record)),
                    equal_to([('ArrivalTimeLateness', repr(r)) for r in rejected]),
                    label='CheckDeadLetters')
