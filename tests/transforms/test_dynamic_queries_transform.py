"""Pipeline tier: DynamicHistogramPerKey (C6 and C9) and DynamicLinearQueriesPerKey (C9 with the
static plug-in, PMW and Laplace histogram) on TestStream in streaming mode: noise-free values,
parity with the pure driver under a seed, dead letters."""

import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp.queries import LinearQuery
from beam_dp.testing import key_events
from beam_dp.testing import replay
from beam_dp.transforms.dynamic import DynamicHistogramPerKey
from beam_dp.transforms.dynamic import DynamicLinearQueriesPerKey
from tests import helpers
from tests.helpers import NOISE_FREE
from tests.helpers import reason
from tests.helpers import run_stream

pytestmark = pytest.mark.pipeline

# (key, record_id, op, label/element, time)
UPDATES = [('a', 'r1', 1, 0, 2.5), ('a', 'r2', 1, 1, 2.5), ('a', 'r3', 1, 1, 2.6),
           ('a', 'r1', -1, 9, 6.5), ('a', 'r4', 1, 7, 6.6), ('a', 'r5', 1, 2, 10.5)]
QUERIES = (LinearQuery.range(3, 0, 1), LinearQuery.range(3, 0, 2), LinearQuery.point(3, 2))


def _stamped(updates, label=lambda x: x):
    return [((k, rid, op, label(x)), t) for k, rid, op, x, t in updates]


def _rows(release):
    return release.step, tuple(round(x, 6) for x in release.values)


@pytest.mark.parametrize('construction', ['two_stream', 'fenwick'])
def test_histogram_noise_free(construction):
    t = DynamicHistogramPerKey(public_keys=['a'], start=0, step=1, end=20, budget=NOISE_FREE,
                               bins=['x', 'y', 'z'], construction=construction)
    labels = {0: 'x', 1: 'y', 2: 'z', 7: 'nope', 9: 'ignored on a deletion'}

    def check(rows):
        values = dict(rows)
        assert values[2] == (1.0, 2.0, 0.0)
        assert values[6] == (0.0, 2.0, 0.0)      # r1 left bin x; r4's label is not a bin
        assert values[10] == (0.0, 2.0, 1.0)

    def check_dead(reasons):
        assert len(reasons) == 1 and 'not in the public bin set' in reasons[0], reasons

    run_stream(helpers.stream(_stamped(UPDATES, labels.get), 30), t, expected=check,
               extract=_rows, dead=check_dead, dead_extract=reason)


@pytest.mark.parametrize('static', ['pmw', 'laplace_histogram'])
def test_linear_queries_noise_free(static):
    t = DynamicLinearQueriesPerKey(public_keys=['a'], start=0, step=1, end=20,
                                   budget=NOISE_FREE, domain_size=3, queries=QUERIES,
                                   static_mechanism=static, alpha=1.0)

    def check(rows):
        values = dict(rows)
        assert set(values) >= {2, 6, 10}, values
        if static == 'laplace_histogram':
            assert values[2] == (1.0, 3.0, 0.0)
            assert values[6] == (0.0, 2.0, 0.0)
            assert values[10] == (0.0, 2.0, 1.0)
        else:
            # PMW's answers are counts in [0, n̂] (clipped fractions times n̂).
            assert all(len(v) == 3 and min(v) >= 0 for v in values.values()), values

    def check_dead(reasons):
        assert len(reasons) == 1 and 'domain element must be an int' in reasons[0], reasons

    run_stream(helpers.stream(_stamped(UPDATES), 30), t, expected=check, extract=_rows,
               dead=check_dead, dead_extract=reason)


def test_linear_queries_parity_with_the_pure_driver_under_a_seed():
    t = DynamicLinearQueriesPerKey(public_keys=['a'], start=0, step=1, end=300,
                                   budget=PrivacyBudget(epsilon=2.0), c_theta=1.0,
                                   domain_size=3, queries=QUERIES, testing_seed=3, label='Dyn')
    updates = []
    for i in range(60):
        updates.append(('a', f'r{i}', 1, i % 3, 3 * i + 0.5))
        updates.append(('a', f'r{i}', -1, 0, 3 * i + 30.5))
    updates = [u for u in updates if u[4] < 290]
    batches = [(int(tt), ((rid, op, x if op == 1 else 0),)) for _, rid, op, x, tt in updates]
    ref = replay(t.loop_driver(), key_events(t.clock, 'a', batches, 299), label='Dyn', seed=3,
                 end_input=False).releases
    expected = [_rows(r) for r in ref]
    assert len(expected) >= 3
    stream = TestStream().advance_watermark_to(0)
    half = len(updates) // 2
    for chunk in (updates[half:], updates[:half]):
        stream = stream.add_elements([TimestampedValue((k, rid, op, x), tt)
                                      for k, rid, op, x, tt in chunk])
    stream = stream.advance_watermark_to(310).advance_watermark_to_infinity()
    run_stream(stream, t, expected=expected, extract=_rows)


@pytest.mark.parametrize('kwargs, match', [
    ({'static_mechanism': 'mwem'}, 'static_mechanism must be one of'),
    ({'queries': []}, 'LinearQuery'),
    ({'alpha': 0}, 'alpha'),
    ({'construction': 'two_stream'}, 'construction'),
])
def test_linear_queries_validation(kwargs, match):
    args = dict(public_keys=['a'], start=0, step=1, budget=PrivacyBudget(epsilon=1.0),
                domain_size=3, queries=QUERIES)
    with pytest.raises(InvalidParamsError, match=match):
        DynamicLinearQueriesPerKey(**{**args, **kwargs})
