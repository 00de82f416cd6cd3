"""Tests of the continual-counts job (pipelines/continual_counts).

* the graph on a TestStream of Pub/Sub messages in streaming mode (releases for every key and
  step, malformed / non-public / late inputs dead-lettered, windowed Avro files written);
* malformed Avro records and Pub/Sub payloads are dead-lettered, not raised;
* the job translates for Dataflow (dry run, Pub/Sub configuration);
* the no-argument demo end to end in a subprocess.
"""

import datetime
import glob
import math
import os
import subprocess
import sys

import apache_beam as beam
import fastavro
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.utils.timestamp import Timestamp

from beam_dp import DeadLetter
from beam_dp import InvalidRecordError
from beam_dp import Release
from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.records import RELEASE_SCHEMA
from beam_dp.io.records import release_from_avro
from pipelines.common import pubsub_codec
from pipelines.continual_counts import options as job_options
from pipelines.continual_counts import pipeline as job
from pipelines.continual_counts import sample_data
from pipelines.continual_counts import summary
from pipelines.continual_counts.events import EVENT_SCHEMA
from pipelines.continual_counts.events import event_to_avro
from pipelines.continual_counts.events import RideEvent
from pipelines.continual_counts.events import decode_event_record
from pipelines.continual_counts.events import encode_event
from pipelines.continual_counts.events import validate_event

from tests.runners import BATCH_RUNNER

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START = datetime.datetime(2024, 6, 2, tzinfo=datetime.timezone.utc)
START_S = int(START.timestamp())
#: A test noise key for --noise_key (read by the in-process runner; never a real secret).
TEST_KEY_VAR = 'BDP_TEST_NOISE_KEY'
os.environ.setdefault(TEST_KEY_VAR, '0123456789abcdef' * 4)
STEP_S = 60
KEYS = ('A', 'B', 'C')


def _event(rider, station, seconds, duration=600.0):
    return RideEvent(rider, station, (START_S + seconds) * 1_000_000, duration)


def _message(event_or_bytes, seconds):
    from apache_beam.io.gcp.pubsub import PubsubMessage
    data = event_or_bytes if isinstance(event_or_bytes, bytes) else encode_event(
        event_or_bytes)
    return PubsubMessage(data, {'event_time': str((START_S + seconds) * 1000)})


def _read_avro(pattern, schema):
    records = []
    for path in sorted(glob.glob(pattern)):
        with open(path, 'rb') as f:
            reader = fastavro.reader(f, reader_schema=schema)
            records.extend(reader)
    return records


# -- events and codec ------------------------------------------------------------------------------

def test_event_codec_roundtrip_and_validation():
    event = _event('r1', 'A', 5, 123.5)
    assert validate_event(decode_event_record(encode_event(event))) == \
        event


@pytest.mark.parametrize('payload', [
    b'',                                   # empty
    b'\xff\xff\xff\xff\xff\xff\xff',       # not Avro
    b'garbage that is not an avro ride',  # decodes partially / trailing bytes
])
def test_malformed_pubsub_payloads_raise_invalid_record(payload):
    with pytest.raises(InvalidRecordError):
        validate_event(decode_event_record(payload))


def test_trailing_bytes_are_malformed():
    data = encode_event(_event('r1', 'A', 5)) + b'\x00'
    with pytest.raises(InvalidRecordError, match='trailing'):
        decode_event_record(data)


@pytest.mark.parametrize('record, reason', [
    ({'rider_id': 'r', 'station': 'A', 'event_time_micros': 1}, 'missing'),
    ({'rider_id': '', 'station': 'A', 'event_time_micros': 1, 'duration_seconds': 1.0}, 'empty'),
    ({'rider_id': 'r', 'station': 7, 'event_time_micros': 1, 'duration_seconds': 1.0}, 'string'),
    ({'rider_id': 'r', 'station': 'A', 'event_time_micros': -5, 'duration_seconds': 1.0},
     'range'),
    ({'rider_id': 'r', 'station': 'A', 'event_time_micros': 1, 'duration_seconds': math.nan},
     'finite'),
    ({'rider_id': 'r', 'station': 'A', 'event_time_micros': 1, 'duration_seconds': -1.0},
     'finite'),
    ('not a record', 'record'),
])
def test_validate_event_rejects(record, reason):
    with pytest.raises(InvalidRecordError, match=reason):
        validate_event(record)


