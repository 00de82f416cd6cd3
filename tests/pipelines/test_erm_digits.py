"""The erm_digits job: the default run end to end in a subprocess (embedded digits and drifting
streams, DirectRunner), Avro in/out with a public end and dead letters, the Dataflow translation
of the Pub/Sub (streaming) configuration, and the command line."""

import glob
import os
import subprocess
import sys

import fastavro
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dp.io.erm import ledger_row_from_avro
from beam_dp.io.erm import model_release_from_avro
from beam_dp.io.records import dead_letter_from_avro
from pipelines.erm_digits import data
from pipelines.erm_digits import options as job_options
from pipelines.erm_digits import pipeline as job

pytestmark = pytest.mark.pipeline
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(directory, prefix):
    out = []
    for path in sorted(glob.glob(os.path.join(str(directory), f'{prefix}*'))):
        with open(path, 'rb') as f:
            out.extend(fastavro.reader(f))
    return out


def test_default_run_prints_accuracy_per_release_and_plots(tmp_path):
    out = tmp_path / 'out'
    env = dict(os.environ, PYTHONPATH=REPO, BDP_TEST_NOISE_KEY='0123456789abcdef' * 4)
    proc = subprocess.run([sys.executable, '-m', 'pipelines.erm_digits', '--output_avro',
                           str(out), '--noise_key', 'env:BDP_TEST_NOISE_KEY', '--stream_id', 'tests',
                           '--ledger', 'none'], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for name in ('digits / Continual', 'digits / Sliding', 'digits / DP-FTRL',
                 'drift / Continual', 'drift / Sliding', 'drift / DP-FTRL'):
        assert name in text, text
    assert 'private (non-private)' in text and 'dead letters      : 0' in text
    assert os.path.getsize(out / 'accuracy.png') > 10_000
    assert ' INFO apache_beam' not in proc.stderr, proc.stderr
    models = [model_release_from_avro(r) for r in _read(out, job.MODELS_PREFIX)]
    ledger = [ledger_row_from_avro(r) for r in _read(out, job.LEDGER_PREFIX)]
    assert len(models) == len(ledger) and models
    for ds in data.DATASETS:
        # DP-FTRL publishes one model per block from block 0.
        assert sorted(m.t_block for m in models if m.stream == ds.name
                      and m.algo == 'dp_ftrl') == list(range(ds.blocks)), ds.name
        published = sorted((m.algo == 'alg5', m.t_block) for m in models
                           if m.stream == ds.name and m.published and m.algo != 'dp_ftrl')
        sliding = [b for is_sliding, b in published if is_sliding]
        # Alg 5 publishes one model per block once the first window (2^k − 1 blocks) is full.
        assert sliding == list(range((1 << ds.levels) - 2, ds.blocks)), (ds.name, sliding)
        continual = sorted({b for is_sliding, b in published if not is_sliding})
        assert continual == list(range(ds.blocks_per_base - 1, ds.blocks)), (ds.name, continual)
    assert all(m.privacy.startswith('event-level') for m in models)
    assert all(row.worst_bound <= row.budget * (1 + 1e-9) for row in ledger)


def test_avro_input_with_public_end_dead_letters_unknown_streams(tmp_path):
    ds = data.DATASETS[1]
    records = data.records_of(ds, data.embedded(ds))[:3 * ds.records_per_block]
    records.append({'stream': 'other', 'event_time_micros': records[0]['event_time_micros'],
                    'features': [0.0], 'label': 0})
    records.append({'stream': ds.name, 'event_time_micros': records[0]['event_time_micros'],
                    'features': [0.0] * ds.feature_dim, 'label': 99})
    path = tmp_path / 'in.avro'
    with open(path, 'wb') as f:
        fastavro.writer(f, data.INPUT_SCHEMA, records)
    out = tmp_path / 'out'
    end = data.START_SECONDS + 8 * data.STEP_SECONDS
    args, beam_args = job_options.parse_args([
        f'--input_avro={path}', f'--end_seconds={end}', f'--output_avro={out}',
        '--runner=DirectRunner'])
    job.build_pipeline(args, PipelineOptions(beam_args)).run().wait_until_finish()
    dead = sorted((d.transform, d.reason) for d in (
        dead_letter_from_avro(r) for r in _read(out, job.DEAD_LETTERS_PREFIX)))
    # The bad label is refused by each of the three transforms that read the drift stream.
    assert [t for t, _ in dead] == ['ContinualDrift', 'FtrlDrift', 'SlidingDrift',
                                    'erm_digits'], dead
    assert dead[0][1] == dead[1][1] == dead[2][1] == (
        'malformed: label must be an integer in [0, 4)')
    assert dead[3][1].startswith("stream is not one of ['digits', 'drift']"), dead
    models = [model_release_from_avro(r) for r in _read(out, job.MODELS_PREFIX)]
    # Blocks 0..7 are released (the public end), with data only in blocks 0..2; the digits
    # stream has no data at all and still releases every block.
    for ds in data.DATASETS:
        # Continual from block B − 1 (drift 3, digits 7), sliding from block 2^k − 2 = 6,
        # through block 7.
        first = min(ds.blocks_per_base - 1, (1 << ds.levels) - 2)
        assert {m.t_block for m in models if m.stream == ds.name and m.published
                and m.algo != 'dp_ftrl'} == set(range(first, 8)), ds.name
        assert sorted(m.t_block for m in models if m.stream == ds.name
                      and m.algo == 'dp_ftrl') == list(range(8)), ds.name


def test_dataflow_translation_of_the_pubsub_configuration():
    pytest.importorskip('google.cloud.pubsub')
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
    args, beam_args = job_options.parse_args([
        '--input_subscription=projects/test-project/subscriptions/examples',
        '--output_topic=projects/test-project/topics/models',
        '--ledger_topic=projects/test-project/topics/ledger',
        '--dead_letter_topic=projects/test-project/topics/dead-letters',
        '--output_avro=gs://bucket/models', '--epsilon=10',
        '--runner=DataflowRunner', '--dry_run=True', '--project=test-project',
        '--region=us-central1', '--temp_location=gs://bucket/tmp', '--streaming'])
    p = job.build_pipeline(args, PipelineOptions(beam_args))
    p.run()   # dry_run: translates the graph into a Dataflow job, submits nothing
    assert isinstance(p.runner, DataflowRunner)
    names = {t.unique_name for t in p.runner.job.proto_pipeline.components.transforms.values()}
    for label in ('ContinualDigits/TrainBlocks', 'SlidingDrift/TrainBlocks',
                  'FtrlDigits/TrainBlocks', 'ReadExamples',
                  'PublishModels', 'PublishLedger', 'PublishDeadLetters'):
        assert any(label in n for n in names), (label, sorted(names)[:20])


def test_command_line_every_option_has_help_and_seeds_are_refused():
    for action in job_options.build_parser()._actions:
        assert action.help, action.option_strings
    for bad in (['--testing_seed=1'], ['--input_avro=x.avro'], ['--epsilon=0'],
                ['--input_avro=x', '--input_subscription=projects/p/subscriptions/s']):
        with pytest.raises(SystemExit):
            job_options.parse_args(bad)
