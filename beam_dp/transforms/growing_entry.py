"""The entry stages of the growing-database transforms: 'TagData' / 'TagQueries' (``TagFn``:
validate an input, key it by its instance, as a ``GrowingItem``) and the lateness gate's
callbacks ('GateLateRecords' / 'GateLateQueries': a record's step, its late dead letter, a late
query's refusal). The wiring is ``growing_database.py``."""

import typing
from typing import Callable, Optional

import apache_beam as beam

from beam_dp.drivers import growing as driver
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import REFUSALS
from beam_dp.drivers.growing import GrowingItem
from beam_dp.errors import InvalidRecordError
from beam_dp.queries import LinearQuery
from beam_dp.transforms import shell
from beam_dp.transforms.shell import RecordText
from beam_dp.transforms.shell import dead_letter

__all__ = [
    'LOOP_ELEMENT',
    'TagFn',
    'item_step',
    'late_query',
    'late_record',
    'strip_text',
]

#: What the entry stages give the release loop: (instance key bytes, ``GrowingItem``).
LOOP_ELEMENT = typing.Tuple[bytes, typing.Any]


@beam.typehints.with_input_types(typing.Any)
@beam.typehints.with_output_types(LOOP_ELEMENT)
class TagFn(beam.DoFn):
    """Validates one input and keys it by ``key_bytes(key)``, as a ``GrowingItem``."""

    def __init__(self, kind: int, label: str, mechanism: str, key_fn: Optional[Callable],
                 domain_fn: Optional[Callable], domain_size: int, clock,
                 keep_records: bool = False, period_micros: Optional[int] = None):
        self._period = period_micros
        self._kind = kind
        self._label = label
        self._mechanism = mechanism
        self._key_fn = key_fn
        self._domain_fn = domain_fn
        self._domain_size = domain_size
        self._clock = clock
        #: Records on an unbounded input: their rendering, for a late dead letter (never
        #: stored by 'AnswerQueries').
        self._keep = keep_records

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        stage = 'TagData' if self._kind == RECORD else 'TagQueries'
        try:
            key = None if self._key_fn is None else shell.extract_key(self._key_fn, element)
            key = driver.instance_key(key, self._key_fn is not None, micros, self._period)
            instance = shell.key_bytes(key)
        except Exception as e:  # pylint: disable=broad-except
            yield dead_letter(self._label, stage, str(e), element, micros)
            return
        if self._kind == RECORD:
            try:
                index = self._domain_fn(element)
            except Exception as e:  # pylint: disable=broad-except
                yield dead_letter(self._label, stage, f'domain_fn raised {e!r}', element, micros)
                return
            reason = driver.check_domain_index(index, self._domain_size)
            if reason is None:
                reason = self._outside(micros)
            if reason is not None:
                yield dead_letter(self._label, stage, reason, element, micros)
                return
            text = shell.render_record(element) if self._keep else None
            yield instance, GrowingItem(key, (micros, RECORD, int(index), int(index)), text)
            return
        qid, query = driver.normalise_query(element, self._domain_size)
        if not qid:
            reason = 'query has no query_id' + ('' if isinstance(query, LinearQuery)
                                                else f' ({query})')
            yield dead_letter(self._label, stage, reason, element, micros)
            return
        if not isinstance(query, LinearQuery):
            dead = dead_letter(self._label, stage, f'invalid query {qid!r}: {query}', element,
                               micros)
        else:
            outside = self._outside(micros)
            dead = None if outside is None else dead_letter(self._label, stage, outside,
                                                            element, micros)
        if dead is not None:
            yield dead
            yield beam.pvalue.TaggedOutput(REFUSALS, driver.answer_record(
                qid, self._mechanism, micros, refusal='INVALID_QUERY', message=dead.value.reason))
            return
        yield instance, GrowingItem(key, (micros, QUERY, qid, (qid, query)))

    def _outside(self, micros: int) -> Optional[str]:
        """Why an event time is outside the clock (before start, after end), or None."""
        try:
            self._clock.checked_step(micros)
        except InvalidRecordError as e:
            return str(e)
        return None


def item_step(clock):
    def step(payload: GrowingItem) -> int:
        return clock.step_of(payload.item[0])
    return step


def late_record(clock):
    def late(unused_key, payload: GrowingItem, step):
        record = payload.item[3] if payload.text is None else RecordText(payload.text)
        return clock.late_reason(step), record, payload.item[0]
    return late


def late_query(clock, mechanism: str):
    def refuse(unused_key, payload: GrowingItem, step):
        micros, _, _, (qid, _) = payload.item
        return driver.late_query(qid, mechanism, micros, clock, step)
    return refuse


def strip_text(payload: GrowingItem) -> GrowingItem:
    return payload._replace(text=None)
