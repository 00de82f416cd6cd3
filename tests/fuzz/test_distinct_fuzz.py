"""Fuzzing the distinct-unit bounding ('BoundPerUnit' with ``distinct_units=True``, the input path
of ``ContinualDistinctCountPerKey`` after extraction): for any sequence of a unit's records, over
any number of calls (the unit's record stored and decoded between them), the kept records are
exactly the unit's first record of each of its first K keys (C caps them), a repeat of a held key
is never dead-lettered, every other record is dead-lettered once, and the stored record never
holds more than K keys."""

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp.drivers.bounding import UnitUsage
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.contribution_bounding import ACTIVE_UNITS
from beam_dp.transforms.contribution_bounding import _BoundContributionsFn

pytestmark = pytest.mark.fuzz

_RECORDS = st.lists(st.tuples(st.sampled_from('abcdefg'), st.integers(0, 6)), max_size=60)


@settings(max_examples=400, deadline=None)
@given(records=_RECORDS, k=st.integers(1, 4), cap=st.one_of(st.none(), st.integers(1, 5)),
       splits=st.lists(st.integers(0, 60), max_size=4))
def test_first_record_of_each_of_the_first_k_keys(records, k, cap, splits):
    bound = UserLevel(unit_fn=len, max_keys_per_unit=k, max_steps_per_unit=1,
                      max_total_contributions=cap)
    fn = _BoundContributionsFn(bound, 'T', mark_new_keys=True, distinct_units=True)
    stored, kept, dead = (), [], []
    cuts = sorted(set(min(s, len(records)) for s in splits)) + [len(records)]
    start = 0
    for cut in cuts:                          # several calls, the record stored in between
        usage = UnitUsage.decode(bound, stored, keep_keys=True)
        items = [((key, step, None), step) for key, step in records[start:cut]]
        for out in fn._bound_unit('u', items, usage):     # pylint: disable=protected-access
            (dead if hasattr(out, 'tag') else kept).append(out)
        stored = usage.record()
        assert isinstance(stored, tuple) and len(stored) - 1 <= min(k, cap or k)
        start = cut
    limit = min(k, cap) if cap is not None else k
    expected, first_keys = [], []
    for key, step in records:
        if key in first_keys:
            continue                          # a repeat: silently not counted
        if len(first_keys) < limit:
            first_keys.append(key)
            expected.append((key, step, None, 1))
    assert kept == expected
    # a record of a held key after its first is silent; every record of another key is dead
    assert len(dead) == sum(1 for key, _ in records if key not in first_keys)


@settings(max_examples=400, deadline=None)
@given(records=_RECORDS, k=st.integers(1, 4), s=st.integers(1, 4),
       cap=st.one_of(st.none(), st.integers(1, 9)), in_order=st.booleans(),
       splits=st.lists(st.integers(0, 60), max_size=4))
def test_active_first_record_of_each_key_and_step(records, k, s, cap, in_order, splits):
    """``distinct_units=ACTIVE_UNITS`` (``count='active'``): the kept records are exactly the
    unit's first record of each (key, step) within its first K keys, S steps per key and C in
    all; a repeat of a kept (key, step) is silent, every other record is dead-lettered once;
    with records in step order each call may fold the released steps (released through the
    step before the call's first record), and the stored record never holds more than K keys
    with at most S live steps each."""
    bound = UserLevel(unit_fn=len, max_keys_per_unit=k, max_steps_per_unit=s,
                      max_total_contributions=cap)
    fn = _BoundContributionsFn(bound, 'T', distinct_units=ACTIVE_UNITS)
    if in_order:
        records = sorted(records, key=lambda r: r[1])
    stored, kept, dead = (), [], []
    cuts = sorted(set(min(c, len(records)) for c in splits)) + [len(records)]
    start = 0
    for cut in cuts:
        chunk = records[start:cut]
        released = chunk[0][1] - 1 if in_order and chunk else -1
        usage = UnitUsage.decode(bound, stored, released, keep_keys=True, keep_steps=True)
        items = [((key, step, None), step) for key, step in chunk]
        for out in fn._bound_unit('u', items, usage):     # pylint: disable=protected-access
            (dead if hasattr(out, 'tag') else kept).append(out)
        stored = usage.record()
        assert isinstance(stored, tuple) and len(stored) - 1 <= k
        assert all(len(entry) == 1 or (len(entry) - 2) // 2 <= s for entry in stored[1:])
        start = cut
    expected, steps_of, n_dead = [], {}, 0
    for key, step in records:
        if step in steps_of.get(key, ()):
            continue                          # the unit is already active in this step: silent
        if (key not in steps_of and len(steps_of) >= k) or len(steps_of.get(key, ())) >= s \
                or (cap is not None and len(expected) >= cap):
            n_dead += 1
            continue
        steps_of.setdefault(key, []).append(step)
        expected.append((key, step, None))
    assert kept == expected
    assert len(dead) == n_dead