def test_release_codec_roundtrip():
    from beam_dp import Release
    release = Release('A', 3, 10, 20, 4.5, [], 'count', 'm', 1.0, 0.0, 0.0, 'user', 2.5)
    assert pubsub_codec.decode_release(pubsub_codec.encode_release(release)) == release


@pytest.mark.pipeline
def test_parse_dead_letters_malformed_avro_and_pubsub():
    good = _event('r1', 'A', 5)
    bad_records = [
        {'rider_id': 'r2', 'station': 'A'},                                      # missing fields
        {**good._asdict(), 'duration_seconds': -3.0},                           # negative
        {**good._asdict(), 'station': ''},                                      # empty key
    ]
    with TestPipeline(runner=BATCH_RUNNER) as p:
        avro = (p | 'Avro' >> beam.Create([good._asdict()] + bad_records)
                | 'ParseAvro' >> job.ParseEvents('avro'))
        pubsub = (p | 'PubSub' >> beam.Create([_message(good, 5), _message(b'\x01\x02', 6),
                                               _message(b'', 7)])
                  | 'ParsePubsub' >> job.ParseEvents('pubsub'))
        assert_that(avro.events, equal_to([good]), label='AvroEvents')
        assert_that(pubsub.events, equal_to([good]), label='PubsubEvents')
        assert_that(avro.dead_letter | 'AvroStages' >> beam.Map(lambda d: d.stage),
                    equal_to(['parse_avro'] * 3), label='AvroDead')
        assert_that(pubsub.dead_letter | 'PubsubStages' >> beam.Map(lambda d: d.stage),
                    equal_to(['parse_pubsub'] * 2), label='PubsubDead')


# -- options ---------------------------------------------------------------------------------------

def test_parse_args_defaults_and_passthrough():
    args, beam_args = job_options.parse_args(['--epsilon=0.5', '--runner=DataflowRunner',
                                           '--start=2024-06-02T01:00:00Z'])
    assert args.epsilon == 0.5 and beam_args == ['--runner=DataflowRunner']
    assert args.start == START_S + 3600
    assert args.uses_sample_data and args.end == args.start + 48 * 3600   # --start + 48 steps
    assert args.output_avro == job_options.DEFAULT_OUTPUT == args.dead_letter_avro
    assert args.plot.endswith('releases.png') and args.noise_key is None
    assert not hasattr(args, 'testing_seed')           # the launchers expose no seed
    with pytest.raises(SystemExit):
        job_options.parse_args(['--testing_seed=7'])
    assert len(job.public_keys(args)) == 50
    args, _ = job_options.parse_args(['--input_subscription=projects/p/subscriptions/s',
                                   '--output_topic=projects/p/topics/t', '--plot=none',
                                   '--public_keys=x, y', '--start=1717286400'])
    assert args.end is None and args.output_avro is None and args.plot is None
    assert job.public_keys(args) == ['x', 'y'] and args.start == 1717286400.0
    # A batch input always gets a public end from public parameters (never from the data).
    args, _ = job_options.parse_args(['--input_avro=rides/*.avro', '--start=1717286400'])
    assert args.end == 1717286400 + job_options.DEFAULT_BATCH_STEPS * 3600
    args, _ = job_options.parse_args(['--input_avro=x', '--start=0', '--step_seconds=60',
                                      '--horizon_steps=10'])
    assert args.end == 600
    assert 'variance_reduced' in job_options.build_parser().format_help()
    for action in job_options.build_parser()._actions:      # every option explains itself
        assert action.help, action.option_strings


# -- streaming graph on a TestStream ---------------------------------------------------------------

def _streaming_args(tmp_path, extra=()):
    args, _ = job_options.parse_args([
        '--input_subscription=projects/p/subscriptions/s', f'--public_keys={",".join(KEYS)}',
        f'--start={START_S}', f'--step_seconds={STEP_S}', f'--end={START_S + 3 * STEP_S}',
        '--max_keys_per_unit=1', '--max_steps_per_unit=3', '--max_contributions_per_step=1',
        f'--noise_key=env:{TEST_KEY_VAR}', '--stream_id=tests',
        f'--output_avro={tmp_path / "out"}', f'--dead_letter_avro={tmp_path / "dead"}', *extra])
    return args


