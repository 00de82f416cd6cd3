"""Linear queries: constructors, evaluation, validation tables, pickling and the Avro round trip."""

import io
import pickle
from contextlib import nullcontext as does_not_raise

import fastavro
import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io.queries import QueryAnswer
from beam_dp.io.queries import answer_from_avro
from beam_dp.io.queries import answer_to_avro
from beam_dp.io.queries import parsed_answer_schema
from beam_dp.io.queries import parsed_query_schema
from beam_dp.io.queries import query_from_avro
from beam_dp.io.queries import query_to_avro
from beam_dp.queries import LinearQuery
from beam_dp.queries import marginal_queries


def _all_kinds():
    return [LinearQuery.point(12, 3, query_id='p'),
            LinearQuery.range(12, 2, 7, query_id='r'),
            LinearQuery.marginal((3, 4), (1,), (2,), query_id='m'),
            LinearQuery.from_vector(np.linspace(0, 1, 12), query_id='v')]


@pytest.mark.parametrize('query', _all_kinds(), ids=lambda q: q.kind)
def test_evaluate_matches_dense(query):
    hist = np.random.default_rng(0).integers(0, 50, 12)
    assert query.evaluate(hist) == pytest.approx(float(query.dense() @ hist), abs=1e-9)
    assert query.dense().min() >= 0 and query.dense().max() <= 1
    assert not query.dense().flags.writeable


def test_marginal_cells_partition_the_domain():
    cells = marginal_queries((2, 3, 2), (0, 2))
    assert len(cells) == 4
    assert np.array_equal(sum(q.dense() for q in cells), np.ones(12))
    hist = np.arange(12)
    assert sum(q.evaluate(hist) for q in cells) == hist.sum()


def test_point_and_range_exact_values():
    hist = np.arange(10)
    assert LinearQuery.point(10, 4).evaluate(hist) == 4
    assert LinearQuery.range(10, 2, 5).evaluate(hist) == 2 + 3 + 4


@pytest.mark.parametrize('build, expectation', [
    (lambda: LinearQuery.point(10, 3), does_not_raise()),
    (lambda: LinearQuery.point(10, 10), pytest.raises(InvalidParamsError, match=r'index must be in \[0, 10\), got 10')),
    (lambda: LinearQuery.point(0, 0), pytest.raises(InvalidParamsError, match='domain_size must be a positive integer, got 0')),
    (lambda: LinearQuery.point(10, 1.5), pytest.raises(InvalidParamsError, match='index must be an integer')),
    (lambda: LinearQuery.range(10, 5, 5), pytest.raises(InvalidParamsError, match=r'0 <= start < stop <= 10, got \[5, 5\)')),
    (lambda: LinearQuery.range(10, 0, 11), pytest.raises(InvalidParamsError, match='start < stop <= 10')),
    (lambda: LinearQuery.marginal((2, 3), (2,), (0,)), pytest.raises(InvalidParamsError, match='dims must be distinct attribute positions')),
    (lambda: LinearQuery.marginal((2, 3), (1,), (3,)), pytest.raises(InvalidParamsError, match=r'must be in \[0, 3\) for attribute 1')),
    (lambda: LinearQuery.marginal((2, 3), (0, 1), (0,)), pytest.raises(InvalidParamsError, match='equal length')),
    (lambda: LinearQuery('marginal', 7, shape=(2, 3), dims=(0,), values=(0,)), pytest.raises(InvalidParamsError, match='has 6 cells but domain_size is 7')),
    (lambda: LinearQuery.from_vector([0.5, np.nan]), pytest.raises(InvalidParamsError, match='finite')),
    (lambda: LinearQuery.from_vector([0.5, 1.5]), pytest.raises(InvalidParamsError, match=r'in \[0, 1\], got min 0.5 and max 1.5')),
    (lambda: LinearQuery.from_vector([-0.1, 0.5]), pytest.raises(InvalidParamsError, match=r'in \[0, 1\]')),
    (lambda: LinearQuery.from_vector([[0.1]]), pytest.raises(InvalidParamsError, match='must be 1-D')),
    (lambda: LinearQuery.from_vector(['a']), pytest.raises(InvalidParamsError, match='numeric')),
    (lambda: LinearQuery.from_vector([np.nan], clip=True), pytest.raises(InvalidParamsError, match='finite')),
    (lambda: LinearQuery('cube', 4), pytest.raises(InvalidParamsError, match="kind must be one of")),
    (lambda: LinearQuery('point', 4, index=1, start=0), pytest.raises(InvalidParamsError, match='takes no start')),
])
def test_validation_table(build, expectation):
    with expectation:
        build()


def test_clip_clips():
    q = LinearQuery.from_vector([-1.0, 0.5, 2.0], clip=True)
    assert q.vector.tolist() == [0.0, 0.5, 1.0]


def test_evaluate_rejects_wrong_domain():
    with pytest.raises(InvalidRecordError, match=r'length 10 \(the domain size\), got shape \(9,\)'):
        LinearQuery.point(10, 1).evaluate(np.zeros(9))
    with pytest.raises(InvalidRecordError, match='domain of size 8, got 10'):
        LinearQuery.point(10, 1).check_domain(8)


@pytest.mark.parametrize('query', _all_kinds(), ids=lambda q: q.kind)
def test_pickle_equality_and_hash(query):
    query.dense()                                   # populate the cache; it must not be pickled
    copy = pickle.loads(pickle.dumps(query))
    assert copy == query and hash(copy) == hash(query)
    assert '_dense' not in copy.__dict__
    assert copy.with_id(None) != query


@pytest.mark.parametrize('query', _all_kinds(), ids=lambda q: q.kind)
def test_query_avro_round_trip(query):
    buf = io.BytesIO()
    fastavro.writer(buf, parsed_query_schema(), [query_to_avro(query)])
    buf.seek(0)
    (record,) = list(fastavro.reader(buf))
    assert query_from_avro(record) == query


@pytest.mark.parametrize('record, match', [
    ({'id': 'x', 'kind': 'POINT', 'domain_size': 4, 'params': {'index': 9}}, 'index must be in'),
    ({'id': 'x', 'kind': 'VECTOR', 'domain_size': 3, 'params': {}, 'vector': [0.1, 0.2]},
     'vector has 2 entries but domain_size is 3'),
    ({'id': 'x', 'kind': 'VECTOR', 'domain_size': 2, 'params': {}, 'vector': None}, 'needs a vector'),
    ({'id': 'x', 'domain_size': 2}, 'invalid query record'),
])
def test_query_from_avro_rejects_bad_records(record, match):
    with pytest.raises(InvalidRecordError, match=match):
        query_from_avro(record)


def test_answer_avro_round_trip():
    answers = [
        QueryAnswer('q1', 0.25, 'pmwg', 0.1, 1_700_000_000_000_000, t=1000, hard=True),
        QueryAnswer('q2', None, 'pmwg', 0.2, 1_700_000_000_000_001, refusal='HALTED',
                    message='hard-query cap reached', t=1001),
    ]
    buf = io.BytesIO()
    fastavro.writer(buf, parsed_answer_schema(), [answer_to_avro(a) for a in answers])
    buf.seek(0)
    assert [answer_from_avro(r) for r in fastavro.reader(buf)] == answers


def test_answer_validation():
    with pytest.raises(InvalidParamsError, match='exactly one of value or refusal'):
        QueryAnswer('q', 0.5, 'm', 0.0, 0, refusal='HALTED')
    with pytest.raises(InvalidParamsError, match='refusal must be one of'):
        QueryAnswer('q', None, 'm', 0.0, 0, refusal='TIRED')
