"""The opt-in unit cap of 'BoundPerUnit' (``UserLevel(max_units=N)``).

* The DoFns, driven by hand on random streams in random bundles, equal a brute-force
  reference: per shard the first ⌈N/64⌉ units (in order of their first record) are admitted,
  every record of any other unit is dead-lettered with the cap reason, and the admitted units'
  records follow the K / S / m / C rule (``test_contribution_bounding.reference``).
* The privacy property (hypothesis): inserting a new unit u anywhere in a stream (the other
  records' order unchanged, bundles drawn anew) changes the kept records of u and of at most
  ONE other unit, of u's shard: the last unit admitted there without u.
* The state stays bounded: a shard never holds more than ⌈N/64⌉ unit records.
* On the DirectRunner (streaming, TestStream) and on Prism: over-cap units are dead-lettered
  with the reason, admitted ones are kept exactly.
"""

import collections
import random

import apache_beam as beam
import pytest
from apache_beam.coders import PickleCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms import userstate
from apache_beam.transforms.window import TimestampedValue
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import UserLevel
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounding import UNIT_SHARDS
from beam_dp.drivers.bounding import shard_capacity
from beam_dp.errors import InvalidParamsError
from beam_dp.transforms.contribution_bounding import MAX_DELTAS
from beam_dp.transforms.contribution_bounding import BoundContributions
from beam_dp.transforms.contribution_bounding import _BoundContributionsFn
from beam_dp.transforms.contribution_bounding import _CappedBoundContributionsFn
from beam_dp.transforms.contribution_bounding import _GroupByUnitInBundleFn
from beam_dp.transforms.contribution_bounding import unit_shard
from beam_dp.transforms.shell import MAX_MICROS
from beam_dp.transforms.shell import key_bytes
from tests import runners
from tests.fuzz.harness import Harness
from tests.fuzz.harness import _Finder
from tests.fuzz.harness import _Timer
from tests.runners import DIRECT_RUNNER
from tests.transforms.test_contribution_bounding import CLOCK
from tests.transforms.test_contribution_bounding import _Ts
from tests.transforms.test_contribution_bounding import _first
from tests.transforms.test_contribution_bounding import category
from tests.transforms.test_contribution_bounding import reference
from tests.transforms.test_contribution_bounding import streaming
from tests.transforms.test_continual import counts
from tests.helpers import run_stream
from tests.transforms.test_continual import tv


def _by_shard(count=16000):
    shards = collections.defaultdict(list)
    for i in range(count):
        shards[unit_shard(key_bytes(f'u{i}'))].append(f'u{i}')
    return shards


#: Unit names per 'BoundPerUnit' shard: the tests crowd a few shards.
SHARD_UNITS = _by_shard()
A, B = SHARD_UNITS[0][:10], SHARD_UNITS[1][:10]


def _bound(per_shard, rng=None, **kwargs):
    """A cap of ``per_shard`` units per shard, as an N that rounds up to it."""
    below = 0 if rng is None else rng.randint(0, UNIT_SHARDS - 1)
    bounds = dict(max_keys_per_unit=2, max_contributions_per_step=2, max_steps_per_unit=2)
    bounds.update(kwargs)
    bound = UserLevel(unit_fn=_first, max_units=per_shard * UNIT_SHARDS - below, **bounds)
    assert shard_capacity(bound) == per_shard
    return bound


def _kind(reason):
    return 'cap' if reason.startswith('unit cap: shard full') else category(reason)


