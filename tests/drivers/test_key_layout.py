"""``CountCodes``: the fast path of an event-level public-key count's extraction accepts only
records the full validator accepts, with the same key index and step, and turns a bundle's
codes into exact per (shard, step) counts."""

import collections

import numpy as np
import pytest

from beam_dp import EventLevel
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp.drivers.clock import NO_EVENT_TIME_MICROS
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import CountCodes
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidRecordError

START, STEP = 1_000_000, 60_000_000
KEYS = ['a', 'b', 'c', 'd', 'e', 'bad\ud800']   # the last has a lone surrogate


def driver(metric='count', last_step=9, unit=None, **kw):
    return KeyedReleaseDriver(metric=metric, budget=PrivacyBudget(epsilon=1.0),
                              privacy_unit=unit or EventLevel(),
                              clock=StepClock(START, STEP, 0, last_step),
                              layout=KeyLayout.of(KEYS, 4), **kw)


def validated(d, key, micros):
    try:
        key_id, step, shard, slot, units = d.extract(key, micros, None, None)
    except InvalidRecordError:
        return None
    return key_id, step, shard, slot, units


@pytest.mark.parametrize('last_step', [9, None])
def test_the_fast_path_accepts_a_subset_of_what_the_validator_accepts_with_the_same_cell(
        last_step):
    d = driver(last_step=last_step)
    codes = d.count_codes()
    end = START + 10 * STEP
    times = [NO_EVENT_TIME_MICROS, 0, START - 1, START, START + 1, START + STEP - 1,
             START + STEP, end - 1, end, end + STEP, 2**62]
    keys = KEYS + ['z', '', 1, None, b'a', np.str_('a'), ('a',)]
    fast = 0
    for key in keys:
        for micros in times:
            code = codes.code(key, micros)
            full = validated(d, key, micros)
            if code is None:
                continue
            fast += 1
            assert full is not None, (key, micros)
            key_id, step, shard, slot, units = full
            assert divmod(code, codes.num_keys) == (step, key_id) and units == 1
            assert (shard, slot) == (key_id % 4, key_id // 4)
    # the five good keys at the in-range times (5 with a last step, 8 without)
    assert fast == 5 * (8 if last_step is None else 5)
    assert sorted(codes.index) == ['a', 'b', 'c', 'd', 'e']   # not the surrogate key


def test_only_event_level_public_counts_have_a_fast_path():
    assert driver().count_codes() is not None
    assert driver('sum', lower=0, upper=1).count_codes() is None
    assert driver('histogram', bins=('x', 'y')).count_codes() is None
    user = UserLevel(lambda r: r, max_keys_per_unit=1, max_contributions_per_step=1,
                     max_steps_per_unit=1)
    assert driver(unit=user).count_codes() is None


def test_partials_are_the_exact_counts_per_shard_and_step():
    d = driver(last_step=None)
    codes = d.count_codes()
    rng = np.random.default_rng(3)
    records = [(KEYS[k], START + int(t)) for k, t in zip(
        rng.integers(0, 5, 5000), rng.integers(0, 50 * STEP, 5000))]
    expected = collections.Counter()
    for key, micros in records:
        _, step, shard, slot, _ = d.extract(key, micros, None, None)
        expected[(shard, step, slot)] += 1
    got = collections.Counter()
    seen = set()
    for shard, step, positions, counts in codes.partials([codes.code(*r) for r in records]):
        assert (shard, step) not in seen and positions.dtype == counts.dtype == np.int64
        seen.add((shard, step))
        for slot, n in zip(positions.tolist(), counts.tolist()):
            got[(shard, step, slot)] += n
    assert got == expected
    assert codes.partials([]) == []


def test_codes_stay_in_int64_for_unbounded_clocks():
    codes = driver(last_step=None).count_codes()
    assert (codes.end_micros - START) // STEP * codes.num_keys < 2**63
    late = codes.end_micros
    assert codes.code('a', late) is None and codes.code('a', late - 1) is not None
