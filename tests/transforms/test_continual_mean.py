"""Pipeline tier: ``ContinualMeanPerKey`` / ``ContinualVariancePerKey`` on TestStream in
streaming mode (DirectRunner named explicitly; the Prism run is in
``tests/integration/test_prism_mean.py``): values at a noise-free budget (empty steps and idle
keys released, clamping, dead letters), user level and private keys, construction checks, and
seeded parity with ``beam_dp.testing.replay``."""

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.transforms.window import TimestampedValue

import beam_dp
from beam_dp import ContinualMeanPerKey
from beam_dp import ContinualVariancePerKey
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests.helpers import NOISE_FREE
from tests.helpers import run_stream
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

STEP = 60


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def _rounded(r):
    return (r.key, r.step, round(r.value, 2))


def _reasons(dead, prefixes):
    reasons = sorted(r for _, r in dead)
    assert len(reasons) == len(prefixes), reasons
    for prefix in prefixes:
        assert any(r.startswith(prefix) for r in reasons), (prefix, reasons)


def _stream():
    return (TestStream()
            .advance_watermark_to(0)
            .add_elements([tv(('a', 2.0), 1), tv(('a', 4.0), 2), tv(('a', 'x'), 3),
                           tv(('a', float('nan')), 4), tv(('zz', 1.0), 5)])
            .advance_watermark_to(100)
            .add_elements([tv(('a', 50.0), 130), tv(('b', -7.0), 140)])   # clamped to 10, 0
            .advance_watermark_to(200)
            .advance_watermark_to_infinity())


def test_means_per_step_with_empty_steps_idle_keys_and_clamping():
    transform = ContinualMeanPerKey(public_keys=['a', 'b'], start=0, step=STEP, end=180,
                                    budget=NOISE_FREE, lower=0.0, upper=10.0)
    # 'b' before its first record: count 0, the clamp gives the midpoint 5.
    run_stream(_stream(), transform, extract=_rounded,
               expected=[('a', 0, 3.0), ('b', 0, 5.0), ('a', 1, 3.0), ('b', 1, 5.0),
                         ('a', 2, 5.33), ('b', 2, 0.0)],
               dead=lambda dead: _reasons(dead, ['value is not a number'] * 2
                                          + ["key 'zz' is not in the public key set"]))


def test_variances_and_release_fields():
    transform = ContinualVariancePerKey(public_keys=['a', 'b'], start=0, step=STEP, end=180,
                                        budget=NOISE_FREE, lower=0.0, upper=10.0)

    def check(releases):
        by = {(r.key, r.step): r for r in releases}
        assert len(by) == 6
        a2 = by[('a', 2)]                              # values 2, 4, 10: mean 16/3
        assert a2.metric == 'variance'
        assert a2.value == pytest.approx(((2 - 16 / 3) ** 2 + (4 - 16 / 3) ** 2
                                          + (10 - 16 / 3) ** 2) / 3, abs=0.02)  # the grid
        count, total, mean, mean_sd, var_sd = a2.values
        assert (count, total, mean) == pytest.approx((3.0, 16.0, 16 / 3), abs=0.01)
        assert mean_sd < 1e-4 and var_sd < 1e-4 and a2.noise_stddev < 1e-5
        # 'b' before its first record: n = 0, the neutral (1 + 0)/2 mean square: r²/2
        assert by[('b', 0)].value == 12.5 and by[('b', 2)].value == pytest.approx(0.0, abs=0.01)

    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | _stream() | transform
        assert out.releases.element_type is beam_dp.Release
        assert_that(out.releases, check)


def test_user_level_bounds_the_units_records():
    stream = (TestStream()
              .advance_watermark_to(0)
              .add_elements([tv(('a', 1.0, 'u1'), 1), tv(('a', 3.0, 'u1'), 2),
                             tv(('a', 9.0, 'u1'), 3),                    # over m = 2
                             tv(('b', 9.0, 'u1'), 4),                    # over K = 1
                             tv(('a', 5.0, 'u2'), 5)])
              .advance_watermark_to(100)
              .advance_watermark_to_infinity())
    transform = ContinualMeanPerKey(
        public_keys=['a', 'b'], start=0, step=STEP, end=60, budget=NOISE_FREE, lower=0.0,
        upper=10.0, privacy_unit=UserLevel(unit_fn=lambda r: r[2], max_keys_per_unit=1,
                                           max_contributions_per_step=2, max_steps_per_unit=1))
    run_stream(stream, transform, extract=_rounded, expected=[('a', 0, 3.0), ('b', 0, 5.0)],
               dead=lambda dead: (len(dead) == 2 and all(s == 'BoundContributions'
                                                          for s, _ in dead)) or
               pytest.fail(f'{dead}'))


