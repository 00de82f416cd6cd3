"""The aggregating entry of event-level public-key releases ('ExtractAndValidate' summing its
bundle + 'DropUnit' + 'PreAggregate' merging partials) against the per-record entry it replaces
(``_ExtractFn`` + ``_PreAggregateFn``): the same dead letters, record by record, and the same
exact sums per (shard, step, flat position) and bundle, on random streams of good and bad
records in random bundles, for counts, sums and histograms."""

import collections
import operator

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import FixedWindows
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import PrivacyBudget
from beam_dp.transforms.continual_extract import _ExtractAndAggregateFn
from beam_dp.transforms.continual_extract import _ExtractFn
from beam_dp.transforms.continual_extract import _MergePartialsFn
from beam_dp.transforms.continual_extract import _PreAggregateFn
from beam_dp.transforms.shell import DEAD_LETTER

START, STEP, STEPS = 1_000, 60, 8
KEYS = ['a', 'b', 'c', 'd', 'e', 'f', 'g']
BINS = ('x', 'y', 'z')


def _raising_key(record):
    if record[0] == 'boom':
        raise RuntimeError('no key')
    return record[0]


def transform(metric):
    common = dict(public_keys=KEYS, start=START, step=STEP, end=START + STEPS * STEP,
                  budget=PrivacyBudget(epsilon=1.0), key_fn=_raising_key, num_shards=3)
    if metric == 'count':
        return ContinualCountPerKey(**common)
    if metric == 'sum':
        return ContinualSumPerKey(lower=-2, upper=3, **common)
    return ContinualHistogramPerKey(bins=BINS, **common)


def stream(seed, n=3000):
    """(record, micros): mostly good, with every kind of bad record mixed in."""
    rng = np.random.default_rng(seed)
    keys = KEYS + ['zz', np.str_('a'), 1, None, 'boom', 'bad\ud800']
    values = [0.5, -7, 2, 'x', 'y', 'q', None, float('nan'), 1e300]
    out = []
    for _ in range(n):
        key = keys[rng.integers(0, len(KEYS) + 2)] if rng.random() < 0.9 else \
            keys[rng.integers(0, len(keys))]
        micros = (START + int(rng.integers(-STEP, (STEPS + 1) * STEP))) * 1_000_000
        if rng.random() < 0.01:
            micros = Timestamp.of(-2**62).micros
        out.append(((key, values[rng.integers(0, len(values))]), micros))
    return out


def run(fn, records, stage_fn):
    """Dead letters (in order) and per bundle {(shard, step, slot): total}."""
    fn.setup()
    dead, sums = [], []
    stage_fn.start_bundle()
    fn.start_bundle()
    for record, micros in records:
        for out in fn.process(record, Timestamp(micros=micros)) or ():
            if getattr(out, 'tag', None) == DEAD_LETTER:
                dead.append(out.value)
            else:
                stage_fn.process(out[1])         # 'DropUnit'
    for wv in fn.finish_bundle() or ():
        assert list(wv.windows) == [GlobalWindow()]
        stage_fn.process(wv.value[1])            # 'DropUnit'
    per_bundle = collections.Counter()
    seen = set()
    for wv in stage_fn.finish_bundle():
        shard, (step, positions, values) = wv.value
        assert (shard, step) not in seen            # one partial per (shard, step)
        seen.add((shard, step))
        assert wv.timestamp.micros == (START + (step + 1) * STEP) * 1_000_000 - 1
        assert len(set(positions.tolist())) == len(positions)
        for slot, value in zip(positions.tolist(), values.tolist()):
            per_bundle[(shard, step, slot)] += value
    sums.append(per_bundle)
    return dead, sums


@pytest.mark.parametrize('metric', ['count', 'sum', 'histogram'])
@pytest.mark.parametrize('seed', [1, 2, 3])
def test_aggregating_entry_equals_the_per_record_entry(metric, seed):
    t = transform(metric)
    args = (t.driver, 'L', t._key_fn, t._value_fn, None)   # pylint: disable=protected-access
    records = stream(seed)
    dead, sums, old_dead, old_sums = [], [], [], []
    for lo in range(0, len(records), 700):   # bundles
        bundle = records[lo:lo + 700]
        d, s = run(_ExtractAndAggregateFn(*args), bundle, _MergePartialsFn(t.driver))
        dead += d
        sums += s
        d, s = run(_ExtractFn(*args), bundle, _PreAggregateFn(t.driver))
        old_dead += d
        old_sums += s
    assert dead == old_dead and sums == old_sums
    assert len(dead) > 100 and sum(sum(s.values()) != 0 for s in sums) > 0
    reasons = {d.reason.split(':')[0].split(' ')[0] for d in dead}
    assert {'key', 'key_fn', 'event', 'record'} <= reasons