def run_capped(records, bound, sizes, clock=None, watermarks=None):
    """The grouping DoFn then the capped 'BoundPerUnit' DoFn, one ``Harness`` (fake state and
    timers) per shard; before bundle b the watermark moves to ``watermarks[b]``. Returns the
    kept ``(unit, key, step, payload)``, the dead ``(unit, key, step, payload, kind)``, the
    harnesses and per record the shard's ``released_through`` when it was bounded."""
    group_fn = _GroupByUnitInBundleFn('T')
    fn = (_BoundContributionsFn if bound.max_units is None else _CappedBoundContributionsFn)(
        bound, 'T', False, clock)
    shards = {}
    if clock is not None:         # the launch seeds: every shard's clock starts, data or not
        for shard in range(UNIT_SHARDS):
            shards[shard] = Harness(fn, shard)
            shards[shard].element((shard, None))
    released = {}
    i = 0
    for b, size in enumerate(sizes):
        if watermarks and b in watermarks:
            for harness in shards.values():
                harness.advance_to(watermarks[b])
        group_fn.start_bundle()
        for j, element in enumerate(records[i:i + size]):
            assert list(group_fn.process(element, _Ts(1000 * (i + j)))) == []
            cell = shards.get(unit_shard(key_bytes(element[0])))
            cell = None if cell is None else cell.states.get('released_through')
            released[element[1][2]] = ((cell and cell.value) or (-1,))[0]
        i += size
        for wv in group_fn.finish_bundle():
            shard, _ = wv.value
            shards.setdefault(shard, Harness(fn, shard)).element(wv.value)
    unit_of = {payload: unit for unit, (_, _, payload) in records}
    kept, dead = [], []
    for harness in shards.values():
        for out in harness.outputs:
            if isinstance(out, beam.pvalue.TaggedOutput):
                u, (key, step, payload) = eval(out.value.record)  # pylint: disable=eval-used
                dead.append((u, key, step, payload, _kind(out.value.reason)))
            elif isinstance(out, tuple):
                kept.append((unit_of[out[2]],) + out)
    return kept, dead, shards, [released[payload] for _, (_, _, payload) in records]


def capped_reference(records, bound, released=None):
    """Brute force: a unit is admitted at its first record while its shard holds fewer than
    ⌈N/64⌉ units; records of units not admitted are 'cap'; the others follow ``reference``.
    Also returns each shard's admitted units in admission order."""
    admitted = collections.defaultdict(list)
    capacity = shard_capacity(bound)
    allowed, dead = [], []
    for i, (unit, (key, step, payload)) in enumerate(records):
        order = admitted[unit_shard(key_bytes(unit))]
        if unit not in order:
            if len(order) >= capacity:
                dead.append((unit, key, step, payload, 'cap'))
                continue
            order.append(unit)
        allowed.append(i)
    kept, over = reference([records[i] for i in allowed], bound,
                           None if released is None else [released[i] for i in allowed])
    return kept, dead + over, admitted


def _sizes(rng, n):
    sizes = []
    while sum(sizes) < n:
        sizes.append(min(rng.choice([1, 2, 7, 50, 1000]), n - sum(sizes)))
    return sizes


def _records(rng, units, n):
    return [(rng.choice(units), (rng.randint(0, 3), rng.randint(0, 4), f'p{k}'))
            for k in range(n)]


@pytest.mark.parametrize('seed', range(20))
def test_capped_dofn_equals_the_first_come_reference(seed):
    rng = random.Random(seed)
    bound = _bound(rng.randint(1, 4), rng, max_keys_per_unit=rng.randint(1, 3),
                   max_total_contributions=rng.choice([None, 2, 5]))
    records = _records(rng, A[:7] + B[:5] + SHARD_UNITS[2][:2], rng.randint(50, 300))
    kept, dead, shards, _ = run_capped(records, bound, _sizes(rng, len(records)))
    want_kept, want_dead, admitted = capped_reference(records, bound)
    assert sorted(kept) == sorted(want_kept)
    assert sorted(dead) == sorted(want_dead)
    for shard, harness in shards.items():
        bag = harness.states['kept_units'].items
        stored = set().union(*bag)
        assert stored == {key_bytes(u) for u in admitted[shard]}
        assert harness.states['admitted_units'].value == len(stored)


@pytest.mark.parametrize('seed', range(10))
def test_capped_dofn_with_a_clock_admits_at_the_first_record_even_when_it_is_late(seed):
    rng = random.Random(seed)
    bound = _bound(rng.randint(1, 3), rng)
    records = _records(rng, A[:6] + B[:4], rng.randint(50, 300))
    sizes = _sizes(rng, len(records))
    watermarks, wm = {}, 0
    for b in range(len(sizes)):
        wm += rng.choice([0, 0, 5_000_000, 10_000_000, 30_000_000])
        watermarks[b] = wm
    kept, dead, _, released = run_capped(records, bound, sizes, CLOCK, watermarks)
    want_kept, want_dead, _ = capped_reference(records, bound, released)
    assert sorted(kept) == sorted(want_kept)
    assert sorted(dead) == sorted(want_dead)


def _kept_by_unit(kept):
    out = collections.defaultdict(list)
    for unit, *rest in kept:
        out[unit].append(tuple(rest))
    return {u: sorted(r) for u, r in out.items()}


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), per_shard=st.integers(1, 4), shard_of_u=st.sampled_from(
    [0, 1, 2]), others=st.integers(0, 120), mine=st.integers(1, 6))
