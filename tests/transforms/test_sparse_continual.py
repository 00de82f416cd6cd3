"""Pipeline tier: SparseContinualCount/HistogramPerKey (C5 per key on the skip-ahead timer) on
TestStream in streaming mode, parity with the pure driver, release-time purity, validation."""

import contextlib

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import noise
from beam_dp.testing import key_events
from beam_dp.testing import replay
from beam_dp.transforms.continual import PrivateKeys
from beam_dp.transforms.sparse_continual import SparseContinualCountPerKey
from beam_dp.transforms.sparse_continual import SparseContinualHistogramPerKey
from tests.helpers import NOISE_FREE
from tests.helpers import reason
from tests.helpers import run_stream
from tests.runners import BATCH_RUNNER

pytestmark = pytest.mark.pipeline


def _replay(transform, key, label, seed, batches, until, private=False):
    """The releases of one key: ``beam_dp.testing.replay`` of the transform's loop driver."""
    return replay(transform.loop_driver(), key_events(transform.clock, key, batches, until,
                                                      private),
                  label=label, seed=seed, end_input=False).releases


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def sparse(**kw):
    kw.setdefault('budget', NOISE_FREE)
    kw.setdefault('public_keys', ['a', 'b'])
    return SparseContinualCountPerKey(start=0, step=1, **kw)


def test_empty_stream_closes_at_2_4_16_and_sparse_data_closes_its_segment():
    # Step s covers [s, s+1). No data for 'b': forced closes at steps 1, 3, 15 only (answers 0).
    # 'a' has 3 records at step 5 (noise-free: the SVT halts there) and one late record.
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(('a', i), 5.5) for i in range(3)])
              .advance_watermark_to(20)
              .add_elements([tv(('a', 0), 3)])                 # step 3 already processed: late
              .advance_watermark_to(40)
              .advance_watermark_to_infinity())
    expected = [('a', 1, 0.0), ('a', 3, 0.0), ('a', 5, 3.0), ('a', 35, 3.0),
                ('b', 1, 0.0), ('b', 3, 0.0), ('b', 15, 0.0)]
    run_stream(stream, sparse(end=39), expected=expected, dead=_one_late, dead_extract=reason)


def _one_late(reasons):
    assert len(reasons) == 1 and reasons[0].startswith('late: step 3 was already released'), \
        reasons


def test_histogram_per_bin_values():
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(('a', 'x'), 0.5), tv(('a', 'y'), 0.7), tv(('a', 'q'), 0.8)])
              .advance_watermark_to(10).advance_watermark_to_infinity())
    t = SparseContinualHistogramPerKey(public_keys=['a'], bins=['x', 'y'], start=0, step=1,
                                       end=5, budget=NOISE_FREE)
    run_stream(stream, t, extract=lambda r: (r.step, tuple(round(v, 6) for v in r.values)),
               expected=[(0, (1.0, 1.0)), (1, (1.0, 1.0)), (3, (1.0, 1.0))],
               dead=lambda reasons: assert_that_one(reasons, "bin 'q' is not in the public bin set"),
               dead_extract=reason)


def assert_that_one(reasons, prefix):
    assert len(reasons) == 1 and reasons[0].startswith(prefix), reasons


EVENTS = [1, 1, 3, 9, 9, 9, 9, 40, 41, 41, 120, 121, 122, 123, 124, 125, 300, 301, 301, 302]


def _parity_stream(events, order):
    stream = TestStream().advance_watermark_to(0)
    for chunk in order(events):
        stream = stream.add_elements([tv(('a', None), t - 0.5) for t in chunk])
    return stream.advance_watermark_to(400).advance_watermark_to_infinity()


@pytest.mark.parametrize('c_theta', [7.0, 1.0])
def test_parity_with_the_pure_driver_under_a_seed(c_theta):
    """Real noise: out-of-order arrival within and across steps gives exactly the releases of
    driving the pure mechanism once over the sorted data (same boundaries, same values)."""
    transform = sparse(public_keys=['a'], end=390, budget=PrivacyBudget(epsilon=1.0),
                       c_theta=c_theta, testing_seed=5, label='Sparse')
    batches = [(t - 1, (1,)) for t in EVENTS]      # event at t - 0.5 s: step t - 1
    ref = _replay(transform, 'a', 'Sparse', 5, batches, 389)
    expected = [(r.step, r.value) for r in ref]
    assert expected, 'the reference closes at least the forced segments'
    # The boundaries agree with the partitioner driven directly (an independent code path; the
    # mechanism's ticks count from 1: tick = step + 1).
    part = transform.mechanism.partitioner
    arrivals = {}
    for t in EVENTS:
        arrivals[t] = arrivals.get(t, 0) + 1
    closes, _ = part.run(arrivals, 390, noise.seeded(5).derive('Sparse', 'key', 'a', 'partition'))
    assert [c.close_tick for c in closes] == [r.step + 1 for r in ref]
    run_stream(_parity_stream(EVENTS, lambda e: (e[10:], e[:10])), transform,
               extract=lambda r: (r.step, r.value), expected=expected)


