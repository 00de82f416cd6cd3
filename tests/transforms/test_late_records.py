"""Pipeline tier (TestStream, streaming mode, runner named): a late record is dead-lettered as
the record it was, at event and user level, public and private keys (issue 21, item 6).

The event-level entry pre-aggregates a bundle's records per (shard, step); a late partial used
to come out as ONE dead letter per (key, step) holding the aggregate (in grid units for sums).
Now it carries the records it folded, so each late record is its own ``DeadLetter``, with its
rendering and its own event time, and the input is checked record by record: every input record
is either counted in the (noise-free) releases or in exactly one dead letter.
"""

import collections

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel
from beam_dp.transforms import shell
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

NOISE_FREE = PrivacyBudget(epsilon=1e6)   # exact releases: tests the wiring, not the noise
STEP = 60
MICROS = 1_000_000


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def _transform(metric, **kwargs):
    kwargs.setdefault('public_keys', ['a', 'b'])
    common = dict(start=0, step=STEP, end=3 * STEP, budget=NOISE_FREE, **kwargs)
    if metric == 'count':
        return ContinualCountPerKey(**common)
    if metric == 'sum':
        return ContinualSumPerKey(lower=0, upper=10, value_fn=lambda r: r[2], **common)
    return ContinualHistogramPerKey(bins=['x', 'y'], value_fn=lambda r: r[3], **common)


def _late_stream(on_time, late):
    """``on_time`` records before the watermark passes step 0's release (at 60 s), then
    ``late`` ones (all of step 0), then the rest of the stream."""
    return (TestStream()
            .advance_watermark_to(0)
            .add_elements([tv(r, t) for r, t in on_time])
            .advance_watermark_to(70)               # step 0 released
            .add_elements([tv(r, t) for r, t in late])
            .advance_watermark_to(4 * STEP)
            .advance_watermark_to_infinity())


def _late_letters(dead):
    return sorted((d.record, d.event_time_micros) for d in dead
                  if d.reason.startswith('late: step 0'))


@pytest.mark.parametrize('metric', ['count', 'sum', 'histogram'])
def test_two_late_records_of_one_key_and_step_are_two_dead_letters_holding_them(metric):
    """Two late records of key 'a', step 0 (one bundle: one partial) → two dead letters, each
    the record's rendering with its own event time (was: one aggregate {'key', 'step',
    'value'} at the step's end)."""
    on_time = [(('a', 'r0', 1.5, 'x'), 10)]
    late = [(('a', 'r1', 2.25, 'x'), 20), (('a', 'r2', 7.0, 'y'), 30)]

    def check(dead):
        assert _late_letters(dead) == sorted(
            (repr(r), t * MICROS) for r, t in late), list(dead)
        for d in dead:
            assert d.stage == 'ReleaseNoisyValues', d

    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | _late_stream(on_time, late) | _transform(metric)
        assert_that(out.dead_letter, check)


def test_private_keys_two_late_records_are_two_dead_letters_holding_them():
    on_time = [(('a', f'r{i}'), 10) for i in range(3)]
    late = [(('a', 'late1'), 20), (('a', 'late2'), 30), (('new', 'late3'), 40)]

    def check(dead):
        assert _late_letters(dead) == sorted((repr(r), t * MICROS) for r, t in late), list(dead)

    keys = PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2)
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | _late_stream(on_time, late) | ContinualCountPerKey(
            keys=keys, start=0, step=STEP, end=3 * STEP, budget=NOISE_FREE)
        assert_that(out.dead_letter, check)


def test_user_level_late_records_are_dead_lettered_one_by_one_by_the_bound():
    """At user level the chain in 'BoundContributions' decides lateness before the
    pre-aggregation: each late record is its own dead letter there, with its own time."""
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2, max_contributions_per_step=4,
                     max_steps_per_unit=3)
    on_time = [(('a', 'u1'), 10)]
    late = [(('a', 'u1'), 20), (('a', 'u2'), 30)]

    def check(dead):
        assert _late_letters(dead) == sorted((repr(r), t * MICROS) for r, t in late), list(dead)

    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | _late_stream(on_time, late) | _transform('count', privacy_unit=unit)
        assert_that(out.dead_letter, check)


