"""Avro encoding of one record per Pub/Sub message (schemaless, single-record fastavro).

A message's data is the Avro binary encoding of exactly one record, without a container header
(the schema is agreed out of band: each job's input schema, ``beam_dp.io.records.RELEASE_SCHEMA``
/ ``DEAD_LETTER_SCHEMA`` for the outputs). Decoding is strict: a payload that fails to decode, or
has bytes left over after one record, raises ``InvalidRecordError`` so the job can dead-letter it.
"""

import io
from typing import Any, Dict

import fastavro

from beam_dp.errors import InvalidRecordError
from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.records import RELEASE_SCHEMA
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import Release
from beam_dp.io.records import dead_letter_from_avro
from beam_dp.io.records import dead_letter_to_avro
from beam_dp.io.records import release_from_avro
from beam_dp.io.records import release_to_avro

__all__ = [
    'decode',
    'decode_dead_letter',
    'decode_release',
    'encode',
    'encode_dead_letter',
    'encode_release',
]


def encode(schema: Dict[str, Any], record: Dict[str, Any]) -> bytes:
    """The schemaless Avro encoding of one record."""
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record)
    return buffer.getvalue()


def decode(schema: Dict[str, Any], data: bytes) -> Dict[str, Any]:
    """One record from ``data``; raises ``InvalidRecordError`` if it is not exactly one record."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidRecordError(f'payload must be bytes, got {type(data).__name__}')
    data = bytes(data)
    if not data:
        raise InvalidRecordError('empty payload')
    buffer = io.BytesIO(data)
    try:
        record = fastavro.schemaless_reader(buffer, schema, None)
    except Exception as e:  # pylint: disable=broad-except
        # fastavro raises EOFError, UnicodeDecodeError, IndexError, ... on corrupt input.
        raise InvalidRecordError(f'payload is not an Avro {schema["name"]}: {e!r}') from e
    if buffer.tell() != len(data):
        raise InvalidRecordError(f'payload has {len(data) - buffer.tell()} trailing byte(s) '
                                 f'after one Avro {schema["name"]}')
    return record


def encode_release(release: Release) -> bytes:
    return encode(RELEASE_SCHEMA, release_to_avro(release))


def decode_release(data: bytes) -> Release:
    return release_from_avro(decode(RELEASE_SCHEMA, data))


def encode_dead_letter(dead: DeadLetter) -> bytes:
    return encode(DEAD_LETTER_SCHEMA, dead_letter_to_avro(dead))


def decode_dead_letter(data: bytes) -> DeadLetter:
    return dead_letter_from_avro(decode(DEAD_LETTER_SCHEMA, data))
