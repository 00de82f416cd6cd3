"""Pipeline tier: ``ERMGQueries`` on TestStream in streaming mode: one lazy model fit per size at
query times, answers and releases equal to the pure driver's (``run_instance``) under a seed
whatever the batching, refusals on their own output, bad arguments refused at construction."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.utils.timestamp import Timestamp

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import run_instance
from beam_dp.drivers.smalldbg import ermg_engine
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.ermg import ermg
from beam_dp.queries import LinearQuery
from beam_dp.transforms.ermg import ERMGQueries
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options
from tests.transforms.test_pmwg_transform import make_stream
from tests.transforms.test_pmwg_transform import split

pytestmark = pytest.mark.pipeline

SEED = 8
LABEL = 'ERMG'
POINTS = [[0.6, 0.8], [0.6, -0.8], [-0.6, 0.8], [-0.6, -0.8]]
LABELS = [1, 1, 0, 0]
CLOCK = dict(start=0, step=1, end=20)
ARGS = dict(points=POINTS, labels=LABELS, reg=0.5, budget=PrivacyBudget(epsilon=0.9, delta=1e-6),
            beta=0.05, n=30)


def test_lazy_runs_and_answers_equal_the_pure_driver():
    mech = ermg(points=POINTS, labels=LABELS, reg=0.5, epsilon=0.9, delta=1e-6, beta=0.05, n=30)
    records = [('data', (i * 3) % 4, 1 + (i // 3) * 0.125) for i in range(150)]
    queries = [('queries', (f'q{j}', LinearQuery.point(4, j % 4)), 1.125 + (j // 2) * 0.5)
               for j in range(24)]
    items = [(Timestamp.of(ts).micros, RECORD, v, v) for _, v, ts in records]
    items += [(Timestamp.of(ts).micros, QUERY, q[0], q) for _, q, ts in queries]
    notebook = run_instance(ermg_engine(mech), items, noise.seeded(SEED), LABEL)
    answered = [a for a in notebook.answers if a.refusal is None]
    refused = [a for a in notebook.answers if a.refusal is not None]
    assert answered and {a.refusal for a in refused} == {'NOT_STARTED'}
    # One run per size: two queries at one size share it.
    assert len(notebook.releases) == len({a.t for a in answered})

    def check_releases(got):
        assert sorted(got) == sorted(notebook.releases)

    def check_answers(got):
        key = lambda a: a.query_id  # noqa: E731
        assert [repr(a) for a in sorted(got, key=key)] == [repr(a) for a in sorted(answered,
                                                                                     key=key)]

    def check_refusals(got):
        assert sorted(a.query_id for a in got) == sorted(a.query_id for a in refused)

    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        streams = p | make_stream(split(records + queries, [1.3, 2.0, 4.7, 9.0]))
        out = (streams['data'], streams['queries']) | LABEL >> ERMGQueries(
            **ARGS, **CLOCK, domain_fn=lambda r: r, testing_seed=SEED)
        assert_that(out.answers, check_answers, label='CheckAnswers')
        assert_that(out.releases, check_releases, label='CheckReleases')
        assert_that(out.refusals, check_refusals, label='CheckRefusals')


def test_bad_arguments_are_refused_at_construction():
    with pytest.raises(InvalidParamsError, match='epsilon must be in'):
        ERMGQueries(**{**ARGS, 'budget': PrivacyBudget(epsilon=2.0, delta=1e-6)},
                    domain_fn=int, **CLOCK)
    with pytest.raises(InvalidParamsError, match='delta'):
        ERMGQueries(**{**ARGS, 'budget': PrivacyBudget(epsilon=0.5)}, domain_fn=int, **CLOCK)
    with pytest.raises(InvalidParamsError, match='L2 norm'):
        ERMGQueries(**{**ARGS, 'points': [[2.0, 0.0]] * 4}, domain_fn=int, **CLOCK)
