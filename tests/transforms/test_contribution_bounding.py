"""BoundContributions: bundle-grouped, bag-backed bounding equals the record-at-a-time rule.

The DoFns are driven directly (a list stands in for the bag state) on random streams split
into random bundles, against a reference that applies the K / S / m rule record by record; then
the transform runs on the DirectRunner with units that are equal in Python but are different
state keys (1, 1.0, True), and with a unit id that cannot be encoded."""

import collections
import random

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp import EventLevel
from beam_dp import InvalidParamsError
from beam_dp import UserLevel
from beam_dp.io.records import DeadLetter
from beam_dp.drivers.bounding import EXHAUSTED_KEYS
from beam_dp.drivers.bounding import EXHAUSTED_TOTAL
from beam_dp.drivers.bounding import UNIT_SHARDS
from beam_dp.drivers.clock import StepClock
from beam_dp.transforms.contribution_bounding import BoundContributions
from beam_dp.transforms.contribution_bounding import MAX_DELTAS
from beam_dp.transforms.contribution_bounding import _BoundContributionsFn
from beam_dp.transforms.contribution_bounding import _GroupByUnitInBundleFn
from beam_dp.transforms.contribution_bounding import _latest
from beam_dp.transforms.contribution_bounding import unit_shard
from beam_dp.transforms.shell import key_bytes
from tests import runners
from tests.fuzz.harness import _Bag
from tests.fuzz.harness import _Cell
from tests.fuzz.harness import _Timer
from tests.runners import DIRECT_RUNNER


def _first(record):
    return record[0]


class _Ts:
    def __init__(self, micros):
        self.micros = micros


#: The reasons' categories, in the order the rule checks them (``drivers/bounding.py``).
_CATEGORIES = (('max_total_contributions', 'total'), ('all max_keys_per_unit', 'exhausted'),
               ('late: step', 'late'), ('max_keys_per_unit', 'keys'),
               ('steps of this key, each with', 'key_full'), ('max_steps_per_unit', 'steps'),
               ('max_contributions_per_step', 'per_step'))


def category(reason):
    return next(name for text, name in _CATEGORIES if text in reason)


def reference(records, bound, released=None):
    """Brute force, record at a time, with every kept (key, step, n) remembered for ever.
    ``released[i]``: the last step known released when record i is bounded (-1: none). A record
    is kept iff it is not late and the unit's keys, steps of the key, records of the step and
    total stay within K, S, m, C; the first failing check names the reason."""
    kept, dead = [], []
    state = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    totals = collections.Counter()
    K, S = bound.max_keys_per_unit, bound.max_steps_per_unit
    m, C = bound.max_contributions_per_step, bound.max_total_contributions
    for i, (unit, (key, step, payload)) in enumerate(records):
        h = -1 if released is None else released[i]
        keys = state[unit]

        def full(k):
            return len(keys[k]) >= S and all(n >= m for s, n in keys[k].items() if s > h)

        if C is not None and totals[unit] >= C:
            reason = 'total'
        elif len(keys) >= K and all(full(k) for k in keys):
            reason = 'exhausted'
        elif step <= h:
            reason = 'late'
        elif key not in keys and len(keys) >= K:
            reason = 'keys'
        elif key in keys and full(key):
            reason = 'key_full'
        elif key in keys and step not in keys[key] and len(keys[key]) >= S:
            reason = 'steps'
        elif keys.get(key, collections.Counter())[step] >= m:
            reason = 'per_step'
        else:
            totals[unit] += 1
            keys[key][step] += 1
            kept.append((unit, key, step, payload))
            continue
        dead.append((unit, key, step, payload, reason))
    return kept, dead


#: The clock of the fuzzed streams: steps of 10 s from 0, released 5 s after their end.
CLOCK = StepClock(start_micros=0, step_micros=10_000_000, allowed_lateness_micros=5_000_000)