def test_merge_adds_partials_of_the_same_shard_and_step_exactly():
    t = transform('sum')
    merge = _MergePartialsFn(t.driver)
    merge.start_bundle()
    big = 2**62
    merge.process((1, (2, np.array([0, 3]), np.array([big, 5]))))
    merge.process((1, (2, np.array([3, 0]), np.array([-1, big]))))
    merge.process((0, (2, np.array([4]), np.array([7]))))
    out = {wv.value[0]: wv.value[1] for wv in merge.finish_bundle()}
    step, positions, values = out[1]
    assert step == 2 and dict(zip(positions.tolist(), map(int, values.tolist()))) == {
        0: 2 * big, 3: 4}
    assert list(map(operator.methodcaller('tolist'), out[0][1:])) == [[4], [7]]


class _Labels(beam.pipeline.PipelineVisitor):

    def __init__(self):
        self.labels = []

    def visit_transform(self, applied):
        self.labels.append(applied.full_label)

    def enter_composite_transform(self, applied):
        self.labels.append(applied.full_label)


@pytest.mark.pipeline
@pytest.mark.parametrize('windowed', [False, True])
def test_input_in_other_windows_is_re_windowed_first_and_counted_the_same(windowed):
    noise_free = PrivacyBudget(epsilon=1e7)
    records = [(('a', 0), START + 5), (('b', 0), START + 61), (('a', 0), START + 62),
               (('zz', 0), START + 1)]
    with beam.Pipeline(runner='FnApiRunner') as p:
        rows = (p | beam.Create(records)
                | 'Stamp' >> beam.Map(lambda r: TimestampedValue(r[0], r[1])))
        if windowed:
            rows = rows | 'Fixed' >> beam.WindowInto(FixedWindows(STEP))
        out = rows | 'Counts' >> ContinualCountPerKey(
            public_keys=['a', 'b'], start=START, step=STEP, end=START + 2 * STEP,
            budget=noise_free)
        assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, round(r.value))),
                    equal_to([('a', 0, 1), ('b', 0, 0), ('a', 1, 2), ('b', 1, 1)]),
                    label='Releases')
        assert_that(out.dead_letter | beam.Map(lambda d: d.stage),
                    equal_to(['ExtractAndValidate']), label='Dead')
    labels = _Labels()
    p.visit(labels)
    assert ('Counts/GlobalWindow' in labels.labels) == windowed


def _unit_of(record):
    value = record[1]
    if value == 'q':
        raise RuntimeError('no unit')
    return None if value is None else ['u1', 'u2', 7, 7.0, b'u', ('u', 3)][len(str(value)) % 6]


@pytest.mark.parametrize('metric', ['count', 'sum', 'histogram'])
@pytest.mark.parametrize('seed', [1, 2])
def test_user_level_entry_equals_extract_then_group(metric, seed):
    """'ExtractAndValidate' grouping per unit shard at user level (``_ExtractAndGroupFn``, with
    the count fast path) = ``_ExtractFn`` then 'KeyByUnit' + 'GroupByUnitInBundle': the same
    dead letters in order and the same groups (unit key, unit, records with their times)."""
    from beam_dp import UserLevel
    from beam_dp.transforms.continual_extract import _ExtractAndGroupFn
    from beam_dp.transforms.contribution_bounding import _GroupByUnitInBundleFn
    common = dict(public_keys=KEYS, start=START, step=STEP, end=START + STEPS * STEP,
                  budget=PrivacyBudget(epsilon=1.0), key_fn=_raising_key, num_shards=3,
                  privacy_unit=UserLevel(_unit_of, max_keys_per_unit=2,
                                         max_contributions_per_step=2, max_steps_per_unit=3))
    t = (ContinualCountPerKey(**common) if metric == 'count' else
         ContinualSumPerKey(lower=-2, upper=3, **common) if metric == 'sum' else
         ContinualHistogramPerKey(bins=BINS, **common))
    args = (t.driver, 'L', t._key_fn, t._value_fn, t._unit_fn)  # pylint: disable=protected-access
    records = stream(seed, 2000)
    for max_buffered in (None, 50):
        new, old, group = _ExtractAndGroupFn(*args), _ExtractFn(*args), \
            _GroupByUnitInBundleFn('L', max_buffered)
        new.setup()
        old.setup()
        if max_buffered:
            new._group._max_buffered = max_buffered   # pylint: disable=protected-access
        outs = {'new': [], 'old': []}
        for lo in range(0, len(records), 700):   # bundles
            new.start_bundle()
            group.start_bundle()
            for record, micros in records[lo:lo + 700]:
                ts = Timestamp(micros=micros)
                outs['new'] += list(new.process(record, ts))
                for out in old.process(record, ts):
                    if getattr(out, 'tag', None) == DEAD_LETTER:
                        outs['old'].append(out)
                    else:
                        outs['old'] += list(group.process((out[0], out[1]), ts))
            outs['new'] += list(new.finish_bundle())
            outs['old'] += list(group.finish_bundle())

        def norm(out):
            if getattr(out, 'tag', None) == DEAD_LETTER:
                return ('dead', out.value)
            return ('group', out.value, out.timestamp, tuple(out.windows))
        assert [norm(o) for o in outs['new']] == [norm(o) for o in outs['old']]
        kinds = collections.Counter(norm(o)[0] for o in outs['new'])
        assert kinds['dead'] > 50 and kinds['group'] >= 3
