"""Pipeline tier: ``BBSchedulerQueries`` / ``BBImproverQueries`` on TestStream in streaming mode:
epoch releases exactly at t_i whatever the batching, parity with the pure scheduler under a seed
(the noise addresses of the Beam-window version, unchanged), refusals on their own output, budgets
at construction, the old arguments refused."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.utils.timestamp import Timestamp

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import bbscheduler_schedule
from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
from beam_dp.drivers.growing import BBEngine
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import instance_rng
from beam_dp.drivers.growing import run_instance
from beam_dp.io.epochs import EpochReleaseRecord
from beam_dp.queries import LinearQuery
from beam_dp.transforms.bb_scheduler import BBImproverQueries
from beam_dp.transforms.bb_scheduler import BBSchedulerQueries
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options
from tests.transforms.test_pmwg_transform import make_stream
from tests.transforms.test_pmwg_transform import split

pytestmark = pytest.mark.pipeline

N = 4
SEED = 11
LABEL = 'BB'
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))
BOX = LaplaceQueryVector(QUERIES)


def run(batches, transform, check_answers=None, check_releases=None):
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        streams = p | make_stream(batches)
        out = (streams['data'], streams['queries']) | LABEL >> transform
        if check_answers is not None:
            both = (out.answers, out.refusals) | 'Both' >> beam.Flatten()
            assert_that(both, check_answers, label='CheckAnswers')
            assert_that(out.answers, lambda got: _eq([a.refusal for a in got if a.refusal], []),
                        label='NoRefusalInAnswers')
        if check_releases is not None:
            assert_that(out.releases, check_releases, label='CheckReleases')


def _eq(actual, expected):
    assert actual == expected


CLOCK = dict(start=0, step=1, end=20)


def scheduler_args(**kw):
    """The transform's arguments (``mechanism_args``: the pure mechanism's)."""
    args = dict(mechanism=BOX, budget=PrivacyBudget(epsilon=1.0), beta=0.05, n=100,
                domain_size=N, **CLOCK)
    args.update(kw)
    return args


def mechanism_args(**kw):
    args = dict(mechanism=BOX, epsilon=1.0, beta=0.05, n=100, domain_size=N)
    args.update(kw)
    return args


def test_epoch_releases_happen_exactly_at_the_schedule_and_answers_match_the_pure_scheduler():
    mech = BBScheduler(**mechanism_args())
    starts = bbscheduler_schedule(100, mech.gamma, 12)
    total = 220
    expected_epochs = sorted({(i, s) for i, s in enumerate(starts) if s <= total})
    records = [('data', i % N, 1 + i * 0.01) for i in range(total)]
    queries = [('queries', (f'q{j}', QUERIES[j % N]), 1.5 + j * 0.4) for j in range(10)]
    # Uneven watermark batches: the releases must not depend on them.
    batches = split(records + queries, [1.3, 1.31, 2.9, 9.0])
    # Pure reference: records one by one, queries in order, same random sources.
    base = instance_rng(noise.seeded(SEED), LABEL, None, None)
    state, ref, q_index = mech.init_state(), {}, 0
    events = sorted(records + queries, key=lambda e: (e[2], e[0] != 'data'))
    for kind, value, _ in events:
        if kind == 'data':
            _, state = mech.add_data_with_releases(state, np.array([value]), base.derive('data'))
        else:
            ans, state = mech.answer(state, value[1], base.derive('query', q_index))
            q_index += 1
            ref[value[0]] = (ans.status, ans.value, ans.epoch)

    def check_releases(releases):
        got = sorted((r.epoch, r.t) for r in releases)
        assert got == expected_epochs
        assert all(isinstance(r, EpochReleaseRecord) for r in releases)
        assert sum(r.epsilon for r in releases) <= 1.0

    def check_answers(answers):
        got = {a.query_id: ('answered' if a.refusal is None else a.refusal.lower(), a.value)
               for a in answers}
        assert got == {k: (s, v) for k, (s, v, _) in ref.items()}
        assert got['q0'][0] == 'not_started'

    run(batches, BBSchedulerQueries(**scheduler_args(), domain_fn=lambda r: r,
                                    testing_seed=SEED), check_answers, check_releases)



def test_the_notebook_driver_gives_the_transforms_releases_and_answers():
    """The same data driven through the pure driver in ONE batch (a notebook) gives exactly the
    transform's epoch releases and answers (the driver cuts batches at epoch starts)."""
    mech = BBScheduler(**mechanism_args())
    records = [('data', i % N, 1 + i * 0.01) for i in range(480)]      # epochs at 100, 167, 277, 460
    queries = [('queries', (f'q{j}', QUERIES[j % N]), 5.9 + j * 0.4) for j in range(6)]
    items = [(Timestamp.of(ts).micros, RECORD, v, v) for _, v, ts in records]
    items += [(Timestamp.of(ts).micros, QUERY, q[0], q) for _, q, ts in queries]
    notebook = run_instance(BBEngine(mech, 'bbscheduler/laplace_query_vector'), items,
                            noise.seeded(SEED), LABEL)
    assert len(notebook.releases) == 4          # every epoch crossed by the first batch runs

    def check_releases(releases):
        assert sorted(releases) == sorted(notebook.releases)

    def check_answers(answers):
        assert sorted(answers, key=lambda a: a.query_id) == sorted(
            notebook.answers, key=lambda a: a.query_id)

    run(split(records + queries, [2.0, 2.5, 4.0, 5.0]),
        BBSchedulerQueries(**scheduler_args(), domain_fn=lambda r: r, testing_seed=SEED),
        check_answers, check_releases)

