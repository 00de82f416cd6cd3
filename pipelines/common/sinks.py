"""Avro file and Pub/Sub sinks shared by the jobs.

``write_avro_files`` applies '<Window{name}>' (streaming only) and 'Write{name}Avro';
``publish`` applies 'Encode{name}' and 'Publish{name}'. The labels are the jobs' (the Dataflow
update contract), so a job that switches to these helpers keeps its graph.

File sinks use one shard per window: batch output is one file, streaming output one file per
window firing (see ``file_naming.avro_file_naming``).
"""

from typing import Any, Callable, Dict, Optional

import apache_beam as beam
import fastavro.write
from apache_beam.io import fileio
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms import trigger
from apache_beam.transforms import window

from pipelines.common.file_naming import avro_file_naming
from pipelines.common.pubsub_codec import encode

__all__ = [
    'AvroRecordSink',
    'avro_encoder',
    'flush_periodically',
    'is_streaming',
    'publish',
    'write_avro_files',
]


class AvroRecordSink(fileio.FileSink):
    """A ``fileio`` sink writing one Avro container file (deflate) of ``to_avro(record)``."""

    def __init__(self, schema: dict, to_avro: Callable[[Any], dict]):
        self._schema = schema
        self._to_avro = to_avro
        self._writer = None

    def open(self, fh):
        self._writer = fastavro.write.Writer(fh, self._schema, codec='deflate')

    def write(self, record):
        self._writer.write(self._to_avro(record))

    def flush(self):
        self._writer.flush()


class _SinkFactory:
    """``fileio``'s per-destination sink factory (a picklable callable)."""

    def __init__(self, schema: dict, to_avro: Callable[[Any], dict]):
        self._schema = schema
        self._to_avro = to_avro

    def __call__(self, _destination) -> AvroRecordSink:
        return AvroRecordSink(self._schema, self._to_avro)


class avro_encoder:  # pylint: disable=invalid-name
    """record → schemaless Avro bytes of ``to_avro(record)`` (a picklable callable)."""

    def __init__(self, schema: Dict[str, Any], to_avro: Callable[[Any], dict]):
        self._schema = schema
        self._to_avro = to_avro

    def __call__(self, record) -> bytes:
        return encode(self._schema, self._to_avro(record))


def is_streaming(pipeline: beam.Pipeline) -> bool:
    return bool(pipeline.options.view_as(StandardOptions).streaming)


def flush_periodically(flush_seconds: int) -> beam.PTransform:
    """Streaming file output: the global window, fired every ``flush_seconds`` of processing
    time and at the end of input (drain).

    Not event-time windows: timer output (releases) and late records (dead letters) can be
    behind the downstream watermark, and an event-time window would drop exactly those (observed
    on the DirectRunner for releases of several steps fired by one watermark jump).
    """
    return beam.WindowInto(
        window.GlobalWindows(),
        trigger=trigger.AfterWatermark(early=trigger.AfterProcessingTime(flush_seconds)),
        accumulation_mode=trigger.AccumulationMode.DISCARDING)


def write_avro_files(pcoll: beam.PCollection, path: str, *, name: str, prefix: str,
                     schema: dict, to_avro: Callable[[Any], dict],
                     streaming_window: Callable[[], beam.PTransform],
                     max_writers_per_bundle: Optional[int] = None) -> None:
    """``pcoll`` → ``{path}/{prefix}[-...]-SSSSS-of-NNNNN.avro`` (local or gs://).

    Args:
      name: the label stem ('Releases' gives 'WindowReleases' and 'WriteReleasesAvro').
      streaming_window: builds the windowing applied first in streaming mode.
      max_writers_per_bundle: passed to ``fileio.WriteToFiles`` when given (0: every record
        goes through the sharded path, so a window is one file instead of one per bundle).
    """
    streaming = is_streaming(pcoll.pipeline)
    to_write = pcoll
    if streaming:
        to_write = pcoll | f'Window{name}' >> streaming_window()
    extra = {} if max_writers_per_bundle is None else {
        'max_writers_per_bundle': max_writers_per_bundle}
    _ = to_write | f'Write{name}Avro' >> fileio.WriteToFiles(
        path=path, file_naming=avro_file_naming(prefix, unique=streaming),
        sink=_SinkFactory(schema, to_avro), shards=1, **extra)


def publish(pcoll: beam.PCollection, topic: str, *, name: str, encode_fn: Callable[[Any], Any],
            with_attributes: bool = False) -> None:
    """'Encode{name}' (``encode_fn``: bytes, or a ``PubsubMessage`` with attributes) then
    'Publish{name}' to ``topic``."""
    _ = (pcoll
         | f'Encode{name}' >> beam.Map(encode_fn)
         | f'Publish{name}' >> beam.io.WriteToPubSub(topic, with_attributes=with_attributes))