def _step(seconds):
    return int(seconds // STEP)


@pytest.mark.parametrize('level', ['event', 'user'])
def test_input_is_released_contributions_plus_dead_letters_record_by_record(level):
    """Every input record (each distinct) is either counted in the noise-free release of its
    (key, step) or held by exactly one dead letter (late, malformed, over a bound), with its own
    event time: the count of (key, step) records not dead-lettered is exactly the released
    increment of that (key, step)."""
    on_time = [(('a', f'u{i % 3}', i), 5 + i) for i in range(6)] + [(('b', 'u0', 9), 70)]
    late = ([(('a', f'u{i % 2}', 100 + i), 20 + i) for i in range(4)]     # step 0, released
            + [(('b', 'u1', 200), 40), (('zz', 'u1', 201), 50)])          # late; bad key
    more = [(('a', 'u2', 300), 130), (('b', 'u2', 301), 125)]             # step 2, on time
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(r, t) for r, t in on_time])
              .advance_watermark_to(70)
              .add_elements([tv(r, t) for r, t in late])
              .add_elements([tv(r, t) for r, t in more])
              .advance_watermark_to(4 * STEP)
              .advance_watermark_to_infinity())
    inputs = on_time + late + more
    kwargs = {}
    if level == 'user':
        kwargs['privacy_unit'] = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2,
                                           max_contributions_per_step=2, max_steps_per_unit=3)

    def check_dead(dead):
        dead = list(dead)
        held = collections.Counter((d.record, d.event_time_micros) for d in dead)
        rendered = collections.Counter((shell.render_record(r), t * MICROS) for r, t in inputs)
        assert not held - rendered, (held - rendered, dead)      # only input records, once
        assert sum(1 for d in dead if d.reason.startswith('late')) >= 5, dead
        check_dead.held = held

    def check_releases(releases):
        counts = {(r.key, r.step): r.value for r in releases}
        held = check_dead.held
        kept = collections.Counter()
        for record, t in inputs:
            if held[(shell.render_record(record), t * MICROS)]:
                held[(shell.render_record(record), t * MICROS)] -= 1
            else:
                kept[(record[0], _step(t))] += 1
        assert sum(held.values()) == 0
        for key in ('a', 'b'):
            total = 0
            for step in range(3):
                total += kept[(key, step)]
                assert counts[(key, step)] == pytest.approx(total, abs=1e-3), (key, step, counts)

    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream | _transform('count', **kwargs)
        # The dead letters are checked (and remembered) first: one matcher sees both outputs.
        both = ((out.dead_letter | 'TagDead' >> beam.Map(lambda d: ('dead', d)),
                 out.releases | 'TagRelease' >> beam.Map(lambda r: ('release', r)))
                | beam.Flatten())

        def check(items):
            items = list(items)
            check_dead([x for tag, x in items if tag == 'dead'])
            check_releases([x for tag, x in items if tag == 'release'])
        assert_that(both, check)


def _sparse():
    from beam_dp.transforms.sparse_continual import SparseContinualCountPerKey
    return SparseContinualCountPerKey(start=0, step=1, end=39, budget=NOISE_FREE,
                                      public_keys=['a'])


def _dynamic():
    from beam_dp.transforms.dynamic import DynamicCountPerKey
    return DynamicCountPerKey(start=0, step=1, end=39, budget=NOISE_FREE, public_keys=['a'],
                              construction='fenwick')


@pytest.mark.parametrize('family', ['sparse', 'dynamic'])
def test_segment_gate_dead_letters_each_late_record_as_it_was_at_its_own_time(family):
    """Sparse and dynamic: 'GateLateRecords' dead-letters a late record holding the input
    record and its event time (was: {'key', 'step', 'payload'} at the step's end); what it
    passes is unchanged (the releases count the on-time record)."""
    make, records = {'sparse': (_sparse, [('a', 1), ('a', 2), ('a', 3)]),
                     'dynamic': (_dynamic, [('a', 'r1', 1), ('a', 'r2', 1), ('a', 'r3', 1)])
                     }[family]
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(records[0], 2.5)])
              .advance_watermark_to(8.5)                         # steps 0..7 released
              .add_elements([tv(records[1], 5.25), tv(records[2], 5.75)])
              .advance_watermark_to(40).advance_watermark_to_infinity())

    def check(dead):
        assert sorted((d.stage, d.record, d.event_time_micros) for d in dead) == [
            ('ReleaseSegments', repr(records[1]), 5_250_000),
            ('ReleaseSegments', repr(records[2]), 5_750_000)], list(dead)

    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream | make()
        assert_that(out.dead_letter, check, label='dead')
        assert_that(out.releases | beam.Map(lambda r: r.value),
                    lambda values: max(values) == pytest.approx(1.0), label='counted')


