"""The Avro converters of the release records round-trip through fastavro, which decodes the
timestamp-micros fields to datetimes (as ``beam.io.ReadFromAvro`` does)."""

import io

import fastavro

from beam_dp import io as records


def _round_trip(schema, row):
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [row])
    buf.seek(0)
    return list(fastavro.reader(buf))[0]


def test_quantile_release_round_trips():
    release = records.QuantileRelease(
        key='UA', step=3, step_start_micros=1_357_516_800_000_000,
        step_end_micros=1_358_121_600_000_001, count=812.5, percentiles=(50.0, 90.0),
        values=(-1.5, 40.25), rank_error_stddev=(67.0, 80.5), value_resolution=4.0,
        layout='tree', metric='quantiles', mechanism='blt', epsilon=0.0, delta=0.0, rho=0.5,
        privacy_unit='event-level (one record)', noise_stddev=3.25)
    read = _round_trip(records.QUANTILE_RELEASE_SCHEMA, records.quantile_release_to_avro(release))
    assert not isinstance(read['step_start_micros'], int)        # fastavro gives a datetime
    back = records.quantile_release_from_avro(read)
    assert back._replace(percentiles=tuple(back.percentiles), values=tuple(back.values),
                         rank_error_stddev=tuple(back.rank_error_stddev)) == release
    assert back.step_end_micros == 1_358_121_600_000_001


def test_release_and_dead_letter_round_trip():
    release = records.Release(
        key='ATL', step=0, step_start_micros=0, step_end_micros=60_000_000, value=2.0,
        values=[], metric='count', mechanism='per_step', epsilon=1.0, delta=0.0, rho=0.0,
        privacy_unit='event-level (one record)', noise_stddev=1.4)
    read = _round_trip(records.RELEASE_SCHEMA, records.release_to_avro(release))
    assert records.release_from_avro(read) == release
    dead = records.DeadLetter('T', 'ExtractAndValidate', 'key must be a string, got NoneType None',
                              "(None, 'N3', 40)", 40_000_000)
    assert records.dead_letter_from_avro(
        _round_trip(records.DEAD_LETTER_SCHEMA, records.dead_letter_to_avro(dead))) == dead
