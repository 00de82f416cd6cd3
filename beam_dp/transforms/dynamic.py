"""Continual per-key counts over a fully-dynamic stream (insertions AND deletions with record ids).

Wiring: as ``SparseContinualCountPerKey`` ('GlobalWindow', 'ExtractAndValidate', 'KeySeeds',
'ReleaseSegments'); the per-key DoFn also keeps the key's registry of live record ids (the
"stamping" stage of spec 001 §15 folded into the key's own state: no extra shuffle, no release,
no privacy cost). Each tick's updates are classified in a fixed order (insertions first, then
deletions, each sorted by record id):

  * an update without a record id              → dead letter, COUNTED by the partitioner;
  * an insertion of a record id that is live   → dead letter (duplicate), COUNTED;
  * a deletion of a record id that is not live → dead letter (never inserted / already
    deleted), COUNTED;
  * otherwise the update is applied (a deletion takes its record's bin from the registry).

Counted means: the update still moves the partitioner's SVT count by one, but not the dataset
(spec 001 §17.5: dropping it before counting would let one extra insertion turn a later deletion
valid and move the count by two). 'two_stream' (C6) routes an invalid update to a hidden extra
bin of its stream — counted by that stream's partitioner, noised by its C2 like any bin, never
released; 'fenwick' (C9) hands it over without an id, which C9 counts and ignores.
"""

from typing import Any, Callable, Optional

from beam_dp.accounting import PrivacyBudget
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.dynamic import Update
from beam_dp.mechanisms.time_partition import PAPER_C_THETA
from beam_dp.transforms.sparse_continual import KeyDriver
from beam_dp.transforms.sparse_continual import SegmentedPerKey

__all__ = [
    'CONSTRUCTIONS',
    'DynamicCountPerKey',
]

CONSTRUCTIONS = ('two_stream', 'fenwick')
_OPS = {1: 1, -1: -1, 'insert': 1, 'delete': -1, '+': 1, '-': -1}


def _sort_key(update):
    return (update[1] != 1, repr(update[0]))


class DynamicDriver(KeyDriver):
    """Payloads are tuples of raw (record_id, op) updates; ``extra`` is {live id: bin}."""

    def __init__(self, mechanism, selection, construction: str):
        super().__init__(mechanism, selection)
        self.construction = construction

    def empty(self):
        return ()

    def merge(self, a, b):
        return tuple(a) + tuple(b)

    def units(self, payload) -> int:
        return len(payload)

    def _ignored(self, op: int) -> Update:
        if self.construction == 'two_stream':
            return Update(None, op, 1)          # the hidden bin (dimension 1 + 1)
        return Update(None, op, 0)

    def prepare(self, state, tick, payload):
        live = dict(state.extra or {})
        fed, rejected = [], []
        for rid, op in sorted(payload, key=_sort_key):
            reason = None
            if rid is None:
                reason = 'update without a record id (counted by the partitioner, ignored)'
            elif op == 1 and rid in live:
                reason = ('duplicate insertion of a live record id (counted by the '
                          'partitioner, ignored)')
            elif op == -1 and rid not in live:
                reason = ('deletion of a record that is not live: never inserted or already '
                          'deleted (counted by the partitioner, ignored)')
            if reason is not None:
                rejected.append((reason, {'record_id': rid, 'op': op, 'tick': tick}))
                fed.append(self._ignored(op))
                continue
            if op == 1:
                live[rid] = 0
            else:
                live.pop(rid)
            fed.append(Update(rid, op, 0))
        return tuple(fed), tuple(rejected), live

    def first_input(self, state, pre):
        if self.construction == 'two_stream':
            return pre
        # C9 orders a batch's insertions before its deletions, so a pre-selection history
        # (insert, delete, re-insert) cannot be replayed as one batch: hand over the live set,
        # plus id-less placeholders so the partitioner counts every pre-selection update.
        live = state.extra or {}
        inserts = tuple(Update(rid, 1, item) for rid, item in sorted(live.items(),
                                                                     key=lambda x: repr(x[0])))
        ops = sorted((u.op for u in pre), reverse=True)
        rest = tuple(Update(None, op, 0) for op in ops[len(inserts):])
        return inserts + rest

    def answer(self, release):
        return tuple(release.answer[:1])

    def noise_sd(self, mech_state) -> float:
        if self.construction != 'two_stream':
            return float('nan')      # C9's node noise has no closed form (restarts, γ).
        counter = self.mechanism.stream.counter
        var = (counter.release_variance(mech_state.insertions.counter.s)
               + counter.release_variance(mech_state.deletions.counter.s))
        return var ** 0.5