def test_unknown_queries_are_refused_and_lazy_mode_releases_at_query_times():
    records = [('data', i % N, 1 + i * 0.01) for i in range(150)]
    queries = [('queries', ('known', QUERIES[0]), 3.0),
               ('queries', ('unknown', LinearQuery.point(N, 2)), 3.0)]

    def check_answers(answers):
        got = {a.query_id: a.refusal for a in answers}
        assert got == {'known': None, 'unknown': 'UNKNOWN_QUERY'}

    def check_releases(releases):
        assert [(r.t, r.mechanism) for r in releases] == [(150, 'bbscheduler/laplace_query_vector')]

    run([(5, records + queries)], BBSchedulerQueries(**scheduler_args(lazy=True),
                                                     domain_fn=lambda r: r, testing_seed=SEED),
        check_answers, check_releases)


def test_bbimprover_runs_once_per_size_at_query_times():
    box = LaplaceQueryVector(QUERIES[:1])
    args = dict(mechanism=box, beta=0.05, n=50, domain_size=N)
    records = [('data', i % N, 1 + i * 0.01) for i in range(80)]
    queries = [('queries', ('a', QUERIES[0]), 1.7), ('queries', ('b', QUERIES[0]), 1.7),
               ('queries', ('c', QUERIES[0]), 5.0)]
    improver = BBImprover(epsilon=0.9, delta=1e-6, **args)

    def check_releases(releases):
        got = sorted((r.epoch, r.t) for r in releases)
        assert got == [(71, 71), (80, 80)]
        assert releases[0].epsilon == pytest.approx(0.0) or all(r.epsilon > 0 for r in releases)

    def check_answers(answers):
        assert {a.query_id: a.t for a in answers} == {'a': 71, 'b': 71, 'c': 80}
        assert all(a.delta_spent == 1e-6 for a in answers)
        assert max(a.epsilon_spent for a in answers) <= 0.9

    del improver
    run([(6, records + queries)], BBImproverQueries(
        **args, budget=PrivacyBudget(epsilon=0.9, delta=1e-6), domain_fn=lambda r: r,
        testing_seed=SEED, **CLOCK),
        check_answers, check_releases)