def test_adding_a_unit_changes_the_kept_records_of_at_most_one_other_unit(
        seed, per_shard, shard_of_u, others, mine):
    rng = random.Random(seed)
    bound = _bound(per_shard, rng, max_total_contributions=rng.choice([None, 3]))
    without = _records(rng, A[:7] + B[:5] + SHARD_UNITS[2][:1], others)
    u = SHARD_UNITS[shard_of_u][-1]
    with_u = list(without)
    for k in range(mine):        # u's records anywhere; the others' relative order unchanged
        with_u.insert(rng.randint(0, len(with_u)),
                      (u, (rng.randint(0, 3), rng.randint(0, 4), f'mine{k}')))
    kept0, _, _, _ = run_capped(without, bound, _sizes(rng, len(without)))
    kept1, dead1, _, _ = run_capped(with_u, bound, _sizes(rng, len(with_u)))
    want0, _, admitted0 = capped_reference(without, bound)
    assert sorted(kept0) == sorted(want0)
    assert sorted(kept1) == sorted(capped_reference(with_u, bound)[0])
    by0, by1 = _kept_by_unit(kept0), _kept_by_unit(kept1)
    changed = {v for v in set(by0) | set(by1) if v != u and by0.get(v) != by1.get(v)}
    assert len(changed) <= 1
    for v in changed:                         # displaced: the last unit admitted without u
        assert unit_shard(key_bytes(v)) == shard_of_u
        assert v == admitted0[shard_of_u][-1] and len(admitted0[shard_of_u]) == per_shard
        assert v not in by1 and all(d[4] == 'cap' for d in dead1 if d[0] == v)


def _stored_bytes(shards):
    """Bytes of the shards' live records (each bag merged into one table, as a compaction
    stores it; between compactions a bag also holds ≤ MAX_DELTAS - 1 stale copies)."""
    total = 0
    for harness in shards.values():
        merged = {}
        for table in harness.states['kept_units'].items:
            merged.update(table)
        total += len(PickleCoder().encode(merged))
    return total


