"""The boost_queries job: the default run in a subprocess (embedded sample, DirectRunner, < 60 s),
its Avro outputs and summary, Avro in → out, and the Dataflow translation of the Pub/Sub
configuration."""

import os
import subprocess
import sys

import fastavro
import pytest

from beam_dp.io.boost import BOOST_QUERY_SCHEMA
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import boost_from_avro
from pipelines.boost_queries import options as job_options
from pipelines.boost_queries import pipeline as job
from pipelines.boost_queries import sample_data

pytestmark = pytest.mark.pipeline
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=REPO, BDP_TEST_NOISE_KEY='0123456789abcdef' * 4)


def _run_job(tmp_path, *extra):
    return subprocess.run([sys.executable, '-m', 'pipelines.boost_queries',
                           '--noise_key', 'env:BDP_TEST_NOISE_KEY', '--stream_id', 'tests',
                           '--ledger', 'none', *extra], cwd=tmp_path,
                          env=ENV, capture_output=True, text=True, timeout=300)


def _records(directory, prefix):
    out = []
    for name in sorted(os.listdir(directory)):
        if name.startswith(prefix) and name.endswith('.avro'):
            with open(directory / name, 'rb') as f:
                out.extend(fastavro.reader(f))
    return out


def test_default_run_prints_budget_per_path_and_block_and_plots_baselines(tmp_path):
    out = tmp_path / 'out' / 'boost_queries'
    proc = _run_job(tmp_path)                  # no output argument: the default ./out/boost_queries
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    assert 'budget by path' in text and 'budget by block' in text, text
    for b in range(sample_data.JOB_BLOCKS):
        assert f'block {b:>3}  n=   2000' in text, text
    for name in ('tree_pmw_bypass (job)', 'laplace', 'exact_cache', 'tree_exact_cache',
                 'vanilla_pmw'):
        assert name in text
    assert (out / 'budget_vs_queries.png').stat().st_size > 1000
    answers = [boost_from_avro(BoostAnswerRecord, r) for r in _records(out, 'answers')]
    refusals = _records(out, 'refusals')
    assert len(answers) + len(refusals) == sample_data.JOB_QUERIES
    assert {a.path for a in answers} <= {'EXACT', 'R1', 'R2', 'R3', 'MIXED'}
    ledger = _records(out, 'ledger')
    assert ledger and all(r['consumed'] <= r['capacity'] + 1e-9 for r in ledger)
    # The same key, the same input: bit-identical answers (noise addressed by the secret key).
    again = _run_job(tmp_path, '--output_avro', str(tmp_path / 'again'), '--no_baselines')
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(_records(tmp_path / 'again', 'answers'), key=str) == sorted(
        _records(out, 'answers'), key=str)


def test_avro_in_and_out(tmp_path):
    rows = [r for r in sample_data.job_rows() if r['event_time_micros'] <
            (sample_data.START_SECONDS + 2 * sample_data.BLOCK_SECONDS) * 10 ** 6][:3000]
    rows.append({'dataset': 'covid', 'event_time_micros': rows[0]['event_time_micros'],
                 'attributes': [9, 9, 9, 9]})                       # out of the domain
    queries = [q for _, q in sample_data.job_queries(count=30)]
    with open(tmp_path / 'rows.avro', 'wb') as f:
        fastavro.writer(f, fastavro.parse_schema(sample_data.ROW_SCHEMA), rows)
    with open(tmp_path / 'queries.avro', 'wb') as f:
        fastavro.writer(f, fastavro.parse_schema(dict(BOOST_QUERY_SCHEMA)), queries)
    proc = _run_job(tmp_path, '--data_avro', str(tmp_path / 'rows.avro'), '--query_avro',
                str(tmp_path / 'queries.avro'), '--blocks', '2', '--output_avro',
                str(tmp_path / 'o'), '--no_baselines')
    assert proc.returncode == 0, proc.stderr[-3000:]
    answered = _records(tmp_path / 'o', 'answers') + _records(tmp_path / 'o', 'refusals')
    assert sorted(r['query_id'] for r in answered) == sorted(q['query_id'] for q in queries)
    assert [b['block'] for b in _records(tmp_path / 'o', 'blocks')] == [0, 1]
    dead = _records(tmp_path / 'o', 'dead_letters')
    assert len(dead) == 1 and dead[0]['stage'] == 'ExtractRows'


def test_dataflow_translation_of_the_pubsub_configuration():
    args, beam_args = job_options.parse_args([
        '--data_subscription=projects/test-project/subscriptions/rows',
        '--query_subscription=projects/test-project/subscriptions/queries',
        '--output_topic=projects/test-project/topics/answers',
        '--dead_letter_topic=projects/test-project/topics/dead', '--epsilon=10',
        '--dry_run=True', '--project=test-project', '--region=us-central1',
        '--temp_location=gs://b/tmp', '--staging_location=gs://b/staging', '--streaming'])
    from apache_beam.options.pipeline_options import PipelineOptions
    pipeline = job.build_pipeline(args, PipelineOptions(beam_args))
    proto = pipeline.to_runner_api()
    names = {t.unique_name for t in proto.components.transforms.values()}
    assert 'AnswerWithBoost/AnswerQueries' in names
    assert {'PublishAnswers', 'ReadRows', 'ReadQueries', 'PublishDeadLetters'} <= names


def test_every_option_has_help_and_half_a_pubsub_configuration_is_refused():
    for action in job_options.build_parser()._actions:
        assert action.help, action.option_strings
    with pytest.raises(SystemExit):
        job_options.parse_args(['--data_subscription=projects/p/subscriptions/rows'])
