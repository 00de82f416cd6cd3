"""Pipeline tier: ``WindowedPMWG`` on TestStream in streaming mode (DirectRunner named
explicitly): parity with the pure PMWG under a seed (the noise addresses of the Beam-window
version: ``instance_rng(rng, label, key, None)``), refusals on their own output, dead letters,
keys, the step clock (late records and queries), Beam windows and the old arguments refused
with what to write, budgets at construction."""

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
        streaming=True, check_refusals=None):
    """``check_answers`` sees answers and refusals together (a refusal has ``refusal`` set);
    ``check_refusals`` the refusals output alone."""
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
            both = (out.answers, out.refusals) | 'Both' >> beam.Flatten()
            assert_that(both, check_answers, label='CheckAnswers')
            assert_that(out.answers, _no_refusal, label='CheckAnswersHaveNoRefusal')
            assert_that(out.refusals, _only_refusals, label='CheckRefusalsAreRefusals')
        if check_refusals is not None:
            assert_that(out.refusals, check_refusals, label='CheckRefusals')
        if check_dead is not None:
            assert_that(out.dead_letter, check_dead, label='CheckDead')


def _no_refusal(answers):
    assert all(a.refusal is None for a in answers)


def _only_refusals(refusals):
    assert all(a.refusal is not None and a.value is None for a in refusals)


CLOCK = dict(start=0, step=10, end=200)


def pmwg(**kwargs):
    params = dict(budget=PrivacyBudget(epsilon=50.0), alpha=0.3, n=30, domain_size=N,
                  domain_fn=lambda r: r, testing_seed=SEED, **CLOCK)
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


def test_late_records_are_dead_lettered_and_late_queries_refused_on_the_public_clock():
    q = LinearQuery.range(N, 0, N)
    batches = [
        (10, [('data', i % N, 1 + i * 0.1) for i in range(40)] + [('queries', ('a', q), 9)]),
        # Step 0 ([0, 10)) is released: the record and the query stamped 5 are late.
        (20, [('data', 3, 5.0), ('queries', ('late', q), 5), ('queries', ('b', q), 15)]),
    ]

    def check(answers):
        got = {a.query_id: (a.refusal, a.t) for a in answers}
        assert got == {'a': (None, 40), 'b': (None, 40), 'late': ('LATE', None)}

    def check_refusals(refusals):
        (late,) = refusals
        assert late.message == 'late: step 0 was already released (allowed lateness 0s)'

    def check_dead(dead):
        assert [d.reason for d in dead] == [
            'late: step 0 was already released (allowed lateness 0s)']
        assert dead[0].stage == 'AnswerQueries' and dead[0].record == '3'

    run(batches, pmwg(), check, check_dead, check_refusals=check_refusals)


def test_records_and_queries_outside_the_clock_are_dead_lettered():
    q = LinearQuery.range(N, 0, N)
    events = [('data', 1, 0.5), ('data', 2, 105.0), ('queries', ('after', q), 150.0)]

    def check(answers):
        assert [(a.query_id, a.refusal) for a in answers] == [('after', 'INVALID_QUERY')]

    def check_dead(dead):
        reasons = sorted(d.reason for d in dead)
        assert [d.stage for d in sorted(dead, key=lambda d: d.reason)] == [
            'TagData', 'TagQueries', 'TagData']
        assert all('after the last released step' in r for r in reasons[:2])
        assert 'before the release start' in reasons[2]

    run([(300, events)], pmwg(start=1, step=10, end=101), check, check_dead)


def test_halted_instance_refuses_every_later_query():
    mech_args = dict(alpha=1.0, n=21, domain_size=3)
    events = [('data', i % 3, 1 + i * 0.01) for i in range(21)]
    events += [('queries', (f'q{j:03d}', LinearQuery.range(3, 0, 1 + j % 2)), 5 + j * 0.01)
               for j in range(100)]
    expected = reference(PMWG(epsilon=1e-3, **mech_args), events)
    statuses = [expected[f'q{j:03d}'][0] for j in range(100)]
    first = statuses.index('HALTED')
    assert set(statuses[first:]) == {'HALTED'}

    def check(answers):
        assert as_dict(answers) == expected
        assert all('hard-query cap' in a.message for a in answers if a.refusal == 'HALTED')

    run(split(events, [4, 100]), pmwg(**mech_args, budget=PrivacyBudget(epsilon=1e-3)), check)


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


