"""Epoch records of the black-box schedulers (``BBSchedulerQueries`` / ``BBImproverQueries``):
one ``EpochReleaseRecord`` per black-box run, its Beam coder (``RowCoder``, deterministic) and
its Avro schema (fastavro). Every field is public metadata of the run."""

from typing import NamedTuple, Optional


from beam_dp.errors import InvalidRecordError
from beam_dp.io.avro import record_schema

__all__ = [
    'EPOCH_RELEASE_SCHEMA',
    'EpochReleaseRecord',
    'epoch_release_from_avro',
    'epoch_release_to_avro',
]


class EpochReleaseRecord(NamedTuple):
    """One black-box run: ``key`` (str of the instance key; '' for one database), the window's
    [start, end) in microseconds (None in the global window), ``epoch`` (BBScheduler: i;
    BBImprover: the size t), ``t`` (size of the snapshot it ran on), ``epsilon``, ``alpha``,
    ``ln_inv_beta`` (the run's ε_i, α_i, ln(1/β_i)), ``mechanism`` (scheduler/box) and
    ``timestamp`` (event time, microseconds, of the item that triggered it: the record that
    brought the size to ``t`` for an eager run, the query for a lazy one). All public."""
    key: str
    window_start_micros: Optional[int]
    window_end_micros: Optional[int]
    epoch: int
    t: int
    epsilon: float
    alpha: float
    ln_inv_beta: float
    mechanism: str
    timestamp: int


RECORD_TYPES = (EpochReleaseRecord,)

EPOCH_RELEASE_SCHEMA = record_schema(
    EpochReleaseRecord, 'One run of a static black box by BBScheduler/BBImprover (public metadata).',
    defaults={'window_start_micros': None, 'window_end_micros': None}, name='EpochRelease')


def epoch_release_to_avro(record: EpochReleaseRecord) -> dict:
    return record._asdict()


def epoch_release_from_avro(record: dict) -> EpochReleaseRecord:
    """The ``EpochReleaseRecord`` of an Avro dict.

    Raises:
      InvalidRecordError: if a field is missing or unknown.
    """
    try:
        return EpochReleaseRecord(**record)
    except TypeError as e:
        raise InvalidRecordError(f'epoch_release_from_avro: invalid epoch record: {e}') from e
