"""Typed records, Avro schemas (fastavro) and record parsing."""

from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import RELEASE_SCHEMA
from beam_dp.io.records import Release
from beam_dp.io.records import dead_letter_from_avro
from beam_dp.io.records import dead_letter_to_avro
from beam_dp.io.records import release_from_avro
from beam_dp.io.records import release_to_avro

__all__ = [
    'DEAD_LETTER_SCHEMA',
    'DeadLetter',
    'RELEASE_SCHEMA',
    'Release',
    'dead_letter_from_avro',
    'dead_letter_to_avro',
    'release_from_avro',
    'release_to_avro',
]
