"""Pipeline tier: the continual transforms on TestStream in streaming mode (DirectRunner named
explicitly), plus construction-time checks, type hints and parity with the pure reference."""

import contextlib

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import TypeOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

import beam_dp
from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import EventLevel
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import Release
from beam_dp import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests.helpers import NOISE_FREE
from tests.helpers import run_stream
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

STEP = 60


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def counts(keys=('a', 'b'), **kwargs):
    kwargs.setdefault('budget', NOISE_FREE)
    return ContinualCountPerKey(public_keys=list(keys), start=0, step=STEP, **kwargs)


def test_releases_every_step_for_every_key_including_idle_keys_and_empty_steps():
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', 1), 5), tv(('a', 2), 6)])
              .advance_watermark_to(200)          # steps 0, 1 (empty) and 2 (empty) released
              .add_elements([tv(('a', 3), 250)])
              .advance_watermark_to(300)
              .advance_watermark_to_infinity())
    expected = [('a', 0, 2.0), ('a', 1, 2.0), ('a', 2, 2.0), ('a', 3, 2.0), ('a', 4, 3.0),
                ('b', 0, 0.0), ('b', 1, 0.0), ('b', 2, 0.0), ('b', 3, 0.0), ('b', 4, 0.0)]
    run_stream(stream, counts(end=300), expected=expected)


def test_releases_follow_the_watermark_and_stop_when_the_input_ends():
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('b', 1), 61)])
              .advance_watermark_to(130)          # steps 0 and 1 released; step 2 not yet
              .advance_watermark_to_infinity())
    # No public end: steps up to the watermark, then the end-of-input timer stops the loop.
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream | counts()
        steps = out.releases | beam.Map(lambda r: (r.key, r.step, r.value))
        assert_that(steps | 'Step0and1' >> beam.Filter(lambda r: r[1] <= 1),
                    equal_to([('a', 0, 0.0), ('b', 0, 0.0), ('a', 1, 0.0), ('b', 1, 1.0)]),
                    label='EarlySteps')


def test_late_and_malformed_records_go_to_the_dead_letter_output():
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', 1), 10), tv(('zz', 1), 11), tv(42, 12)])
              .advance_watermark_to(70)           # step 0 released
              .add_elements([tv(('a', 1), 20)])   # late for step 0 (allowed lateness 0)
              .add_elements([tv(('a', 1), -5)])   # before start
              .advance_watermark_to(130)
              .advance_watermark_to_infinity())

    def check(dead):
        reasons = sorted(r for _, r in dead)
        assert len(reasons) == 4, reasons
        assert any("key 'zz' is not in the public key set" in r for r in reasons)
        assert any('key_fn raised' in r for r in reasons)
        assert any(r.startswith('late: step 0 was already released') for r in reasons)
        assert any('before the release start' in r for r in reasons)

    run_stream(stream, counts(end=120),
               expected=[('a', 0, 1.0), ('b', 0, 0.0), ('a', 1, 1.0), ('b', 1, 0.0)],
               dead=check)


def test_allowed_lateness_delays_the_release_and_counts_late_records():
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', 1), 10)])
              .advance_watermark_to(70)           # step 0 ended, but lateness is 30 s
              .add_elements([tv(('a', 1), 20)])   # within allowed lateness: counted
              .advance_watermark_to(95)
              .add_elements([tv(('a', 1), 30)])   # step 0 released at 90: late
              .advance_watermark_to(160)
              .advance_watermark_to_infinity())
    run_stream(stream, counts(keys=['a'], end=120, allowed_lateness=30),
               expected=[('a', 0, 2.0), ('a', 1, 2.0)],
               dead=lambda dead: _assert_reasons(dead, ['late: step 0']))


def _assert_reasons(dead, prefixes):
    reasons = sorted(r for _, r in dead)
    assert len(reasons) == len(prefixes), reasons
    for prefix in prefixes:
        assert any(r.startswith(prefix) for r in reasons), (prefix, reasons)


def test_user_level_bounding():
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=2,
                     max_steps_per_unit=2)
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', 'u1'), 1), tv(('a', 'u1'), 2), tv(('a', 'u1'), 3),  # m=2
                             tv(('b', 'u1'), 4),                                           # K=1
                             tv(('b', 'u2'), 5)])
              .add_elements([tv(('a', 'u1'), 65), tv(('a', 'u1'), 125)])                   # S=2
              .advance_watermark_to(200)
              .advance_watermark_to_infinity())
    run_stream(stream, counts(end=180, privacy_unit=unit),
               expected=[('a', 0, 2.0), ('a', 1, 3.0), ('a', 2, 3.0),
                         ('b', 0, 1.0), ('b', 1, 1.0), ('b', 2, 1.0)],
               dead=lambda dead: _assert_reasons(dead, [
                   'contribution bound: max_contributions_per_step=2',
                   'contribution bound: unit already contributed to max_keys_per_unit=1',
                   'contribution bound: unit already contributed to max_steps_per_unit=2']))


