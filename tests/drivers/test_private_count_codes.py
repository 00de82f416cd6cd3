"""``PrivateCountCodes``: the fast path of an event-level count over private keys accepts a
subset of what the validator accepts, with the same (key, shard, step), and its partials are
the exact counts."""

import collections

import numpy as np
import pytest

from beam_dp import EventLevel
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp.drivers import key_layout
from beam_dp.drivers.clock import NO_EVENT_TIME_MICROS
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import InvalidRecordError

START, STEP = 1_000_000, 60_000_000
SELECT = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=3)
KEYS = ['a', 'b', 'c', 'd', 'e', 'bad\ud800', '', 'é']


def driver(metric='count', last_step=9, unit=None, **kw):
    return KeyedReleaseDriver(metric=metric, budget=PrivacyBudget(epsilon=1.0),
                              privacy_unit=unit or EventLevel(),
                              clock=StepClock(START, STEP, 0, last_step), private_keys=SELECT,
                              **kw)


def validated(d, key, micros):
    try:
        return d.extract(key, micros, None, None)
    except InvalidRecordError:
        return None


@pytest.mark.parametrize('last_step', [9, None])
def test_the_fast_path_accepts_a_subset_of_what_the_validator_accepts_with_the_same_cell(
        last_step):
    d = driver(last_step=last_step)
    codes = d.private_count_codes()
    end = START + 10 * STEP
    times = [NO_EVENT_TIME_MICROS, 0, START - 1, START, START + 1, START + STEP - 1,
             START + STEP, end - 1, end, end + STEP, 2**62]
    keys = KEYS + [1, None, b'a', np.str_('a'), np.str_('z'), ('a',)]
    assert all(codes.code(k, t) is None for k in keys for t in times)   # nothing learnt yet
    for key in keys:                                  # the DoFn learns what the validator took
        for micros in times:
            full = validated(d, key, micros)
            if full is not None:
                codes.learn(full[0], full[2])
    fast = 0
    for key in keys:
        for micros in times:
            code = codes.code(key, micros)
            if code is None:
                continue
            fast += 1
            full = validated(d, key, micros)
            assert full is not None, (key, micros)
            text, step, shard, bin_index, units = full
            assert code >> 20 == step and (bin_index, units) == (0, 1)
            [(got_shard, got_step, got_keys, counts)] = codes.partials([code])
            assert (got_shard, got_step, got_keys, counts) == (shard, step, [text], [1])
    # Learnt: the valid keys' texts (np.str_('z') as 'z'); fast: only exact str keys (not the
    # np.str_ ones) at the in-range times (5 with a last step, 8 without).
    assert sorted(codes.index) == sorted(['a', 'b', 'c', 'd', 'e', '', 'é', 'z'])
    assert fast == 7 * (8 if last_step is None else 5)


def test_only_event_level_private_counts_have_a_fast_path():
    assert driver().private_count_codes() is not None
    assert driver().private_count_codes() is not driver().private_count_codes()   # fresh
    assert driver('sum', lower=0, upper=1).private_count_codes() is None
    assert driver('histogram', bins=('x', 'y')).private_count_codes() is None
    user = UserLevel(lambda r: r, max_keys_per_unit=1, max_contributions_per_step=1,
                     max_steps_per_unit=1)
    assert driver(unit=user).private_count_codes() is None


def test_partials_are_the_exact_counts_per_shard_and_step_with_and_without_multiplicities():
    d = driver(last_step=None)
    codes = d.private_count_codes()
    rng = np.random.default_rng(3)
    names = [f'k{i}' for i in range(40)]
    for name in names:
        codes.learn(name, SELECT.shard_of(name))
    records = [(names[k], START + int(t)) for k, t in zip(
        rng.integers(0, 40, 5000), rng.integers(0, 50 * STEP, 5000))]
    expected = collections.Counter()
    for key, micros in records:
        _, step, shard, _, _ = d.extract(key, micros, None, None)
        expected[(shard, step, key)] += 1
    all_codes = np.asarray([codes.code(*r) for r in records], dtype=np.int64)
    half = all_codes.size // 2
    packed = [codes.compact(all_codes[:half]), codes.compact(all_codes[half:])]
    weighted = (np.concatenate([c for c, _ in packed]), np.concatenate([n for _, n in packed]))
    for parts in (codes.partials(all_codes), codes.partials(*weighted)):
        got, seen = collections.Counter(), set()
        for shard, step, keys, counts in parts:
            assert (shard, step) not in seen and len(set(keys)) == len(keys)
            seen.add((shard, step))
            assert all(type(n) is int for n in counts)       # pylint: disable=unidiomatic-typecheck
            for key, n in zip(keys, counts):
                got[(shard, step, key)] += n
        assert got == expected
    assert codes.partials([]) == []


def test_at_most_the_cap_of_keys_is_known_and_room_forgets_them(monkeypatch):
    monkeypatch.setattr(key_layout, '_MAX_KEYS', 3)
    codes = driver().private_count_codes()
    for key in 'abcde':
        codes.learn(key, 0)
    assert sorted(codes.index) == ['a', 'b', 'c']
    codes.learn(np.str_('x'), 0)
    assert 'x' not in codes.index
    codes.room()
    assert codes.index == {} and codes.code('a', START) is None
    codes.learn('d', 1)
    codes.room()                                      # below the cap: kept
    assert codes.partials([codes.code('d', START + STEP)]) == [(1, 1, ['d'], [1])]


def test_codes_stay_in_int64_for_unbounded_clocks():
    codes = driver(last_step=None).private_count_codes()
    codes.learn('a', 0)
    late = codes.end_micros
    assert codes.code('a', late) is None and 0 < codes.code('a', late - 1) < 2**63
