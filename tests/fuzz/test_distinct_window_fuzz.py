"""Fuzzing the input path of ``ContinualDistinctCountPerKey(count='active', output=('window',
W))`` after extraction: 'BoundPerUnit' with ``distinct_units=ActiveWindow(W)``. For any
sequence of a unit's records, in any arrival order, over any number of calls (the unit's record
stored and decoded between them, the released steps advancing as far as the records still to
come allow), the ±1 deltas it emits sum, key by key and step by step, to the first difference
of the union of [t, t + W) over the kept active steps (``membership_stream``: ≤ 2S non-zero
steps per key, each ±1), every delta is at a step not yet released, the kept steps are the
per-step active rule's, and the stored record never holds more than K keys with at most S live
steps each."""

import collections

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.distinct_window import ActiveWindow
from beam_dp.drivers.distinct_window import coverage_deltas
from beam_dp.drivers.distinct_window import membership_stream
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.contribution_bounding import _BoundContributionsFn

pytestmark = pytest.mark.fuzz

_RECORDS = st.lists(st.tuples(st.sampled_from('abcde'), st.integers(0, 12)), max_size=60)


@settings(max_examples=400, deadline=None)
@given(records=_RECORDS, k=st.integers(1, 3), s=st.integers(1, 4), w=st.integers(2, 6),
       cap=st.one_of(st.none(), st.integers(1, 9)), in_order=st.booleans(),
       mark=st.booleans(), splits=st.lists(st.integers(0, 60), max_size=5))
def test_window_deltas_sum_to_the_membership_stream(records, k, s, w, cap, in_order, mark,
                                                    splits):
    bound = UserLevel(unit_fn=len, max_keys_per_unit=k, max_steps_per_unit=s,
                      max_total_contributions=cap)
    fn = _BoundContributionsFn(bound, 'T', mark_new_keys=mark,
                               distinct_units=ActiveWindow(w))
    if in_order:
        records = sorted(records, key=lambda r: r[1])
    stored, sums, dead, firsts = (), collections.defaultdict(int), 0, collections.Counter()
    cuts = sorted(set(min(c, len(records)) for c in splits)) + [len(records)]
    start = 0
    for cut in cuts:
        chunk = records[start:cut]
        # released through the step before every record still to come (none of them is late)
        released = min((st_ for _, st_ in records[start:]), default=0) - 1
        usage = UnitUsage.decode(bound, stored, released, keep_keys=True, keep_steps=True,
                                 keep_last=True)
        items = [((key, step, (0, 0, 1)), step) for key, step in chunk]
        for out in fn._bound_unit('u', items, usage):     # pylint: disable=protected-access
            if hasattr(out, 'tag'):
                dead += 1
                continue
            key, at, payload = out[0], out[1], out[2]
            assert at > released                          # never a released step
            sums[(key, at)] += payload[2]
            if mark:
                firsts[key] += out[3]
        stored = usage.record()
        assert isinstance(stored, tuple) and len(stored) - 1 <= k
        assert all(len(entry) == 1 or (len(entry) - 3) // 2 <= s for entry in stored[1:])
        start = cut
    steps_of, n_dead, total = {}, 0, 0
    for key, step in records:                             # the per-step active rule
        if step in steps_of.get(key, ()):
            continue
        if (key not in steps_of and len(steps_of) >= k) or len(steps_of.get(key, ())) >= s \
                or (cap is not None and total >= cap):
            n_dead += 1
            continue
        steps_of.setdefault(key, []).append(step)
        total += 1
    assert dead == n_dead
    got = {cell: d for cell, d in sums.items() if d}
    want = {(key, at): d for key, used in steps_of.items()
            for at, d in membership_stream(used, w)}
    assert got == want
    for key, used in steps_of.items():
        assert len([1 for (k2, _) in want if k2 == key]) <= 2 * len(used)
    if mark:                                              # one first-record flag per key
        assert dict(firsts) == {key: 1 for key in steps_of}


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.integers(0, 30), max_size=8, unique=True), w=st.integers(1, 8))
def test_coverage_deltas_in_any_order_add_up(steps, w):
    total = collections.Counter()
    for i, t in enumerate(steps):
        for at, d in coverage_deltas(steps[:i + 1], t, w):
            assert at >= t
            total[at] += d
    assert {a: d for a, d in total.items() if d} == dict(membership_stream(steps, w))
