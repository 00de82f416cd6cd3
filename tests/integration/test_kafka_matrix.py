"""Kafka on Flink for the runner matrix (issue 27 item 1): ``WindowedPMWG``, ``BoostQueries`` and
``ContinualERM`` read their events from a real Kafka topic (Beam's cross-language KafkaIO on
embedded Flink, as ``test_kafka_flink.py``) in ONE job, and every output equals what the same
transforms emit on the DirectRunner for the same events (a TestStream) under the same seed.

The events are the matrix's (``tests/runner_matrix.EVENTS``), moved to the recent past (the
clocks of Boost and ERM with them), produced in event-time order with their event time as Kafka
CreateTime (the source's watermark follows CreateTime with max delay 0, so a record produced
after a later one would be late) and on the topic before the job starts (a backlog). The job
checkpoints with ``--finish_bundle_before_checkpointing`` (docs/runners.md, Kafka on Flink). It
never ends (unbounded source): the test polls the outputs collected in this process (LOOPBACK)
until every output has the reference's count, waits 5 s more (a duplicate would show), cancels.
"""

import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import TimestampedValue

from tests import runner_matrix as matrix
from tests import runners
from tests.integration import kafka_support as ks
from tests.integration.kafka_support import broker  # noqa: F401  (module fixture)
from tests.integration.test_kafka_flink import CHECKPOINTING
from tests.integration.test_kafka_flink import flink_kafka_options

pytestmark = [pytest.mark.integration, pytest.mark.flink, runners.requires_flink,
              ks.requires_kafka]

NAMES = list(matrix.KAFKA_FAMILIES)
TIMEOUT = 300


def _decode(kv):
    name, t, event = kv[1].decode('utf-8').split('|', 2)
    return TimestampedValue(f'{name}|{event}', float(t))


def _counts(outputs):
    return {(n, o): len(v) for n, per in outputs.items() for o, v in per.items()}


def test_pmwg_boost_and_erm_over_kafka_on_flink_equal_the_reference(broker):  # noqa: F811
    offset = int(time.time()) - 120
    reference = matrix.run(runners.direct_options(streaming=True), NAMES, offset=offset)
    assert all(reference[n][next(iter(reference[n]))] for n in NAMES), reference

    topic = 'matrix-events'
    broker.create_topics(topic)
    prod = ks.producer(broker.bootstrap)
    events = sorted((t + offset, name, event) for name in NAMES
                    for t, event in matrix.EVENTS[name])
    for t, name, event in events:
        prod.send(topic, key=name.encode(), timestamp_ms=int(round(t * 1000)),
                  value=f'{name}|{t!r}|{event!r}'.encode('utf-8'))
    prod.flush()
    prod.close()

    service = ks.expansion_service()
    began = time.monotonic()
    p = beam.Pipeline(options=PipelineOptions(flink_kafka_options() + CHECKPOINTING))
    lines = (p
             | 'ReadEvents' >> ks.read_from_kafka(broker.bootstrap, topic, None, service)
             | 'Decode' >> beam.Map(_decode).with_output_types(str))
    handle = matrix.apply_all(p, lines, NAMES, offset)
    result = p.run()
    want = _counts(reference)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            got = _counts(matrix.collected(handle, pop=False))
            if all(got[k] >= v for k, v in want.items()):
                break
            if str(result.state) in ('FAILED', 'CANCELLED', 'DONE'):
                result.wait_until_finish()
                break
            time.sleep(1)
        time.sleep(5)
    finally:
        result.cancel()
    got = matrix.collected(handle)
    print(f'Kafka -> Flink job, {len(NAMES)} families: {time.monotonic() - began:.1f}s, '
          f'{_counts(got)}')
    for name in NAMES:
        for output in reference[name]:
            assert got[name][output] == reference[name][output], (
                f'{name}.{output}: {len(got[name][output])} elements on Kafka/Flink, '
                f'{len(reference[name][output])} on the reference; only on Kafka/Flink '
                f'{sorted(set(got[name][output]) - set(reference[name][output]))[:2]}, only '
                f'on the reference '
                f'{sorted(set(reference[name][output]) - set(got[name][output]))[:2]}')