def test_budget_exceeded_at_construction_and_validation():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=1.0), relation=SWAP_ONE)
    accountant.spend('other', PrivacyCost(epsilon=0.5, relation=SWAP_ONE))
    with pytest.raises(BudgetExceededError):
        BBSchedulerQueries(**scheduler_args(), domain_fn=lambda r: r, accountant=accountant)
    with pytest.raises(InvalidParamsError, match='gamma must be in'):
        BBSchedulerQueries(**scheduler_args(n=2), domain_fn=lambda r: r)
    with pytest.raises(InvalidParamsError, match='only lazy=True'):
        BBImproverQueries(mechanism=BOX, budget=PrivacyBudget(epsilon=0.5, delta=1e-6),
                          beta=0.05, n=100, domain_size=N, domain_fn=lambda r: r, lazy=False,
                          **CLOCK)


@pytest.mark.parametrize('family', [BBSchedulerQueries, BBImproverQueries])
def test_the_old_arguments_are_refused_with_what_to_write(family):
    args = dict(mechanism=BOX, beta=0.05, n=100, domain_size=N, domain_fn=lambda r: r, **CLOCK)
    with pytest.raises(InvalidParamsError, match=r'use budget=PrivacyBudget\(epsilon=0.5, '
                                                 r'delta=1e-06\)'):
        family(epsilon=0.5, delta=1e-6, **args)
    with pytest.raises(InvalidParamsError, match='timer_granularity.*step=<seconds>'):
        family(budget=PrivacyBudget(epsilon=0.5, delta=1e-6), timer_granularity=1, **args)
    with pytest.raises(InvalidParamsError, match='missing required argument.*step'):
        family(budget=PrivacyBudget(epsilon=0.5, delta=1e-6),
               **{k: v for k, v in args.items() if k != 'step'})


def test_replay_of_the_loop_driver_gives_the_transforms_output_and_the_notebook_instance():
    """``beam_dp.testing.replay`` of ``loop_driver()`` (the one reference) over the same items,
    watermarks between the batches, gives the Beam job's answers, refusals and epoch releases,
    which are the pure instance's (``run_instance``: the Beam-window version's noise
    addresses)."""
    from beam_dp.drivers.growing import GrowingItem
    from beam_dp.testing import replay
    from beam_dp.testing.replay import Element
    from beam_dp.testing.replay import Watermark
    from beam_dp.transforms.shell import key_bytes
    transform = BBSchedulerQueries(**scheduler_args(), domain_fn=lambda r: r, testing_seed=SEED)
    records = [('data', i % N, 1 + i * 0.01) for i in range(300)]
    queries = [('queries', (f'q{j}', QUERIES[j % N]), 1.5 + j * 0.4) for j in range(12)]
    events, cuts = [], [1.3, 2.9, 9.0, 30.0]
    for batch_end, batch in split(records + queries, cuts):
        for kind, value, ts in batch:
            micros = Timestamp.of(ts).micros
            item = ((micros, RECORD, value, value) if kind == 'data'
                    else (micros, QUERY, value[0], value))
            events.append(Element(key_bytes(None), GrowingItem(None, item)))
        events.append(Watermark(Timestamp.of(min(batch_end, 30.0)).micros))
    replayed = replay(transform.loop_driver(), events, label=LABEL, seed=SEED)
    items = [e.payload.item for e in events if isinstance(e, Element)]
    notebook = run_instance(transform.engine, items, noise.seeded(SEED), LABEL)
    refused = replayed.tagged.get('refusals', [])
    assert sorted(replayed.releases + refused, key=lambda a: a.query_id) == sorted(
        notebook.answers, key=lambda a: a.query_id)
    assert refused and all(a.refusal for a in refused)
    assert sorted(replayed.tagged['releases']) == sorted(notebook.releases)

    def check_answers(answers):
        assert sorted(answers, key=lambda a: a.query_id) == sorted(
            notebook.answers, key=lambda a: a.query_id)

    def check_releases(releases):
        assert sorted(releases) == sorted(notebook.releases)

    run(split(records + queries, cuts[:-1]), transform, check_answers, check_releases)