@pytest.mark.pipeline
def test_build_pipeline_streaming_teststream(tmp_path):
    args = _streaming_args(tmp_path)
    stream = (
        TestStream()
        .advance_watermark_to(Timestamp(START_S))
        .add_elements([
            beam.window.TimestampedValue(_message(_event('r1', 'A', 5), 5), START_S + 5),
            beam.window.TimestampedValue(_message(_event('r2', 'B', 10), 10), START_S + 10),
            beam.window.TimestampedValue(_message(b'\x00garbage', 11), START_S + 11),
            beam.window.TimestampedValue(_message(_event('r3', 'Z', 12), 12), START_S + 12),
        ])
        .advance_watermark_to(Timestamp(START_S + 70))
        .add_elements([
            beam.window.TimestampedValue(_message(_event('r1', 'A', 75), 75), START_S + 75),
            # Late: step 0 was released when the watermark passed START + 60; the user-level
            # bounding stage learns it from its own release chain (seeded at launch), so it
            # dead-letters the record before it uses the unit's S.
            beam.window.TimestampedValue(_message(_event('r4', 'C', 30), 30), START_S + 30),
        ])
        # Finite first (past the last release at START + 180), then end of stream.
        .advance_watermark_to(Timestamp(START_S + 4 * STEP_S))
        .advance_watermark_to_infinity())
    collected = {}

    def outputs_fn(outputs):
        collected['ok'] = True
        assert_that(outputs.releases | 'KeySteps' >> beam.Map(lambda r: (r.key, r.step)),
                    equal_to([(k, s) for k in KEYS for s in range(3)]), label='AllKeySteps')
        assert_that(outputs.dead_letters | 'Stages' >> beam.Map(lambda d: d.stage),
                    equal_to(['parse_pubsub', 'ExtractAndValidate', 'BoundContributions']),
                    label='DeadStages')

    options = PipelineOptions(['--runner=DirectRunner'])
    options.view_as(StandardOptions).streaming = True
    p = job.build_pipeline(args, options, source=stream, outputs_fn=outputs_fn)
    assert options.view_as(StandardOptions).streaming
    p.run().wait_until_finish()
    assert collected['ok']
    releases = [release_from_avro(r) for r in
                _read_avro(str(tmp_path / 'out' / 'releases-*.avro'), RELEASE_SCHEMA)]
    assert sorted((r.key, r.step) for r in releases) == [(k, s) for k in KEYS for s in range(3)]
    assert all(r.metric == 'count' and r.noise_stddev > 0 for r in releases)
    dead = _read_avro(str(tmp_path / 'dead' / 'dead_letters-*.avro'), DEAD_LETTER_SCHEMA)
    assert sorted(d['stage'] for d in dead) == ['BoundContributions', 'ExtractAndValidate',
                                                'parse_pubsub']


@pytest.mark.pipeline
def test_lateness_arrival_counts_by_publish_time(tmp_path):
    """--lateness=arrival: the element timestamp is the publish time (the watermark follows it);
    'ArrivalTimeLateness' puts each ride in the step of its ``event_time_micros`` and
    dead-letters it iff it was published at or after that step's end + 30 s. r2 (step 0,
    published after the step but before 90 s) counts in step 0; r3 (step 0, published at 95 s)
    is dead-lettered with the record; r4 claims step 2 at 10 s and counts there, making no one
    late."""
    args = _streaming_args(tmp_path, ['--lateness=arrival', '--allowed_lateness_seconds=30',
                                      '--epsilon=1000000'])
    rides = [(_event('r1', 'A', 5), 5), (_event('r4', 'A', 170), 10),
             (_event('r2', 'B', 50), 80), (_event('r3', 'C', 20), 95)]
    stream = TestStream().advance_watermark_to(Timestamp(START_S))
    from apache_beam.io.gcp.pubsub import PubsubMessage  # pylint: disable=import-outside-toplevel
    for event, published in rides:
        stream = stream.advance_watermark_to(Timestamp(START_S + published)).add_elements(
            [beam.window.TimestampedValue(PubsubMessage(encode_event(event), {}),
                                          START_S + published)])
    stream = (stream.advance_watermark_to(Timestamp(START_S + 4 * STEP_S))
              .advance_watermark_to_infinity())
    expected = {('A', 0): 1, ('A', 1): 1, ('A', 2): 2, ('B', 0): 1, ('B', 1): 1, ('B', 2): 1,
                ('C', 0): 0, ('C', 1): 0, ('C', 2): 0}

    def outputs_fn(outputs):
        assert_that(outputs.releases | 'Values' >> beam.Map(
            lambda r: ((r.key, r.step), round(r.value))), equal_to(list(expected.items())),
            label='Counts')
        assert_that(outputs.dead_letters | 'Dead' >> beam.Map(
            lambda d: (d.transform, d.stage, d.reason.split(' (')[0], "'r3'" in d.record)),
            equal_to([('ArrivalTimeLateness', 'ArrivalTimeLateness',
                       'late: step 0 was already released', True)]), label='Dead')

    options = PipelineOptions(['--runner=DirectRunner'])
    p = job.build_pipeline(args, options, source=stream, outputs_fn=outputs_fn)
    labels = []

    class _Labels(beam.pipeline.PipelineVisitor):
        def visit_transform(self, applied):
            labels.append(applied.full_label)

    p.visit(_Labels())
    assert 'ArrivalTimeLateness/JudgeArrival/ParDo(_JudgeArrivalFn)' in labels
    p.run().wait_until_finish()