def run_dofns(records, bound, bundle_sizes, mark_new_keys=False, clock=None, watermarks=None):
    """Group per bundle, then bound per (shard, bundle) with one bag per unit shard; before
    bundle b the watermark moves to ``watermarks[b]`` (micros) and due 'released' timers fire.
    Returns the kept and dead records, each unit's stored record, and per record the
    ``released_through`` its shard had when it was bounded."""
    group_fn = _GroupByUnitInBundleFn('T')
    group_fn.setup()
    bound_fn = _BoundContributionsFn(bound, 'T', mark_new_keys, clock)
    bags = collections.defaultdict(_Bag)
    cells = collections.defaultdict(_Cell)
    timers = collections.defaultdict(_Timer)
    ends = collections.defaultdict(_Timer)
    if clock is not None:         # the launch seeds: every shard's clock starts, data or not
        for shard in range(UNIT_SHARDS):
            assert list(bound_fn.process((shard, None), bags[shard], cells[shard],
                                         timers[shard], ends[shard])) == []
    unit_of_payload = {payload: unit for unit, (_, _, payload) in records}   # payloads unique
    released = {}
    kept, dead = [], []
    i = 0
    for b, size in enumerate(bundle_sizes):
        wm = (watermarks or {}).get(b)
        for shard, timer in list(timers.items()):
            while wm is not None and timer.micros is not None and timer.micros <= wm:
                timer.micros = None
                assert bound_fn.advance_released(cells[shard], timer) is None
        group_fn.start_bundle()
        for j, element in enumerate(records[i:i + size]):
            assert list(group_fn.process(element, _Ts(1000 * (i + j)))) == []
            shard = unit_shard(key_bytes(element[0]))
            released[element[1][2]] = (cells[shard].value or (-1,))[0]
        i += size
        for wv in group_fn.finish_bundle():
            assert isinstance(wv, WindowedValue)
            shard, units = wv.value
            for unit_key, unit, _ in units:
                assert unit_key == key_bytes(unit)     # units are told apart by their bytes
                assert unit_shard(unit_key) == shard   # the stateful stage is keyed by shard
            assert wv.timestamp.micros == min(m for _, _, group in units for _, m in group)
            for out in bound_fn.process(wv.value, bags[shard], cells[shard], timers[shard],
                                        ends[shard]):
                if isinstance(out, beam.pvalue.TaggedOutput):
                    d = out.value
                    u, (key, step, payload) = eval(d.record)  # pylint: disable=eval-used
                    dead.append((u, key, step, payload, category(d.reason)))
                else:
                    kept.append((unit_of_payload[out[2]],) + out)
            assert len(bags[shard].items) <= MAX_DELTAS   # compacted: a read stays bounded
    assert i == len(records)
    units = {unit for unit, _ in records}
    state = {unit: _latest(bags[unit_shard(key_bytes(unit))].items, key_bytes(unit))
             for unit in units}
    return kept, dead, state, [released[payload] for _, (_, _, payload) in records]


def check_against_reference(records, bound, sizes, clock=None, watermarks=None):
    kept, dead, state, released = run_dofns(records, bound, sizes, clock=clock,
                                            watermarks=watermarks)
    want_kept, want_dead = reference(records, bound, released)
    # Within a bundle records of one unit keep their order; across units the order may change.
    assert sorted(kept) == sorted(want_kept)
    assert sorted(dead) == sorted(want_dead)
    assert_within_bound(kept, bound)
    for unit, record in state.items():
        assert_compact(record, bound, sum(1 for k in kept if k[0] == unit))
    return kept, dead, state


def assert_within_bound(kept, bound):
    """The bound itself, whatever the reference says: ≤ K keys, ≤ S steps per key, ≤ m per
    (key, step), ≤ C in all, per unit."""
    per_unit = collections.defaultdict(list)
    for unit, key, step, *_ in kept:
        per_unit[unit].append((key, step))
    for pairs in per_unit.values():
        assert len({k for k, _ in pairs}) <= bound.max_keys_per_unit
        for key in {k for k, _ in pairs}:
            assert len({s for k, s in pairs if k == key}) <= bound.max_steps_per_unit
        assert max(collections.Counter(pairs).values()) <= bound.max_contributions_per_step
        if bound.max_total_contributions is not None:
            assert len(pairs) <= bound.max_total_contributions


