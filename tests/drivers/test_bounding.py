"""beam_dp.drivers.bounding: the compact per-unit usage record keeps the bound exact.

A hypothesis fuzz drives ``UnitUsage`` record by record over random streams in which the last
released step advances, records are stored and re-read (as the DoFn does between calls) and
whole shards are compacted at random points, and compares every decision with the brute-force
rule that remembers every kept (key, step, n) for ever. Then the layouts: markers and folded
steps."""

import collections

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import UserLevel
from beam_dp.drivers.bounding import EXHAUSTED_KEYS
from beam_dp.drivers.bounding import EXHAUSTED_TOTAL
from beam_dp.drivers.bounding import NOTHING_RELEASED
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.bounding import compact_record
from beam_dp.drivers.bounding import held_keys_if_full
from beam_dp.drivers.bounding import keys_reason
from tests.transforms.test_contribution_bounding import assert_within_bound
from tests.transforms.test_contribution_bounding import category
from tests.transforms.test_contribution_bounding import reference


def _unit(record):
    return record


def _late(step):
    return f'late: step {step} was already released'


bounds = st.builds(
    lambda k, m, s, c: UserLevel(unit_fn=_unit, max_keys_per_unit=k,
                                 max_contributions_per_step=m, max_steps_per_unit=s,
                                 max_total_contributions=c),
    st.integers(1, 3), st.integers(1, 3), st.integers(1, 4),
    st.one_of(st.none(), st.integers(1, 12)))
events = st.lists(st.one_of(
    st.tuples(st.just('record'), st.integers(0, 2), st.integers(0, 3), st.integers(0, 9)),
    st.tuples(st.just('release'), st.integers(0, 3)),
    st.tuples(st.just('compact'))), max_size=120)


def drive(bound, stream):
    """Runs the events through stored compact records; returns the records with the released
    step each was bounded at, the decisions, and the stored records."""
    stored = collections.defaultdict(tuple)
    released = NOTHING_RELEASED
    records, released_at, kept, dead = [], [], [], []
    for event in stream:
        if event[0] == 'release':
            released += event[1]
        elif event[0] == 'compact':          # the timer: the whole shard folded
            stored = collections.defaultdict(tuple, {
                u: compact_record(bound, r, released) for u, r in stored.items()})
        else:
            _, unit, key, step = event
            payload = len(records)
            records.append((unit, (key, step, payload)))
            released_at.append(released)
            usage = UnitUsage.decode(bound, stored[unit], released, _late)
            reason, _ = usage.offer(key, step)
            if reason is None:
                kept.append((unit, key, step, payload))
                stored[unit] = usage.record()
            else:
                dead.append((unit, key, step, payload, category(reason)))
    return records, released_at, kept, dead, stored


@settings(max_examples=300, deadline=None)
@given(bounds, events)
def test_compact_records_decide_exactly_as_the_full_history(bound, stream):
    records, released_at, kept, dead, stored = drive(bound, stream)
    want_kept, want_dead = reference(records, bound, released_at)
    assert kept == want_kept
    assert dead == want_dead
    assert_within_bound(kept, bound)
    for unit, record in stored.items():
        n = sum(1 for k in kept if k[0] == unit)
        if record == ():
            assert n == 0
        elif isinstance(record, int):
            assert record in (EXHAUSTED_TOTAL, EXHAUSTED_KEYS)
            assert record == EXHAUSTED_KEYS or n == bound.max_total_contributions
        else:
            assert record[0] == n and len(record) - 1 <= bound.max_keys_per_unit


@settings(max_examples=200, deadline=None)
@given(bounds, events)
def test_a_unit_never_keeps_more_than_s_steps_of_a_key_whatever_the_release_schedule(
        bound, stream):
    _, _, kept, _, _ = drive(bound, stream)
    assert_within_bound(kept, bound)


@settings(max_examples=300, deadline=None)
@given(bounds, events, st.integers(0, 3), st.integers(0, 9))
def test_a_full_units_record_of_another_key_is_over_k_without_decoding(bound, stream, key,
                                                                        step):
    """``held_keys_if_full`` (the 'BoundPerUnit' fast path): whenever it gives a stored
    record's keys, the decoded usage answers a record of any other key, for any step not yet
    released, with exactly ``keys_reason`` and leaves the record as it was — at every released
    step from the one the record was stored at to past the last step."""
    _, _, _, _, stored = drive(bound, stream)
    checked = 0
    for record in list(stored.values()) + [compact_record(bound, r, 2) for r in stored.values()]:
        held = held_keys_if_full(bound, record)
        if held is None:
            continue
        assert held == tuple(entry[0] for entry in record[1:])
        if key in held:
            continue
        for released in range(NOTHING_RELEASED, 10):
            if step <= released:
                continue
            usage = UnitUsage.decode(bound, record, released, _late)
            before = usage.record()
            assert usage.offer(key, step) == (keys_reason(bound), False)
            assert usage.record() == before
            checked += 1
    # and a record it answers None for is one where that shortcut would be wrong or unknown:
    # exhausted markers, new units and units below K keys are never given
    for record in (EXHAUSTED_TOTAL, EXHAUSTED_KEYS, ()):
        assert held_keys_if_full(bound, record) is None


def test_held_keys_if_full_refuses_used_up_records():
    """K keys but the total at C, or every key used S steps: not answered (decoding may
    exhaust the unit, whose reason differs)."""
    bound = UserLevel(unit_fn=_unit, max_keys_per_unit=2, max_contributions_per_step=2,
                      max_steps_per_unit=2, max_total_contributions=4)
    assert held_keys_if_full(bound, (3, ('a', 0, 0, 2), ('b', 0, 1, 1))) == ('a', 'b')
    assert held_keys_if_full(bound, (4, ('a', 0, 0, 2), ('b', 0, 1, 2))) is None  # C reached
    assert held_keys_if_full(bound, (3, ('a', 1, 0, 2), ('b', 0, 1, 1, 2, 1))) is None  # S used
    assert held_keys_if_full(bound, (3, ('a',), ('b', 1, 1, 1))) is None
    assert held_keys_if_full(bound, (1, ('a', 0, 0, 1))) is None     # fewer than K keys


def test_markers_and_folded_steps():
    bound = UserLevel(unit_fn=_unit, max_keys_per_unit=2, max_contributions_per_step=2,
                      max_steps_per_unit=3, max_total_contributions=5)
    usage = UnitUsage.decode(bound, ())
    for key, step in [('a', 0), ('a', 0), ('a', 1), ('b', 4)]:
        assert usage.offer(key, step)[0] is None
    assert usage.record() == (4, ('a', 0, 0, 2, 1, 1), ('b', 0, 4, 1))
    # idle until step 4 is released: every step is a count; 'a' still has one step left
    assert compact_record(bound, usage.record(), 4) == (4, ('a', 2), ('b', 1))
    assert usage.offer('b', 5) == (None, False)
    assert usage.record() == EXHAUSTED_TOTAL           # C = 5 records kept
    assert 'max_total_contributions=5' in usage.offer('c', 9)[0]
    # S steps of a key, each at m, and no other key possible: the unit is used up
    small = UserLevel(unit_fn=_unit, max_keys_per_unit=1, max_contributions_per_step=1,
                      max_steps_per_unit=2)
    assert compact_record(small, (2, ('a', 0, 7, 1, 8, 1)), NOTHING_RELEASED) == EXHAUSTED_KEYS
    assert compact_record(small, (1, ('a', 0, 7, 1)), 9) == (1, ('a', 1))
    assert compact_record(small, (2, ('a', 1, 9, 1)), 9) == EXHAUSTED_KEYS

