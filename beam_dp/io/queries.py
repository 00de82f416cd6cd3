"""Query records: the Avro schemas (fastavro) of linear queries and of their answers
(``QueryAnswer``), with dict converters. Pure Python (no Beam).

A query record carries its id, kind, domain size, the kind's parameters and (for vector queries)
the dense vector. An answer record carries the query id, either a value or a refusal with a
reason, the mechanism's name, the ε (and δ) spent so far by the answering instance, the database
size t at which it was answered, the public hard/easy flag where the mechanism has one, and an
event-time timestamp (microseconds since the epoch).

Converting a record back into a ``LinearQuery`` re-runs its validation; a malformed record raises
``InvalidRecordError`` (chained to the cause) so that a transform can route it to a dead-letter
output instead of failing. Answers are built from a mechanism's result in one
place, ``beam_dp.drivers.growing.answer_record``.
"""

import dataclasses
from typing import Any, Dict, Optional

import fastavro

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.queries.linear import KINDS
from beam_dp.queries.linear import LinearQuery

__all__ = [
    'ANSWER_SCHEMA',
    'QUERY_SCHEMA',
    'REFUSAL_REASONS',
    'QueryAnswer',
    'answer_from_avro',
    'answer_to_avro',
    'parsed_answer_schema',
    'parsed_query_schema',
    'query_from_avro',
    'query_to_avro',
]

#: Why a mechanism refused to answer; the names match the mechanisms' ``status`` values.
REFUSAL_REASONS = ('HALTED', 'NOT_STARTED', 'BUDGET_EXHAUSTED', 'UNKNOWN_QUERY', 'INVALID_QUERY',
                   'LATE',
                   # BoostQueries (``beam_dp.io.boost.BOOST_REFUSAL_REASONS``, upper case)
                   'EMPTY_WINDOW', 'INVALID_WINDOW', 'REPLAY_WINDOW_EXPIRED', 'WINDOW_EXPIRED',
                   'WINDOW_NOT_SEALED', 'WINDOW_TOO_LONG', 'WRONG_DATASET')

_NULLABLE_LONG = ['null', 'long']

QUERY_SCHEMA: Dict[str, Any] = {
    'type': 'record',
    'name': 'LinearQuery',
    'namespace': 'beam_dp.queries',
    'doc': 'A linear query f in [0,1]^N over the domain {0..N-1}.',
    'fields': [
        {'name': 'id', 'type': 'string'},
        {'name': 'kind', 'type': {'type': 'enum', 'name': 'LinearQueryKind',
                                  'symbols': [k.upper() for k in KINDS]}},
        {'name': 'domain_size', 'type': 'long'},
        {'name': 'params', 'type': {
            'type': 'record', 'name': 'LinearQueryParams',
            'fields': [
                {'name': 'index', 'type': _NULLABLE_LONG, 'default': None},
                {'name': 'start', 'type': _NULLABLE_LONG, 'default': None},
                {'name': 'stop', 'type': _NULLABLE_LONG, 'default': None},
                {'name': 'shape', 'type': {'type': 'array', 'items': 'long'}, 'default': []},
                {'name': 'dims', 'type': {'type': 'array', 'items': 'long'}, 'default': []},
                {'name': 'values', 'type': {'type': 'array', 'items': 'long'}, 'default': []},
            ]}},
        {'name': 'vector', 'type': ['null', {'type': 'array', 'items': 'double'}],
         'default': None},
    ],
}

ANSWER_SCHEMA: Dict[str, Any] = {
    'type': 'record',
    'name': 'QueryAnswer',
    'namespace': 'beam_dp.queries',
    'doc': 'The answer to one linear query: a value, or a refusal with its reason.',
    'fields': [
        {'name': 'query_id', 'type': 'string'},
        {'name': 'value', 'type': ['null', 'double'], 'default': None},
        {'name': 'refusal', 'type': ['null', {
            'type': 'record', 'name': 'Refusal',
            'fields': [
                {'name': 'reason', 'type': {'type': 'enum', 'name': 'RefusalReason',
                                            'symbols': list(REFUSAL_REASONS)}},
                {'name': 'message', 'type': 'string', 'default': ''},
            ]}], 'default': None},
        {'name': 'mechanism', 'type': 'string'},
        {'name': 'epsilon_spent', 'type': 'double'},
        {'name': 'delta_spent', 'type': 'double', 'default': 0.0},
        {'name': 't', 'type': _NULLABLE_LONG, 'default': None,
         'doc': 'database size when answered (public under swap-one neighbours)'},
        {'name': 'hard', 'type': ['null', 'boolean'], 'default': None},
        {'name': 'timestamp', 'type': 'long', 'doc': 'event time, microseconds since the epoch'},
    ],
}


def parsed_query_schema():
    """``QUERY_SCHEMA`` parsed by fastavro (parse a fresh copy; fastavro mutates its input)."""
    import copy
    return fastavro.parse_schema(copy.deepcopy(QUERY_SCHEMA))