def test_lateness_arrival_needs_a_subscription(tmp_path):
    with pytest.raises(SystemExit):
        job_options.parse_args(['--lateness=arrival'])
    assert _streaming_args(tmp_path).lateness == 'watermark'


# -- batch input without --end ---------------------------------------------------------------------

@pytest.mark.pipeline
def test_input_avro_without_end_releases_every_step_of_the_default_range(tmp_path):
    """Issue 16: --input_avro without --end printed 'keys x steps: 50 x 1'. The job now passes
    the public default end (start + 48 steps): every key, every step."""
    rides = tmp_path / 'rides.avro'
    events = [_event(f'r{i}', KEYS[i % 3], 600 * i) for i in range(36)]          # six hours
    with open(rides, 'wb') as f:
        fastavro.writer(f, EVENT_SCHEMA, [event_to_avro(e) for e in events])
    args, beam_args = job_options.parse_args([
        f'--input_avro={rides}', f'--public_keys={",".join(KEYS)}', f'--start={START_S}',
        f'--noise_key=env:{TEST_KEY_VAR}', '--stream_id=tests', f'--output_avro={tmp_path / "out"}',
        '--plot=none'])
    assert args.end == START_S + 48 * 3600

    def outputs_fn(outputs):
        assert_that(outputs.releases | 'KeySteps' >> beam.Map(lambda r: (r.key, r.step)),
                    equal_to([(k, s) for k in KEYS for s in range(48)]), label='AllKeySteps')

    p = job.build_pipeline(args, PipelineOptions(['--runner=DirectRunner'] + beam_args),
                           outputs_fn=outputs_fn)
    p.run().wait_until_finish()


# -- the summary: truth after bounding -------------------------------------------------------------

def test_summary_separates_noise_from_the_bounding_bias():
    keys = ['A', 'B']
    truth = np.array([[3, 1], [0, 2]])                       # per step: A 3+1, B 0+2
    removed_ride = _event('r9', 'A', 30)._replace(station="A")
    dead = [DeadLetter('X', 'BoundContributions', 'contribution bound', repr(removed_ride),
                       removed_ride.event_time_micros),
            DeadLetter('X', 'BoundContributions', 'bound', "RideEvent(station='Z')", 0),
            DeadLetter('P', 'parse_avro', 'bad', '{}', None)]
    removed, unplaced = summary.removed_by_bounding(dead, keys, START_S * 10**6, STEP_S * 10**6,
                                                    2)
    assert removed.tolist() == [[1, 0], [0, 0]] and unplaced == 1
    releases = [Release(k, s, 0, 1, v, [], 'count', 'm', 1.0, 0.0, 0.0, 'user', 2.0)
                for k, s, v in [('A', 0, 2.0), ('A', 1, 3.0), ('B', 0, -1.0), ('B', 1, 2.0)]]
    result, arrays = summary.summarize(releases, dead, keys, truth, removed, 'isotonic')
    assert arrays['bounded'].tolist() == [[2, 3], [0, 2]]    # cumulative, minus the removed ride
    assert (result.true_total, result.bounded_total, result.removed_total) == (6, 5, 1)
    assert result.vs_bounded.rmse == pytest.approx(0.5)      # only B's step 0 is off, by 1
    assert result.vs_raw.max == pytest.approx(1.0) and result.negative_releases == 1
    assert arrays['processed'].tolist() == [[2.0, 3.0], [0.0, 2.0]]
    assert result.vs_bounded_postprocessed.rmse == 0.0
    text = result.text()
    assert 'after bounding      : 5 (bounding removed 1 = 16.7%' in text
    assert 'error vs bounded' in text and 'the DP noise alone' in text
    assert 'noise plus the bounding bias' in text and 'post-processed      : isotonic' in text


