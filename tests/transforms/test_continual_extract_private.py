"""The aggregating entry of event-level PRIVATE-key releases ('ExtractAndValidate' summing its
bundle per (shard, step, key) + 'DropUnit' + 'PreAggregate' merging partials) against the
per-record entry it replaces (``_ExtractFn`` + the old 'DropUnit' + the private
``_PreAggregateFn``): the same dead letters, record by record, and the same exact payloads
``{key: (per-bin units, new units)}`` per (shard, step) and bundle, on random streams of good
and bad records in random bundles, for counts (with the learnt-key fast path, its packing,
compaction and key cap), sums and histograms."""

import pytest
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp.drivers import key_layout
from beam_dp.transforms import continual_extract
from beam_dp.transforms.continual_extract import _ExtractAndAggregatePrivateFn
from beam_dp.transforms.continual_extract import _ExtractFn
from beam_dp.transforms.continual_private_keys import _MergePrivatePartialsFn
from beam_dp.transforms.continual_private_keys import _PreAggregateFn
from beam_dp.transforms.shell import DEAD_LETTER
from tests.transforms.test_continual_extract import BINS
from tests.transforms.test_continual_extract import START
from tests.transforms.test_continual_extract import STEP
from tests.transforms.test_continual_extract import STEPS
from tests.transforms.test_continual_extract import _raising_key
from tests.transforms.test_continual_extract import stream


def transform(metric):
    common = dict(keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=3),
                  start=START, step=STEP, end=START + STEPS * STEP,
                  budget=PrivacyBudget(epsilon=1.0), key_fn=_raising_key)
    if metric == 'count':
        return ContinualCountPerKey(**common)
    if metric == 'sum':
        return ContinualSumPerKey(lower=-2, upper=3, **common)
    return ContinualHistogramPerKey(bins=BINS, **common)


def _old_drop_unit(element):
    return element[1][0], element[1][1], element[1][2][:4] + (1,)


def run(fn, records, stage_fn, aggregating):
    """Dead letters (in order) and {(shard, step): payload} of one bundle."""
    dead = []
    stage_fn.start_bundle()
    fn.start_bundle()
    for record, micros in records:
        for out in fn.process(record, Timestamp(micros=micros)) or ():
            if getattr(out, 'tag', None) == DEAD_LETTER:
                dead.append(out.value)
            else:
                assert not aggregating
                stage_fn.process(_old_drop_unit(out))
    for wv in fn.finish_bundle() or ():
        assert aggregating and wv.value[0] is None
        assert list(wv.windows) == [GlobalWindow()]
        stage_fn.process(wv.value[1])                      # 'DropUnit'
    payloads = {}
    for wv in stage_fn.finish_bundle():
        shard, (step, payload) = wv.value
        assert (shard, step) not in payloads             # one partial per (shard, step)
        assert wv.timestamp.micros == (START + (step + 1) * STEP) * 1_000_000 - 1
        assert all(type(k) is str and len(v[0]) == len(payload[k][0])  # pylint: disable=unidiomatic-typecheck
                   for k, v in payload.items())
        payloads[(shard, step)] = payload
    return dead, payloads


@pytest.mark.parametrize('metric', ['count', 'sum', 'histogram'])
@pytest.mark.parametrize('seed', [1, 2, 3])
@pytest.mark.parametrize('small', [False, True])
def test_aggregating_private_entry_equals_the_per_record_entry(metric, seed, small,
                                                               monkeypatch):
    if small:   # pack every 5 codes, compact beyond 12, forget learnt keys beyond 4
        monkeypatch.setattr(continual_extract, '_FLUSH_CODES', 5)
        monkeypatch.setattr(continual_extract, '_COMPACT_CODES', 12)
        monkeypatch.setattr(key_layout, '_MAX_KEYS', 4)
    t = transform(metric)
    args = (t.driver, 'L', t._key_fn, t._value_fn, None)   # pylint: disable=protected-access
    new, old = _ExtractAndAggregatePrivateFn(*args), _ExtractFn(*args)
    new.setup()
    old.setup()
    validated = []
    full_validator = new._validate                          # pylint: disable=protected-access
    new._validate = lambda *a: validated.append(1) or full_validator(*a)
    records = stream(seed)
    dead, sums, old_dead, old_sums = [], [], [], []
    for lo in range(0, len(records), 700):   # bundles
        bundle = records[lo:lo + 700]
        d, s = run(new, bundle, _MergePrivatePartialsFn(t.driver), True)
        dead += d
        sums.append(s)
        d, s = run(old, bundle, _PreAggregateFn(t.driver), False)
        old_dead += d
        old_sums.append(s)
    assert dead == old_dead and sums == old_sums
    assert len(dead) > 100 and sum(len(s) for s in sums) > 10
    reasons = {d.reason.split(':')[0].split(' ')[0] for d in dead}
    assert {'key_fn', 'event', 'record'} <= reasons
    fast = len(records) - len(validated) - sum(d.reason.startswith('key_fn') for d in dead)
    assert (fast > 300) if metric == 'count' else fast == 0


def test_merge_adds_private_partials_of_the_same_shard_and_step_exactly():
    t = transform('histogram')
    merge = _MergePrivatePartialsFn(t.driver)
    merge.start_bundle()
    big = 2**70
    merge.process((1, (2, {'a': ((big, 1, 0), 3), 'b': ((0, 0, 1), 1)})))
    merge.process((1, (2, {'a': ((big, 0, 0), 1)})))
    merge.process((0, (2, {'c': ((1, 0, 0), 1)})))
    out = {wv.value[0]: wv.value[1] for wv in merge.finish_bundle()}
    assert out == {1: (2, {'a': ((2 * big, 1, 0), 4), 'b': ((0, 0, 1), 1)}),
                   0: (2, {'c': ((1, 0, 0), 1)})}