def test_sums_are_clamped_and_snapped_to_the_grid():
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', 0.3), 1), tv(('a', 7.0), 2), tv(('a', -1.0), 3),
                             tv(('a', 'x'), 4), tv(('a', float('nan')), 5)])
              .advance_watermark_to(100)
              .advance_watermark_to_infinity())
    transform = ContinualSumPerKey(public_keys=['a'], start=0, step=STEP, end=60,
                                   budget=NOISE_FREE, lower=0.0, upper=2.0, grid_bits=4)
    # 0.3 → 5/16 = 0.3125; 7.0 → 2.0; -1.0 → 0.0.
    run_stream(stream, transform, expected=[('a', 0, 2.3125)],
               dead=lambda dead: _assert_reasons(dead, ['value is not a number'] * 2))


def test_histograms():
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', 'x'), 1), tv(('a', 'y'), 2), tv(('a', 'y'), 70),
                             tv(('a', 'q'), 3)])
              .advance_watermark_to(130)
              .advance_watermark_to_infinity())
    transform = ContinualHistogramPerKey(public_keys=['a'], bins=['x', 'y'], start=0, step=STEP,
                                         end=120, budget=NOISE_FREE)
    run_stream(stream, transform,
               extract=lambda r: (r.key, r.step, tuple(round(v, 6) for v in r.values), r.value),
               expected=[('a', 0, (1.0, 1.0), 2.0), ('a', 1, (1.0, 2.0), 3.0)],
               dead=lambda dead: _assert_reasons(dead, ["bin 'q' is not in the public bin set"]))


