"""Kafka on Flink end to end: Avro events on a topic -> Beam's Kafka source (cross-language) on the
FlinkRunner -> ContinualCountPerKey (public end) -> releases (Avro) on a topic, read back.

* The broker is a real Kafka (KRaft mode, jars from Maven Central via .ci/fetch_kafka.sh) that
  the module fixture starts on 127.0.0.1 and stops at the end.
* The Kafka read and write are Beam's Java KafkaIO, expanded by a 2.62.0 expansion service that
  .ci/fetch_expansion_service.sh assembles (the Python SDK is 2.77; see kafka_support for the two
  adjustments this needs), and run by the 2.62 Flink job server (embedded ``[local]`` cluster).
* The events carry their event time (Avro field and Kafka CreateTime; the source's watermark
  follows CreateTime); the job releases every step of every public key exactly once, with the
  values of ``beam_dp.testing.replay`` under the seed.
* The events are on the topic before the job starts (a fresh job on a backlog) and Flink
  checkpoints every 200 ms with ``--finish_bundle_before_checkpointing``
  (``CHECKPOINTING``). Without that option, the 2.62 runner finishes a bundle inside the
  checkpoint, buffers its output and emits the advanced watermark ahead of it, so the counting
  stage dead-letters on-time records as late: seen in 3 of 3 runs of this job without it (12-32
  of 40 releases wrong), in none of 3 with it (docs/runners.md).
"""

import time
import typing

import apache_beam as beam
import pytest
from apache_beam.io.kafka import WriteToKafka
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests import runners
from tests.integration import kafka_support as ks
from tests.integration.kafka_support import broker  # noqa: F401  (module fixture)

pytestmark = [pytest.mark.integration, pytest.mark.flink, runners.requires_flink,
              ks.requires_kafka]

KEYS = ['north', 'south', 'east', 'west', 'idle']     # 'idle' never has an event
STEP = 5
SECONDS = 40                                          # 8 steps
SEED = 77
LABEL = 'KafkaCounts'
#: Flink checkpointing that keeps the watermark behind every bundle's output (docs/runners.md:
#: without the option a checkpoint taken mid-bundle emits the watermark before that output).
FINISH_BUNDLE_BEFORE_CHECKPOINTING = '--finish_bundle_before_checkpointing'
CHECKPOINTING = ['--checkpointing_interval=200', FINISH_BUNDLE_BEFORE_CHECKPOINTING]


def events(start):
    """Deterministic events [(station, rider, event_time_seconds)] in [start, start + SECONDS)."""
    out = []
    for i in range(SECONDS):
        for j in range((i * 7) % 4):
            out.append((KEYS[(i * 3 + j) % 4], f'rider-{i}-{j}', start + i + j * 0.25))
    return out


def counts(start):
    return ContinualCountPerKey(public_keys=KEYS, start=start, step=STEP, end=start + SECONDS,
                                budget=PrivacyBudget(epsilon=1.0), testing_seed=SEED,
                                label=LABEL)


def decode_event(kv):
    e = ks.avro_decode(ks.EVENT_SCHEMA, kv[1])
    return TimestampedValue((e['station'], e['rider']), e['event_time_micros'] / 1e6)


def encode_release(r):
    key = f'{r.key}/{r.step}'.encode()
    return key, ks.avro_encode(ks.RELEASE_SCHEMA, {'key': r.key, 'step': r.step,
                                                   'value': float(r.value),
                                                   'noise_stddev': float(r.noise_stddev)})


def flink_kafka_options():
    """flink_options with the job server that has the Kafka IO jars on its class path."""
    jar = ks.flink_kafka_job_server_jar()
    return [a if not a.startswith('--flink_job_server_jar=') else '--flink_job_server_jar=' + jar
            for a in runners.flink_options(streaming=True)]


def wait_for_releases(reader, expected_count, timeout, result=None):
    """Polls the release topic until ``expected_count`` records (or the timeout), then 5 s more
    so that a duplicate would be seen; fails early if the job fails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(reader.poll()) < expected_count:
        if result is not None and str(result.state) in ('FAILED', 'CANCELLED', 'DONE'):
            result.wait_until_finish()
            break
    time.sleep(5)
    return [ks.avro_decode(ks.RELEASE_SCHEMA, v) for _, v in reader.poll()]


def test_avro_events_from_kafka_to_releases_on_kafka(broker):
    start = int(time.time()) - SECONDS - 60            # events in the recent past
    topic_in, topic_out = 'rides-avro', 'releases-avro'
    broker.create_topics(topic_in, topic_out)
    prod = ks.producer(broker.bootstrap)
    evs = events(start)
    for station, rider, t in evs:
        prod.send(topic_in, key=station.encode(), timestamp_ms=int(t * 1000),
                  value=ks.avro_encode(ks.EVENT_SCHEMA, {
                      'station': station, 'rider': rider,
                      'event_time_micros': int(round(t * 1e6))}))
    prod.flush()
    prod.close()

    transform = counts(start)
    reference = release_table(replay(transform.driver.loop_driver(), keyed_events(
        transform.driver, [(k, int((t - start) // STEP), None) for k, _, t in evs],
        steps=SECONDS // STEP), label=LABEL, seed=SEED, end_input=False).releases)
    expected = sorted((k, s, v[0]) for (k, s), v in reference.items())
    assert len(expected) == len(KEYS) * SECONDS // STEP

    service = ks.expansion_service()
    reader = ks.TopicReader(broker.bootstrap, topic_out)
    began = time.monotonic()
    p = beam.Pipeline(options=PipelineOptions(flink_kafka_options() + CHECKPOINTING))
    out = (p
           | 'ReadEvents' >> ks.read_from_kafka(broker.bootstrap, topic_in, start * 1000 - 1000,
                                                service)
           | 'DecodeAvro' >> beam.Map(decode_event).with_output_types(tuple[str, str])
           | transform)
    _ = (out.releases
         | 'EncodeAvro' >> beam.Map(encode_release).with_output_types(
             typing.Tuple[bytes, bytes])
         | 'WriteReleases' >> WriteToKafka(producer_config={'bootstrap.servers': broker.bootstrap},
                                           topic=topic_out, expansion_service=service))
    result = p.run()
    try:
        got = wait_for_releases(reader, len(expected), timeout=300, result=result)
    finally:
        result.cancel()
        reader.close()
    print(f'Kafka -> Flink -> Kafka job: {time.monotonic() - began:.1f}s, {len(got)} releases')

    pairs = [(r['key'], r['step']) for r in got]
    assert len(pairs) == len(set(pairs)), 'a step of a key was released twice'
    assert sorted((r['key'], r['step'], r['value']) for r in got) == expected
