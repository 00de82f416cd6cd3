"""Kafka for the Flink integration tests: a KRaft broker, Beam's cross-language Kafka IO, Avro.

Helper module only (no tests here). Artefacts (fetched by the .ci scripts, never committed):

* broker jars: ``$BEAM_DP_KAFKA_LIB``, else ``<cache>/kafka/lib-*`` (``bash .ci/fetch_kafka.sh``);
* Kafka expansion service and the Flink job server with the Kafka IO jars:
  ``$BEAM_DP_KAFKA_EXPANSION_JAR``, else ``<cache>/kafka-xlang/...`` (``bash
  .ci/fetch_expansion_service.sh``; both Beam 2.62.0, like the Flink job server).

Two things the pinned Python SDK (2.77) needs to work with the 2.62 Java side (docs/runners.md):

* ``ReadFromKafka`` of 2.77 sends payload fields the 2.62 expansion service has no setter for
  ("KafkaIO$Read$External$Configuration is missing a setter setDynamicReadPollIntervalSeconds"),
  so ``read_from_kafka`` builds the same external transform (same URN) with the 2.62 fields.
* The expansion service runs with ``--experiments=use_deprecated_read``: the Kafka read is then
  Flink's own source operator (offsets in Flink checkpoints). With the default (splittable DoFn in
  the embedded Java SDK harness) the reader seeks and polls but no record ever reaches the next
  stage on the 2.62 Flink runner.
"""

from __future__ import annotations

import base64
import glob
import io
import os
import shutil
import socket
import subprocess
import time
import typing
import uuid

import fastavro
import pytest
from apache_beam.io.kafka import ReadFromKafka
from apache_beam.transforms.external import ExternalTransform
from apache_beam.transforms.external import JavaJarExpansionService
from apache_beam.transforms.external import NamedTupleBasedPayloadBuilder

from tests import runners

EVENT_SCHEMA = fastavro.parse_schema({
    'type': 'record', 'name': 'RideEvent', 'namespace': 'beam_dp.tests',
    'fields': [{'name': 'station', 'type': 'string'}, {'name': 'rider', 'type': 'string'},
               {'name': 'event_time_micros', 'type': 'long'}]})
RELEASE_SCHEMA = fastavro.parse_schema({
    'type': 'record', 'name': 'CountRelease', 'namespace': 'beam_dp.tests',
    'fields': [{'name': 'key', 'type': 'string'}, {'name': 'step', 'type': 'long'},
               {'name': 'value', 'type': 'double'}, {'name': 'noise_stddev', 'type': 'double'}]})