def test_a_shard_holds_at_most_its_capacity_of_unit_records():
    """New units keep arriving (50 per shard in each of 4 rounds, in 3 shards) through a cap
    of 5 per shard: each shard holds 5 unit records and the live state stays the size of 15
    units, where without the cap it grows with the units seen."""
    bound = _bound(5)
    uncapped = UserLevel(unit_fn=_first, max_keys_per_unit=2, max_contributions_per_step=2,
                         max_steps_per_unit=2)
    rng = random.Random(1)
    capped_bytes, uncapped_bytes, records = [], [], []
    for r in range(4):
        records += _records(rng, [u for s in range(3) for u in SHARD_UNITS[s][50 * r:50 * r + 50]],
                           300)
        sizes = [100] * (len(records) // 100)
        _, dead, shards, _ = run_capped(records, bound, sizes)
        for harness in shards.values():
            assert len(set().union(*harness.states['kept_units'].items)) == 5
            assert harness.states['admitted_units'].value == 5
            assert sum(map(len, harness.states['kept_units'].items)) <= MAX_DELTAS * 5
        assert sum(1 for d in dead if d[4] == 'cap') > len(records) // 2
        capped_bytes.append(_stored_bytes(shards))
        _, _, shards, _ = run_capped(records, uncapped, sizes)
        uncapped_bytes.append(_stored_bytes(shards))
    assert max(capped_bytes) < 1.5 * min(capped_bytes)
    assert uncapped_bytes[-1] > 3 * uncapped_bytes[0] and uncapped_bytes[-1] > 10 * max(
        capped_bytes)


@pytest.mark.parametrize('bad', [0, -3, 2.5, '10', True])
def test_bad_max_units_raises_naming_it(bad):
    with pytest.raises(InvalidParamsError, match='max_units'):
        UserLevel(unit_fn=_first, max_steps_per_unit=1, max_units=bad)


def test_without_a_cap_the_dofn_and_its_state_are_unchanged():
    """'BoundPerUnit' runs the uncapped DoFn (state 'kept_units', 'released_through', timer
    'released') without max_units, and adds only 'admitted_units' with it."""
    def specs(bound):
        pipeline = beam.Pipeline(runner='BundleBasedDirectRunner')
        _ = pipeline | beam.Create([('u', ('a', 0, 'x'))]) | BoundContributions(bound)
        finder = _Finder('BoundPerUnit')
        pipeline.visit(finder)
        (fn,) = finder.found
        state, timers = userstate.get_dofn_specs(fn)
        return type(fn), sorted(s.name for s in state), sorted(t.name for t in timers)

    assert specs(UserLevel(unit_fn=_first, max_steps_per_unit=1)) == (
        _BoundContributionsFn, ['kept_units', 'released_through'],
        ['ts-end_of_input', 'ts-released'])
    assert specs(UserLevel(unit_fn=_first, max_steps_per_unit=1, max_units=10)) == (
        _CappedBoundContributionsFn, ['admitted_units', 'kept_units', 'released_through'],
        ['ts-end_of_input', 'ts-released'])


def _cap_pipeline(pipeline):
    """One unit per shard (N = 64): in shard 0 'first' then 'second' (over the cap), in shard 1
    one unit; K = 1, m = 2, S = 2. Kept exactly: the admitted units' records within K, m, S."""
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=1, max_contributions_per_step=2,
                      max_steps_per_unit=2, max_units=UNIT_SHARDS)
    first, second, other = SHARD_UNITS[0][0], SHARD_UNITS[0][1], SHARD_UNITS[1][0]
    stream = TestStream().advance_watermark_to(0)
    batches = [[(first, ('a', 0, 'f0')), (other, ('a', 0, 'o0'))],
               [(second, ('a', 0, 's0')), (first, ('a', 0, 'f1')), (first, ('a', 0, 'f2'))],
               [(second, ('b', 1, 's1')), (other, ('a', 1, 'o1')), (first, ('a', 1, 'f3'))]]
    for t, batch in enumerate(batches):
        stream = stream.add_elements([TimestampedValue(e, t + 1) for e in batch])
        stream = stream.advance_watermark_to(t + 2)
    stream = stream.advance_watermark_to(100)
    with pipeline as p:
        out = p | stream | BoundContributions(bound)
        assert_that(out.kept | beam.Map(lambda e: e[2]),
                    equal_to(['f0', 'f1', 'o0', 'o1', 'f3']), label='kept')
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.reason)),
                    equal_to([('BoundContributions', 'contribution bound: '
                               'max_contributions_per_step=2 reached for this key and step')]
                             + [('BoundContributions', 'unit cap: shard full (max_units=64: '
                                 'at most 1 units in each of the 64 unit shards; this unit '
                                 'arrived after its shard was full)')] * 2), label='dead')


@pytest.mark.pipeline
def test_pipeline_over_cap_units_are_dead_lettered_and_admitted_ones_kept_exactly():
    _cap_pipeline(beam.Pipeline(runner=DIRECT_RUNNER, options=streaming()))


@pytest.mark.integration
@pytest.mark.prism
@runners.requires_prism
def test_on_prism_over_cap_units_are_dead_lettered():
    _cap_pipeline(beam.Pipeline(options=PipelineOptions(runners.prism_options(streaming=True))))


@pytest.mark.pipeline
def test_continual_count_with_a_unit_cap_counts_the_admitted_units_exactly():
    """ContinualCountPerKey at user level with N = 64 (one unit per shard), noise-free: the
    unit that comes second to shard 0 is dead-lettered with the cap reason, the admitted
    units' records are counted exactly; the noise sd is twice the uncapped transform's."""
    first, second, other = SHARD_UNITS[0][0], SHARD_UNITS[0][1], SHARD_UNITS[1][0]
    bounds = dict(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=2,
                  max_steps_per_unit=2)
    unit = UserLevel(max_units=UNIT_SHARDS, **bounds)
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', first), 1), tv(('a', other), 2), tv(('a', first), 3)])
              .advance_watermark_to(30)
              .add_elements([tv(('a', second), 31), tv(('b', second), 65),
                             tv(('a', first), 66), tv(('b', other), 67)])   # other: K = 1
              .advance_watermark_to(200)
              .advance_watermark_to_infinity())
    reason = ('unit cap: shard full (max_units=64: at most 1 units in each of the 64 unit '
              'shards; this unit arrived after its shard was full)')
    run_stream(stream, counts(end=120, privacy_unit=unit),
               expected=[('a', 0, 3.0), ('a', 1, 4.0), ('b', 0, 0.0), ('b', 1, 0.0)],
               dead=equal_to([('BoundContributions', reason)] * 2 + [(
                   'BoundContributions', 'contribution bound: unit already contributed to '
                   'max_keys_per_unit=1 keys')]))
    budget = PrivacyBudget(epsilon=1.0)
    plain = counts(end=120, privacy_unit=UserLevel(**bounds), budget=budget)
    capped = counts(end=120, privacy_unit=unit, budget=budget)
    assert capped._driver.sensitivity() == tuple(2 * x for x in plain._driver.sensitivity())
    assert 'calibrated to 2 units per change' in capped._driver.release_metadata()[
        'privacy_unit']


