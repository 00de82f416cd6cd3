"""Helpers shared by the transforms: time conversion, dead letters, output bundles."""

import datetime
import math
import numbers
from typing import NamedTuple, Optional

import apache_beam as beam
from apache_beam.utils.timestamp import Duration
from apache_beam.utils.timestamp import Timestamp

from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import DeadLetter

DEAD_LETTER = 'dead_letter'
_MAX_RECORD_CHARS = 2000


class ContinualOutputs(NamedTuple):
    """The outputs of a continual transform: ``releases`` (``Release`` records) and
    ``dead_letter`` (``DeadLetter`` records: malformed, out-of-range, late or over-bound inputs)."""
    releases: beam.PCollection
    dead_letter: beam.PCollection


def to_micros(owner: str, name: str, value, allow_zero: bool = True, duration: bool = False) -> int:
    """Seconds (int/float), ``Timestamp``/``Duration`` or aware ``datetime`` → integer microseconds."""
    if isinstance(value, (Timestamp, Duration)):
        micros = value.micros
    elif isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidParamsError(f'{owner}: {name} must be timezone-aware, got {value!r}.')
        micros = round(value.timestamp() * 1_000_000)
    elif isinstance(value, datetime.timedelta):
        micros = round(value.total_seconds() * 1_000_000)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidParamsError(f'{owner}: {name} must be finite, got {value!r}.')
        micros = round(float(value) * 1_000_000)
    else:
        kind = 'a duration in seconds' if duration else 'a time in seconds since the epoch'
        raise InvalidParamsError(f'{owner}: {name} must be {kind}, got {value!r}.')
    if micros < 0 or (micros == 0 and not allow_zero):
        word = 'non-negative' if allow_zero else 'positive'
        raise InvalidParamsError(f'{owner}: {name} must be {word}, got {value!r}.')
    return micros


def dead_letter(transform: str, stage: str, reason: str, record,
                event_time_micros: Optional[int] = None) -> beam.pvalue.TaggedOutput:
    try:
        text = repr(record)
    except Exception:  # pylint: disable=broad-except
        text = f'<unprintable {type(record).__name__}>'
    if len(text) > _MAX_RECORD_CHARS:
        text = text[:_MAX_RECORD_CHARS] + '...'
    return beam.pvalue.TaggedOutput(
        DEAD_LETTER, DeadLetter(transform, stage, reason, text, event_time_micros))
