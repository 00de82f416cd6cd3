"""Fuzzing the ERM transforms' input path (issue 12): 'ExtractAndValidate' of
``SlidingWindowERM`` taken from the built graph (pickled and set up as a worker gets it) and
called directly, 10^4 hypothesis cases; then a few hundred records through the whole pipeline.

Required of every record: no exception escapes; exactly ONE outcome (one valid element or one
dead letter with a reason: input = kept + dead-lettered); a kept element is safe for the
stateful stage (a public stream id, a block of the clock, finite features of the right length,
a label in range); a well-formed record is never dead-lettered. Through the pipeline: the dead
letters are exactly the records the pure extraction refuses, and the models equal the pure
reference on the kept ones.
"""

import functools
import math

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.coders import FastPrimitivesCoder
from apache_beam.internal import pickler
from apache_beam.testing.util import assert_that
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import ContinualERM
from beam_dp import PrivacyBudget
from beam_dp import SlidingWindowERM
from beam_dp import noise
from tests.drivers.erm_one_pass import reference
from beam_dp.io.erm import model_release_from_event
from tests.fuzz import strategies as fz
from tests.fuzz.harness import _Finder
from tests.runners import BATCH_RUNNER

pytestmark = pytest.mark.fuzz

STREAMS = ('a', 'b')
DIM, CLASSES, LAST_BLOCK, SEED = 3, 3, 9, 5


def transform():
    return SlidingWindowERM(start=0, step=1, end=fz.END / 1e6, public_streams=list(STREAMS),
                            num_classes=CLASSES, feature_dim=DIM, records_per_block=3, mu=0.5,
                            passes=1, levels=2, budget=PrivacyBudget(epsilon=2.0),
                            testing_seed=SEED)


def ftrl_transform():
    """``ContinualERM(algorithm='dp_ftrl')`` on the same streams, clock and parse rules."""
    return ContinualERM(algorithm='dp_ftrl', start=0, step=1, end=fz.END / 1e6,
                        public_streams=list(STREAMS), num_classes=CLASSES, feature_dim=DIM,
                        records_per_block=3, mu=0.5, budget=PrivacyBudget(epsilon=2.0),
                        testing_seed=SEED)


@functools.lru_cache(maxsize=None)
def entry_fn():
    pipeline = beam.Pipeline(runner='BundleBasedDirectRunner')
    _ = pipeline | beam.Create([('a', [0.0] * DIM, 0)]) | 'ERM' >> transform()
    finder = _Finder('ExtractAndValidate')
    pipeline.visit(finder)
    (fn,) = finder.found
    fn = pickler.loads(pickler.dumps(fn))
    fn.setup()
    return fn


_finite = st.floats(-1e3, 1e3, allow_nan=False)
_number = st.one_of(_finite, st.integers(-5, 5), st.sampled_from(
    [math.nan, math.inf, -math.inf, 1e308, None, 'x', True, np.float64(0.5)]))
_features = st.one_of(
    st.lists(_finite, min_size=DIM, max_size=DIM), st.lists(_finite, min_size=DIM, max_size=DIM),
    st.lists(_number, min_size=0, max_size=DIM + 1),
    st.builds(np.array, st.lists(_finite, min_size=DIM, max_size=DIM)), fz.values())
_labels = st.one_of(st.integers(0, CLASSES - 1), st.integers(-3, 6), fz.values(),
                    st.builds(np.int64, st.integers(0, CLASSES - 1)))
_streams = st.one_of(st.sampled_from(STREAMS), st.sampled_from(STREAMS), fz.bad_or_good_keys())
RECORDS = st.one_of(st.tuples(_streams, _features, _labels), st.tuples(_streams, _features),
                    fz.records())


def well_formed(record, micros) -> bool:
    if not (isinstance(record, tuple) and len(record) == 3 and fz.START <= micros < fz.END):
        return False
    stream, x, y = record
    return (type(stream) is str and stream in STREAMS and isinstance(x, list) and len(x) == DIM
            and all(type(v) in (int, float) and math.isfinite(v) for v in x)
            and type(y) is int and 0 <= y < CLASSES)


@fz.FUZZ
@given(record=RECORDS, micros=fz.event_micros())
def test_extraction_one_outcome_safe_elements(record, micros):
    valid, dead, other = fz.extract(entry_fn(), record, micros)
    assert not other and len(valid) + len(dead) == 1, (valid, dead, other)
    for d in dead:
        assert d.stage == 'ExtractAndValidate' and d.reason and d.transform == 'ERM'
    if well_formed(record, micros):
        assert valid, dead
    for stream, (block, x, y) in valid:
        assert type(stream) is str and stream in STREAMS
        assert 0 <= block <= LAST_BLOCK
        assert isinstance(x, tuple) and len(x) == DIM and all(
            type(v) is float and math.isfinite(v) for v in x)
        assert type(y) is int and 0 <= y < CLASSES


_PIPELINE_MICROS = st.one_of(st.integers(fz.START, fz.END - 1), st.integers(fz.START, fz.END - 1),
                             st.integers(-10 ** 9, 10 ** 9 + fz.END))


def _encodable(item) -> bool:
    """Beam can carry the record at all (a source cannot emit e.g. lone surrogates)."""
    try:
        FastPrimitivesCoder().encode(item[0])
        return True
    except Exception:  # pylint: disable=broad-except
        return False


@pytest.mark.parametrize('make', [transform, ftrl_transform], ids=['sliding', 'dp_ftrl'])
@settings(max_examples=3, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(batch=st.lists(st.tuples(RECORDS, _PIPELINE_MICROS).filter(_encodable), min_size=100,
                     max_size=100))
def test_through_the_pipeline_input_is_kept_plus_dead_lettered(make, batch):
    """3 × 100 records through the whole transform (batch DirectRunner, public end); the
    extraction is the shared one, so DP-FTRL dead-letters exactly what Alg 5 does."""
    kept, refused = {s: [] for s in STREAMS}, 0
    for record, micros in batch:
        valid, dead, _ = fz.extract(entry_fn(), record, micros)
        refused += len(dead)
        for stream, (_, x, y) in valid:
            kept[stream].append(('record', micros, x, y))
    erm = make()
    want = []
    for stream in STREAMS:
        res = reference(erm.driver, stream, kept[stream], noise.seeded(SEED).derive('ERM'),
                        until_block=LAST_BLOCK)
        assert not res.rejected
        want += [(stream, e.job.job_id, tuple(model_release_from_event(
            stream, e, 2.0, CLASSES, DIM + 1, 0).weights)) for e in res.events]
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = (p | beam.Create(list(range(len(batch))))
               | beam.Map(lambda i: TimestampedValue(batch[i][0], Timestamp(micros=batch[i][1])))
               | 'ERM' >> erm)
        assert_that(out.dead_letter | beam.combiners.Count.Globally(),
                    lambda counts: _equal(counts, [refused]), label='DeadCount')
        assert_that(out.releases | beam.Map(lambda r: (r.stream, r.release_id, tuple(r.weights))),
                    lambda got: _equal(sorted(got), sorted(want)), label='Models')


def _equal(got, want):
    assert list(got) == list(want), (len(got), len(want))
