"""Typed output records of beam_dp transforms, their Beam coders and Avro schemas.

``Release`` is one released value: a key's estimate for one event-time step, with the mechanism
and privacy parameters that produced it. ``DeadLetter`` is an input the transform could not use,
with the stage and the reason. Both are plain NamedTuples (their deterministic ``RowCoder`` is registered by
``beam_dp.io.coders``, the only module of this package that imports Beam) with a fastavro schema; ``release_to_avro`` / ``release_from_avro`` convert losslessly.
"""

import typing
from typing import List, NamedTuple, Optional

import fastavro

from beam_dp.io.avro import MICROS
from beam_dp.io.avro import record_schema

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


class Release(NamedTuple):
    """One released value.

    key: the (public or privately selected) key. step: the step index (0 = the step starting at
    the transform's ``start``). step_start_micros / step_end_micros: the step's event-time bounds
    [start, end) in microseconds since the epoch. value: the released estimate (for histograms,
    the sum over bins). values: the per-bin estimates of a histogram (empty otherwise).
    metric: 'count', 'sum' or 'histogram'. mechanism: the counter and estimator. epsilon, delta,
    rho: the privacy parameters of the whole continual release of this transform. privacy_unit:
    what one neighbouring change is. noise_stddev: the standard deviation of this release's noise
    (public: it depends only on the parameters and the step index).
    """
    key: str
    step: int
    step_start_micros: int
    step_end_micros: int
    value: float
    values: List[float]
    metric: str
    mechanism: str
    epsilon: float
    delta: float
    rho: float
    privacy_unit: str
    noise_stddev: float


class DeadLetter(NamedTuple):
    """An input that was not used, and why. ``record`` is a printable rendering of the input."""
    transform: str
    stage: str
    reason: str
    record: str
    event_time_micros: Optional[int]


RECORD_TYPES = (Release, DeadLetter)

RELEASE_SCHEMA = fastavro.parse_schema(record_schema(
    Release, 'One differentially private release of a key for one event-time step.',
    types={'step_start_micros': MICROS, 'step_end_micros': MICROS}, defaults={'values': []}))

DEAD_LETTER_SCHEMA = fastavro.parse_schema(record_schema(
    DeadLetter, 'An input record a beam_dp transform did not use, with the reason.',
    defaults={'event_time_micros': None}))


def release_to_avro(release: Release) -> dict:
    """A plain dict for fastavro (timestamp-micros fields stay integers)."""
    d = release._asdict()
    d['values'] = list(d['values'])
    return d


def release_from_avro(record: dict) -> Release:
    fields = dict(record)
    for name in ('step_start_micros', 'step_end_micros'):
        value = fields[name]
        if hasattr(value, 'timestamp'):   # fastavro decodes timestamp-micros to datetime.
            fields[name] = _datetime_to_micros(value)
    fields['values'] = list(fields.get('values') or [])
    return Release(**fields)


def dead_letter_to_avro(dead: DeadLetter) -> dict:
    return dead._asdict()


def dead_letter_from_avro(record: dict) -> DeadLetter:
    return DeadLetter(**record)


def _datetime_to_micros(value) -> int:
    import datetime
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    delta = value - epoch
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


del typing
