"""The Boost caching driver (pure, no Beam): what a stateful DoFn keyed by dataset calls
(spec 002 §5). The DoFn only holds a ``BoostDriverState`` in one state cell and calls:

* ``add_rows(state, rows)`` for data rows (event time, attribute tuple): a row goes into its open
  event-time block; a row for a sealed block is refused as late (``clock.late_reason``, the one
  late reason of every family) and never changes it (trap 9.3), a row before ``start_micros`` is
  refused with the clock's 'event time is before the release start' reason, a bad row with a
  'malformed: ...' reason (docs/dead_letters.md);
* ``seal_until(state, watermark, rng)`` from its event-time timer: seals every block whose end is
  at or before the watermark **in order, empty blocks included** (the dyadic tree needs
  contiguous ids), then answers the pending queries that were waiting for them;
* ``submit(state, queries, rng)`` for a batch of queries: answered in a deterministic order
  (query id), each with noise addressed ``rng.derive('boost', dataset, query_id)`` and, inside
  the mechanism, (node, purpose). A query id seen before re-emits its stored outputs with
  ``replay=True`` and charges nothing (idempotent replay of a retried bundle). A query whose
  window reaches an unsealed block waits in ``pending`` (sealed in order, answered in id order).

Every output is typed (``beam_dp.io.boost``): answers (value, status, path), refusals with a
public reason, per-block ledger rows after each charge, sealed-block notices, rejected rows. No
output carries a true answer. Atomic check-and-charge per dataset is the mechanism's admission
(one key per dataset: Beam has no cross-key transactions).

Privacy: event-level, replace-one within a block, public block sizes (``TreePMWBypass``).
"""

import dataclasses
import math
import numbers
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.drivers.clock import format_micros
from beam_dp.drivers.clock import late_reason
from beam_dp.errors import InvalidParamsError
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostBlockSealed
from beam_dp.io.boost import BoostLedgerRow
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.boost import BoostRefusal
from beam_dp.io.boost import BoostRowRejection
from beam_dp.mechanisms.boost.cache import PMap
from beam_dp.mechanisms.boost.filters import to_epsilon
from beam_dp.mechanisms.boost.pmw_bypass import TreePMWBypass
from beam_dp.mechanisms.boost.state import BoostRequest
from beam_dp.mechanisms.boost.state import BoostState
from beam_dp.noise import RandomSource
from beam_dp.queries import LinearQuery

__all__ = [
    'BoostDriver',
    'BoostDriverState',
    'budget_fields',
    'rectangle_query',
]


def rectangle_query(shape: Sequence[int], subsets: Sequence[Sequence[int]],
                    query_id: Optional[str] = None) -> LinearQuery:
    """q(x) = Π_a 1[x_a ∈ S_a] over the mixed-radix domain ``shape`` (C order); an empty S_a
    means every value. Raises InvalidParamsError on a bad subset."""
    if len(subsets) != len(shape):
        raise InvalidParamsError(f'rectangle_query: {len(subsets)} subsets for {len(shape)} '
                                 f'attributes.')
    mask = np.ones(tuple(shape), dtype=np.float64)
    for axis, (size, values) in enumerate(zip(shape, subsets)):
        if not values:
            continue
        keep = np.zeros(size, dtype=bool)
        for x in values:
            if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x < size:
                raise InvalidParamsError(f'rectangle_query: value {x!r} of attribute {axis} '
                                         f'is not in [0, {size}).')
            keep[x] = True
        index = [np.newaxis] * len(shape)
        index[axis] = slice(None)
        mask = mask * keep[tuple(index)]
    return LinearQuery.from_vector(mask.reshape(-1), query_id=query_id)


