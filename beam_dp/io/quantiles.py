"""The release record of ``ContinualQuantilesPerKey`` (plain NamedTuple + Avro schema)."""

from typing import List, NamedTuple

import fastavro

from beam_dp.io.records import _datetime_to_micros  # pylint: disable=protected-access

__all__ = ['QuantileRelease', 'QUANTILE_RELEASE_SCHEMA', 'RECORD_TYPES',
           'quantile_release_from_avro', 'quantile_release_to_avro']


class QuantileRelease(NamedTuple):
    """Chosen percentiles of one key's values, released at one step (cumulative since start).

    key, step, step_start_micros, step_end_micros: as ``Release``. count: the noisy number of
    records (the tree's root, or the sum of the leaves). percentiles: the requested percentiles
    in [0, 100], ascending. values: the released value of each percentile (monotone in the
    percentile, within [lower, upper]). rank_error_stddev: per percentile, the standard deviation
    in records of the noise in the estimated rank at the released bucket (closed form from the
    counter's exact noise sd; public: it depends on the parameters, the step and the released
    bucket only). value_resolution: the bucket width (the value is exact to one bucket; a rank
    error adds at most the records of the bucket). layout: 'tree' (hierarchical histogram) or
    'flat' (leaf histogram). noise_stddev: the counter's per-node (per-bucket) noise sd.
    metric ('quantiles'), mechanism, epsilon, delta, rho, privacy_unit: as ``Release``.
    """
    key: str
    step: int
    step_start_micros: int
    step_end_micros: int
    count: float
    percentiles: List[float]
    values: List[float]
    rank_error_stddev: List[float]
    value_resolution: float
    layout: str
    metric: str
    mechanism: str
    epsilon: float
    delta: float
    rho: float
    privacy_unit: str
    noise_stddev: float


RECORD_TYPES = (QuantileRelease,)

_DOUBLES = {'type': 'array', 'items': 'double'}
QUANTILE_RELEASE_SCHEMA = fastavro.parse_schema({
    'type': 'record',
    'name': 'QuantileRelease',
    'namespace': 'beam_dp',
    'doc': 'Differentially private percentiles of a key for one event-time step.',
    'fields': [
        {'name': 'key', 'type': 'string'},
        {'name': 'step', 'type': 'long'},
        {'name': 'step_start_micros', 'type': {'type': 'long', 'logicalType': 'timestamp-micros'}},
        {'name': 'step_end_micros', 'type': {'type': 'long', 'logicalType': 'timestamp-micros'}},
        {'name': 'count', 'type': 'double'},
        {'name': 'percentiles', 'type': _DOUBLES},
        {'name': 'values', 'type': _DOUBLES},
        {'name': 'rank_error_stddev', 'type': _DOUBLES},
        {'name': 'value_resolution', 'type': 'double'},
        {'name': 'layout', 'type': 'string'},
        {'name': 'metric', 'type': 'string'},
        {'name': 'mechanism', 'type': 'string'},
        {'name': 'epsilon', 'type': 'double'},
        {'name': 'delta', 'type': 'double'},
        {'name': 'rho', 'type': 'double'},
        {'name': 'privacy_unit', 'type': 'string'},
        {'name': 'noise_stddev', 'type': 'double'},
    ],
})


_LISTS = ('percentiles', 'values', 'rank_error_stddev')


def quantile_release_to_avro(release: QuantileRelease) -> dict:
    """A plain dict for fastavro and ``QUANTILE_RELEASE_SCHEMA`` (timestamps stay integers)."""
    d = release._asdict()
    for name in _LISTS:
        d[name] = list(d[name])
    return d


def quantile_release_from_avro(record: dict) -> QuantileRelease:
    """The ``QuantileRelease`` of a record read with ``QUANTILE_RELEASE_SCHEMA`` (fastavro and
    ``beam.io.ReadFromAvro`` decode the timestamp-micros fields to datetimes: back to micros)."""
    fields = dict(record)
    for name in ('step_start_micros', 'step_end_micros'):
        if hasattr(fields[name], 'timestamp'):
            fields[name] = _datetime_to_micros(fields[name])
    for name in _LISTS:
        fields[name] = list(fields.get(name) or [])
    return QuantileRelease(**fields)