def test_private_keys_release_selected_keys_only():
    records = [tv(('hot', float(i % 10), f'u{i}'), 1 + i % 50) for i in range(300)]
    records.append(tv(('cold', 3.0, 'v'), 7))
    stream = (TestStream().advance_watermark_to(0).add_elements(records)
              .advance_watermark_to(100).advance_watermark_to_infinity())
    transform = ContinualMeanPerKey(
        keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2), start=0,
        step=STEP, end=60, budget=NOISE_FREE, lower=0.0, upper=10.0,
        privacy_unit=UserLevel(unit_fn=lambda r: r[2], max_keys_per_unit=1,
                               max_contributions_per_step=1, max_steps_per_unit=1))
    run_stream(stream, transform, extract=_rounded, expected=[('hot', 0, 4.5)])


@pytest.mark.parametrize('cls', [ContinualMeanPerKey, ContinualVariancePerKey])
def test_parity_with_the_pure_reference_under_a_seed(cls):
    """Real noise (ε = 1): the pipeline emits exactly the reference's releases, whatever the
    arrival order and bundling."""
    keys = [f'k{i}' for i in range(5)]
    events = [(keys[(i * 3) % 5], 7 * i % 290, (i * 13) % 17 - 3.0) for i in range(80)]
    stream = TestStream().advance_watermark_to(0)
    for chunk in (events[50:], events[:50]):
        stream = stream.add_elements([tv((k, x), t) for k, t, x in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    transform = cls(public_keys=keys, start=0, step=STEP, end=300, num_shards=2,
                    budget=PrivacyBudget(epsilon=1.0), lower=0.0, upper=12.0, testing_seed=11,
                    label='Means')
    expected = release_table(replay(transform.driver.loop_driver(), keyed_events(
        transform.driver, [(k, t // STEP, x) for k, t, x in events], steps=5), label='Means',
        seed=11, end_input=False).releases)
    assert len(expected) == 25
    run_stream(stream, transform, extract=lambda r: (r.key, r.step, tuple(r.values)),
               expected=[(k, s, tuple(v)) for (k, s), v in expected.items()])


@pytest.mark.parametrize('kwargs,match', [
    (dict(lower=0.0), 'upper'),
    (dict(lower=1.0, upper=1.0), 'needs lower < upper'),
    (dict(lower=0.0, upper=1.0, bins=['x']), 'bins'),
])
def test_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        ContinualMeanPerKey(public_keys=['a'], start=0, step=60, budget=PrivacyBudget(epsilon=1.0),
                            **kwargs)


def test_budget_split_is_no_worse_than_pipeline_dp():
    """PipelineDP's MEAN: a count at ε/2 (sd √2·2/ε) and a normalised sum at ε/2 (sd
    √2·2r/ε). Here, one step at ε (T = 1): the same sds."""
    t = ContinualMeanPerKey(public_keys=['a'], start=0, step=60, end=60, lower=0.0, upper=10.0,
                            budget=PrivacyBudget(epsilon=1.0))
    assert t.driver.noise_stddev(0) == pytest.approx(2 * 2 ** 0.5, rel=1e-3)


def test_private_keys_at_event_level():
    """The aggregating private-keys entry (``_ExtractAndAggregatePrivateFn``) sums the tuples."""
    records = [tv(('hot', float(i % 10)), 1 + i % 50) for i in range(300)]
    records += [tv(('hot', 'bad'), 3), tv(('cold', 3.0), 7)]
    stream = (TestStream().advance_watermark_to(0).add_elements(records)
              .advance_watermark_to(100).advance_watermark_to_infinity())
    transform = ContinualVariancePerKey(
        keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2), start=0,
        step=STEP, end=60, budget=NOISE_FREE, lower=0.0, upper=10.0)
    run_stream(stream, transform, extract=_rounded, expected=[('hot', 0, 8.25)],
               dead=lambda dead: _reasons(dead, ['value is not a number']))


def test_count_share_is_a_mean_and_variance_argument_only():
    t = ContinualMeanPerKey(public_keys=['a'], start=0, step=60, end=60, lower=0.0, upper=10.0,
                            budget=PrivacyBudget(epsilon=1.0), count_share=0.25)
    assert t.driver.count_share == 0.25
    with pytest.raises(InvalidParamsError, match='count_share'):
        beam_dp.ContinualSumPerKey(public_keys=['a'], start=0, step=60, lower=0.0, upper=1.0,
                                   budget=PrivacyBudget(epsilon=1.0), count_share=0.25)
