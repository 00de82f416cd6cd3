"""The arrival-time lateness rule (pure): a record's step is the step of its claimed event time,
and it is on time iff its own arrival time is before that step's release time."""

import datetime
import math

import pytest
from apache_beam.utils.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from beam_dp.drivers.arrival import arrival_step
from beam_dp.drivers.arrival import event_time_micros
from beam_dp.drivers.arrival import late_by_arrival_reason
from beam_dp.drivers.clock import NO_EVENT_TIME_MICROS
from beam_dp.drivers.clock import StepClock
from beam_dp.errors import InvalidRecordError

S = 1_000_000
#: steps of 60 s from t = 600 s, 30 s of allowed lateness, steps 0..4.
CLOCK = StepClock(600 * S, 60 * S, 30 * S, last_step=4)


def test_on_time_until_the_release_time_then_late():
    # step 1 = [660, 720) s, released at 750 s.
    event = 700 * S
    assert arrival_step(CLOCK, event, 650 * S) == 1          # arrived before its step began
    assert arrival_step(CLOCK, event, 749 * S) == 1          # after the end, within lateness
    assert arrival_step(CLOCK, event, 750 * S - 1) == 1      # the last on-time microsecond
    with pytest.raises(InvalidRecordError) as e:
        arrival_step(CLOCK, event, 750 * S)                  # at the release time: late
    assert str(e.value) == late_by_arrival_reason(CLOCK, 1, 750 * S)
    assert str(e.value).startswith('late: step 1 was already released (allowed lateness 30s)')
    assert 'by arrival time' in str(e.value)


def test_a_claimed_time_far_ahead_of_arrival_is_its_own_step():
    """The rule judges the claim against the record's own arrival: a claim four steps ahead is
    on time (and counted in its step), whatever else arrived."""
    assert arrival_step(CLOCK, 870 * S, 601 * S) == 4


def test_outside_the_clock_and_without_an_arrival_time_are_dead_letter_reasons():
    with pytest.raises(InvalidRecordError, match='before the release start'):
        arrival_step(CLOCK, 599 * S, 600 * S)
    with pytest.raises(InvalidRecordError, match='after the last released step 4'):
        arrival_step(CLOCK, 900 * S, 600 * S)
    with pytest.raises(InvalidRecordError, match='no arrival time'):
        arrival_step(CLOCK, 700 * S, NO_EVENT_TIME_MICROS)


def test_event_time_conversions():
    assert event_time_micros(700) == 700 * S
    assert event_time_micros(700.25) == 700_250_000
    assert event_time_micros(Timestamp(micros=123)) == 123
    aware = datetime.datetime(2024, 6, 2, tzinfo=datetime.timezone.utc)
    assert event_time_micros(aware) == 1717286400 * S
    for bad, text in ((datetime.datetime(2024, 6, 2), 'naive'), (math.nan, 'not finite'),
                      (True, 'event_time_fn must return'), ('700', 'event_time_fn must return'),
                      (None, 'event_time_fn must return'), (1e300, 'out of range'),
                      (10**400, 'out of range'), (-math.inf, 'not finite')):
        with pytest.raises(InvalidRecordError, match=f'^[^(]*{text}'):
            event_time_micros(bad)


@given(event=st.integers(600 * S, 900 * S - 1), arrival=st.integers(0, 2000 * S))
def test_the_verdict_is_the_closed_form(event, arrival):
    """On time ⇔ arrival < start + (step + 1)·length + lateness, step = ⌊(event − start) /
    length⌋: a function of the record's two times and the public clock only."""
    step = (event - 600 * S) // (60 * S)
    on_time = arrival < 600 * S + (step + 1) * 60 * S + 30 * S
    if on_time:
        assert arrival_step(CLOCK, event, arrival) == step
    else:
        with pytest.raises(InvalidRecordError, match='^late: '):
            arrival_step(CLOCK, event, arrival)
