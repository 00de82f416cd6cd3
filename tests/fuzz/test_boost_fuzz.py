"""Fuzzing BoostQueries' input path: 'ExtractRows' and 'ExtractQueries' taken from the built
graph (pickled and set up as a worker gets them) and called directly, 10^4 hypothesis cases
each; then a few hundred rows through the whole pipeline.

Required of every input: no exception escapes; exactly ONE outcome (one kept element, one dead
letter with a reason, or, for a query of an unknown dataset, one 'wrong_dataset' refusal); a
kept row is safe for the stateful stage (a public dataset, a block of the clock, attributes in
the domain); a well-formed input is never dead-lettered. Through the pipeline: the dead letters
are exactly the rows the pure extraction refuses (input = kept + dead-lettered), and the answers
equal the pure driver's on the kept rows.
"""

import functools

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.internal import pickler
from apache_beam.testing.util import assert_that
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import PrivacyBudget
from beam_dp import noise
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.boost import BoostRefusal
from beam_dp.io.boost import boost_to_avro
from beam_dp.mechanisms.boost import Readiness
from beam_dp.transforms.boost import QUERY
from beam_dp.transforms.boost import ROW
from beam_dp.transforms.boost import BoostQueries
from beam_dp.drivers.boost_events import refuse_waiting
from beam_dp.drivers.boost_events import run_events
from tests.fuzz import strategies as fz
from tests.fuzz.harness import _Finder
from tests.fuzz.test_erm_fuzz import _PIPELINE_MICROS
from tests.fuzz.test_erm_fuzz import _encodable
from tests.fuzz.test_erm_fuzz import _equal
from tests.runners import BATCH_RUNNER

pytestmark = pytest.mark.fuzz

DATASETS = ('covid', 'flu')
SHAPE = (2, 3)
LAST_BLOCK, SEED = 9, 3


def transform():
    return BoostQueries(public_datasets=list(DATASETS), shape=list(SHAPE), start=0, step=1,
                        end=fz.END / 1e6, budget=PrivacyBudget(epsilon=50.0), alpha=0.2,
                        readiness=Readiness(c0=2, s0=1), testing_seed=SEED, label='Boost')


@functools.lru_cache(maxsize=None)
def entry_fn(stage):
    pipeline = beam.Pipeline(runner='BundleBasedDirectRunner')
    data = pipeline | 'D' >> beam.Create([('covid', (0, 0))])
    queries = pipeline | 'Q' >> beam.Create([])
    _ = (data, queries) | 'Boost' >> transform()
    finder = _Finder(stage)
    pipeline.visit(finder)
    (fn,) = finder.found
    fn = pickler.loads(pickler.dumps(fn))
    fn.setup()
    return fn


_attr = st.one_of(st.integers(0, 2), st.integers(-3, 5), fz.values())
_attributes = st.one_of(st.tuples(st.integers(0, 1), st.integers(0, 2)),
                        st.tuples(st.integers(0, 1), st.integers(0, 2)),
                        st.lists(_attr, max_size=3), st.tuples(_attr, _attr), fz.values())
_datasets = st.one_of(st.sampled_from(DATASETS), st.sampled_from(DATASETS),
                      fz.bad_or_good_keys())
ROWS = st.one_of(st.tuples(_datasets, _attributes), st.tuples(_datasets), fz.records())


def well_formed_row(row, micros) -> bool:
    if not (isinstance(row, tuple) and len(row) == 2 and fz.START <= micros < fz.END):
        return False
    dataset, attrs = row
    return (type(dataset) is str and dataset in DATASETS and isinstance(attrs, tuple)
            and len(attrs) == 2 and all(type(x) is int for x in attrs)
            and 0 <= attrs[0] < 2 and 0 <= attrs[1] < 3)


@fz.FUZZ
@given(row=ROWS, micros=fz.event_micros())
def test_row_extraction_one_outcome_safe_elements(row, micros):
    valid, dead, other = fz.extract(entry_fn('ExtractRows'), row, micros)
    assert not other and len(valid) + len(dead) == 1, (valid, dead, other)
    for d in dead:
        assert d.stage == 'ExtractRows' and d.reason and d.transform == 'Boost'
    if well_formed_row(row, micros):
        assert valid, dead
    for dataset, (kind, t, attrs) in valid:
        assert type(dataset) is str and dataset in DATASETS and kind == ROW and t == micros
        assert 0 <= t // 10 ** 6 <= LAST_BLOCK
        assert type(attrs) is tuple and [type(x) for x in attrs] == [int, int]
        assert 0 <= attrs[0] < 2 and 0 <= attrs[1] < 3


