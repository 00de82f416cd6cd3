"""The input of the continual-counts job: bike-ride events, their Avro schema and validation.

One event is one ride: ``rider_id`` (the privacy unit: all rides of one rider are protected
together), ``station`` (the start station: the released key), ``event_time_micros`` (when the
ride started, timestamp-micros) and ``duration_seconds``.

``encode_event`` / ``decode_event_record`` are the Pub/Sub payload codec (one schemaless Avro
record per message, see ``pipelines.common.pubsub_codec``). ``validate_event`` turns a decoded
record (a dict from an Avro file or a Pub/Sub message) into a ``RideEvent`` or raises
``InvalidRecordError`` naming the problem; the pipeline routes such records to its dead-letter
output. Validation is about the record's shape only: whether the
station is public, or the time inside the released range, is decided by the DP transform.
"""

import datetime
import math
import numbers
from typing import Any, Mapping, NamedTuple

import apache_beam as beam
import fastavro

from beam_dp.errors import InvalidRecordError
from pipelines.common import pubsub_codec

__all__ = [
    'EVENT_SCHEMA',
    'RideEvent',
    'decode_event_record',
    'encode_event',
    'event_to_avro',
    'validate_event',
]

# Event times outside [1970, 2200) are certainly corrupt (Beam's timestamps are bounded too).
MAX_EVENT_TIME_MICROS = 7_258_118_400 * 1_000_000
MAX_ID_CHARS = 256

EVENT_SCHEMA = fastavro.parse_schema({
    'type': 'record',
    'name': 'RideEvent',
    'namespace': 'beam_dp.pipelines.continual_counts',
    'doc': 'One bike ride, keyed by its start station; rider_id is the privacy unit.',
    'fields': [
        {'name': 'rider_id', 'type': 'string', 'doc': 'Pseudonymous rider id (privacy unit).'},
        {'name': 'station', 'type': 'string', 'doc': 'Start station name (the released key).'},
        {'name': 'event_time_micros',
         'type': {'type': 'long', 'logicalType': 'timestamp-micros'},
         'doc': 'Ride start, microseconds since the epoch (UTC).'},
        {'name': 'duration_seconds', 'type': 'double', 'doc': 'Ride duration in seconds.'},
    ],
})


class RideEvent(NamedTuple):
    """A validated ride event."""
    rider_id: str
    station: str
    event_time_micros: int
    duration_seconds: float


beam.coders.registry.register_coder(RideEvent, beam.coders.RowCoder)

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _micros(value: Any) -> int:
    """fastavro decodes timestamp-micros to an aware datetime; plain longs are accepted too."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidRecordError(f'event_time_micros is a naive datetime: {value!r}')
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise InvalidRecordError(f'event_time_micros must be a long, got {type(value).__name__}')


def _text(record: Mapping[str, Any], name: str) -> str:
    value = record.get(name)
    if not isinstance(value, str):
        raise InvalidRecordError(f'{name} must be a string, got {type(value).__name__}')
    value = value.strip()
    if not value:
        raise InvalidRecordError(f'{name} is empty')
    if len(value) > MAX_ID_CHARS:
        raise InvalidRecordError(f'{name} is longer than {MAX_ID_CHARS} characters')
    return value


def validate_event(record: Any) -> RideEvent:
    """A decoded record → ``RideEvent``.

    Raises:
      InvalidRecordError: the record is not a mapping, a field is missing or of the wrong type,
        an id is empty, the event time is outside [1970, 2200), or the duration is negative or
        not finite.
    """
    if isinstance(record, RideEvent):
        record = record._asdict()
    if not isinstance(record, Mapping):
        raise InvalidRecordError(f'a ride event must be a record, got {type(record).__name__}')
    missing = [f['name'] for f in EVENT_SCHEMA['fields'] if f['name'] not in record]
    if missing:
        raise InvalidRecordError(f'missing field(s): {", ".join(missing)}')
    rider_id = _text(record, 'rider_id')
    station = _text(record, 'station')
    micros = _micros(record['event_time_micros'])
    if not 0 <= micros < MAX_EVENT_TIME_MICROS:
        raise InvalidRecordError(f'event_time_micros out of range: {micros}')
    duration = record['duration_seconds']
    if not isinstance(duration, numbers.Real) or isinstance(duration, bool):
        raise InvalidRecordError(
            f'duration_seconds must be a number, got {type(duration).__name__}')
    duration = float(duration)
    if not math.isfinite(duration) or duration < 0:
        raise InvalidRecordError(f'duration_seconds must be finite and >= 0, got {duration!r}')
    return RideEvent(rider_id, station, micros, duration)


def event_to_avro(event: RideEvent) -> dict:
    """A plain dict for fastavro (the timestamp stays an integer)."""
    return event._asdict()


def encode_event(event: RideEvent) -> bytes:
    """One Pub/Sub payload: the schemaless Avro encoding of ``event``."""
    return pubsub_codec.encode(EVENT_SCHEMA, event_to_avro(event))


def decode_event_record(data: bytes) -> dict:
    """The decoded (not yet validated, see ``validate_event``) event record of one payload.

    Raises:
      InvalidRecordError: ``data`` is not exactly one Avro ``RideEvent``.
    """
    return pubsub_codec.decode(EVENT_SCHEMA, data)