def _default_update(record):
    return record[1], record[2]


class DynamicCountPerKey(SegmentedPerKey):
    """Continual per-key counts of the live records of an insert/delete stream.

    Each record is an update: ``update_fn(record)`` → (record_id, op) with op +1 / 'insert' or
    -1 / 'delete' (default ``(record[1], record[2])``); the count of a key at a tick is the
    number of its inserted and not yet deleted record ids.

    Privacy unit and neighbours: one more update event (event level, spec 001 §1.1), within
    streams whose updates are valid; covering a record's whole lifetime (insert + delete) costs
    2ε (run at ε/2). Invalid updates are dead-lettered but counted (see the module doc); in
    streams that contain them an extra update can change another update's validity, so the
    aggregate part degrades to group size 2.

    Guarantee: ε-DP with ``budget=PrivacyBudget(epsilon=ε)``:
      * ``construction='two_stream'`` (C6, default — recommended for counts, spec §10/§16):
        insertions and deletions each run C5 with the full ε (parallel composition over the
        fixed split by update type); answer Â - B̂.
      * ``construction='fenwick'`` (C9, Qiu & Yi Theorem 11): one partitioner over all updates
        (ε_p) + the Fenwick interval tree of per-node deletion-only mechanisms (ε_tree); polylog
        worse for counting, meant for polynomial-error plug-ins.
    With ``keys=PrivateKeys(...)`` plus the selection's (ε_s, δ) (units = update events).

    Released: one ``Release`` per key at each segment close (``step`` = close tick - 1); for C6
    a close of either stream; ``noise_stddev`` is C6's exact sd, NaN for C9. Nothing between.

    Not guaranteed: late updates (tick already processed) are dead-lettered, not counted.

    Args:
      construction: 'two_stream' or 'fenwick'.
      update_fn: record → (record_id, op).
      others: as ``SparseContinualCountPerKey``.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter; BudgetExceededError: over budget.
    """

    _metric = 'count'

    def __init__(self, *, budget: PrivacyBudget, construction: str = 'two_stream',
                 update_fn: Callable[[Any], Any] = _default_update,
                 partition_fraction: float = 0.5, beta: float = 0.1,
                 c_theta: float = PAPER_C_THETA, max_segment_ticks: Optional[int] = None,
                 monotone: bool = False, **kwargs):
        super().__init__(budget=budget, **kwargs)
        owner = self._owner
        if construction not in CONSTRUCTIONS:
            raise InvalidParamsError(f"{owner}: construction must be one of 'two_stream', "
                                     f"'fenwick', got {construction!r}.")
        if not callable(update_fn):
            raise InvalidParamsError(f'{owner}: update_fn must be callable, got '
                                     f'{update_fn!r}.')
        self._construction = construction
        self._update_fn = update_fn
        try:
            if construction == 'two_stream':
                self._mechanism = TwoStreamCounter(budget.epsilon, partition_fraction, beta,
                                                   c_theta, 2, max_segment_ticks, monotone)
            else:
                self._mechanism = FullyDynamicCounter(budget.epsilon, partition_fraction, beta,
                                                      c_theta, 1, max_segment_ticks, monotone)
        except InvalidParamsError as e:
            raise InvalidParamsError(f'{owner}: {str(e).split(": ", 1)[-1]}') from e
        self._finish_init()

    @property
    def mechanism(self):
        return self._mechanism

    @property
    def driver(self) -> DynamicDriver:
        selection = None if self._private is None else self._private.selection(1)
        return DynamicDriver(self._mechanism, selection, self._construction)

    def _parse(self, record):
        rid, op = self._update_fn(record)
        if op not in _OPS:
            raise ValueError(f"op must be +1/'insert' or -1/'delete', got {op!r}")
        return ((rid, _OPS[op]),)

    def _mechanism_name(self) -> str:
        m = self._mechanism
        name = 'two_stream_c6' if self._construction == 'two_stream' else 'fenwick_c9'
        return (f'{name}/c_theta={m.c_theta:g}/partition_fraction={m.partition_fraction:g}')

