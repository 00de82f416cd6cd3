"""``ContinualMeanPerKey`` / ``ContinualVariancePerKey`` on the PrismRunner (named explicitly;
the binary built by ``.ci/build_prism.sh``): user-level bounding, dead letters and idle keys
at a noise-free budget, and parity with ``beam_dp.testing.replay`` under a seed (event level:
also in the runner matrix, ``tests/runner_matrix.py``)."""

import apache_beam as beam
import pytest
from apache_beam.coders import FloatCoder
from apache_beam.coders import StrUtf8Coder
from apache_beam.coders import TupleCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue as tv

from beam_dp import ContinualMeanPerKey
from beam_dp import ContinualVariancePerKey
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests import runners
from tests.helpers import NOISE_FREE

pytestmark = [pytest.mark.integration, pytest.mark.prism, runners.requires_prism]

STEP = 60
STR_FLOAT_STR = TupleCoder([StrUtf8Coder(), FloatCoder(), StrUtf8Coder()])
STR_FLOAT = TupleCoder([StrUtf8Coder(), FloatCoder()])


def _run(stream, transform, coder, check_releases, check_dead=None):
    with beam.Pipeline(options=PipelineOptions(runners.prism_options(streaming=True))) as p:
        records = (p | stream.with_output_types(coder.to_type_hint())
                   | 'Identity' >> beam.Map(lambda r: r).with_output_types(coder.to_type_hint()))
        out = records | transform
        assert_that(out.releases, check_releases, label='CheckReleases')
        if check_dead is not None:
            assert_that(out.dead_letter | 'Stages' >> beam.Map(lambda d: d.stage), check_dead,
                        label='CheckDeadLetters')


def test_user_level_mean_on_prism():
    stream = (TestStream(coder=STR_FLOAT_STR)
              .advance_watermark_to(0)
              .add_elements([tv(('a', 1.0, 'u1'), 1), tv(('a', 3.0, 'u1'), 2),
                             tv(('a', 9.0, 'u1'), 3), tv(('b', 9.0, 'u1'), 4),
                             tv(('a', 5.0, 'u2'), 5)])
              .advance_watermark_to(130)
              .advance_watermark_to_infinity())
    transform = ContinualMeanPerKey(
        public_keys=['a', 'b'], start=0, step=STEP, end=120, budget=NOISE_FREE, lower=0.0,
        upper=10.0, privacy_unit=UserLevel(unit_fn=lambda r: r[2], max_keys_per_unit=1,
                                           max_contributions_per_step=2, max_steps_per_unit=1))
    _run(stream, transform, STR_FLOAT_STR,
         lambda rs: equal_to([('a', 0, 3.0), ('b', 0, 5.0), ('a', 1, 3.0), ('b', 1, 5.0)])(
             [(r.key, r.step, round(r.value, 2)) for r in rs]),
         equal_to(['BoundContributions'] * 2))


@pytest.mark.parametrize('cls', [ContinualMeanPerKey, ContinualVariancePerKey])
def test_parity_with_the_pure_reference_on_prism(cls):
    keys = ['k0', 'k1', 'k2']
    events = [(keys[i % 3], 7 * i % 170, float((i * 13) % 17 - 3)) for i in range(40)]
    stream = (TestStream(coder=STR_FLOAT).advance_watermark_to(0)
              .add_elements([tv((k, x), t) for k, t, x in events])
              .advance_watermark_to(400).advance_watermark_to_infinity())
    transform = cls(public_keys=keys, start=0, step=STEP, end=180, budget=PrivacyBudget(rho=0.5),
                    lower=0.0, upper=12.0, testing_seed=5, label='Means')
    want = release_table(replay(transform.driver.loop_driver(), keyed_events(
        transform.driver, [(k, t // STEP, x) for k, t, x in events], steps=3), label='Means',
        seed=5, end_input=False).releases)
    _run(stream, transform, STR_FLOAT,
         lambda rs: equal_to(sorted(want.items()))(
             [((r.key, r.step), list(r.values)) for r in rs]))