def assert_compact(record, bound, kept):
    """A stored record is a marker, or the total and ≤ K key entries of ≤ 2 + 2·S fields."""
    if isinstance(record, int):
        assert record in (EXHAUSTED_TOTAL, EXHAUSTED_KEYS)
        return
    if not record:
        assert kept == 0
        return
    assert record[0] == kept
    assert len(record) - 1 <= bound.max_keys_per_unit
    for entry in record[1:]:
        assert len(entry) == 1 or 2 <= len(entry) <= 2 + 2 * bound.max_steps_per_unit


def random_case(rng):
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=rng.randint(1, 3),
                      max_contributions_per_step=rng.randint(1, 3),
                      max_steps_per_unit=rng.randint(1, 3),
                      max_total_contributions=rng.choice([None, 1, 2, 5, 9]))
    records = [(f'u{rng.randint(0, 6)}', (rng.randint(0, 4), rng.randint(0, 5), n))
               for n in range(rng.randint(50, 400))]
    sizes = []
    while sum(sizes) < len(records):
        sizes.append(min(rng.choice([1, 2, 7, 50, 1000]), len(records) - sum(sizes)))
    return bound, records, sizes


@pytest.mark.parametrize('seed', range(20))
def test_grouped_bag_bounding_equals_record_at_a_time_rule(seed):
    bound, records, sizes = random_case(random.Random(seed))
    check_against_reference(records, bound, sizes)


@pytest.mark.parametrize('seed', range(20))
def test_released_steps_are_late_and_folded_and_the_bound_stays_exact(seed):
    rng = random.Random(seed)
    bound, records, sizes = random_case(rng)
    watermarks, wm = {}, 0
    for b in range(len(sizes)):
        wm += rng.choice([0, 0, 5_000_000, 10_000_000, 30_000_000])
        watermarks[b] = wm
    check_against_reference(records, bound, sizes, CLOCK, watermarks)


def test_a_unit_past_its_steps_stays_bounded_across_many_steps_and_is_folded():
    """S = 3, m = 2, K = 2: unit 'u' sends 3 records to each of 2 keys in each of 40 steps, the
    watermark passing each step's release time in between: it keeps 3 steps × 2 records per
    key and its record ends as the EXHAUSTED_KEYS marker. Unit 'v' sends to key 'a' in steps 0
    and 1 and, in step 1, a record for the released step 0 (late); idle until step 30, its
    record keeps step 0 as a count and step 1's count; back in step 30 its released steps are
    folded (2 used) and step 30 kept; in step 31 step 30 is released too, so the key is full
    (S used) and a record for step 30 is late."""
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=2, max_contributions_per_step=2,
                      max_steps_per_unit=3)
    records, sizes, watermarks = [], [], {}
    for step in range(40):
        watermarks[len(sizes)] = CLOCK.release_time_micros(step - 1)
        batch = [('u', (key, step, 10 * step + i)) for i, key in enumerate('ab' * 3)]
        if step < 2:
            batch.append(('v', ('a', step, 10 * step + 6)))
        if step == 1:
            batch.append(('v', ('b', 0, 10 * step + 7)))
        if step == 30:
            idle = (len(records), len(sizes))
            batch.append(('v', ('a', 30, 308)))
        if step == 31:
            batch += [('v', ('a', 31, 318)), ('v', ('a', 30, 319))]
        records += batch
        sizes.append(len(batch))
    kept, dead, state = check_against_reference(records, bound, sizes, CLOCK, watermarks)
    assert sorted((k, s) for u, k, s, _ in kept if u == 'u') == \
        sorted([(k, s) for k in 'ab' for s in range(3)] * 2)
    assert state['u'] == EXHAUSTED_KEYS
    assert ('v', 'b', 0, 17, 'late') in dead
    assert sorted(k[1:3] for k in kept if k[0] == 'v') == [('a', 0), ('a', 1), ('a', 30)]
    assert [d[4] for d in dead if d[0] == 'v' and d[2] >= 30] == ['key_full', 'late']
    assert state['v'] == (3, ('a', 2, 30, 1))      # steps 0 and 1 folded into one count
    _, _, before_return, _ = run_dofns(records[:idle[0]], bound, sizes[:idle[1]], clock=CLOCK,
                                       watermarks=watermarks)
    assert before_return['v'] == (2, ('a', 1, 1, 1))   # idle: step 0 folded, step 1 counted