@pytest.mark.parametrize('windowfn', [window.FixedWindows(100),
                                      window.SlidingWindows(100, 50), window.Sessions(10)])
def test_beam_windows_are_refused_with_what_to_write(windowfn):
    with pytest.raises(InvalidParamsError, match=r'global window.*period=<seconds>'):
        with beam.Pipeline(runner=BATCH_RUNNER) as p:
            data = p | 'D' >> beam.Create([1]) | 'WD' >> beam.WindowInto(windowfn)
            queries = p | 'Q' >> beam.Create([]) | 'WQ' >> beam.WindowInto(windowfn)
            _ = (data, queries) | pmwg()


@pytest.mark.parametrize('kwargs, match', [
    ({'epsilon': 1.0}, r'epsilon is not an argument: use budget=PrivacyBudget\(epsilon=1.0\)'),
    ({'epsilon': 1.0, 'delta': 1e-6},
     r'epsilon/delta is not an argument: use budget=PrivacyBudget\(epsilon=1.0, delta=1e-06\)'),
    ({'timer_granularity': 5}, r'timer_granularity is not an argument of WindowedPMWG: .*'
                               r'step=<seconds>'),
])
def test_the_old_arguments_are_refused_with_what_to_write(kwargs, match):
    args = dict(alpha=0.3, n=30, domain_size=N, domain_fn=lambda r: r, **CLOCK)
    if 'epsilon' not in kwargs:
        args['budget'] = PrivacyBudget(epsilon=1.0)
    with pytest.raises(InvalidParamsError, match=match):
        WindowedPMWG(**args, **kwargs)


def test_user_level_and_rho_budgets_are_refused():
    from beam_dp.privacy_unit import UserLevel
    with pytest.raises(InvalidParamsError, match='only privacy_unit=EventLevel'):
        pmwg(privacy_unit=UserLevel(lambda r: r, max_keys_per_unit=1,
                                    max_contributions_per_step=1, max_steps_per_unit=1))
    with pytest.raises(InvalidParamsError, match='not ρ'):
        pmwg(budget=PrivacyBudget(rho=0.5))


def test_a_bounded_input_without_end_is_refused():
    with pytest.raises(InvalidParamsError, match='no end was given'):
        run([(60, [('data', 1, 1.0)])], pmwg(end=None), streaming=False)


def test_the_signature_is_public():
    import inspect
    params = inspect.signature(WindowedPMWG).parameters
    assert {'budget', 'privacy_unit', 'start', 'step', 'end', 'allowed_lateness'} <= set(params)
    assert not {'epsilon', 'delta', 'timer_granularity'} & set(params)
    assert 'budget: Required.' in WindowedPMWG.__doc__


def test_budget_exceeded_at_construction_before_any_data():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=1.0), relation=SWAP_ONE)
    pmwg(budget=PrivacyBudget(epsilon=0.6), accountant=accountant, label='First')   # fits
    accountant.spend('other', PrivacyCost(epsilon=0.6, relation=SWAP_ONE))
    with pytest.raises(BudgetExceededError):
        pmwg(budget=PrivacyBudget(epsilon=0.6), accountant=accountant)


@pytest.mark.parametrize('kwargs, match', [
    ({'alpha': -1}, 'alpha'),
    ({'step': 0}, 'step'),
    ({'domain_size': 2}, 'domain_size must be at least 3'),
    ({'domain_fn': 3}, 'domain_fn must be callable'),
    ({'data_key_fn': 'x'}, 'data_key_fn must be callable'),
    ({'testing_seed': 1.5}, 'testing_seed must be an int'),
])
def test_constructor_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        pmwg(**kwargs)