def parsed_answer_schema():
    """``ANSWER_SCHEMA`` parsed by fastavro."""
    import copy
    return fastavro.parse_schema(copy.deepcopy(ANSWER_SCHEMA))


def query_to_avro(query: LinearQuery, query_id: Optional[str] = None) -> Dict[str, Any]:
    """The Avro dict of ``query``; its id is ``query_id``, else ``query.query_id``, else ''."""
    qid = query_id if query_id is not None else (query.query_id or '')
    return {
        'id': qid,
        'kind': query.kind.upper(),
        'domain_size': query.domain_size,
        'params': {
            'index': query.index,
            'start': query.start,
            'stop': query.stop,
            'shape': list(query.shape or ()),
            'dims': list(query.dims or ()),
            'values': list(query.values or ()),
        },
        'vector': None if query.vector is None else query.vector.tolist(),
    }


def query_from_avro(record: Dict[str, Any]) -> LinearQuery:
    """The ``LinearQuery`` of an Avro dict.

    Raises:
      InvalidRecordError: if the record is malformed or the query it describes is invalid.
    """
    try:
        kind = str(record['kind']).lower()
        params = record.get('params') or {}
        domain_size = record['domain_size']
        qid = record.get('id') or None
        if kind == 'point':
            return LinearQuery.point(domain_size, params.get('index'), query_id=qid)
        if kind == 'range':
            return LinearQuery.range(domain_size, params.get('start'), params.get('stop'),
                                     query_id=qid)
        if kind == 'marginal':
            query = LinearQuery.marginal(params.get('shape') or (), params.get('dims') or (),
                                         params.get('values') or (), query_id=qid)
            if query.domain_size != domain_size:
                raise InvalidParamsError(f'LinearQuery: shape {query.shape} does not match '
                                         f'domain_size {domain_size}.')
            return query
        if kind == 'vector':
            vector = record.get('vector')
            if vector is None:
                raise InvalidParamsError('LinearQuery: a vector query needs a vector, got None.')
            query = LinearQuery.from_vector(vector, query_id=qid)
            if query.domain_size != domain_size:
                raise InvalidParamsError(f'LinearQuery: vector has {query.domain_size} entries '
                                         f'but domain_size is {domain_size}.')
            return query
        raise InvalidParamsError(f'LinearQuery: kind must be one of {KINDS}, got {kind!r}.')
    except (KeyError, TypeError, AttributeError, InvalidParamsError) as e:
        raise InvalidRecordError(f'query_from_avro: invalid query record: {e}') from e


@dataclasses.dataclass(frozen=True)
class QueryAnswer:
    """One answer record: ``value`` or ``refusal`` (one of ``REFUSAL_REASONS``), never both.
    The one exception is a sparse-vector ⊥ ("below threshold"): no value, no refusal,
    ``hard=False``.

    Raises:
      InvalidParamsError: if both or neither of value and refusal are given (except for a ⊥), or
        the reason is unknown.
    """
    query_id: str
    value: Optional[float]
    mechanism: str
    epsilon_spent: float
    timestamp: int
    refusal: Optional[str] = None
    message: str = ''
    delta_spent: float = 0.0
    t: Optional[int] = None
    hard: Optional[bool] = None

    def __post_init__(self):
        below = self.value is None and self.refusal is None and self.hard is False
        if (self.value is None) == (self.refusal is None) and not below:
            raise InvalidParamsError(f'QueryAnswer: give exactly one of value or refusal, got '
                                     f'value={self.value!r}, refusal={self.refusal!r}.')
        if self.refusal is not None and self.refusal not in REFUSAL_REASONS:
            raise InvalidParamsError(f'QueryAnswer: refusal must be one of {REFUSAL_REASONS}, got '
                                     f'{self.refusal!r}.')


def answer_to_avro(answer: QueryAnswer) -> Dict[str, Any]:
    """The Avro dict of an answer."""
    return {
        'query_id': answer.query_id,
        'value': answer.value,
        'refusal': (None if answer.refusal is None
                    else {'reason': answer.refusal, 'message': answer.message}),
        'mechanism': answer.mechanism,
        'epsilon_spent': float(answer.epsilon_spent),
        'delta_spent': float(answer.delta_spent),
        't': answer.t,
        'hard': answer.hard,
        'timestamp': int(answer.timestamp),
    }


def answer_from_avro(record: Dict[str, Any]) -> QueryAnswer:
    """The ``QueryAnswer`` of an Avro dict.

    Raises:
      InvalidRecordError: if the record is malformed.
    """
    try:
        refusal = record.get('refusal')
        return QueryAnswer(
            query_id=record['query_id'], value=record.get('value'),
            refusal=None if refusal is None else refusal['reason'],
            message='' if refusal is None else refusal.get('message', ''),
            mechanism=record['mechanism'], epsilon_spent=record['epsilon_spent'],
            delta_spent=record.get('delta_spent', 0.0), t=record.get('t'),
            hard=record.get('hard'), timestamp=record['timestamp'])
    except (KeyError, TypeError, InvalidParamsError) as e:
        raise InvalidRecordError(f'answer_from_avro: invalid answer record: {e}') from e