def test_release_time_purity_boundaries_after_j_do_not_depend_on_data_before():
    """§18.11 at the transform's driver: fix the seed and the boundaries t_1..t_j; perturbing
    the data inside segments 1..j leaves every later boundary unchanged."""
    transform = sparse(public_keys=['a'], budget=PrivacyBudget(epsilon=1.0), c_theta=1.0,
                       testing_seed=1, label='P')
    base = [(t - 1, (1,)) for t in EVENTS]
    steps = [r.step for r in _replay(transform, 'a', 'P', 1, base, 1999)]
    assert len(steps) >= 4
    j = 2
    cut = steps[j - 1]
    # Move data around inside segments 1..j without changing any segment's total.
    perturbed = [(s, v) for s, v in base if s > cut]
    seg_bounds = [-1] + steps[:j]
    for lo, hi in zip(seg_bounds, seg_bounds[1:]):
        n = sum(1 for s, _ in base if lo < s <= hi)
        if n:
            perturbed.append((hi, (n,)))      # all of the segment's records at its close step
    out = [r.step for r in _replay(transform, 'a', 'P', 1, perturbed, 1999)]
    assert out[:j] == steps[:j]
    assert out[j:] == steps[j:]


def test_private_keys_on_the_sparse_transform():
    # Selection (ε_s = 2, δ = 1e-3): 'big' (150 records at step 1) is selected, its first
    # release counts everything since its first record; 'solo' (one record) never appears.
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(('big', None), 1.5)] * 150 + [tv(('solo', None), 1.5)])
              .advance_watermark_to(30).advance_watermark_to_infinity())
    keys = PrivateKeys(budget=PrivacyBudget(epsilon=2.0, delta=1e-3))
    t = SparseContinualCountPerKey(keys=keys, start=0, step=1, end=20, budget=NOISE_FREE,
                                   testing_seed=2, label='PK')
    ref = _replay(t, 'big', 'PK', 2, [(1, (150,))], 19, private=True)
    expected = [('big', r.step, r.value) for r in ref]
    assert expected and expected[0][2] == 150.0
    assert _replay(t, 'solo', 'PK', 2, [(1, (1,))], 19, private=True) == []
    run_stream(stream, t, expected=expected)


def test_budget_and_validation():
    acc = BudgetAccountant(PrivacyBudget(epsilon=1.0, delta=1e-6))
    sparse(budget=PrivacyBudget(epsilon=0.5), accountant=acc)
    with pytest.raises(BudgetExceededError, match='asks for'):
        SparseContinualCountPerKey(keys=PrivateKeys(PrivacyBudget(epsilon=0.6, delta=1e-7)),
                                   start=0, step=1, budget=PrivacyBudget(epsilon=0.5),
                                   accountant=BudgetAccountant(PrivacyBudget(epsilon=1.0,
                                                                             delta=1e-6)))


ok = contextlib.nullcontext


@pytest.mark.parametrize('kwargs, expectation', [
    ({}, ok()),
    ({'public_keys': None}, pytest.raises(InvalidParamsError, match='public_keys must be a collection')),
    ({'public_keys': []}, pytest.raises(InvalidParamsError, match='public_keys must not be empty')),
    ({'keys': ['x']}, pytest.raises(InvalidParamsError, match='either public_keys or keys')),
    ({'budget': PrivacyBudget(rho=1.0)}, pytest.raises(InvalidParamsError, match='pure epsilon budget')),
    ({'step': 0}, pytest.raises(InvalidParamsError, match='step must be positive')),
    ({'c_theta': 0}, pytest.raises(InvalidParamsError, match='c_theta must be positive')),
    ({'partition_fraction': 1.0}, pytest.raises(InvalidParamsError, match=r'partition_fraction must be in \(0, 1\)')),
    ({'beta': 0}, pytest.raises(InvalidParamsError, match='beta must be in')),
    ({'max_segment_ticks': 0}, pytest.raises(InvalidParamsError, match='max_segment_ticks must be a positive integer')),
    ({'end': 0}, pytest.raises(InvalidParamsError, match='end must be after start')),
    ({'privacy_unit': 'user'}, pytest.raises(InvalidParamsError, match='only privacy_unit=EventLevel')),
    ({'testing_seed': 'x'}, pytest.raises(InvalidParamsError, match='testing_seed must be an int')),
])
def test_validation(kwargs, expectation):
    params = dict(public_keys=['a'], start=0, step=1, budget=PrivacyBudget(epsilon=1.0))
    params.update(kwargs)
    with expectation:
        SparseContinualCountPerKey(**params)


def test_batch_input_data_before_the_key_seeds_and_malformed_keys():
    """Flatten gives no order between a key's data and its seed (batch runs the data first):
    a public key starts at step 0 either way. Unhashable, non-UTF-8 and numpy keys are
    dead-lettered or normalised at extraction, never raised."""
    import numpy as np
    keys = {'a': 'a', 'np': np.str_('b'), 'list': ['x'], 'bad': '\ud800'}
    records = [('a', 5.5)] * 3 + [('np', 2.5), ('list', 1.0), ('bad', 1.0)]
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = (p | beam.Create(records) | beam.Map(lambda r: TimestampedValue(r, r[1]))
               | sparse(end=10, key_fn=lambda r: keys[r[0]]))
        assert_that(out.releases | 'Extract' >> beam.Map(lambda r: (r.key, r.step, r.value)),
                    equal_to([('a', 1, 0.0), ('a', 3, 0.0), ('a', 5, 3.0),
                              ('b', 1, 0.0), ('b', 2, 1.0), ('b', 8, 1.0)]), label='CheckReleases')
        assert_that(out.dead_letter | 'Reasons' >> beam.Map(lambda d: d.reason.split(':')[0]),
                    equal_to(['key must be a string, got tuple (\'x\',)', 'key is not valid UTF-8 text']),
                    label='CheckDead')
