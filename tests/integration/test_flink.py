"""The continual transforms in streaming mode on the FlinkRunner (embedded ``[local]`` cluster).

* An unbounded source that Flink runs: ``PeriodicImpulse`` (a splittable DoFn with a watermark)
  drives a deterministic generator of ride events with event timestamps;
  ``ContinualCountPerKey`` (public end, ``testing_seed``) releases every key for every step; the
  releases equal ``beam_dp.testing.replay`` release for release, and equal what the DirectRunner
  releases for the same events.
* ``TestStream`` on Flink: idle keys and empty steps released, late records dead-lettered.
  TestStream needs an explicit standard coder on Flink: its default ``FastPrimitivesCoder`` is
  Python-only, and the Java runner, which decodes the TestStream's events to replay them, fails
  with "CoderException: `UnknownCoderWrapper` was used to perform an actual decoding in the
  Java SDK". ``TestStream(coder=TupleCoder([StrUtf8Coder(), ...]))`` fixes it.

The job server is the one ``.ci/fetch_flink_job_server.sh`` provides (see docs/runners.md);
each Flink job takes ~30-60 s here (job server JVM + mini cluster start).
"""

import time

import apache_beam as beam
import pytest
from apache_beam.coders import StrUtf8Coder
from apache_beam.coders import TupleCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests import runners

pytestmark = [pytest.mark.integration, pytest.mark.flink, runners.requires_flink]

KEYS = ['north', 'south', 'east', 'west', 'idle']     # 'idle' never has an event
STEP = 5
IMPULSES = 40                                         # one per second: 8 steps
SEED = 77
LABEL = 'FlinkCounts'
RECORD_CODER = TupleCoder([StrUtf8Coder(), StrUtf8Coder()])


def generate(impulse_seconds, start):
    """The deterministic events of the impulse at ``impulse_seconds``: [(key, rider), time]."""
    i = int(round(impulse_seconds - start))
    out = []
    for j in range((i * 7) % 4):
        key = KEYS[(i * 3 + j) % 4]
        out.append(((key, f'rider-{i}-{j}'), start + i + j * 0.25))
    return out


def all_events(start):
    return [e for i in range(IMPULSES) for e in generate(start + i, start)]


def counts(start, **kwargs):
    return ContinualCountPerKey(public_keys=KEYS, start=start, step=STEP,
                                end=start + IMPULSES, budget=PrivacyBudget(epsilon=1.0),
                                testing_seed=SEED, label=LABEL, **kwargs)


def expected_releases(start):
    transform = counts(start)
    reference = release_table(replay(transform.driver.loop_driver(), keyed_events(
        transform.driver,
        [(key, int((t - start) // STEP), None) for (key, _), t in all_events(start)],
        steps=IMPULSES // STEP), label=LABEL, seed=SEED, end_input=False).releases)
    return sorted((key, step, values[0]) for (key, step), values in reference.items())


def _extract(release):
    return (release.key, release.step, release.value)


def test_periodic_impulse_counts_equal_the_reference_and_the_direct_runner():
    # The impulses lie in the (recent) past: PeriodicImpulse catches up at full speed and then
    # stops, so the run does not wait for wall-clock time; the source is unbounded all the same
    # (splittable DoFn, watermark advanced per impulse; streaming mode).
    start = int(time.time()) - IMPULSES - 60
    expected = expected_releases(start)
    assert len(expected) == len(KEYS) * IMPULSES // STEP

    began = time.monotonic()
    with beam.Pipeline(options=PipelineOptions(runners.flink_options(streaming=True))) as p:
        records = (
            p
            | 'Impulses' >> PeriodicImpulse(start_timestamp=start,
                                            stop_timestamp=start + IMPULSES, fire_interval=1)
            | 'Generate' >> beam.FlatMap(
                lambda t, start=start: [TimestampedValue(r, ts) for r, ts in generate(t, start)])
            .with_output_types(tuple[str, str]))
        out = records | counts(start)
        assert_that(out.releases | beam.Map(_extract), equal_to(expected))
        assert_that(out.dead_letter, equal_to([]), label='NoDeadLetters')
    print(f'Flink PeriodicImpulse job: {time.monotonic() - began:.1f}s')

    # The same events on the streaming DirectRunner (TestStream: PeriodicImpulse is not
    # supported by BundleBasedDirectRunner).
    stream = TestStream(coder=RECORD_CODER).advance_watermark_to(start)
    for i in range(IMPULSES):
        stream = stream.add_elements(
            [TimestampedValue(r, ts) for r, ts in generate(start + i, start)]
        ).advance_watermark_to(start + i + 1)
    stream = stream.advance_watermark_to(start + IMPULSES + 10).advance_watermark_to_infinity()
    with beam.Pipeline(options=PipelineOptions(runners.direct_options(streaming=True))) as p:
        out = p | stream.with_output_types(tuple[str, str]) | counts(start)
        assert_that(out.releases | beam.Map(_extract), equal_to(expected))


def test_teststream_idle_keys_late_records_and_parity():
    """TestStream on Flink (explicit coder): every key and step released (an idle key, empty
    steps), a late record dead-lettered, values equal to the reference under the seed."""
    events = [(('north', 'r1'), 1), (('north', 'r2'), 2), (('south', 'r3'), 7)]
    late = (('south', 'r4'), 3)                      # step 0, after step 0 was released
    stream = (TestStream(coder=RECORD_CODER)
              .advance_watermark_to(0)
              .add_elements([TimestampedValue(r, t) for r, t in events])
              .advance_watermark_to(11)               # steps 0 and 1 released; step 2 empty
              .add_elements([TimestampedValue(*late)])
              .advance_watermark_to(30)               # past the end (20): steps 2, 3 released
              .advance_watermark_to_infinity())
    transform = ContinualCountPerKey(public_keys=KEYS, start=0, step=STEP, end=20,
                                     budget=PrivacyBudget(epsilon=1.0), testing_seed=SEED,
                                     label=LABEL)
    reference = release_table(replay(transform.driver.loop_driver(), keyed_events(
        transform.driver, [(k, t // STEP, None) for (k, _), t in events], steps=4),
        label=LABEL, seed=SEED, end_input=False).releases)
    expected = sorted((k, s, v[0]) for (k, s), v in reference.items())

    def check_dead(dead):
        assert [(d.stage, d.reason.split(' (')[0]) for d in dead] == [
            ('ReleaseNoisyValues', 'late: step 0 was already released')], dead

    # --max_bundle_size=1: Flink's operators hold the watermark back while a bundle is open, so
    # with the default bundling the late record joins the open bundle of the on-time ones and
    # reaches the stateful stage before watermark 11 does (it is then counted, not late).
    options = runners.flink_options(streaming=True) + ['--max_bundle_size=1']
    with beam.Pipeline(options=PipelineOptions(options)) as p:
        out = (p
               | stream.with_output_types(tuple[str, str])
               | 'Identity' >> beam.Map(lambda r: r).with_output_types(tuple[str, str])
               | transform)
        assert_that(out.releases | beam.Map(_extract), equal_to(expected))
        assert_that(out.dead_letter, check_dead, label='LateRecord')