@pytest.mark.parametrize('with_other', [False, True])
def test_growing_database_gate_dead_letters_the_late_record_as_it_was(with_other):
    """BB / PMWG on the step clock: 'GateLateRecords' dead-letters a late record holding the
    input record (not its domain index), at its own time."""
    from beam_dp.transforms.bb_scheduler import BBSchedulerQueries
    from tests.transforms.test_bb_transforms import scheduler_args
    from tests.transforms.test_pmwg_transform import make_stream

    first = [('data', (2, 'other'), 150.0)] if with_other else []
    batches = [(120, first), (250, []), (260, [('data', (3, 'late'), 160.0)])]
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        streams = p | make_stream(batches)
        out = (streams['data'], streams['queries']) | 'T' >> BBSchedulerQueries(
            **scheduler_args(domain_fn=lambda r: r[0], start=100, step=100, end=1000))
        assert_that(out.dead_letter | beam.Map(lambda d: (d.record, d.event_time_micros)),
                    lambda got: sorted(got) == [("(3, 'late')", 160_000_000)] or
                    pytest.fail(repr(got)))


# -- unit tier: the records a partial carries are exactly the records it sums ------------------


def _drive(fn, merge, records):
    """One bundle through an aggregating entry + its 'PreAggregate': the partials as
    ``{(shard, step): (total units, sorted carried (rendering, µs))}``."""
    fn.setup()
    fn.start_bundle()
    merge.start_bundle()
    for record, micros in records:
        for out in fn.process(record, Timestamp(micros=micros)) or ():
            assert getattr(out, 'tag', None) == shell.DEAD_LETTER, out
    for wv in fn.finish_bundle():
        merge.process(wv.value[1])
    got = collections.defaultdict(lambda: [0, []])
    for wv in merge.finish_bundle():
        shard, payload = wv.value
        if isinstance(payload[1], dict):            # private keys: {key: (units, units)}
            units = sum(sum(v[0]) for v in payload[1].values())
            carried = payload[2]
        else:
            units = int(np.asarray(payload[2]).sum())
            carried = payload[3]
        got[(shard, payload[0])][0] += units
        got[(shard, payload[0])][1] += list(shell.unpack_records(carried))
    return {k: (n, sorted(c)) for k, (n, c) in got.items()}


@pytest.mark.parametrize('private', [False, True])
@pytest.mark.parametrize('flush', [7, 1 << 16])
def test_each_partial_carries_exactly_the_records_it_counts(monkeypatch, private, flush):
    """Counts (fast path: codes; a ``numpy.str_`` key and a record past the coded range take
    the validator), several packs per bundle: the records a (shard, step) partial carries are
    exactly its input records, one per counted unit, each with its own event time."""
    from beam_dp.transforms import continual_extract as ce
    from beam_dp.transforms import continual_private_keys as cpk
    monkeypatch.setattr(ce, '_FLUSH_CODES', flush)
    keys = ['a', 'b', 'c', 'd', 'e']
    if private:
        t = ContinualCountPerKey(keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6),
                                                  num_shards=3),
                                 start=0, step=STEP, end=8 * STEP, budget=NOISE_FREE)
    else:
        t = ContinualCountPerKey(public_keys=keys, start=0, step=STEP, end=8 * STEP,
                                 budget=NOISE_FREE, num_shards=2)
    driver = t.driver
    rng = np.random.default_rng(3)
    records = []
    for i in range(200):
        key = keys[rng.integers(0, len(keys))]
        if i % 17 == 0:
            key = np.str_(key)                       # not exactly a str: the validator
        records.append(((key, f'id{i}'), int(rng.integers(0, 8 * STEP * MICROS))))
    fn_class = ce._ExtractAndAggregatePrivateFn if private else ce._ExtractAndAggregateFn
    merge = cpk._MergePrivatePartialsFn(driver) if private else ce._MergePartialsFn(driver)
    got = _drive(fn_class(driver, 'L', t._key_fn, None, None, keep_records=True), merge,
                 records)
    want = collections.defaultdict(list)
    for record, micros in records:
        shard = (driver.extract(record[0], micros, record, None)[2])
        want[(shard, micros // (STEP * MICROS))].append((repr(record), micros))
    assert {k: (len(v), sorted(v)) for k, v in want.items()} == got
    # Without keep_records (a batch pipeline over a bounded input) nothing is carried.
    fn = fn_class(driver, 'L', t._key_fn, None, None)
    fn.setup()
    fn.start_bundle()
    for record, micros in records:
        fn.process(record, Timestamp(micros=micros))
    for wv in fn.finish_bundle():
        assert len(wv.value[1][1]) == (2 if private else 3), wv.value
