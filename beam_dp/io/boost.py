"""Records of the Boost caching driver (spec 002 §5.1-§5.2): the query input, the answers, the
refusals, the per-block budget ledger, sealed-block notices and rejected rows; each a NamedTuple
with a registered ``RowCoder`` (deterministic) and a fastavro schema.

No record carries a true answer, q(Data), an SV threshold or an unrounded SV margin (trap 9.4):
``value`` is a DP output, ``count_estimate`` is that value times the public window size, ledger
rows are charges (public functions of earlier DP outputs), a sealed-block notice carries the
block's public size n_i (replace-one adjacency: block sizes are public, spec §1.3). A rejected
row carries the raw input row: keep it as private as the input (like ``DeadLetter``).
"""

from typing import Any, Dict, List, NamedTuple, Optional

import fastavro

from beam_dp.io.avro import record_schema
from beam_dp.io.queries import QueryAnswer
from beam_dp.io.queries import answer_to_avro

__all__ = [
    'BOOST_ANSWER_SCHEMA',
    'BOOST_BLOCK_SCHEMA',
    'BOOST_LEDGER_SCHEMA',
    'BOOST_QUERY_SCHEMA',
    'BOOST_REFUSAL_REASONS',
    'BOOST_REFUSAL_SCHEMA',
    'BOOST_ROW_REJECTION_SCHEMA',
    'BoostAnswerRecord',
    'BoostBlockSealed',
    'BoostLedgerRow',
    'BoostQueryRecord',
    'BoostRefusal',
    'BoostRowRejection',
    'boost_from_avro',
    'boost_to_avro',
    'refusal_answer',
]

#: Why a query is refused (public: parameters, sealed block ids and filter state only).
BOOST_REFUSAL_REASONS = ('budget_exhausted', 'empty_window', 'invalid_query', 'invalid_window',
                         'replay_window_expired', 'window_expired', 'window_not_sealed',
                         'window_too_long', 'wrong_dataset')


class BoostQueryRecord(NamedTuple):
    """A query: a rectangle (``subsets[a]`` = allowed values of attribute a; [] = any value) or,
    if ``vector`` is non-empty, the dense weights q ∈ [0,1]^N. The window is the absolute block
    range [first_block, last_block], or the latest ``latest`` sealed blocks when latest > 0."""
    query_id: str
    dataset: str
    subsets: List[List[int]]
    vector: List[float]
    first_block: int
    last_block: int
    latest: int


class BoostAnswerRecord(NamedTuple):
    """A DP answer: ``value`` (fraction), ``count_estimate`` (value × public window size),
    ``path`` (EXACT, R1, R2, R3 or MIXED), ``epsilon`` (the largest per-block charge of this
    query), the accuracy target, and ``replay`` (True when a duplicate query id re-emitted the
    stored answer at no charge)."""
    dataset: str
    query_id: str
    value: float
    count_estimate: float
    path: str
    first_block: int
    last_block: int
    epsilon: float
    alpha: float
    beta: float
    replay: bool


class BoostRefusal(NamedTuple):
    """A refused query and the public reason (``BOOST_REFUSAL_REASONS``), as the Boost driver
    keeps it (state, ``replay``); ``BoostQueries``' ``refusals`` output carries it as the one
    refusal record of every query family, a ``QueryAnswer`` (``refusal_answer``)."""
    dataset: str
    query_id: str
    reason: str
    first_block: int
    last_block: int
    replay: bool


class BoostLedgerRow(NamedTuple):
    """One charge to one block's filter: ``purpose`` sv_init, sv_fail or laplace."""
    dataset: str
    query_id: str
    block: int
    purpose: str
    epsilon: float
    consumed: float
    capacity: float


class BoostBlockSealed(NamedTuple):
    """A sealed block (immutable from now on) with its public size and event-time bounds."""
    dataset: str
    block: int
    start_micros: int
    end_micros: int
    size: int


class BoostRowRejection(NamedTuple):
    """A data row that did not enter a block (late, before the start, malformed)."""
    dataset: str
    reason: str
    event_time_micros: Optional[int]
    record: str


RECORD_TYPES = (BoostQueryRecord, BoostAnswerRecord, BoostRefusal, BoostLedgerRow,
                BoostBlockSealed, BoostRowRejection)
"""Every Boost record type (their RowCoders are registered by ``beam_dp.io.coders``)."""

def _schema(cls, doc: str) -> Dict[str, Any]:
    return record_schema(cls, doc, namespace='beam_dp.boost')


BOOST_QUERY_SCHEMA = _schema(BoostQueryRecord, 'A linear query over a window of time blocks.')
BOOST_ANSWER_SCHEMA = _schema(BoostAnswerRecord, 'A DP answer of the Boost cache.')
BOOST_REFUSAL_SCHEMA = _schema(BoostRefusal, 'A refused Boost query.')
BOOST_LEDGER_SCHEMA = _schema(BoostLedgerRow, 'One per-block budget charge.')
BOOST_BLOCK_SCHEMA = _schema(BoostBlockSealed, 'A sealed time block.')
BOOST_ROW_REJECTION_SCHEMA = _schema(BoostRowRejection, 'A data row that entered no block.')

_SCHEMAS = {cls: schema for cls, schema in zip(RECORD_TYPES, (
    BOOST_QUERY_SCHEMA, BOOST_ANSWER_SCHEMA, BOOST_REFUSAL_SCHEMA, BOOST_LEDGER_SCHEMA,
    BOOST_BLOCK_SCHEMA, BOOST_ROW_REJECTION_SCHEMA))}
_PARSED: Dict[type, Any] = {}


def refusal_answer(refusal: BoostRefusal, micros: int) -> QueryAnswer:
    """The refusal as the one refusal record of the query families: a ``QueryAnswer`` with
    ``refusal`` = the reason in upper case (``REFUSAL_REASONS``) and the dataset, the window and
    whether the query id was a replay in ``message``; ``micros``: its event time."""
    words = (f"{refusal.reason.replace('_', ' ')}: dataset {refusal.dataset!r}, blocks "
             f'[{refusal.first_block}, {refusal.last_block}]'
             + ('; a replayed query id' if refusal.replay else ''))
    return QueryAnswer(query_id=refusal.query_id, value=None, mechanism='boost',
                       epsilon_spent=0.0, timestamp=int(micros),
                       refusal=refusal.reason.upper(), message=words)


def boost_to_avro(record) -> Dict[str, Any]:
    """The Avro dict of any Boost record (validated against its schema); a refusal
    (``QueryAnswer``) in ``ANSWER_SCHEMA``."""
    if isinstance(record, QueryAnswer):
        return answer_to_avro(record)
    cls = type(record)
    if cls not in _PARSED:
        _PARSED[cls] = fastavro.parse_schema(_SCHEMAS[cls])
    out = record._asdict()
    fastavro.validation.validate(out, _PARSED[cls], raise_errors=True)
    return out


def boost_from_avro(cls, data: Dict[str, Any]):
    """The ``cls`` record from its Avro dict."""
    return cls(**{name: data[name] for name in cls._fields})
