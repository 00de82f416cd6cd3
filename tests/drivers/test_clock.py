"""StepClock: the one public step schedule (0-based steps, release = end + allowed lateness)."""

import pytest

from beam_dp.drivers.clock import NO_EVENT_TIME_MICROS
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.clock import format_micros
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError


def test_steps_are_zero_based_event_time_periods():
    clock = StepClock(start_micros=100, step_micros=60, allowed_lateness_micros=5)
    assert clock.step_of(99) == -1 and clock.step_of(100) == 0 and clock.step_of(159) == 0
    assert clock.step_of(160) == 1
    assert clock.step_bounds(2) == (220, 280) and clock.step_end(2) == 280
    assert clock.release_time_micros(0) == 165
    assert clock.describe() == {'step_seconds': 60e-6, 'allowed_lateness_seconds': 5e-6}


def test_public_end_gives_the_last_step_that_starts_before_it():
    assert StepClock.ending_at(0, 60, 300).last_step == 4          # steps 0..4 cover [0, 300)
    assert StepClock.ending_at(0, 60, 301).last_step == 5          # step 5 starts before 301
    assert StepClock.ending_at(0, 60, None).last_step is None
    with pytest.raises(InvalidParamsError, match='end must be after start'):
        StepClock.ending_at(10, 60, 10)


def test_a_finite_horizon_caps_the_last_step():
    assert StepClock(0, 60).limited_to(8).last_step == 7
    assert StepClock(0, 60, last_step=3).limited_to(8).last_step == 3
    assert StepClock(0, 60, last_step=9).limited_to(8).last_step == 7
    assert StepClock(0, 60).limited_to(None).last_step is None


def test_release_loop_stops_after_the_last_step():
    bounded = StepClock(0, 60, allowed_lateness_micros=1, last_step=2)
    assert [bounded.is_released(s) for s in (-1, 0, 2, 3)] == [False, True, True, False]
    assert bounded.next_release_time_micros(1) == 181
    assert bounded.next_release_time_micros(2) is None
    assert StepClock(0, 60).next_release_time_micros(10**6) == (10**6 + 2) * 60


def test_checked_step_gives_the_dead_letter_reason():
    clock = StepClock(100, 60, last_step=1)
    assert clock.checked_step(219) == 1
    with pytest.raises(InvalidRecordError, match='event time is before the release start'):
        clock.checked_step(99)
    with pytest.raises(InvalidRecordError, match='event time is after the last released step 1'):
        clock.checked_step(220)
    assert clock.late_reason(3) == 'late: step 3 was already released (allowed lateness 0s)'


@pytest.mark.parametrize('kwargs, match', [
    ({'start_micros': -1}, 'start_micros must be a non-negative integer'),
    ({'step_micros': 0}, 'step_micros must be a positive integer'),
    ({'allowed_lateness_micros': -1}, 'allowed_lateness_micros must be a non-negative integer'),
    ({'last_step': -1}, 'last_step must be a non-negative integer'),
])
def test_validation(kwargs, match):
    params = dict(start_micros=0, step_micros=60)
    params.update(kwargs)
    with pytest.raises(InvalidParamsError, match=f'StepClock: {match}'):
        StepClock(**params)


def test_no_event_time_and_before_start_are_told_apart_with_both_times():
    clock = StepClock(1_717_286_400_000_000, 3_600_000_000, last_step=1)
    with pytest.raises(InvalidRecordError, match=r'record has no event timestamp .*Beam.s minimum '
                       r'timestamp.*release start is 2024-06-02T00:00:00Z \(1717286400 s'):
        clock.checked_step(NO_EVENT_TIME_MICROS)
    with pytest.raises(InvalidRecordError, match=r'before the release start: the record is at '
                       r'2024-06-01T23:59:59.500000Z \(1717286399.5 s.*start is 2024-06-02T00:00:00Z'):
        clock.checked_step(1_717_286_399_500_000)
    with pytest.raises(InvalidRecordError, match=r'after the last released step 1: the record is '
                       r'at 2024-06-02T02:00:00Z .*step 1 ends at 2024-06-02T02:00:00Z'):
        clock.checked_step(1_717_293_600_000_000)
    assert format_micros(-1_500_000) == '1969-12-31T23:59:58.500000Z (-1.5 s since the epoch)'
