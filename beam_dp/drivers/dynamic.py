"""The fully-dynamic segmented driver (pure, no Beam): insert/delete updates with record ids.

``DynamicDriver`` is the ``KeyDriver`` of ``DynamicCountPerKey``. Its ``registry`` is the key's
set of live record ids (the "stamping" stage folded into the key's own state: no
extra shuffle, no release, no privacy cost). Each step's updates are classified in a fixed order
(insertions first, then deletions, each sorted by record id) by the validity rule of
docs/partitioning.md (``classify``):

  * an update without a record id              → rejected, COUNTED by the partitioner;
  * an insertion of a record id that is live   → rejected (duplicate), COUNTED;
  * a deletion of a record id that is not live → rejected (never inserted / already deleted),
    COUNTED;
  * otherwise the update is applied (a deletion takes its record's bin from the registry).

Counted means: the update still moves the partitioner's SVT count by one, but not the dataset
(dropping it before counting would let one extra insertion turn a later deletion valid and move
the count by two: the rule decides the sensitivity). 'two_stream' (C6) routes a rejected update
to a hidden extra bin of its stream — counted by that stream's partitioner, noised by its C2 like
any bin, never released; 'fenwick' (C9) receives it without an id, which C9 counts and ignores.
"""

from typing import Dict, Hashable, Optional, Tuple

from beam_dp.drivers.segmented import KeyDriver
from beam_dp.mechanisms.dynamic import Update

__all__ = [
    'CONSTRUCTIONS',
    'DynamicDriver',
    'classify',
    'parse_op',
    'parse_update',
]

CONSTRUCTIONS = ('two_stream', 'fenwick')
_OPS = {1: 1, -1: -1, 'insert': 1, 'delete': -1, '+': 1, '-': -1}


def parse_op(op) -> int:
    """+1 / 'insert' / '+' → 1, -1 / 'delete' / '-' → -1.

    Raises:
      ValueError: for anything else (the transform dead-letters the record).
    """
    if op not in _OPS:
        raise ValueError(f"op must be +1/'insert' or -1/'delete', got {op!r}")
    return _OPS[op]


def parse_update(record_id, op) -> Tuple[Hashable, int]:
    """(record_id, ±1) of one update, checked where the record enters.

    Raises:
      ValueError: for a bad op or a record id that cannot be a registry key (unhashable), so
        the record is dead-lettered at extraction instead of failing in the release timer.
    """
    try:
        hash(record_id)
    except TypeError as e:
        raise ValueError(f'record_id must be hashable, got {record_id!r:.80}') from e
    try:
        return record_id, parse_op(op)
    except TypeError as e:
        raise ValueError(f"op must be +1/'insert' or -1/'delete', got {op!r:.80}") from e


def _sort_key(update):
    return (update[1] != 1, repr(update[0]))


def classify(live: Dict[Hashable, int], record_id, op: int) -> Optional[str]:
    """The validity rule: None if the update is valid against the live ids, else why not."""
    if record_id is None:
        return 'update without a record id (counted by the partitioner, ignored)'
    if op == 1 and record_id in live:
        return 'duplicate insertion of a live record id (counted by the partitioner, ignored)'
    if op == -1 and record_id not in live:
        return ('deletion of a record that is not live: never inserted or already deleted '
                '(counted by the partitioner, ignored)')
    return None


class DynamicDriver(KeyDriver):
    """Payloads are tuples of raw (record_id, op) or (record_id, op, bin) updates (an
    insertion's bin; a deletion takes its record's bin from the registry); ``registry`` is
    {live id: bin}. ``bins``: the public bin count (1 for counts); ``answer_dimension``: the
    released width (bins, or |𝒬| for C9 with a plug-in)."""

    def __init__(self, mechanism, selection, construction: str, clock=None, bins: int = 1,
                 answer_dimension: Optional[int] = None):
        super().__init__(mechanism, selection, clock)
        self.construction = construction
        self.bins = bins
        self.answer_dimension = bins if answer_dimension is None else answer_dimension

    def empty(self):
        return ()

    def merge(self, a, b):
        return tuple(a) + tuple(b)

    def units(self, payload) -> int:
        return len(payload)

    def _ignored(self, op: int) -> Update:
        if self.construction == 'two_stream':
            return Update(None, op, self.bins)  # the hidden bin (dimension bins + 1)
        return Update(None, op, 0)

    def prepare(self, state, step, payload) -> Tuple[tuple, tuple, dict]:
        live = dict(state.registry or {})
        fed, rejected = [], []
        for update in sorted(payload, key=_sort_key):
            rid, op = update[0], update[1]
            reason = classify(live, rid, op)
            if reason is not None:
                rejected.append((reason, {'record_id': rid, 'op': op, 'step': step}))
                fed.append(self._ignored(op))
                continue
            if op == 1:
                item = live[rid] = update[2] if len(update) > 2 else 0
            else:
                item = live.pop(rid)
            fed.append(Update(rid, op, item))
        return tuple(fed), tuple(rejected), live

    def first_input(self, state, candidate_input):
        if self.construction == 'two_stream':
            return candidate_input
        # C9 orders a batch's insertions before its deletions, so a pre-selection history
        # (insert, delete, re-insert) cannot be replayed as one batch: hand over the live set,
        # plus id-less placeholders so the partitioner counts every pre-selection update.
        live = state.registry or {}
        inserts = tuple(Update(rid, 1, item) for rid, item in sorted(live.items(),
                                                                     key=lambda x: repr(x[0])))
        ops = sorted((u.op for u in candidate_input), reverse=True)
        rest = tuple(Update(None, op, 0) for op in ops[len(inserts):])
        return inserts + rest

    def answer(self, release):
        return tuple(release.answer[:self.answer_dimension])

    def noise_sd(self, mechanism_state) -> float:
        if self.construction != 'two_stream':
            return float('nan')      # C9's node noise has no closed form (restarts, γ).
        counter = self.mechanism.stream.counter
        var = (counter.release_variance(mechanism_state.insertions.counter.s)
               + counter.release_variance(mechanism_state.deletions.counter.s))
        return var ** 0.5