_ints = st.one_of(st.integers(-2, 12), fz.values())
_good_query = st.builds(BoostQueryRecord, st.sampled_from(['q1', 'q2', 'q3']),
                        st.sampled_from(DATASETS + ('other',)),
                        st.lists(st.lists(st.integers(-1, 3), max_size=3), max_size=3),
                        st.one_of(st.just([]), st.lists(st.floats(), max_size=7)),
                        st.integers(-2, 12), st.integers(-2, 12), st.integers(-1, 3))
_odd_query = st.builds(BoostQueryRecord, fz.values(), _datasets, fz.values(), fz.values(),
                       _ints, _ints, _ints)
QUERIES = st.one_of(_good_query, _good_query, _odd_query, _good_query.map(boost_to_avro),
                    st.dictionaries(st.sampled_from(BoostQueryRecord._fields), fz.values()),
                    fz.records())


@fz.FUZZ
@given(query=QUERIES, micros=fz.event_micros())
def test_query_extraction_one_outcome(query, micros):
    valid, dead, other = fz.extract(entry_fn('ExtractQueries'), query, micros)
    assert len(valid) + len(dead) + len(other) == 1, (valid, dead, other)
    for d in dead:
        assert d.stage == 'ExtractQueries' and d.reason
    for o in other:
        assert o.tag == 'refusals' and isinstance(o.value, BoostRefusal)
        assert o.value.reason == 'wrong_dataset'
    for dataset, (kind, t, q) in valid:
        assert dataset in DATASETS and kind == QUERY and t == micros
        assert isinstance(q, BoostQueryRecord) and q.query_id
    if isinstance(query, BoostQueryRecord) and query.dataset in DATASETS and isinstance(
            query.subsets, list) and all(isinstance(s, list) for s in query.subsets):
        assert valid or dead[0].reason.startswith('query field'), dead


_FIXED_QUERIES = [(3_500_000, BoostQueryRecord('a', 'covid', [[1], []], [], 0, 2, 0)),
                  (9_500_000, BoostQueryRecord('b', 'flu', [[], [0, 2]], [], 0, 8, 0)),
                  (9_700_000, BoostQueryRecord('c', 'covid', [[0], [1]], [], 0, 0, 4))]


@settings(max_examples=3, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(batch=st.lists(st.tuples(ROWS, _PIPELINE_MICROS).filter(_encodable), min_size=150,
                     max_size=150))
def test_through_the_pipeline_input_is_kept_plus_dead_lettered(batch):
    """3 × 150 rows (plus 3 queries) through the whole transform (batch, public end)."""
    kept, refused = {d: [] for d in DATASETS}, 0
    for row, micros in batch:
        valid, dead, _ = fz.extract(entry_fn('ExtractRows'), row, micros)
        refused += len(dead)
        for dataset, item in valid:
            kept[dataset].append(item)
    boost = transform()
    want = []
    for dataset in DATASETS:
        driver = boost.driver(dataset)
        items = kept[dataset] + [(QUERY, t, q) for t, q in _FIXED_QUERIES if q.dataset == dataset]
        state, out, _ = run_events(driver, boost.clock, driver.init_state(), items, 2 ** 62,
                                   noise.seeded(SEED).derive('Boost'))
        out += refuse_waiting(driver, state)[1]
        want += [(r.dataset, r.query_id, r.value) for r in out if hasattr(r, 'value')]
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        data = (p | 'Rows' >> beam.Create(list(range(len(batch))))
                | 'StampRows' >> beam.Map(
                    lambda i: TimestampedValue(batch[i][0], Timestamp(micros=batch[i][1]))))
        queries = p | 'Queries' >> beam.Create(
            [TimestampedValue(q, Timestamp(micros=t)) for t, q in _FIXED_QUERIES])
        out = (data, queries) | 'Boost' >> boost
        assert_that(out.dead_letter | beam.combiners.Count.Globally(),
                    lambda counts: _equal(counts, [refused]), label='DeadCount')
        assert_that(out.answers | beam.Map(lambda r: (r.dataset, r.query_id, r.value)),
                    lambda got: _equal(sorted(got), sorted(want)), label='Answers')


def test_a_sanity_case_is_kept():
    valid, dead, _ = fz.extract(entry_fn('ExtractRows'), ('covid', (1, np.int64(2))), 5)
    assert valid == [('covid', (ROW, 5, (1, 2)))] and not dead
