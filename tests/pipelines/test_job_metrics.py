"""Issue 10: exact counts of private records never leave through metrics or logs by default.

The continual-counts job on Avro rides (malformed, unknown-key, early and over-bound records;
batch, where the DirectRunner reports metrics of every stage):
by default it emits NO user metric (no counter, distribution or gauge) and logs no count of
input events; with ``--debug_metrics`` (documented as sensitive) the per-stage dead-letter and
parse counters appear and are exact. A transform on its own (the shell's ``debug_metrics``)
behaves the same way.
"""

import logging

import apache_beam as beam
import fastavro
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import TimestampedValue

from pipelines.continual_counts import options as job_options
from pipelines.continual_counts import pipeline as job
from pipelines.continual_counts.events import EVENT_SCHEMA
from pipelines.continual_counts.events import event_to_avro
from tests import families
from tests.pipelines.test_continual_counts import KEYS
from tests.pipelines.test_continual_counts import START_S
from tests.pipelines.test_continual_counts import TEST_KEY_VAR
from tests.pipelines.test_continual_counts import _event
from tests.runners import BATCH_RUNNER

pytestmark = pytest.mark.pipeline


def _rides(tmp_path):
    """Seven rides: three counted, one parse dead letter (negative time), one unknown station
    ('ExtractAndValidate'), one over max_keys_per_unit=1 ('BoundContributions'), one early."""
    events = [_event('r1', 'A', 5), _event('r2', 'B', 10), _event('r3', 'C', 70),
              _event('r4', 'Z', 12), _event('r1', 'B', 20), _event('r5', 'A', -3600)]
    records = [event_to_avro(e) for e in events]
    records.append({**records[0], 'event_time_micros': -5})
    path = tmp_path / 'rides.avro'
    with open(path, 'wb') as f:
        fastavro.writer(f, EVENT_SCHEMA, records)
    return path


def _all_metrics(result):
    query = result.metrics().query(MetricsFilter())
    return {kind: [(m.key.metric.namespace, m.key.metric.name, m.committed)
                   for m in query.get(kind, [])]
            for kind in ('counters', 'distributions', 'gauges')}


def _run_job(tmp_path, extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    args, beam_args = job_options.parse_args([
        f'--input_avro={_rides(tmp_path)}', f'--public_keys={",".join(KEYS)}',
        f'--start={START_S}', '--max_keys_per_unit=1', f'--noise_key=env:{TEST_KEY_VAR}',
        '--stream_id=tests',
        f'--output_avro={tmp_path / "out"}', '--plot=none', '--progress_every=1', *extra])
    result = job.build_pipeline(args, PipelineOptions(['--runner=DirectRunner'] + beam_args)
                                ).run()
    result.wait_until_finish()
    return _all_metrics(result)


def test_the_job_emits_no_count_metric_and_logs_no_input_count_by_default(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        metrics = _run_job(tmp_path / 'default', [])
    assert not any(metrics.values()), metrics
    assert not [r for r in caplog.records if 'events parsed' in r.getMessage()]


def test_debug_metrics_reports_exact_counts(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        metrics = _run_job(tmp_path / 'debug', ['--debug_metrics'])
    counters = {(ns, name): value for ns, name, value in metrics['counters']}
    assert counters == {
        (job.JOB, 'events_parsed_avro'): 6, (job.JOB, 'dead_letters_parse_avro'): 1,
        (job.JOB, 'dead_letters_parse_avro'): 1,
        (job.JOB, 'dead_letters_ExtractAndValidate'): 2,       # station Z, before start
        (job.JOB, 'dead_letters_BoundContributions'): 1,
        ('ContinualCountPerStation', 'dead_letters/ExtractAndValidate'): 2,
        ('ContinualCountPerStation', 'dead_letters/BoundContributions'): 1}, counters
    assert [r for r in caplog.records if 'events parsed' in r.getMessage()]


@pytest.mark.parametrize('debug', [False, True])
def test_a_transform_counts_dead_letters_only_with_debug_metrics(debug):
    records = [('a', 1, 'u1'), ('zz', 1, 'u1'), (['x'], 1, 'u1'), ('b', 1, 'u2')]
    pipeline = beam.Pipeline(runner=BATCH_RUNNER)
    _ = (pipeline | beam.Create(records) | beam.Map(lambda r: TimestampedValue(r, 0.5))
         | families.build('SparseContinualCountPerKey', debug_metrics=debug, label='Sparse'))
    result = pipeline.run()
    result.wait_until_finish()
    metrics = _all_metrics(result)
    if not debug:
        assert not any(metrics.values()), metrics
    else:
        assert metrics['counters'] == [('Sparse', 'dead_letters/ExtractAndValidate', 2)]