@pytest.mark.parametrize('seed', range(5))
def test_new_key_flag_marks_each_units_first_kept_record_of_a_key(seed):
    rng = random.Random(seed)
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=2, max_contributions_per_step=2,
                      max_steps_per_unit=2)
    records = [(f'u{rng.randint(0, 4)}', (rng.randint(0, 3), rng.randint(0, 3), n))
               for n in range(300)]
    sizes = [rng.choice([1, 5, 40]) for _ in range(300)]
    sizes = [s for i, s in enumerate(sizes) if sum(sizes[:i]) < 300]
    sizes[-1] -= sum(sizes) - 300
    kept, _, _, _ = run_dofns(records, bound, sizes, mark_new_keys=True)
    want_kept, _ = reference(records, bound)
    seen, want = set(), []
    for unit, key, step, payload in want_kept:     # reference order = arrival order per unit
        want.append((unit, key, step, payload, int((unit, key) not in seen)))
        seen.add((unit, key))
    assert sorted(kept) == sorted(want)


def test_bag_holds_the_units_total_and_one_entry_per_key():
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=2, max_contributions_per_step=5,
                      max_steps_per_unit=2)
    records = [('u', ('a', 0, i)) for i in range(4)] + [('u', ('b', 1, 9))]
    _, _, bags, _ = run_dofns(records, bound, [len(records)])
    assert bags['u'] == (5, ('a', 0, 0, 4), ('b', 0, 1, 1))


def streaming():
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    return options


class _Unencodable:
    def __reduce__(self):
        raise TypeError('no pickling here')

    def __repr__(self):
        return 'Unencodable()'


@pytest.mark.pipeline
def test_units_equal_in_python_are_bounded_separately_and_bad_units_dead_lettered():
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=1, max_contributions_per_step=1,
                      max_steps_per_unit=1)
    # 1 == 1.0 == True in Python, but they are three units (three state keys): each keeps one.
    elements = [(1, ('a', 0, 'x')), (1.0, ('a', 0, 'y')), (True, ('a', 0, 'z')),
                (1, ('a', 0, 'over')), (_Unencodable(), ('a', 0, 'bad'))]
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([TimestampedValue(e, 1) for e in elements])
              .advance_watermark_to(100))
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming()) as p:
        out = p | stream | BoundContributions(bound)
        assert_that(out.kept | beam.Map(lambda e: e[2]), equal_to(['x', 'y', 'z']),
                    label='kept')
        assert_that(out.dead_letter | beam.Map(lambda d: (type(d), d.stage, d.reason)),
                    equal_to([(DeadLetter, 'BoundContributions',   # K = S = m = 1: used up
                               'contribution bound: unit already used all max_keys_per_unit=1 '
                               'keys, each for max_steps_per_unit=1 steps with '
                               'max_contributions_per_step=1 records'),
                              (DeadLetter, 'BoundContributions',
                               "privacy unit id cannot be encoded as a key: "
                               "TypeError('no pickling here')")]),
                    label='dead')


