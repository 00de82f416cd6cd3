"""The pmwg_queries job: the default run in a subprocess (sample data, DirectRunner) and the
Dataflow translation of the Pub/Sub (streaming) configuration."""

import os
import subprocess
import sys

import fastavro
import pytest

from beam_dp.io.queries import answer_from_avro
from pipelines.pmwg_queries import options as job_options
from pipelines.pmwg_queries import pipeline as job
from pipelines.pmwg_queries import sample_data

pytestmark = pytest.mark.pipeline
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_default_run_answers_every_valid_query_and_reports_refusals(tmp_path):
    out = tmp_path / 'out'
    env = dict(os.environ, PYTHONPATH=REPO, BDP_TEST_NOISE_KEY='0123456789abcdef' * 4)
    proc = subprocess.run([sys.executable, '-m', 'pipelines.pmwg_queries', '--output_avro',
                           str(out), '--noise_key', 'env:BDP_TEST_NOISE_KEY', '--stream_id', 'tests',
                           '--ledger', 'none'], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'answers by status' in proc.stdout
    # Every status it reports is explained, and so are the error units and the output paths.
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith('    ')}
    assert {'easy', 'hard', 'NOT_STARTED', 'INVALID_QUERY'} <= set(lines), proc.stdout
    assert 'refused: fewer trips than the initial size n' in lines['NOT_STARTED']
    assert 'public synthetic histogram' in lines['easy'] and 'fresh noise' in lines['hard']
    assert 'error units: a linear query is answered on the NORMALISED histogram' in proc.stdout
    assert f'answers written to  : {out / "answers-*.avro"}' in proc.stdout
    # Quiet by default: no Beam INFO logs (only the job's own lines).
    assert ' INFO apache_beam' not in proc.stderr and ' INFO root' not in proc.stderr, proc.stderr
    assert f'refusals written to : {out / "refusals-*.avro"}' in proc.stdout
    written = {'answers': [], 'refusals': []}
    for name in os.listdir(out):
        for prefix, records in written.items():
            if name.startswith(prefix):
                with open(out / name, 'rb') as f:
                    records.extend(answer_from_avro(r) for r in fastavro.reader(f))
    answers, refusals = written['answers'], written['refusals']
    # 1,200 valid queries + 1 invalid (refused, not dropped); refusals on their own output.
    assert len(answers) + len(refusals) == 1201
    assert all(a.refusal is None for a in answers)
    assert refusals and all(a.refusal is not None for a in refusals)
    assert sum(a.refusal == 'INVALID_QUERY' for a in refusals) == 1
    assert all(a.t is None or a.t <= 12_000 for a in answers + refusals)


def test_dataflow_translation_of_the_pubsub_configuration(tmp_path):
    args, beam_args = job_options.parse_args([
        '--data_subscription=projects/test-project/subscriptions/trips',
        '--query_subscription=projects/test-project/subscriptions/queries',
        '--output_topic=projects/test-project/topics/answers',
        '--dead_letter_topic=projects/test-project/topics/dead',
        '--epsilon=1.0', '--delta=0', '--alpha=0.2', '--beta=0.05', '--domain_size=128',
        '--window_seconds=3600', '--start=2026-01-01T00:00:00Z', '--step_seconds=60',
        '--dry_run=True', '--project=test-project',
        '--region=us-central1', '--temp_location=gs://b/tmp', '--staging_location=gs://b/staging',
        '--streaming'])
    from apache_beam.options.pipeline_options import PipelineOptions
    pipeline = job.build_pipeline(args, PipelineOptions(beam_args))
    # With --runner=DataflowRunner even --dry_run=True looks up the gs:// staging bucket (network,
    # unavailable here); translating the graph to the runner API (what Dataflow receives)
    # exercises the same construction offline.
    proto = pipeline.to_runner_api()
    assert any('AnswerQueries' in t.unique_name for t in proto.components.transforms.values())
    labels = set()
    pipeline.visit(type('V', (), {
        'enter_composite_transform': lambda self, n: labels.add(n.full_label),
        'leave_composite_transform': lambda self, n: None,
        'visit_transform': lambda self, n: labels.add(n.full_label),
        'visit_value': lambda self, v, n: None})())
    assert 'AnswerWithPMWG/AnswerQueries' in labels
    assert 'PublishAnswers' in labels and 'PublishRefusals' in labels and 'ReadTrips' in labels
    assert 'AnswerWithPMWG/GateLateRecords' in labels


def test_launcher_rejects_half_a_pubsub_configuration():
    with pytest.raises(SystemExit):
        job_options.parse_args(['--data_subscription=projects/test-project/subscriptions/trips'])


def test_every_option_has_help_and_beam_logs_stay_quiet_unless_verbose():
    import logging
    from pipelines.common.launch import configure_logging
    from pipelines.common.launch import with_default_runner
    for action in job_options.build_parser()._actions:
        assert action.help, action.option_strings
    beam_logger = logging.getLogger('apache_beam')
    level = beam_logger.level
    try:
        configure_logging([])
        assert beam_logger.level == logging.WARNING
        configure_logging(['--verbose'])
        assert beam_logger.level == logging.INFO
    finally:
        beam_logger.setLevel(level)
    assert with_default_runner([]) == ['--runner=DirectRunner']
    prism = ['--runner=PrismRunner', '--experiments=prism_disable_sdf_split']
    assert with_default_runner(['--runner=PrismRunner']) == prism
    assert with_default_runner(prism) == prism
    flink = with_default_runner(['--runner', 'FlinkRunner', '--checkpointing_interval=2000'])
    assert flink[-1] == '--finish_bundle_before_checkpointing'
    explicit = ['--runner=FlinkRunner', '--finish_bundle_before_checkpointing=false']
    assert with_default_runner(explicit) == explicit


def test_the_step_clock_options():
    """Pub/Sub and Avro input need a public --start; Avro (batch) input an --end too; the
    embedded sample defaults to its own period; --window_seconds keys a database per period."""
    with pytest.raises(SystemExit):
        job_options.parse_args([
            '--data_subscription=projects/p/subscriptions/trips',
            '--query_subscription=projects/p/subscriptions/queries'])
    with pytest.raises(SystemExit):
        job_options.parse_args(['--data_avro=trips.avro', '--start=1767225600'])
    args, _ = job_options.parse_args([
        '--data_subscription=projects/p/subscriptions/trips',
        '--query_subscription=projects/p/subscriptions/queries', '--window_seconds=3600',
        '--start=1767225600'])
    assert (args.start, args.end, args.step_seconds) == (1767225600.0, None, 60.0)
    assert job.release_schedule(args) == (1767225600.0, None)
    sample, _ = job_options.parse_args([])
    start = sample_data.SAMPLE_START.timestamp()
    assert (sample.start, sample.end) == (start, start + sample_data.SPAN_SECONDS)
    period = job.period_fn(3600)
    assert period({'event_time_micros': 3_600_000_000 * 5 + 1}) == 5
    assert job.period_fn(0) is None