def budget_fields(owner: str, budget, noise) -> dict:
    """The mechanism's budget fields from a ``PrivacyBudget`` (plus the driver's
    ``ledger_delta``): pure ε → ``epsilon_budget`` (Laplace); ρ → ``rho_budget`` and
    (ε, δ > 0) → ``rho_budget`` = the largest ρ that converts to it (the accountant's
    ``rho_for_epsilon_delta``) and ``ledger_delta`` = δ (Gaussian). Else InvalidParamsError."""
    if noise == 'gaussian' and isinstance(budget, PrivacyBudget) and (budget.is_zcdp or
                                                                       budget.delta):
        if budget.is_zcdp:
            return dict(noise='gaussian', rho_budget=float(budget.rho))
        return dict(noise='gaussian', ledger_delta=budget.delta,
                    rho_budget=rho_for_epsilon_delta(budget.epsilon, budget.delta))
    if noise == 'laplace' and isinstance(budget, PrivacyBudget) and not (
            budget.is_zcdp or budget.delta):
        return dict(epsilon_budget=float(budget.epsilon))
    if noise not in ('laplace', 'gaussian'):
        raise InvalidParamsError(f"{owner}: noise must be 'laplace' or 'gaussian', got "
                                 f"{noise!r}.")
    want = ('a pure epsilon PrivacyBudget(epsilon=...)' if noise == 'laplace' else
            'PrivacyBudget(rho=...) or PrivacyBudget(epsilon=..., delta=... > 0)')
    raise InvalidParamsError(f'{owner}: with noise={noise!r} the budget must be {want}, got '
                             f'{budget!r}.')


@dataclasses.dataclass(frozen=True)
class BoostDriverState:
    """One dataset. SECRET: ``open_blocks`` (exact counts of unsealed blocks) and the secret
    parts of ``mech``. ``pending``: queries waiting for unsealed blocks. ``processed``: query id
    → the outputs it produced (DP outputs only), for idempotent replay; with a replay retention
    R it is the young generation, ``processed_old`` the old one, ``replay_clock`` the latest
    query event time seen and ``replay_generation`` the young generation's start (all public)."""
    mech: BoostState
    open_blocks: Tuple[Tuple[int, np.ndarray], ...] = ()
    pending: Tuple[BoostQueryRecord, ...] = ()
    processed: PMap = dataclasses.field(default_factory=PMap)
    processed_old: PMap = dataclasses.field(default_factory=PMap)
    replay_clock: Optional[int] = None
    replay_generation: int = 0
    #: Queries answered so far (public): with a replay retention it is part of each query's noise
    #: address (``_query_rng``).
    answer_seq: int = 0