def _past_s_steps_pipeline(pipeline):
    """S = 2, m = 1, K = 1. Unit 'u' sends 2 records in each of 8 steps as the watermark passes
    each step's release time: it keeps steps 0 and 1 only. Unit 'v' sends one record in steps
    4 and 5 and, after step 4 is released, one for step 3: late (at this stage: the 'released'
    timer advanced). Every record is kept, over the bound or late: none is lost."""
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=1, max_contributions_per_step=1,
                      max_steps_per_unit=2)
    stream = TestStream().advance_watermark_to(0)
    for step in range(8):
        t = step * 10 + 1
        elements = [('u', ('a', step, f'{step}.{i}')) for i in range(2)]
        if step == 5:
            elements.append(('v', ('a', 3, 'v-late')))
        if step in (4, 5):
            elements.append(('v', ('a', step, f'v{step}')))
        stream = stream.add_elements([TimestampedValue(e, t) for e in elements])
        stream = stream.advance_watermark_to(CLOCK.release_time_micros(step) / 1e6 + 1)
    with pipeline as p:
        out = p | stream | BoundContributions(bound, clock=CLOCK)
        assert_that(out.kept | beam.Map(lambda e: e[1:]),
                    equal_to([(0, '0.0'), (1, '1.0'), (4, 'v4'), (5, 'v5')]), label='kept')
        assert_that(out.dead_letter | beam.Map(lambda d: category(d.reason)),
                    equal_to(['per_step'] + ['exhausted'] * 13 + ['late']), label='dead')


@pytest.mark.pipeline
def test_pipeline_unit_past_s_steps_across_many_steps_keeps_s_and_late_records_are_late():
    _past_s_steps_pipeline(beam.Pipeline(runner=DIRECT_RUNNER, options=streaming()))


@pytest.mark.integration
@pytest.mark.prism
@runners.requires_prism
def test_on_prism_unit_past_s_steps_keeps_s_and_late_records_are_late():
    """The same on Prism (portable: the 'released' timer and its state cell on a real runner)."""
    runners.on_prism_with_one_rerun(lambda: _past_s_steps_pipeline(beam.Pipeline(
        options=PipelineOptions(runners.prism_options(streaming=True)))))


def test_grouping_flushes_a_large_bundle_before_its_end():
    """A bundle of the whole input (Prism catching up) must not be buffered whole: past
    ``max_buffered`` records the groups are emitted from ``process``; every record comes out
    once, each unit's records in arrival order, each group timestamped at its earliest record."""
    records = [(f'u{i % 7}', ('k', 0, (0, 0, 1), f'r{i}')) for i in range(23)]
    group_fn = _GroupByUnitInBundleFn('T', max_buffered=5)
    group_fn.start_bundle()
    outputs, early = [], 0
    for i, element in enumerate(records):
        out = list(group_fn.process(element, _Ts(1000 * i)))
        early += len(out)
        outputs += out
        assert group_fn._buffered < 5
    outputs += list(group_fn.finish_bundle())
    assert early > 0
    seen = collections.defaultdict(list)
    for wv in outputs:
        shard, units = wv.value
        assert wv.timestamp.micros == min(m for _, _, recs in units for _, m in recs)
        for encoded, unit, recs in units:
            assert unit_shard(encoded) == shard
            seen[unit] += [record[3] for record, _ in recs]
    expected = collections.defaultdict(list)
    for unit, record in records:
        expected[unit].append(record[3])
    assert seen == expected


@pytest.mark.pipeline
def test_pipeline_with_groups_emitted_from_process_keeps_the_same_records(monkeypatch):
    """Every group emitted early (MAX_BUFFERED = 1: from ``process``, not ``finish_bundle``):
    the same records kept, over the bound and late as when a bundle is grouped whole."""
    monkeypatch.setattr(_GroupByUnitInBundleFn, 'MAX_BUFFERED', 1)
    _past_s_steps_pipeline(beam.Pipeline(runner=DIRECT_RUNNER, options=streaming()))


@pytest.mark.integration
@pytest.mark.prism
@runners.requires_prism
def test_on_prism_with_groups_emitted_from_process(monkeypatch):
    monkeypatch.setattr(_GroupByUnitInBundleFn, 'MAX_BUFFERED', 1)
    runners.on_prism_with_one_rerun(lambda: _past_s_steps_pipeline(beam.Pipeline(
        options=PipelineOptions(runners.prism_options(streaming=True)))))


def test_a_privacy_unit_that_is_not_user_level_is_an_invalid_parameter():
    with pytest.raises(InvalidParamsError, match='privacy_unit must be UserLevel'):
        BoundContributions(EventLevel())
