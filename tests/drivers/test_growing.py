"""The growing-database driver (pure): event-time order, epoch cuts, answers and refusals built
in one place, query normalisation, and bundling invariance of an instance."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.drivers.growing import BBEngine
from beam_dp.drivers.growing import PMWGEngine
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import answer_record
from beam_dp.drivers.growing import check_domain_index
from beam_dp.drivers.growing import instance_rng
from beam_dp.drivers.growing import normalise_query
from beam_dp.drivers.growing import order
from beam_dp.drivers.growing import process
from beam_dp.drivers.growing import run_instance
from beam_dp.io.queries import query_to_avro
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import bbscheduler_schedule
from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.queries import LinearQuery

N = 4
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))


def scheduler(**kw):
    args = dict(mechanism=LaplaceQueryVector(QUERIES), epsilon=1.0, beta=0.05, n=100,
                domain_size=N)
    args.update(kw)
    return BBScheduler(**args)


def test_order_is_time_then_records_before_queries_then_tie():
    items = [(5, QUERY, 'b', None), (5, RECORD, 3, 3), (5, QUERY, 'a', None), (2, QUERY, 'z', None),
             (5, RECORD, 1, 1)]
    assert [i[:3] for i in order(items)] == [(2, QUERY, 'z'), (5, RECORD, 1), (5, RECORD, 3),
                                              (5, QUERY, 'a'), (5, QUERY, 'b')]


def test_one_large_batch_runs_every_epoch_it_crosses_like_records_one_by_one():
    mech = scheduler()
    starts = bbscheduler_schedule(100, mech.gamma, 6)
    data = np.arange(480) % N
    engine = BBEngine(mech, 'bb')
    rng = noise.seeded(3)
    batched, state = engine.add(mech.init_state(), data, rng)
    one_by_one, ref = [], mech.init_state()
    for x in data:
        new, ref = mech.add_data_with_releases(ref, [x], rng)
        one_by_one.extend(new)
    assert batched == tuple(one_by_one)
    assert [r.t for r in batched] == [s for s in starts if s <= 480]
    assert state.epoch == ref.epoch and state.t == ref.t == 480
    # The mechanism alone, given the same batch, runs only the last epoch it crosses (Alg 1 on a
    # batch, documented); the driver is what makes a notebook match the job.
    raw, _ = mech.add_data_with_releases(mech.init_state(), data, rng)
    assert [r.epoch for r in raw] == [batched[-1].epoch]


def test_release_timestamps_are_the_records_that_reached_the_epoch_start():
    mech = scheduler()
    items = [(1000 + i, RECORD, i % N, i % N) for i in range(200)]
    out = run_instance(BBEngine(mech, 'bb'), items, noise.seeded(1), 'L')
    # The t-th record (1-based) is stamped 1000 + t - 1.
    assert [(r.t, r.timestamp) for r in out.releases] == [(100, 1099), (167, 1166)]


@pytest.mark.parametrize('cuts', [(), (50,), (99, 100, 101), (10, 166, 170, 300)])
def test_an_instance_does_not_depend_on_how_its_items_are_bundled(cuts):
    mech = scheduler()
    items = [(10 * i, RECORD, i % N, i % N) for i in range(320)]
    items += [(10 * i + 5, QUERY, f'q{i}', (f'q{i}', QUERIES[i % N])) for i in range(0, 320, 40)]
    engine = BBEngine(mech, 'bb')
    whole = run_instance(engine, items, noise.seeded(9), 'L', key='k')
    base = instance_rng(noise.seeded(9), 'L', 'k', None)
    state, count, answers, releases = engine.init_state(), 0, [], []
    bounds = [-1] + [10 * c for c in cuts] + [10 ** 9]
    for lo, hi in zip(bounds, bounds[1:]):
        due = order(i for i in items if lo < i[0] <= hi)
        if due:
            state, count, out = process(engine, state, due, base, count, 'k')
            answers.extend(out.answers)
            releases.extend(out.releases)
    assert tuple(answers) == whole.answers and tuple(releases) == whole.releases
    assert count == 8


def test_pmwg_answers_and_refusals_are_built_by_answer_record():
    mech = PMWG(epsilon=30, alpha=0.3, n=100, domain_size=8)
    items = [(1, QUERY, 'early', ('early', LinearQuery.point(8, 1)))]
    items += [(2, RECORD, i % 8, i % 8) for i in range(100)]
    items += [(3, QUERY, 'late', ('late', LinearQuery.point(8, 1)))]
    out = run_instance(PMWGEngine(mech), items, noise.seeded(2), 'P')
    early, late = out.answers
    assert early.refusal == 'NOT_STARTED' and early.t == 0
    assert early.message == 'the database has 0 records, fewer than the initial size n=100'
    assert late.refusal is None and late.value is not None and late.t == 100
    assert out.releases == () and out.rejected == ()


def test_a_query_the_mechanism_rejects_is_refused_and_dead_lettered():
    mech = PMWG(epsilon=30, alpha=0.3, n=100, domain_size=8)
    bad = LinearQuery.point(4, 1)           # another domain: the mechanism raises
    out = run_instance(PMWGEngine(mech), [(7, QUERY, 'x', ('x', bad))], noise.seeded(2), 'P')
    (answer,) = out.answers
    assert answer.refusal == 'INVALID_QUERY' and answer.epsilon_spent == 0.0
    assert answer.timestamp == 7 and len(out.rejected) == 1


def test_answer_record_carries_the_bb_delta_and_explicit_refusals():
    mech = BBImprover(mechanism=LaplaceQueryVector(QUERIES[:1]), epsilon=0.9, delta=1e-6,
                      beta=0.05, n=5, domain_size=N)
    items = [(1, RECORD, 0, 0)] * 6 + [(2, QUERY, 'a', ('a', QUERIES[0]))]
    (answer,) = run_instance(BBEngine(mech, 'bbimprover/x'), items, noise.seeded(0), 'B').answers
    assert answer.delta_spent == 1e-6 and answer.t == 6
    halted = answer_record('q', 'm', 5, refusal='HALTED', message='x' * 600)
    assert halted.refusal == 'HALTED' and len(halted.message) == 500 and halted.value is None


def test_query_normalisation():
    q = LinearQuery.point(N, 2, query_id='p')
    assert normalise_query(q) == ('p', q)
    assert normalise_query(('i', q.with_id(None)))[0] == 'i'
    qid, parsed = normalise_query(query_to_avro(q))
    assert qid == 'p' and parsed.evaluate(np.eye(N)[2]) == 1
    assert normalise_query(('i', q), domain_size=8)[1].startswith('query must be over a domain')
    assert normalise_query(42)[0] is None and 'a query must be' in normalise_query(42)[1]
    assert normalise_query(('i', 'nope'))[1].startswith('query must be a LinearQuery')


@pytest.mark.parametrize('index, ok', [(0, True), (3, True), (np.int64(2), True), (4, False),
                                       (-1, False), (True, False), (1.0, False), ('1', False)])
def test_domain_index(index, ok):
    assert (check_domain_index(index, N) is None) == ok
