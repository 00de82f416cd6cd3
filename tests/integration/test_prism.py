"""The continual transforms' streaming suite on the PrismRunner (named explicitly; the binary
built by ``.ci/build_prism.sh``).

TestStream in streaming mode: idle keys and empty steps released, releases following the
watermark, late and malformed records dead-lettered, user-level bounding, parity with
``beam_dp.testing.replay`` under a seed. Prism 2.77.0 panics with "zero length key" when a TestStream
feeds a stateful stage directly; the transforms re-window first ('GlobalWindow'), and these tests
put an identity Map after the TestStream as well.
"""

import apache_beam as beam
import pytest
from apache_beam.coders import StrUtf8Coder
from apache_beam.coders import TupleCoder
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue as tv

from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests import runners
from tests.helpers import NOISE_FREE

pytestmark = [pytest.mark.integration, pytest.mark.prism, runners.requires_prism]

STEP = 60
STR_INT = TupleCoder([StrUtf8Coder(), VarIntCoder()])
STR_STR = TupleCoder([StrUtf8Coder(), StrUtf8Coder()])


def _extract(r):
    return (r.key, r.step, round(r.value, 6))


def run(stream, transform, element_type, expected=None, check_dead=None):
    with beam.Pipeline(options=PipelineOptions(runners.prism_options(streaming=True))) as p:
        records = (p
                   | stream.with_output_types(element_type)
                   | 'Identity' >> beam.Map(lambda r: r).with_output_types(element_type))
        out = records | transform
        if expected is not None:
            assert_that(out.releases | 'Extract' >> beam.Map(_extract), equal_to(expected),
                        label='CheckReleases')
        if check_dead is not None:
            assert_that(out.dead_letter | 'Reasons' >> beam.Map(lambda d: (d.stage, d.reason)),
                        check_dead, label='CheckDeadLetters')


def counts(keys=('a', 'b'), **kwargs):
    kwargs.setdefault('budget', NOISE_FREE)
    return ContinualCountPerKey(public_keys=list(keys), start=0, step=STEP, **kwargs)


def test_idle_keys_and_empty_steps_are_released():
    stream = (TestStream(coder=STR_INT)
              .advance_watermark_to(0)
              .add_elements([tv(('a', 1), 5), tv(('a', 2), 6)])
              .advance_watermark_to(200)
              .add_elements([tv(('a', 3), 250)])
              .advance_watermark_to(300)
              .advance_watermark_to_infinity())
    expected = [('a', 0, 2.0), ('a', 1, 2.0), ('a', 2, 2.0), ('a', 3, 2.0), ('a', 4, 3.0),
                ('b', 0, 0.0), ('b', 1, 0.0), ('b', 2, 0.0), ('b', 3, 0.0), ('b', 4, 0.0)]
    run(stream, counts(end=300), tuple[str, int], expected=expected)


def test_late_and_malformed_records_go_to_the_dead_letter_output():
    stream = (TestStream(coder=STR_INT)
              .advance_watermark_to(0)
              .add_elements([tv(('a', 1), 10), tv(('zz', 1), 11)])
              .advance_watermark_to(70)           # step 0 released
              .add_elements([tv(('a', 1), 20)])   # late for step 0
              .add_elements([tv(('a', 1), -5)])   # before start
              .advance_watermark_to(130)
              .advance_watermark_to_infinity())

    def check(dead):
        reasons = sorted(r for _, r in dead)
        assert len(reasons) == 3, reasons
        assert any("key 'zz' is not in the public key set" in r for r in reasons), reasons
        assert any(r.startswith('late: step 0 was already released') for r in reasons), reasons
        assert any('before the release start' in r for r in reasons), reasons

    run(stream, counts(end=120), tuple[str, int],
        expected=[('a', 0, 1.0), ('b', 0, 0.0), ('a', 1, 1.0), ('b', 1, 0.0)], check_dead=check)


def test_user_level_bounding():
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=2,
                     max_steps_per_unit=2)
    stream = (TestStream(coder=STR_STR)
              .advance_watermark_to(0)
              .add_elements([tv(('a', 'u1'), 1), tv(('a', 'u1'), 2), tv(('a', 'u1'), 3),
                             tv(('b', 'u1'), 4), tv(('b', 'u2'), 5)])
              .add_elements([tv(('a', 'u1'), 65), tv(('a', 'u1'), 125)])
              .advance_watermark_to(200)
              .advance_watermark_to_infinity())

    def check(dead):
        reasons = sorted(r for _, r in dead)
        assert len(reasons) == 3, reasons
        for text in ('max_contributions_per_step=2', 'max_keys_per_unit=1',
                     'max_steps_per_unit=2'):
            assert any(text in r for r in reasons), (text, reasons)

    run(stream, counts(end=180, privacy_unit=unit), tuple[str, str],
        expected=[('a', 0, 2.0), ('a', 1, 3.0), ('a', 2, 3.0),
                  ('b', 0, 1.0), ('b', 1, 1.0), ('b', 2, 1.0)], check_dead=check)


def test_parity_with_the_pure_reference_under_a_seed():
    keys = [f'k{i}' for i in range(7)]
    events = [(keys[(i * 3) % 7], 7 * i % 290) for i in range(60)]
    stream = TestStream(coder=STR_INT).advance_watermark_to(0)
    for chunk in (events[40:], events[:40]):          # out of order within and across steps
        stream = stream.add_elements([tv((k, 1), t) for k, t in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    transform = ContinualCountPerKey(public_keys=keys, start=0, step=STEP, end=300, num_shards=3,
                                     budget=PrivacyBudget(epsilon=1.0), testing_seed=11,
                                     label='Counts')
    expected = release_table(replay(transform.driver.loop_driver(), keyed_events(
        transform.driver, [(k, t // STEP, None) for k, t in events], steps=5), label='Counts',
        seed=11, end_input=False).releases)
    run(stream, transform, tuple[str, int],
        expected=[(k, s, round(v[0], 6)) for (k, s), v in expected.items()])
