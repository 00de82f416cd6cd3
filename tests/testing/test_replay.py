"""``beam_dp.testing.replay``: the loop's semantics in plain Python (the parity tests in
tests/transforms/ check it against the Beam job family by family)."""

import pytest

from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from beam_dp.testing import Element
from beam_dp.testing import Watermark
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay

STEP = 60


def _counts(**kw):
    return ContinualCountPerKey(public_keys=['a', 'b', 'c'], start=0, step=STEP, num_shards=2,
                                budget=PrivacyBudget(epsilon=1.0), label='Counts', **kw)


def test_every_key_every_step_up_to_the_watermark_and_nothing_after_it():
    driver = _counts().driver
    out = replay(driver.loop_driver(), keyed_events(driver, [('a', 1, None)], steps=4),
                 label='Counts', seed=3)
    assert sorted(release_table(out.releases)) == [(k, s) for k in 'abc' for s in range(4)]


def test_the_seed_and_the_label_are_the_noise_address():
    driver = _counts().driver
    events = keyed_events(driver, [('a', 0, None)] * 3, steps=3)
    one = release_table(replay(driver.loop_driver(), events, label='Counts', seed=3).releases)
    again = release_table(replay(driver.loop_driver(), events, label='Counts', seed=3).releases)
    other = release_table(replay(driver.loop_driver(), events, label='Other', seed=3).releases)
    assert one == again and one != other


def test_a_payload_of_a_released_step_is_a_late_dead_letter_and_changes_nothing():
    driver = _counts().driver
    events = keyed_events(driver, [('a', 0, None)], steps=2)
    partial = [e for e in events if isinstance(e, Element) and e.payload is not None]
    late = events + partial                # step 0's partial again, after step 1's release
    on_time = replay(driver.loop_driver(), events, label='Counts', seed=5)
    out = replay(driver.loop_driver(), late, label='Counts', seed=5)
    assert release_table(out.releases) == release_table(on_time.releases)
    assert [(d.transform, d.stage, d.reason.split(' (')[0]) for d in out.dead_letters] == [
        ('Counts', 'ReleaseNoisyValues', 'late: step 0 was already released')]


def test_a_bounded_clock_releases_through_its_last_step_at_the_end_of_input():
    driver = _counts(end=5 * STEP).driver
    out = replay(driver.loop_driver(), [Element(0, None), Element(1, None)], label='Counts',
                 seed=1)
    assert sorted({r.step for r in out.releases}) == [0, 1, 2, 3, 4]


def test_an_unbounded_clock_stops_at_the_last_watermark():
    driver = _counts().driver
    out = replay(driver.loop_driver(), [Element(0, None), Element(1, None),
                                        Watermark(driver.clock.release_time_micros(2))],
                 label='Counts', seed=1)
    assert sorted({r.step for r in out.releases}) == [0, 1, 2]
    assert all(state.input_ended for state in out.states.values())


def test_exactly_one_noise_source():
    driver = _counts().driver
    with pytest.raises(ValueError, match='exactly one'):
        replay(driver.loop_driver(), [], label='Counts')