@dataclasses.dataclass(frozen=True)
class BoostDriver:
    """Drives one dataset's ``TreePMWBypass`` over event-time blocks and a query stream.

    Args:
      dataset: the dataset key. shape: attribute domain sizes (bins are their mixed radix).
      mechanism: the configured ``TreePMWBypass`` (domain_size = Π shape).
      start_micros, block_micros: block b covers [start + b·len, start + (b+1)·len).
      replay_retention_micros: R, the public replay window (None: every query id is kept for
        ever). Query ids are kept for at least R of query event time (two generations, each
        dropped whole), and a query stamped ≤ (the latest query time seen) − R is refused
        'replay_window_expired': it may be a replay whose answer was dropped, and answering
        it again would release a second, different answer for the same id (the histograms,
        SVs and cache it would read have changed, so the same addressed noise would not give
        the same output) and charge again. New queries that late are refused alike (a public
        rule on public query times).
      allowed_lateness_micros: a block is sealed when the watermark passes its end plus this
        (the clock's allowed lateness: the late reason says it).
      ledger_delta: with a Gaussian mechanism (ρ-zCDP filters), the δ > 0 at which the ledger
        rows and each answer's ``epsilon`` are reported as (ε, δ)-DP ε (``consumed`` =
        ε(ρ consumed), a row's ``epsilon`` its increment, ``capacity`` = ε(ρ_G): the
        accountant's conversion); 0 (default) reports ρ. Pure mechanisms report ε.

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    dataset: str
    shape: Tuple[int, ...]
    mechanism: TreePMWBypass
    start_micros: int = 0
    block_micros: int = 7 * 24 * 3600 * 10 ** 6
    replay_retention_micros: Optional[int] = None
    ledger_delta: float = 0.0
    allowed_lateness_micros: int = 0

    def __post_init__(self):
        owner = type(self).__name__
        if not isinstance(self.dataset, str):
            v._fail(owner, f'dataset must be a string, got {self.dataset!r}.')
        shape = tuple(v.check_positive_int(owner, 'shape', d) for d in self.shape)
        object.__setattr__(self, 'shape', shape)
        if not isinstance(self.mechanism, TreePMWBypass):
            v._fail(owner, f'mechanism must be a TreePMWBypass, got {self.mechanism!r}.')
        if math.prod(shape) != self.mechanism.domain_size:
            v._fail(owner, f'shape {shape} has {math.prod(shape)} bins but the mechanism\'s '
                           f'domain_size is {self.mechanism.domain_size}.')
        v.check_non_negative_int(owner, 'start_micros', self.start_micros)
        v.check_positive_int(owner, 'block_micros', self.block_micros)
        v.check_non_negative_int(owner, 'allowed_lateness_micros', self.allowed_lateness_micros)
        if self.replay_retention_micros is not None:
            v.check_positive_int(owner, 'replay_retention_micros', self.replay_retention_micros)
        if v.check_probability(owner, 'ledger_delta', self.ledger_delta) and (
                self.mechanism.noise != 'gaussian'):
            v._fail(owner, "ledger_delta applies to a mechanism with noise='gaussian' (zCDP "
                           "filters); a pure mechanism's ledger is in ε.")

    def init_state(self) -> BoostDriverState:
        return BoostDriverState(self.mechanism.init_state())

    # Data ---------------------------------------------------------------------------------------

    def _bin(self, attrs) -> Optional[int]:
        try:
            values = tuple(attrs)
        except TypeError:
            return None
        if len(values) != len(self.shape):
            return None
        for x, d in zip(values, self.shape):
            if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x < d:
                return None
        return int(np.ravel_multi_index(values, self.shape))

    def add_rows(self, state: BoostDriverState, rows: Sequence[Tuple[int, Any]]
                 ) -> Tuple[BoostDriverState, List[BoostRowRejection]]:
        """Adds (event_time_micros, attributes) rows to their open blocks."""
        sealed = state.mech.num_blocks
        open_blocks = dict(state.open_blocks)
        rejected = []
        for row in rows:
            time, attrs = (row if isinstance(row, tuple) and len(row) == 2 else (None, row))
            if isinstance(time, bool) or not isinstance(time, numbers.Integral):
                rejected.append(self._reject(
                    'malformed: a row must be (event_time_micros: int, attributes)', None, row))
                continue
            if time < self.start_micros:
                rejected.append(self._reject(
                    f'event time is before the release start: the record is at '
                    f'{format_micros(time)}, the start is {format_micros(self.start_micros)}',
                    time, row))
                continue
            block = (int(time) - self.start_micros) // self.block_micros
            if block < sealed:
                rejected.append(self._reject(self._late(block), time, row))
                continue
            index = self._bin(attrs)
            if index is None:
                rejected.append(self._reject(
                    'malformed: the attributes are not a point of the public domain', time, row))
                continue
            counts = open_blocks.get(block)
            counts = (np.zeros(self.mechanism.domain_size, dtype=np.int64) if counts is None
                      else counts.copy())
            counts[index] += 1
            counts.setflags(write=False)
            open_blocks[block] = counts
        return dataclasses.replace(state, open_blocks=tuple(sorted(open_blocks.items()))), rejected

    def add_block_counts(self, state: BoostDriverState, block: int, counts
                         ) -> Tuple[BoostDriverState, List[BoostRowRejection]]:
        """Adds a pre-aggregated histogram of block ``block`` (spec §5.1 step 3: rows combined
        per event-time window upstream). A sealed block is refused as late, never changed."""
        c = np.asarray(counts)
        if (isinstance(block, bool) or not isinstance(block, numbers.Integral) or block < 0
                or c.shape != (self.mechanism.domain_size,)
                or not np.issubdtype(c.dtype, np.integer) or (c.size and c.min() < 0)):
            return state, [self._reject(
                'malformed: block counts must be a non-negative integer histogram of the domain',
                None, ('block', block))]
        if block < state.mech.num_blocks:
            return state, [self._reject(self._late(block), self.block_end(block) - 1,
                                        ('block', block))]
        open_blocks = dict(state.open_blocks)
        base = open_blocks.get(block)
        total = c.astype(np.int64) if base is None else base + c.astype(np.int64)
        total.setflags(write=False)
        open_blocks[block] = total
        return dataclasses.replace(state, open_blocks=tuple(sorted(open_blocks.items()))), []

    def _late(self, block: int) -> str:
        return late_reason(block, self.allowed_lateness_micros)

    def _reject(self, reason: str, time, row) -> BoostRowRejection:
        return BoostRowRejection(self.dataset, reason, None if time is None else int(time),
                                 repr(row)[:1000])

    def block_end(self, block: int) -> int:
        return self.start_micros + (block + 1) * self.block_micros

    def seal_until(self, state: BoostDriverState, watermark_micros: int,
                   rng: RandomSource) -> Tuple[BoostDriverState, List[Any]]:
        """Seals every block ending at or before the watermark (empty ones included), then
        answers the pending queries whose windows are now sealed."""
        out: List[Any] = []
        open_blocks = dict(state.open_blocks)
        mech = state.mech
        while self.block_end(mech.num_blocks) <= watermark_micros:
            block = mech.num_blocks
            counts = open_blocks.pop(block, None)
            if counts is None:
                counts = np.zeros(self.mechanism.domain_size, dtype=np.int64)
            mech = self.mechanism.add_data(mech, counts)
            out.append(BoostBlockSealed(self.dataset, block, self.block_end(block) -
                                        self.block_micros, self.block_end(block),
                                        int(counts.sum())))
        if mech is state.mech:
            return state, out
        waiting = list(state.pending)
        state = dataclasses.replace(state, mech=mech, open_blocks=tuple(sorted(
            open_blocks.items())), pending=())
        state, answered = self.submit(state, waiting, rng)
        return state, out + answered

    # Queries ------------------------------------------------------------------------------------

    def _window(self, state: BoostDriverState, q: BoostQueryRecord) -> Tuple[int, int]:
        if q.latest > 0:
            sealed = state.mech.num_blocks
            return max(0, sealed - q.latest), sealed - 1
        return q.first_block, q.last_block

    def _advance_replay(self, state: BoostDriverState, now: int) -> BoostDriverState:
        """Moves the replay clock to ``now``; rotates the generations every R of it."""
        clock = now if state.replay_clock is None else max(state.replay_clock, now)
        gen, young, old = state.replay_generation, state.processed, state.processed_old
        if state.replay_clock is None:
            gen = clock
        elif clock - gen >= 2 * self.replay_retention_micros:
            gen, young, old = clock, PMap(), PMap()
        elif clock - gen >= self.replay_retention_micros:
            gen, young, old = clock, PMap(), young
        return dataclasses.replace(state, processed=young, processed_old=old,
                                   replay_clock=clock, replay_generation=gen)

    def _stored(self, state: BoostDriverState, q) -> Optional[tuple]:
        if not isinstance(q, BoostQueryRecord):
            return None
        stored = state.processed.get(q.query_id)
        return stored if stored is not None else state.processed_old.get(q.query_id)

    def submit(self, state: BoostDriverState, queries: Sequence[BoostQueryRecord],
               rng: RandomSource, now_micros: Optional[int] = None
               ) -> Tuple[BoostDriverState, List[Any]]:
        """Answers ``queries`` (and the pending ones they join) in query-id order;
        ``now_micros``: their event time (the replay window; None: not checked)."""
        out: List[Any] = []
        expired = False
        if self.replay_retention_micros is not None and now_micros is not None:
            state = self._advance_replay(state, now_micros)
            expired = now_micros <= state.replay_clock - self.replay_retention_micros
        pending = list(state.pending)
        for q in sorted(queries, key=lambda r: str(getattr(r, 'query_id', ''))):
            stored = self._stored(state, q)
            if expired and stored is None and all(p.query_id != getattr(q, 'query_id', None)
                                                  for p in pending):
                out.append(BoostRefusal(self.dataset, str(getattr(q, 'query_id', '')),
                                        'replay_window_expired', getattr(q, 'first_block', -1),
                                        getattr(q, 'last_block', -1), False))
                continue
            if stored is not None:
                out.extend(r._replace(replay=True) for r in stored
                           if isinstance(r, (BoostAnswerRecord, BoostRefusal)))
                continue
            if not isinstance(q, BoostQueryRecord) or q.dataset != self.dataset:
                state, rows = self._finish(state, q, 'wrong_dataset' if isinstance(
                    q, BoostQueryRecord) else 'invalid_query', None)
                out.extend(rows)
                continue
            first, last = self._window(state, q)
            if (last >= state.mech.num_blocks and first <= last) or last < 0 <= q.latest:
                if all(p.query_id != q.query_id for p in pending):
                    pending.append(q)
                continue
            state, rows = self._answer(state, q, first, last, rng)
            out.extend(rows)
        pending.sort(key=lambda r: r.query_id)
        return dataclasses.replace(state, pending=tuple(pending)), out

    def _parse(self, q: BoostQueryRecord) -> Optional[LinearQuery]:
        try:
            if q.vector:
                return LinearQuery.from_vector(q.vector, query_id=q.query_id)
            return rectangle_query(self.shape, q.subsets, q.query_id)
        except (InvalidParamsError, TypeError, ValueError):
            return None

    def _answer(self, state: BoostDriverState, q: BoostQueryRecord, first: int, last: int,
                rng: RandomSource):
        query = self._parse(q)
        if query is None or (q.vector and len(q.vector) != self.mechanism.domain_size):
            return self._finish(state, q, 'invalid_query', None)
        request = BoostRequest(query, first, last, q.query_id)
        query_rng, state = self._query_rng(state, q.query_id, rng)
        answer, mech = self.mechanism.answer(state.mech, request, query_rng)
        state = dataclasses.replace(state, mech=mech)
        if answer.status != 'ok':
            return self._finish(state, q, answer.reason, (first, last))
        size = sum(mech.sizes[first:last + 1])
        ledger, amount = self._ledger(mech, q.query_id, answer)
        record = BoostAnswerRecord(self.dataset, q.query_id, answer.value, answer.value * size,
                                   answer.path, first, last, amount,
                                   self.mechanism.alpha, self.mechanism.beta, False)
        rows = [record] + ledger
        processed = state.processed.set(q.query_id, (record,))
        return dataclasses.replace(state, processed=processed), rows

    def _query_rng(self, state: BoostDriverState, query_id: str, rng: RandomSource
                   ) -> Tuple[RandomSource, BoostDriverState]:
        """The noise of one query: ('boost', dataset, query id). With a replay retention the
        processed ids are forgotten after 2R, so a later query may reuse an id: its draws would
        then repeat the earlier query's noise on the same nodes (and release the exact
        difference of the two answers). The address then also takes ``answer_seq``, the number
        of queries answered before it on this dataset (state, so a replay from restored state
        draws the same noise). Without a retention ids are kept for ever and a repeated id is a
        replay, so the address is unchanged."""
        if self.replay_retention_micros is None:
            return rng.derive('boost', self.dataset, query_id), state
        seq = state.answer_seq
        return (rng.derive('boost', self.dataset, query_id, 'seq', seq),
                dataclasses.replace(state, answer_seq=seq + 1))

    def _ledger(self, mech, query_id: str, answer) -> Tuple[List[BoostLedgerRow], float]:
        """The ledger rows of ``answer`` and its amount (the largest per-block charge) in
        the budget's notion: ε, ρ, or ε at ``ledger_delta`` (then a row's amount is its ε
        increment, so the rows of a block still sum to its ``consumed``)."""
        mechanism = self.mechanism
        convert = None
        if not self.ledger_delta:
            capacity = (mechanism.rho_budget if mechanism.noise == 'gaussian'
                        else mechanism.epsilon_budget)
        else:
            capacity = to_epsilon(mechanism.rho_budget, self.ledger_delta)

            def convert(rho):
                return to_epsilon(rho, self.ledger_delta)
        ledger, running, first, last = [], {}, {}, {}
        for block, purpose, eps in answer.charges:
            running[block] = running.get(block, 0.0) + eps
            before = mech.filters.spent(block) - sum(
                e for b, _, e in answer.charges if b == block)
            consumed = before + running[block]
            if convert is not None:
                if block not in first:
                    first[block] = last[block] = convert(before)
                consumed = convert(consumed)
                eps, last[block] = consumed - last[block], consumed
            ledger.append(BoostLedgerRow(self.dataset, query_id, block, purpose, eps, consumed,
                                         capacity))
        if convert is None:
            return ledger, answer.epsilon
        return ledger, max((last[b] - first[b] for b in first), default=0.0)

    def _finish(self, state: BoostDriverState, q, reason: str, window):
        first, last = window if window else (getattr(q, 'first_block', -1),
                                             getattr(q, 'last_block', -1))
        qid = str(getattr(q, 'query_id', ''))
        refusal = BoostRefusal(self.dataset, qid, reason, first, last, False)
        if isinstance(q, BoostQueryRecord):
            state = dataclasses.replace(state, processed=state.processed.set(qid, (refusal,)))
        return state, [refusal]