def test_with_a_clock_another_unit_does_not_change_which_records_a_unit_keeps():
    """No cap, S = 1 (issue 13: this was a strict xfail). v sends a record for step 3 after the
    watermark passed step 3's release time (late by the schedule: the release stage drops it),
    then one for step 5. The shard's clock is seeded at launch and advanced by its own timer
    chain on the schedule, so with or without u (a unit of the same shard whose kept step-3
    record armed the timer before the fix) v's step-3 record is late here and its step 5 kept.
    Before the fix, without u the shard's released_through lagged, v's step-3 record was kept
    here and used S, and step 5 was refused."""
    bound = UserLevel(unit_fn=_first, max_steps_per_unit=1)
    u, v = SHARD_UNITS[0][0], SHARD_UNITS[0][1]

    def kept_of_v(with_u, capped):
        fn = (_CappedBoundContributionsFn(_bound(2, max_steps_per_unit=1), 'T', False, CLOCK)
              if capped else _BoundContributionsFn(bound, 'T', False, CLOCK))
        harness = Harness(fn, 0)
        harness.element((0, None))            # the launch seed ('SeedAtStart')
        if with_u:
            harness.element((0, ((key_bytes(u), u, ((('a', 3, 'u3'), 31_000_000),)),)))
        harness.advance_to(CLOCK.release_time_micros(3) + 1)
        for step in (3, 5):
            harness.element((0, ((key_bytes(v), v, ((('a', step, f'v{step}'),
                                                     step * 10_000_000 + 1),)),)))
        kept = [out[2] for out in harness.outputs
                if isinstance(out, tuple) and out[2].startswith('v')]
        late = [out.value.reason for out in harness.outputs
                if isinstance(out, beam.pvalue.TaggedOutput)]
        return kept, late, harness.states['released_through'].value

    for capped in (False, True):
        without, with_u = kept_of_v(False, capped), kept_of_v(True, capped)
        assert without == with_u == (['v5'], [CLOCK.late_reason(3)], (3, 4))


def test_a_shards_clock_runs_on_the_schedule_until_the_last_step_or_the_end_of_input():
    """A seeded shard that never sees a record: its chain marks each step released when the
    watermark passes its release time (one firing per step), stops after the clock's last
    step; without a last step it runs on with O(1) state until 'end_of_input' stops it."""
    bound = UserLevel(unit_fn=_first, max_steps_per_unit=1)
    ended = CLOCK.limited_to(6)
    harness = Harness(_BoundContributionsFn(bound, 'T', False, ended), 5)
    harness.element((5, None))
    assert harness.timers.get('ts-end_of_input', _Timer()).micros is None   # a last step
    for step in range(6):
        harness.advance_to(ended.release_time_micros(step) - 1)
        assert harness.states['released_through'].value == (step - 1, step)
        harness.advance_to(ended.release_time_micros(step))
    assert harness.states['released_through'].value == (5, None)
    assert harness.timers['ts-released'].micros is None and harness.outputs == []
    harness = Harness(_BoundContributionsFn(bound, 'T', False, CLOCK), 5)
    harness.element((5, None))
    harness.advance_to(CLOCK.release_time_micros(999))
    assert harness.states['released_through'].value == (999, 1000)
    assert harness.timers['ts-released'].micros == CLOCK.release_time_micros(1000)
    end = harness.timers['ts-end_of_input']
    assert end.micros == MAX_MICROS
    end.clear()                 # the input ended: at watermark +inf both timers are due at once
    harness.fn.end_of_input(**harness._kwargs(harness.fn.end_of_input, MAX_MICROS))
    assert harness.states['released_through'].value == (999, None)
    assert harness.timers['ts-released'].micros is None
    harness.fn.advance_released(**harness._kwargs(harness.fn.advance_released, MAX_MICROS))
    assert harness.states['released_through'].value == (999, None)   # a stale firing: no-op