# -- Dataflow translation --------------------------------------------------------------------------

@pytest.mark.pipeline
def test_translates_for_dataflow_pubsub(tmp_path):
    pytest.importorskip('google.cloud.pubsub')
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
    args, beam_args = job_options.parse_args([
        '--input_subscription=projects/test-project/subscriptions/rides',
        '--output_topic=projects/test-project/topics/releases',
        '--dead_letter_topic=projects/test-project/topics/dead-letters',
        '--output_avro=gs://bucket/releases', '--epsilon=0.5',
        '--runner=DataflowRunner', '--dry_run=True', '--project=test-project',
        '--region=us-central1', '--temp_location=gs://bucket/tmp', '--streaming'])
    options = PipelineOptions(beam_args)
    p = job.build_pipeline(args, options)
    p.run()   # dry_run: translates the graph into a Dataflow job, submits nothing
    runner = p.runner
    assert isinstance(runner, DataflowRunner)
    proto = runner.job.proto
    # Runner v2 jobs carry the graph in the portable pipeline proto.
    transforms = {t.unique_name for t in runner.job.proto_pipeline.components.transforms.values()}
    assert any('ContinualCountPerStation/ReleaseNoisyValues' in n for n in transforms), transforms
    assert any('ReadEvents' in n for n in transforms)
    assert any('PublishReleases' in n for n in transforms)
    assert any('PublishDeadLetters' in n for n in transforms)
    assert proto.type.name == 'JOB_TYPE_STREAMING'


# -- the demo --------------------------------------------------------------------------------------

@pytest.mark.pipeline
@pytest.mark.slow
def test_demo_no_arguments_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
               MPLBACKEND='Agg')
    done = subprocess.run([sys.executable, '-m', 'pipelines.continual_counts'], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = tmp_path / 'out' / 'continual_counts'
    releases = [release_from_avro(r) for r in
                _read_avro(str(out / 'releases-*.avro'), RELEASE_SCHEMA)]
    keys = sample_data.load_stations()
    steps = int((sample_data.SAMPLE_END - sample_data.SAMPLE_START).total_seconds()
                // sample_data.SAMPLE_STEP_SECONDS)
    pairs = sorted((r.key, r.step) for r in releases)
    assert pairs == sorted((k, s) for k in keys for s in range(steps))   # each exactly once
    assert {r.epsilon for r in releases} == {1.0}
    assert all(r.privacy_unit.startswith('user-level') for r in releases)
    dead = _read_avro(str(out / 'dead_letters-*.avro'), DEAD_LETTER_SCHEMA)
    stages = {d['stage'] for d in dead}
    assert {'parse_avro', 'ExtractAndValidate', 'BoundContributions'} <= stages
    png = out / 'releases.png'
    assert png.exists() and png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert 'continual_counts summary' in done.stdout
    # Issue 21: the embedded sample is public, so evaluation is on, and the summary says so.
    assert 'evaluation on: demo data' in done.stdout
    assert 'mean |err|' in done.stdout and 'expected noise std' in done.stdout
    # Issue 16: the truth after bounding is shown next to the raw truth, with what bounding
    # removed; every bounding dead letter is placed (it holds the input ride).
    assert 'after bounding' in done.stdout and 'bounding removed' in done.stdout
    assert 'not placed' not in done.stdout
    bounded_line = next(line for line in done.stdout.splitlines() if 'error vs bounded' in line)
    ratio = float(bounded_line.split('RMSE / noise std = ')[1].split(')')[0])
    assert 0.5 < ratio < 1.6, bounded_line
    # Progress lines count releases only (their number is public); exact input counts are
    # logged only with --debug_metrics (issue 10).
    assert 'events parsed' not in done.stderr
    # Quiet by default: no Beam INFO logs besides the forwarded progress lines.
    noisy = [line for line in done.stderr.splitlines()
             if (' INFO apache_beam' in line and 'worker: ' not in line) or ' INFO root' in line]
    assert not noisy, noisy


def test_sample_data_is_committed_and_deterministic():
    assert os.path.getsize(sample_data.RIDES_PATH) < 2_000_000
    assert sample_data.load_stations() == sample_data.stations()
    with open(sample_data.RIDES_PATH, 'rb') as f:
        reader = fastavro.reader(f)
        assert reader.writer_schema['name'].endswith('RideEvent')
        first = [next(reader) for _ in range(3)]
    assert all(isinstance(validate_event(r), RideEvent) for r in first)
