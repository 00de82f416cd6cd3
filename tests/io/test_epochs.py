"""Epoch records of the black-box schedulers: Avro round trip and a deterministic Beam coder."""

import copy
import io

import apache_beam as beam
import fastavro
import pytest

from beam_dp.errors import InvalidRecordError
from beam_dp.io.epochs import EPOCH_RELEASE_SCHEMA
from beam_dp.io.epochs import EpochReleaseRecord
from beam_dp.io.epochs import epoch_release_from_avro
from beam_dp.io.epochs import epoch_release_to_avro

RECORDS = [
    EpochReleaseRecord('', None, None, 0, 100, 0.16, 1.83, 6.09, 'bbscheduler/laplace', 1099),
    EpochReleaseRecord('k', 0, 60_000_000, 71, 71, 0.01, 0.5, 8.1, 'bbimprover/box', 7),
]


def test_avro_round_trip():
    buf = io.BytesIO()
    schema = fastavro.parse_schema(copy.deepcopy(EPOCH_RELEASE_SCHEMA))
    fastavro.writer(buf, schema, [epoch_release_to_avro(r) for r in RECORDS])
    buf.seek(0)
    assert [epoch_release_from_avro(r) for r in fastavro.reader(buf)] == RECORDS


def test_registered_coder_is_deterministic_and_lossless():
    coder = beam.coders.registry.get_coder(EpochReleaseRecord)
    assert coder.is_deterministic()
    for record in RECORDS:
        assert coder.decode(coder.encode(record)) == record


def test_a_record_missing_a_field_is_refused():
    record = epoch_release_to_avro(RECORDS[0])
    del record['epoch']
    with pytest.raises(InvalidRecordError, match='invalid epoch record'):
        epoch_release_from_avro(record)