def test_parity_with_the_pure_reference_under_a_seed():
    """Real noise (ε = 1): the pipeline emits exactly the reference's releases, whatever the
    arrival order and bundling (noise is derived from (seed, label, shard, step))."""
    keys = [f'k{i}' for i in range(7)]
    events = [(keys[(i * 3) % 7], 7 * i % 290) for i in range(60)]
    stream = TestStream().advance_watermark_to(0)
    for chunk in (events[40:], events[:40]):          # out of order within and across steps
        stream = stream.add_elements([tv((k, None), t) for k, t in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    transform = ContinualCountPerKey(public_keys=keys, start=0, step=STEP, end=300, num_shards=3,
                                     budget=PrivacyBudget(epsilon=1.0), testing_seed=11,
                                     label='Counts')
    expected = release_table(replay(transform.driver.loop_driver(), keyed_events(
        transform.driver, [(k, t // STEP, None) for k, t in events], steps=5), label='Counts',
        seed=11, end_input=False).releases)
    run_stream(stream, transform, extract=lambda r: (r.key, r.step, r.value),
               expected=[(k, s, v[0]) for (k, s), v in expected.items()])


def test_release_metadata_and_noise_stddev():
    stream = TestStream().advance_watermark_to(0).advance_watermark_to(100) \
        .advance_watermark_to_infinity()
    transform = counts(keys=['a'], end=60, budget=PrivacyBudget(epsilon=0.5))

    def check(releases):
        (r,) = releases
        assert isinstance(r, Release)
        assert r.epsilon == 0.5 and r.delta == 0.0 and r.rho == 0.0 and r.metric == 'count'
        # end= gives a known horizon of one step: the lowest-error counter for T = 1 is one
        # noisy node (the binary tree of one leaf; per-step noise is the same).
        assert r.mechanism == 'binary_tree/variance_reduced/discrete_laplace'
        assert r.step_start_micros == 0 and r.step_end_micros == 60_000_000
        assert r.noise_stddev == pytest.approx(transform.driver.noise_stddev(0))
        assert r.privacy_unit == 'event-level (one record)'

    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream | transform
        assert_that(out.releases, check)


def test_runtime_type_check_and_output_types():
    stream = (TestStream().advance_watermark_to(0).add_elements([tv(('a', 1), 1)])
              .advance_watermark_to(100).advance_watermark_to_infinity())
    options = streaming_options()
    # runtime_type_check wraps DoFns in a way that hides state specs from timer callbacks on
    # the DirectRunner (AssertionError in direct_userstate); the sampling checker does not.
    options.view_as(TypeOptions).performance_runtime_type_check = True
    with beam.Pipeline(runner=DIRECT_RUNNER, options=options) as p:
        out = p | stream | counts(keys=['a'], end=60)
        assert out.releases.element_type is Release
        assert out.dead_letter.element_type is beam_dp.DeadLetter
        assert_that(out.releases | beam.Map(lambda r: r.value), equal_to([1.0]))


def test_budget_is_checked_at_construction_before_any_data():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=1.0))
    counts(budget=PrivacyBudget(epsilon=0.7), accountant=accountant, end=60)
    p = beam.Pipeline(runner=BATCH_RUNNER)
    p | 'First' >> beam.Create([]) | 'A' >> counts(budget=PrivacyBudget(epsilon=0.7),
                                                   accountant=accountant, end=60)
    with pytest.raises(BudgetExceededError, match='asks for'):
        counts(budget=PrivacyBudget(epsilon=0.7), accountant=accountant, end=60)


ok = contextlib.nullcontext


@pytest.mark.parametrize('kwargs, expectation', [
    ({}, ok()),
    ({'public_keys': []}, pytest.raises(InvalidParamsError, match='ContinualCountPerKey: public_keys must not be empty')),
    ({'public_keys': 'abc'}, pytest.raises(InvalidParamsError, match='public_keys must be a collection of strings')),
    ({'public_keys': ['a', 1]}, pytest.raises(InvalidParamsError, match='public keys must be strings, got 1')),
    ({'public_keys': ['a', 'a']}, pytest.raises(InvalidParamsError, match='public keys must be distinct')),
    ({'step': 0}, pytest.raises(InvalidParamsError, match='step must be positive')),
    ({'step': 'x'}, pytest.raises(InvalidParamsError, match='step must be a duration in seconds')),
    ({'start': -1}, pytest.raises(InvalidParamsError, match='start must be non-negative')),
    ({'end': 0}, pytest.raises(InvalidParamsError, match='end must be after start')),
    ({'allowed_lateness': -1}, pytest.raises(InvalidParamsError, match='allowed_lateness must be non-negative')),
    ({'horizon_steps': 0}, pytest.raises(InvalidParamsError, match='horizon_steps must be a positive integer')),
    ({'estimator': 'best'}, pytest.raises(InvalidParamsError, match="estimator must be one of")),
    ({'num_shards': 5}, pytest.raises(InvalidParamsError, match='num_shards must not exceed the number of keys')),
    ({'budget': 1.0}, pytest.raises(InvalidParamsError, match='budget must be a PrivacyBudget')),
    ({'privacy_unit': 'user'}, pytest.raises(InvalidParamsError, match='privacy_unit must be EventLevel')),
    ({'key_fn': 3}, pytest.raises(InvalidParamsError, match='key_fn must be callable')),
    ({'value_fn': len}, pytest.raises(InvalidParamsError, match='value_fn is not an argument of ContinualCountPerKey: a count counts records')),
    ({'testing_seed': 'x'}, pytest.raises(InvalidParamsError, match='testing_seed must be an int')),
])
def test_count_validation(kwargs, expectation):
    params = dict(public_keys=['a', 'b'], start=0, step=60, budget=PrivacyBudget(epsilon=1.0))
    params.update(kwargs)
    with expectation:
        ContinualCountPerKey(**params)


@pytest.mark.parametrize('kwargs, match', [
    ({'lower': 2.0, 'upper': 1.0}, 'lower must not exceed upper'),
    ({'lower': 0.0, 'upper': 0.0}, 'must not both be 0'),
    ({'lower': 0.0, 'upper': float('inf')}, 'must be finite'),
    ({'lower': 0.0, 'upper': 1.0, 'grid_bits': 40}, 'grid_bits must be at most 30'),
    ({}, 'missing required argument.s. lower, upper'),
])
def test_sum_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        ContinualSumPerKey(public_keys=['a'], start=0, step=60, budget=PrivacyBudget(epsilon=1.0),
                           **kwargs)


def test_histogram_and_unit_validation():
    with pytest.raises(InvalidParamsError, match='bins must be a non-empty list of distinct labels'):
        ContinualHistogramPerKey(public_keys=['a'], bins=[], start=0, step=60,
                                 budget=PrivacyBudget(epsilon=1.0))
    with pytest.raises(InvalidParamsError, match='UserLevel: max_steps_per_unit must be set'):
        UserLevel(unit_fn=len)
    with pytest.raises(InvalidParamsError, match='UserLevel: max_keys_per_unit must be a positive integer'):
        UserLevel(unit_fn=len, max_keys_per_unit=0, max_steps_per_unit=3)
    assert EventLevel().sensitivity(1) == (1, 1)
    assert UserLevel(unit_fn=len, max_keys_per_unit=4, max_contributions_per_step=2,
                     max_steps_per_unit=3).sensitivity(1) == (24, 12)