def avro_encode(schema, record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    return buf.getvalue()


def avro_decode(schema, data: bytes) -> dict:
    return fastavro.schemaless_reader(io.BytesIO(data), schema)


# -- artefacts -------------------------------------------------------------------------------------

def kafka_lib() -> str | None:
    path = os.environ.get('BEAM_DP_KAFKA_LIB')
    if path:
        return path if os.path.isdir(path) else None
    libs = sorted(d for d in glob.glob(os.path.join(runners.cache_dir(), 'kafka', 'lib-*'))
                  if os.path.isfile(os.path.join(d, '.complete')))
    return libs[-1] if libs else None


def expansion_service_jar() -> str | None:
    path = os.environ.get('BEAM_DP_KAFKA_EXPANSION_JAR') or os.path.join(
        runners.cache_dir(), 'kafka-xlang',
        'beam-sdks-java-io-kafka-expansion-service-2.62.0-thin.jar')
    return path if os.path.isfile(path) else None


def _xlang_file(name: str) -> str | None:
    jar = expansion_service_jar()
    path = jar and os.path.join(os.path.dirname(jar), name)
    return path if path and os.path.exists(path) else None


def flink_kafka_job_server_jar() -> str | None:
    """The 2.62 Flink job server with the Kafka IO jars on its class path."""
    return _xlang_file('beam-runners-flink-1.19-job-server-2.62.0-kafka-thin.jar')


def flink_kafka_cluster_lib() -> str | None:
    """A lib dir for .ci/flink_cluster.sh (BEAM_DP_FLINK_CLUSTER_LIB) with the Kafka IO jars."""
    return _xlang_file('flink-lib')


def _missing_reason() -> str | None:
    if not runners.java_available():
        return 'Kafka on Flink needs Java on PATH (java not found)'
    if kafka_lib() is None:
        return ('Kafka broker jars not found ($BEAM_DP_KAFKA_LIB or <cache>/kafka/lib-*); '
                'fetch them with: bash .ci/fetch_kafka.sh')
    if expansion_service_jar() is None or flink_kafka_job_server_jar() is None:
        return ('Kafka expansion service not found ($BEAM_DP_KAFKA_EXPANSION_JAR or '
                '<cache>/kafka-xlang/); build it with: bash .ci/fetch_expansion_service.sh')
    try:
        import kafka  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError as e:
        return "kafka-python is not importable (%s); pip install -e '.[test]'" % e
    return None


#: Skip marker (error under BEAM_DP_REQUIRE_RUNNERS=1): broker, expansion service or client missing.
requires_kafka = runners._requirement(  # pylint: disable=protected-access
    _missing_reason() is not None, _missing_reason() or '')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


# -- the broker ------------------------------------------------------------------------------------

class KafkaBroker:
    """A single-node Kafka broker in KRaft mode (broker + controller) on 127.0.0.1."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = '127.0.0.1:%d' % self.port
        self.process = None
        self.log_path = os.path.join(workdir, 'broker.log')

    def _java(self, main: str, *args: str) -> list[str]:
        return ['java', '-Xms128m', '-Xmx384m',
                '-Dlog4j.configuration=file:' + os.path.join(self.workdir, 'log4j.properties'),
                '-cp', os.path.join(kafka_lib(), '*'), main, *args]

    def start(self, timeout: float = 60) -> 'KafkaBroker':
        os.makedirs(self.workdir, exist_ok=True)
        data = os.path.join(self.workdir, 'data')
        props = os.path.join(self.workdir, 'server.properties')
        with open(props, 'w', encoding='utf-8') as f:
            f.write('\n'.join([
                'process.roles=broker,controller', 'node.id=1',
                'controller.quorum.voters=1@127.0.0.1:%d' % self.controller_port,
                'listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d' % (
                    self.port, self.controller_port),
                'advertised.listeners=PLAINTEXT://127.0.0.1:%d' % self.port,
                'controller.listener.names=CONTROLLER', 'inter.broker.listener.name=PLAINTEXT',
                'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
                'log.dirs=' + data, 'num.partitions=1', 'auto.create.topics.enable=false',
                'offsets.topic.replication.factor=1', 'transaction.state.log.replication.factor=1',
                'transaction.state.log.min.isr=1', 'group.initial.rebalance.delay.ms=0', '']))
        with open(os.path.join(self.workdir, 'log4j.properties'), 'w', encoding='utf-8') as f:
            f.write('log4j.rootLogger=WARN, out\nlog4j.appender.out=org.apache.log4j.ConsoleAppender\n'
                    'log4j.appender.out.layout=org.apache.log4j.PatternLayout\n'
                    'log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n\n')
        # A Kafka cluster id (22 url-safe base64 characters) that does not start with '-':
        # the storage tool would read such an id as an option and the broker setup fails.
        cluster_id = '-'
        while cluster_id.startswith('-'):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip('=')
        subprocess.run(self._java('kafka.tools.StorageTool', 'format', '-t', cluster_id,
                                  '-c', props), check=True, capture_output=True, timeout=120)
        with open(self.log_path, 'wb') as log:
            self.process = subprocess.Popen(self._java('kafka.Kafka', props), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError('Kafka broker exited: ' + self.tail())
            try:
                with socket.create_connection(('127.0.0.1', self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError('Kafka broker not up after %ss: %s' % (timeout, self.tail()))

    def tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, encoding='utf-8', errors='replace') as f:
                return f.read()[-n:]
        except OSError:
            return ''

    def create_topics(self, *names: str) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic  # pylint: disable=import-outside-toplevel
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1)
                                 for n in names])
        finally:
            admin.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        shutil.rmtree(os.path.join(self.workdir, 'data'), ignore_errors=True)


@pytest.fixture(scope='module')
def broker(tmp_path_factory):
    """A KafkaBroker for the test module (import this name into the module to use it)."""
    b = KafkaBroker(str(tmp_path_factory.mktemp('kafka'))).start()
    try:
        yield b
    finally:
        b.stop()


def producer(bootstrap: str):
    from kafka import KafkaProducer  # pylint: disable=import-outside-toplevel
    return KafkaProducer(bootstrap_servers=bootstrap, acks='all', linger_ms=0)


class TopicReader:
    """Reads a topic from the beginning, accumulating (key, value) pairs across calls."""

    def __init__(self, bootstrap: str, topic: str):
        from kafka import KafkaConsumer  # pylint: disable=import-outside-toplevel
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap,
                                      auto_offset_reset='earliest', enable_auto_commit=False,
                                      consumer_timeout_ms=500)
        self.records: list[tuple[bytes, bytes]] = []

    def poll(self) -> list[tuple[bytes, bytes]]:
        self.records.extend((m.key, m.value) for m in self.consumer)
        return self.records

    def close(self) -> None:
        self.consumer.close()


# -- Beam's cross-language Kafka IO against the 2.62 expansion service ----------------------------

def expansion_service(extra: typing.Sequence[str] = ()) -> JavaJarExpansionService:
    """Starts (lazily, per pipeline construction) the 2.62 Kafka expansion service.

    EMBEDDED: the Java transforms run inside the Flink JVM (no Docker here); use_deprecated_read:
    the read is Flink's own source operator (see the module docstring).
    """
    return JavaJarExpansionService(
        expansion_service_jar(),
        extra_args=['{{PORT}}', '--defaultEnvironmentType=EMBEDDED',
                    '--experiments=use_deprecated_read', *extra])


#: The fields of KafkaIO.Read.External.Configuration in Beam 2.62 that these tests set.
_Read262 = typing.NamedTuple('ReadFromKafkaSchema262', [
    ('consumer_config', typing.Mapping[str, str]), ('topics', typing.List[str]),
    ('key_deserializer', str), ('value_deserializer', str),
    ('start_read_time', typing.Optional[int]),
    ('commit_offset_in_finalize', bool), ('timestamp_policy', str)])


def read_from_kafka(bootstrap: str, topic: str, start_read_time_ms: int | None,
                    service) -> ExternalTransform:
    """Beam's ReadFromKafka (same URN, 2.62 payload): (key, value) bytes, Kafka CreateTime as
    the element timestamp and watermark, from the first offset at ``start_read_time_ms``, or,
    with None, from the earliest offset (``auto.offset.reset=earliest``).

    Use None when the topic may still be empty as the job starts: with a start time, the 2.62
    reader's start fails on a topic with no record at or after that time ("There are no messages
    has a timestamp that is greater than or equals to the target time ..."), and Flink restarts
    the task until there is one (seen: every attempt failing while the topic was empty).
    """
    config = {'bootstrap.servers': bootstrap}
    if start_read_time_ms is None:
        config['auto.offset.reset'] = 'earliest'
    return ExternalTransform(
        ReadFromKafka.URN_WITHOUT_METADATA,
        NamedTupleBasedPayloadBuilder(_Read262(
            consumer_config=config,
            topics=[topic],
            key_deserializer=ReadFromKafka.byte_array_deserializer,
            value_deserializer=ReadFromKafka.byte_array_deserializer,
            start_read_time=None if start_read_time_ms is None else int(start_read_time_ms),
            commit_offset_in_finalize=False,
            timestamp_policy=ReadFromKafka.create_time_policy)),
        service)
