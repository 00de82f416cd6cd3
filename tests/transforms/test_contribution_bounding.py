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

from beam_dp import UserLevel
from beam_dp.io.records import DeadLetter
from beam_dp.transforms.contribution_bounding import BoundContributions
from beam_dp.transforms.contribution_bounding import MAX_DELTAS
from beam_dp.transforms.contribution_bounding import _BoundContributionsFn
from beam_dp.transforms.contribution_bounding import _GroupByUnitInBundleFn
from beam_dp.transforms.contribution_bounding import _latest
from beam_dp.transforms.contribution_bounding import unit_shard
from beam_dp.transforms.shell import key_bytes


def _first(record):
    return record[0]


class _Bag:
    def __init__(self):
        self.items = []

    def read(self):
        return list(self.items)

    def add(self, value):
        self.items.append(value)

    def clear(self):
        self.items = []


class _Ts:
    def __init__(self, micros):
        self.micros = micros


def reference(records, bound):
    """Record at a time: keep iff the unit's key, step, per-step count and total (with
    max_total_contributions) are all within bound."""
    kept, dead = [], []
    state = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    totals = collections.Counter()
    for unit, (key, step, payload) in records:
        keys = state[unit]
        if key not in keys and len(keys) >= bound.max_keys_per_unit:
            dead.append((unit, key, step, payload, 'keys'))
        elif key in keys and step not in keys[key] and len(keys[key]) >= bound.max_steps_per_unit:
            dead.append((unit, key, step, payload, 'steps'))
        elif keys.get(key, collections.Counter())[step] >= bound.max_contributions_per_step:
            dead.append((unit, key, step, payload, 'per_step'))
        elif bound.max_total_contributions is not None and \
                totals[unit] >= bound.max_total_contributions:
            dead.append((unit, key, step, payload, 'total'))
        else:
            totals[unit] += 1
            keys[key][step] += 1
            kept.append((unit, key, step, payload))
    return kept, dead


def run_dofns(records, bound, bundle_sizes, mark_new_keys=False):
    """Group per bundle, then bound per (shard, bundle) with one bag per unit shard. Returns
    the kept and dead records and each unit's record in the state (unit → (key, step, n)s)."""
    group_fn = _GroupByUnitInBundleFn('T')
    group_fn.setup()
    bound_fn = _BoundContributionsFn(bound, 'T', mark_new_keys)
    bags = collections.defaultdict(_Bag)
    unit_of_payload = {payload: unit for unit, (_, _, payload) in records}   # payloads unique
    kept, dead = [], []
    i = 0
    for size in bundle_sizes:
        group_fn.start_bundle()
        for j, element in enumerate(records[i:i + size]):
            assert list(group_fn.process(element, _Ts(1000 * (i + j)))) == []
        i += size
        for wv in group_fn.finish_bundle():
            assert isinstance(wv, WindowedValue)
            shard, units = wv.value
            for unit_key, unit, _ in units:
                assert unit_key == key_bytes(unit)     # units are told apart by their bytes
                assert unit_shard(unit_key) == shard   # the stateful stage is keyed by shard
            assert wv.timestamp.micros == min(m for _, _, group in units for _, m in group)
            for out in bound_fn.process(wv.value, bags[shard]):
                if isinstance(out, beam.pvalue.TaggedOutput):
                    d = out.value
                    u, (key, step, payload) = eval(d.record)  # pylint: disable=eval-used
                    reason = ('keys' if 'max_keys_per_unit' in d.reason else
                              'steps' if 'max_steps_per_unit' in d.reason else
                              'total' if 'max_total_contributions' in d.reason else 'per_step')
                    dead.append((u, key, step, payload, reason))
                else:
                    kept.append((unit_of_payload[out[2]],) + out)
            assert len(bags[shard].items) <= MAX_DELTAS   # compacted: a read stays bounded
    assert i == len(records)
    units = {unit for unit, _ in records}
    state = {unit: _latest(bags[unit_shard(key_bytes(unit))].items, key_bytes(unit))
             for unit in units}
    return kept, dead, state

@pytest.mark.parametrize('seed', range(20))
def test_grouped_bag_bounding_equals_record_at_a_time_rule(seed):
    rng = random.Random(seed)
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=rng.randint(1, 3),
                      max_contributions_per_step=rng.randint(1, 3),
                      max_steps_per_unit=rng.randint(1, 3),
                      max_total_contributions=rng.choice([None, 1, 2, 5, 9]))
    records = [(f'u{rng.randint(0, 6)}', (rng.randint(0, 4), rng.randint(0, 5), n))
               for n in range(rng.randint(50, 400))]
    sizes = []
    while sum(sizes) < len(records):
        sizes.append(min(rng.choice([1, 2, 7, 50, 1000]), len(records) - sum(sizes)))
    kept, dead, bags = run_dofns(records, bound, sizes)
    want_kept, want_dead = reference(records, bound)
    # Within a bundle records of one unit keep their order; across units the order may change.
    assert sorted(kept) == sorted(want_kept)
    assert sorted(dead) == sorted(want_dead)
    # A unit's record never exceeds K·S entries, and it sums to the unit's kept records.
    cap = bound.max_keys_per_unit * bound.max_steps_per_unit
    for unit, entries in bags.items():
        assert len(entries) <= cap
        assert sum(n for _, _, n in entries) == sum(1 for k in kept if k[0] == unit)


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
    kept, _, _ = run_dofns(records, bound, sizes, mark_new_keys=True)
    want_kept, _ = reference(records, bound)
    seen, want = set(), []
    for unit, key, step, payload in want_kept:     # reference order = arrival order per unit
        want.append((unit, key, step, payload, int((unit, key) not in seen)))
        seen.add((unit, key))
    assert sorted(kept) == sorted(want)


def test_bag_holds_one_entry_per_key_and_step_per_bundle():
    bound = UserLevel(unit_fn=_first, max_keys_per_unit=2, max_contributions_per_step=5,
                      max_steps_per_unit=2)
    records = [('u', ('a', 0, i)) for i in range(4)] + [('u', ('b', 1, 9))]
    _, _, bags = run_dofns(records, bound, [len(records)])
    assert sorted(bags['u']) == [('a', 0, 4), ('b', 1, 1)]


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
    with beam.Pipeline(runner='DirectRunner', options=streaming()) as p:
        out = p | stream | BoundContributions(bound)
        assert_that(out.kept | beam.Map(lambda e: e[2]), equal_to(['x', 'y', 'z']),
                    label='kept')
        assert_that(out.dead_letter | beam.Map(lambda d: (type(d), d.stage, d.reason)),
                    equal_to([(DeadLetter, 'BoundContributions',
                               'contribution bound: max_contributions_per_step=1 reached for '
                               'this key and step'),
                              (DeadLetter, 'BoundContributions',
                               "privacy unit id cannot be encoded as a key: "
                               "TypeError('no pickling here')")]),
                    label='dead')
