"""Pipeline tier: ``SmallDBGQueries`` on TestStream in streaming mode: synthetic-database runs
exactly at the epoch starts whatever the batching, answers and releases equal to the pure
driver's (``run_instance``) under a seed, refusals on their own output, large domains and bad
arguments refused at construction, the budget checked at construction."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.utils.timestamp import Timestamp

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import run_instance
from beam_dp.drivers.smalldbg import smalldbg_engine
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import bbscheduler_schedule
from beam_dp.mechanisms.smalldb import smalldbg
from beam_dp.queries import LinearQuery
from beam_dp.transforms.smalldbg import SmallDBGQueries
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options
from tests.transforms.test_pmwg_transform import make_stream
from tests.transforms.test_pmwg_transform import split

pytestmark = pytest.mark.pipeline

N = 4
SEED = 5
LABEL = 'SmallDBG'
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))
CLOCK = dict(start=0, step=1, end=20)
ARGS = dict(queries=QUERIES, budget=PrivacyBudget(epsilon=40.0), beta=0.05, n=30,
            domain_size=N)


def _run(batches, transform, check_answers, check_releases, check_refusals=None):
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        streams = p | make_stream(batches)
        out = (streams['data'], streams['queries']) | LABEL >> transform
        assert_that(out.answers, check_answers, label='CheckAnswers')
        assert_that(out.releases, check_releases, label='CheckReleases')
        if check_refusals is not None:
            assert_that(out.refusals, check_refusals, label='CheckRefusals')


def test_runs_at_the_epoch_starts_and_everything_equals_the_pure_driver():
    mech = smalldbg(queries=QUERIES, epsilon=40.0, beta=0.05, n=30)
    starts = bbscheduler_schedule(30, mech.gamma, 10)
    total = 150
    records = [('data', (i * 7) % N, 1 + (i // 3) * 0.125) for i in range(total)]
    queries = [('queries', (f'q{j}', QUERIES[j % N]), 1.125 + j * 0.5) for j in range(12)]
    items = [(Timestamp.of(ts).micros, RECORD, v, v) for _, v, ts in records]
    items += [(Timestamp.of(ts).micros, QUERY, q[0], q) for _, q, ts in queries]
    notebook = run_instance(smalldbg_engine(mech), items, noise.seeded(SEED), LABEL)
    assert [r.t for r in notebook.releases] == sorted({s for s in starts if s <= total})
    answered = [a for a in notebook.answers if a.refusal is None]
    refused = [a for a in notebook.answers if a.refusal is not None]
    assert answered and refused and {a.refusal for a in refused} == {'NOT_STARTED'}
    # Every answer is a fraction with denominator m (a synthetic database of m records).
    m = mech.mechanism.m
    assert all(abs(a.value * m - round(a.value * m)) < 1e-9 for a in answered)

    def check_releases(got):
        assert sorted(got) == sorted(notebook.releases)
        assert sum(r.epsilon for r in got) <= 40.0

    def check_answers(got):
        got = sorted(got, key=lambda a: a.query_id)
        want = sorted(answered, key=lambda a: a.query_id)
        assert [repr(a) for a in got] == [repr(a) for a in want]

    def check_refusals(got):
        assert sorted(got, key=lambda a: a.query_id) == sorted(refused,
                                                               key=lambda a: a.query_id)

    # Uneven watermark batches: the releases must not depend on them.
    _run(split(records + queries, [1.3, 2.0, 4.7, 9.0]),
         SmallDBGQueries(**ARGS, **CLOCK, domain_fn=lambda r: r, testing_seed=SEED),
         check_answers, check_releases, check_refusals)


def test_large_domains_and_bad_arguments_are_refused_at_construction():
    big = tuple(LinearQuery.range(12, 0, b) for b in range(1, 13))
    with pytest.raises(InvalidParamsError, match='exponential in the domain'):
        SmallDBGQueries(queries=big, budget=PrivacyBudget(epsilon=1.0), beta=0.05, n=10 ** 6,
                        domain_size=12, domain_fn=int, **CLOCK)
    with pytest.raises(InvalidParamsError, match='domain_size=5'):
        SmallDBGQueries(**{**ARGS, 'domain_size': 5}, domain_fn=int, **CLOCK)
    with pytest.raises(InvalidParamsError, match='gamma'):
        SmallDBGQueries(**{**ARGS, 'budget': PrivacyBudget(epsilon=1.0)}, domain_fn=int,
                        **CLOCK)
    with pytest.raises(InvalidParamsError, match='not ρ'):
        SmallDBGQueries(**{**ARGS, 'budget': PrivacyBudget(rho=1.0)}, domain_fn=int, **CLOCK)
    with pytest.raises(InvalidParamsError, match='epsilon=1'):
        SmallDBGQueries(epsilon=1, domain_fn=int, **CLOCK)


def test_the_budget_is_checked_at_construction():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=50.0), relation=SWAP_ONE)
    SmallDBGQueries(**ARGS, **CLOCK, domain_fn=int, accountant=accountant)   # 40 ≤ 50: builds
    accountant.spend('other', PrivacyCost(epsilon=20.0, relation=SWAP_ONE))
    with pytest.raises(BudgetExceededError):
        SmallDBGQueries(**ARGS, **CLOCK, domain_fn=int, accountant=accountant)
