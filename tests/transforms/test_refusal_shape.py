"""One refusal shape for every query family (``WindowedPMWG``, ``BBSchedulerQueries``,
``BBImproverQueries``, ``BoostQueries``): refused queries go to the ``refusals`` output, never to
``answers``; each is ONE record type, a ``QueryAnswer`` naming its query, a public reason of
``REFUSAL_REASONS`` and words. Pipeline tier
(TestStream, streaming mode, the runner ``tests/runners.py`` names)."""

import apache_beam as beam
import pytest

from beam_dp.io.boost import BOOST_REFUSAL_REASONS
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.queries import REFUSAL_REASONS
from beam_dp.io.queries import QueryAnswer
from beam_dp.queries import LinearQuery
from tests import families
from tests.helpers import collect
from tests.helpers import run
from tests.helpers import stream

pytestmark = pytest.mark.pipeline

GROWING = ('WindowedPMWG', 'BBSchedulerQueries', 'BBImproverQueries')
QUERY_FAMILIES = GROWING + ('BoostQueries',)
FULL = LinearQuery.range(families.DOMAIN, 0, families.DOMAIN)
WRONG_DOMAIN = LinearQuery.range(families.DOMAIN + 1, 0, 2)


def _events(name):
    """(early, late) events: a few records and queries (refused: too few records, an invalid
    query, an unknown dataset, too small blocks), then after the watermark passed step 1 a
    query stamped in step 0 (late)."""
    if name == 'BoostQueries':
        rows = [(('data', ('d', (i % 2, i % families.DOMAIN))), 0.5 + i / 100) for i in range(6)]
        ask = [(('query', BoostQueryRecord('w', 'd', [[1], []], [], 0, 0, 0)), 1.5),
               (('query', BoostQueryRecord('x', 'nope', [[1], []], [], 0, 0, 0)), 1.5)]
        return rows + ask, []
    rows = [(('data', i % families.DOMAIN), 0.5 + i / 100) for i in range(6)]
    ask = [(('query', ('few', FULL)), 1.5), (('query', ('bad', WRONG_DOMAIN)), 1.5)]
    return rows + ask, [(('query', ('late', FULL)), 0.7)]


def _build(name):
    def build(p):
        early, late = _events(name)
        events = p | stream(early, 2.5, late, 4.0)
        data = events | 'Data' >> beam.FlatMap(lambda e: [e[1]] if e[0] == 'data' else [])
        queries = events | 'Queries' >> beam.FlatMap(lambda e: [e[1]] if e[0] == 'query' else [])
        extra = {'alpha': 0.05} if name == 'BoostQueries' else {}
        out = (data, queries) | 'T' >> families.build(name, testing_seed=5, **extra)
        assert 'refusals' in type(out)._fields
        collect(out.answers, 'answers')
        collect(out.refusals, 'refusals')
        return None
    return build


@pytest.mark.parametrize('name', QUERY_FAMILIES)
def test_refused_queries_go_to_the_refusals_output_and_never_to_the_answers(name):
    got = run(_build(name))
    answers, refusals = got.get('answers', []), got.get('refusals', [])
    assert refusals, name
    # ONE refusal record for every family: a QueryAnswer with a reason and words, no value.
    assert all(isinstance(r, QueryAnswer) and r.value is None and r.refusal in REFUSAL_REASONS
               and r.message for r in refusals)
    if name == 'BoostQueries':
        assert all(isinstance(a, BoostAnswerRecord) and a.value is not None for a in answers)
        assert {r.query_id: r.refusal for r in refusals}['x'] == 'WRONG_DATASET'
        assert 'w' in {r.query_id for r in refusals} | {a.query_id for a in answers}
        assert {r.refusal.lower() for r in refusals} <= set(BOOST_REFUSAL_REASONS)
        return
    assert all(isinstance(a, QueryAnswer) and a.refusal is None for a in answers)
    assert all(isinstance(r, QueryAnswer) and r.value is None and r.refusal in REFUSAL_REASONS
               and r.message for r in refusals)
    assert {r.query_id: r.refusal for r in refusals} == {
        'few': 'NOT_STARTED', 'bad': 'INVALID_QUERY', 'late': 'LATE'}
    assert answers == []
