"""Pipeline tier: ``WindowedPMWG`` on TestStream in streaming mode (DirectRunner named
explicitly): parity with the pure PMWG under a seed, refusals, dead letters, keys, fixed windows,
sliding windows refused, budgets at construction."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.transforms import window
from apache_beam.transforms.window import TimestampedValue

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.drivers.growing import instance_rng
from beam_dp.io.queries import query_to_avro
from beam_dp.queries import LinearQuery
from beam_dp.transforms.pmwg import WindowedPMWG
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

SEED = 7
N = 8
LABEL = 'PMWG'


def make_stream(batches):
    """batches: [(watermark_seconds, [('data'|'queries', value, ts), ...]), ...] → TestStream."""
    stream = TestStream(output_tags=['data', 'queries'])
    for tag in ('data', 'queries'):
        stream = stream.advance_watermark_to(0, tag=tag)
    last = 0
    for watermark, events in batches:
        for tag in ('data', 'queries'):
            items = [TimestampedValue(v, ts) for t, v, ts in events if t == tag]
            if items:
                stream = stream.add_elements(items, tag=tag)
        for tag in ('data', 'queries'):
            stream = stream.advance_watermark_to(watermark, tag=tag)
        last = watermark
    for tag in ('data', 'queries'):
        stream = stream.advance_watermark_to(last + 1000, tag=tag)
    for tag in ('data', 'queries'):
        stream = stream.advance_watermark_to_infinity(tag=tag)
    return stream


def run(batches, transform, check_answers=None, check_dead=None, windowfn=None,
        streaming=True):
    options = streaming_options() if streaming else PipelineOptions()
    with beam.Pipeline(runner=DIRECT_RUNNER if streaming else BATCH_RUNNER, options=options) as p:
        if streaming:
            streams = p | make_stream(batches)
            data, queries = streams['data'], streams['queries']
        else:
            events = [e for _, evs in batches for e in evs]
            data = (p | 'Data' >> beam.Create([(v, ts) for t, v, ts in events if t == 'data'])
                    | 'StampData' >> beam.Map(lambda e: TimestampedValue(*e)))
            queries = (p | 'Queries' >> beam.Create(
                [(v, ts) for t, v, ts in events if t == 'queries'])
                | 'StampQueries' >> beam.Map(lambda e: TimestampedValue(*e)))
        if windowfn is not None:
            data = data | 'WindowData' >> beam.WindowInto(windowfn)
            queries = queries | 'WindowQueries' >> beam.WindowInto(windowfn)
        out = (data, queries) | LABEL >> transform
        if check_answers is not None:
            assert_that(out.answers, check_answers, label='CheckAnswers')
        if check_dead is not None:
            assert_that(out.dead_letter, check_dead, label='CheckDead')


def pmwg(**kwargs):
    params = dict(epsilon=50.0, alpha=0.3, n=30, domain_size=N, domain_fn=lambda r: r,
                  testing_seed=SEED)
    params.update(kwargs)
    return WindowedPMWG(**params)


def reference(mechanism, events, key=None, wid=None, seed=SEED):
    """The pure mechanism on the events in (ts, records first, tie) order: {qid: (status, value, t)}."""
    order = sorted(events, key=lambda e: (e[2], 0 if e[0] == 'data' else 1,
                                          e[1] if e[0] == 'data' else e[1][0]))
    base = instance_rng(noise.seeded(seed), LABEL, key, wid)
    state, out, index = mechanism.init_state(), {}, 0
    for kind, value, _ in order:
        if kind == 'data':
            state = mechanism.add_data(state, np.array([value]), None)
        else:
            qid, query = value
            ans, state = mechanism.answer(state, query, base.derive('query', index))
            index += 1
            out[qid] = (ans.status.upper(), ans.value, ans.t)
    return out


def as_dict(answers):
    out = {}
    for a in answers:
        status = a.refusal or ('HARD' if a.hard else 'EASY')
        out[a.query_id] = (status, a.value, a.t)
    return out


def workload(num_records=120, num_queries=40, seed=3, start=1.0, span=100.0):
    rng = np.random.default_rng(seed)
    events = [('data', int(rng.integers(0, N)), start + span * i / num_records)
              for i in range(num_records)]
    for j in range(num_queries):
        a = int(rng.integers(0, N - 1))
        b = int(rng.integers(a + 1, N + 1))
        events.append(('queries', (f'q{j:03d}', LinearQuery.range(N, a, b)),
                       start + span * (j + 0.5) / num_queries))
    return events


def split(events, cuts):
    """Groups events into watermark batches at the given cut times."""
    batches, prev = [], -1.0
    for cut in list(cuts) + [1e6]:
        batches.append((cut, [e for e in events if prev < e[2] <= cut]))
        prev = cut
    return batches


def test_streaming_answers_equal_the_pure_mechanism_under_a_seed():
    events = workload()
    mech = PMWG(epsilon=50.0, alpha=0.3, n=30, domain_size=N)
    expected = reference(mech, events)
    assert {s for s, _, _ in expected.values()} >= {'NOT_STARTED', 'EASY'}

    def check(answers):
        assert as_dict(answers) == expected
        for a in answers:
            assert a.mechanism == 'pmwg'
            if a.refusal == 'NOT_STARTED':
                assert 'fewer than the initial size n=30' in a.message

    run(split(events, [20, 45, 70, 101]), pmwg(), check)


def test_batch_run_gives_the_same_answers_as_streaming():
    events = workload(num_records=80, num_queries=20, seed=5)
    expected = reference(PMWG(epsilon=50.0, alpha=0.3, n=30, domain_size=N), events)
    run(split(events, [101]), pmwg(), lambda answers: _eq(as_dict(answers), expected),
        streaming=False)


def _eq(actual, expected):
    assert actual == expected


def test_late_records_count_in_a_later_t_and_queries_see_only_earlier_records():
    q = LinearQuery.range(N, 0, N)
    batches = [
        (10, [('data', i % N, 1 + i * 0.1) for i in range(40)] + [('queries', ('a', q), 9)]),
        (20, [('data', 3, 5.0), ('queries', ('b', q), 15)]),    # the record is late (ts 5 < 10)
    ]

    def check(answers):
        got = {a.query_id: a.t for a in answers}
        assert got == {'a': 40, 'b': 41}

    run(batches, pmwg(), check)


def test_halted_instance_refuses_every_later_query():
    mech_args = dict(epsilon=1e-3, alpha=1.0, n=21, domain_size=3)
    events = [('data', i % 3, 1 + i * 0.01) for i in range(21)]
    events += [('queries', (f'q{j:03d}', LinearQuery.range(3, 0, 1 + j % 2)), 5 + j * 0.01)
               for j in range(100)]
    expected = reference(PMWG(**mech_args), events)
    statuses = [expected[f'q{j:03d}'][0] for j in range(100)]
    first = statuses.index('HALTED')
    assert set(statuses[first:]) == {'HALTED'}

    def check(answers):
        assert as_dict(answers) == expected
        assert all('hard-query cap' in a.message for a in answers if a.refusal == 'HALTED')

    run(split(events, [4, 100]), pmwg(**mech_args, domain_fn=lambda r: r), check)


def test_invalid_queries_and_records_are_dead_lettered_with_a_reason():
    good = LinearQuery.range(N, 0, 4)
    bad_avro = query_to_avro(LinearQuery.range(N, 0, 4), 'avro-bad')
    bad_avro['params']['stop'] = 99
    events = [('data', i % N, 1 + i * 0.1) for i in range(35)]
    events += [('data', 'not-an-index', 2.0), ('data', N + 5, 2.5),
               ('queries', ('wrong-domain', LinearQuery.range(4, 0, 2)), 6.0),
               ('queries', bad_avro, 6.0),
               ('queries', query_to_avro(good, 'avro-good'), 6.0),
               ('queries', good, 6.0),                       # no query id
               ('queries', ('ok', good), 6.0)]

    def check_answers(answers):
        got = {a.query_id: a.refusal for a in answers}
        assert got == {'wrong-domain': 'INVALID_QUERY', 'avro-bad': 'INVALID_QUERY',
                       'avro-good': None, 'ok': None}

    def check_dead(dead):
        reasons = sorted(d.reason for d in dead)
        assert len(reasons) == 5, reasons
        assert sum('domain_fn' in r for r in reasons) == 2
        assert any("invalid query 'wrong-domain'" in r for r in reasons)
        assert any("invalid query 'avro-bad'" in r for r in reasons)
        assert any('query has no query_id' in r for r in reasons)

    run(split(events, [10]), pmwg(), check_answers, check_dead)


def test_keys_run_independent_instances():
    q = LinearQuery.range(N, 0, N)
    events = [('data', ('a', i % N), 1 + i * 0.01) for i in range(40)]
    events += [('data', ('b', i % N), 1 + i * 0.01) for i in range(10)]
    events += [('queries', ('qa', q), 5), ('queries', ('qb', q), 5)]

    def check(answers):
        got = {a.query_id: (a.refusal, a.t) for a in answers}
        assert got == {'qa': (None, 40), 'qb': ('NOT_STARTED', 10)}

    run(split(events, [10]), pmwg(domain_fn=lambda r: r[1], data_key_fn=lambda r: r[0],
                                  query_key_fn=lambda qv: 'a' if qv[0] == 'qa' else 'b'), check)


def test_fixed_windows_run_independent_instances_and_close():
    q = LinearQuery.range(N, 0, 4)
    w1 = [('data', i % N, 1001 + i * 0.1) for i in range(40)]     # window [1000, 1100)
    w2 = [('data', i % N, 1101 + i * 0.1) for i in range(35)]     # window [1100, 1200)
    queries = [('queries', ('w1', q), 1050), ('queries', ('w2', q), 1150)]
    late = [('queries', ('late', q), 1060), ('data', 1, 1061)]     # window 1 is closed
    mech = PMWG(epsilon=50.0, alpha=0.3, n=30, domain_size=N)
    exp1 = reference(mech, w1 + queries[:1], wid=(1_000_000_000, 1_100_000_000))
    exp2 = reference(mech, w2 + queries[1:], wid=(1_100_000_000, 1_200_000_000))

    def check(answers):
        got = as_dict(answers)
        assert got['w1'] == exp1['w1'] and got['w1'][2] == 40
        assert got['w2'] == exp2['w2'] and got['w2'][2] == 35
        late_answer = [a for a in answers if a.query_id == 'late'][0]
        assert late_answer.refusal == 'HALTED' and 'is closed' in late_answer.message

    def check_dead(dead):
        assert [d.reason.startswith('late: window') for d in dead] == [True]

    run([(1060, w1 + queries[:1]), (1250, w2 + queries[1:]), (1300, late)], pmwg(start=1000),
        check, check_dead, windowfn=window.FixedWindows(100))


def test_unbounded_fixed_windows_without_start_are_refused():
    with pytest.raises(InvalidParamsError, match='start must be set for an unbounded input'):
        run([(60, [('data', 1, 1.0)])], pmwg(), None, None, windowfn=window.FixedWindows(100))


def test_sliding_windows_are_refused_with_a_clear_error():
    with pytest.raises(InvalidParamsError, match='sliding windows are not supported'):
        with beam.Pipeline(runner=BATCH_RUNNER) as p:
            data = p | 'D' >> beam.Create([1]) | 'WD' >> beam.WindowInto(
                window.SlidingWindows(100, 50))
            queries = p | 'Q' >> beam.Create([]) | 'WQ' >> beam.WindowInto(
                window.SlidingWindows(100, 50))
            _ = (data, queries) | pmwg()


def test_mismatched_windowing_is_refused():
    with pytest.raises(InvalidParamsError, match='same windowing'):
        with beam.Pipeline(runner=BATCH_RUNNER) as p:
            data = p | 'D' >> beam.Create([1]) | 'WD' >> beam.WindowInto(window.FixedWindows(10))
            queries = p | 'Q' >> beam.Create([])
            _ = (data, queries) | pmwg()


def test_budget_exceeded_at_construction_before_any_data():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=1.0), relation=SWAP_ONE)
    pmwg(epsilon=0.6, accountant=accountant, label='First')   # fits: checked, not yet spent
    accountant.spend('other', PrivacyCost(epsilon=0.6, relation=SWAP_ONE))
    with pytest.raises(BudgetExceededError):
        pmwg(epsilon=0.6, accountant=accountant)


@pytest.mark.parametrize('kwargs, match', [
    ({'epsilon': -1}, 'epsilon must be positive'),
    ({'domain_size': 2}, 'domain_size must be at least 3'),
    ({'domain_fn': 3}, 'domain_fn must be callable'),
    ({'data_key_fn': 'x'}, 'data_key_fn must be callable'),
    ({'testing_seed': 1.5}, 'testing_seed must be an int'),
])
def test_constructor_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        pmwg(**kwargs)


def test_a_start_in_the_window_at_the_epoch_is_refused():
    with pytest.raises(InvalidParamsError, match='begins after the epoch'):
        run([(60, [('data', 1, 1.0)])], pmwg(start=50), None, None,
            windowfn=window.FixedWindows(100))
