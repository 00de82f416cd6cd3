"""Fully-dynamic (insert + delete) continual release: C6 (two insertion-only streams) and C9
(Qiu & Yi Theorem 11: partitioner + Fenwick interval tree of C8 node mechanisms).

Updates carry a record id: ``Update(record_id, op, item)`` with op +1 (insert) / -1 (delete) and
item the bin (0 for plain counting). Dataset logic (C9), applied when an update arrives (within a
tick: insertions first, then deletions, each in the given order):
  * insertion with a missing id, or of an id that is live → ignored (duplicate);
  * deletion with a missing id, or of an id that is not live → ignored (invalid);
  * deletion of a record inserted in the still-open segment → the pair is netted out (§17.6).
Every update — ignored or not — is COUNTED by the partitioner (§17.5): the raw event count is
what moves by exactly one between neighbours.

C6 (``TwoStreamCounter``) — recommended for counts and histograms (docs/partitioning.md).
  Neighbours: one more update (event-level). Insertions feed stream A, deletions stream B (a
  fixed split by update type); each is a ``SparseCounter`` with the FULL ε (parallel
  composition), answer Â − B̂. Guarantee ε-DP. For the split to be a fixed partition, each
  stream must see every event of its type: C6 applies NO dataset logic (a deletion carries its
  own item and always subtracts), so it assumes a valid stream, as the paper does.

C9 (``FullyDynamicCounter``) — the paper's headline construction; polylog-worse for counting.
  Neighbours: one more update, within *valid* streams (every insertion of a non-live id, every
  deletion of a live id). Guarantee (ε_p + ε_tree)-DP: ε_p for the partitioner over all updates
  (Thm 6); in the tree, given the public boundaries a record's insertion segment fixes the one
  node per level that may hold it (parallel composition within a level) and level ℓ gets
  ε_v = 6ε_tree/(π² ℓ²) (Σ_ℓ = ε_tree for any height). Invalid updates are processed safely but
  may shift which insertion owns an id; for streams with such updates the tree part degrades to
  group size 2 (2ε_tree). Answers change only at segment closes.

Debug (``NoiseFreeDebug``): zero noise everywhere (structural tests only; refuses secure rngs).
"""

import dataclasses
import functools
from typing import Dict, Hashable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import basel_weight
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import fenwick
from beam_dp.mechanisms.plugin import StaticLinearMechanism
from beam_dp.mechanisms.dynamic_node import NodeMechanism
from beam_dp.mechanisms.dynamic_node import NodeState
from beam_dp.mechanisms.dynamic_node import NoiseFreeDebug
from beam_dp.mechanisms.dynamic_node import check_debug
from beam_dp.mechanisms.sparse_counter import SegmentedParams
from beam_dp.mechanisms.sparse_counter import SparseCounter
from beam_dp.mechanisms.sparse_counter import SparseCounterState
from beam_dp.mechanisms.time_partition import PartitionerState
from beam_dp.mechanisms.time_partition import SegmentClose
from beam_dp.mechanisms.time_partition import TimePartitioner
from beam_dp.noise import RandomSource

__all__ = [
    'DynamicRelease',
    'FullyDynamicCounter',
    'FullyDynamicState',
    'TwoStreamCounter',
    'TwoStreamState',
    'Update',
]

INSERT = 1
DELETE = -1


class Update(NamedTuple):
    """One update: ``op`` +1 inserts, -1 deletes record ``record_id`` (None = missing) in bin
    ``item``."""
    record_id: Optional[Hashable]
    op: int
    item: int = 0


@dataclasses.dataclass(frozen=True)
class DynamicRelease:
    """A tick's release: boundaries closed since the previous call and the current answer."""
    tick: int
    closes: Tuple[SegmentClose, ...]
    answer: Tuple[float, ...]


def _ordered(updates: Sequence[Update]) -> Tuple[Update, ...]:
    updates = tuple(Update(*u) for u in updates)
    return tuple(u for u in updates if u.op == INSERT) + tuple(u for u in updates
                                                               if u.op != INSERT)


# --- C6 -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TwoStreamState:
    insertions: SparseCounterState
    deletions: SparseCounterState
    answer: Tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class TwoStreamCounter(SegmentedParams):
    """C6: two independent C5 instances (insertions, deletions), each with the full ε.

    Args: as ``SparseCounter`` (``epsilon`` is each stream's total, = the whole budget).
    """

    def __post_init__(self):
        self.stream

    @property
    def stream(self) -> SparseCounter:
        return SparseCounter(self.epsilon, self.partition_fraction, self.beta, self.c_theta,
                             self.dimension, self.max_segment_ticks, self.monotone,
                             self.skip_ahead)

    def privacy_cost(self) -> PrivacyCost:
        # Parallel composition over the fixed split {insert events} ⊔ {delete events}.
        return PrivacyCost(epsilon=self.epsilon)

    def init_state(self) -> TwoStreamState:
        s = self.stream.init_state()
        return TwoStreamState(s, s, (0.0,) * self.dimension)

    def _split(self, updates: Sequence[Update]):
        ins = np.zeros(self.dimension, dtype=np.int64)
        dels = np.zeros(self.dimension, dtype=np.int64)
        for u in updates:
            u = Update(*u)
            if not 0 <= u.item < self.dimension or u.op not in (INSERT, DELETE):
                raise InvalidParamsError(f'TwoStreamCounter: invalid update {u!r}.')
            (ins if u.op == INSERT else dels)[u.item] += 1
        return ins, dels

    def advance(self, state: TwoStreamState, tick: int, updates: Sequence[Update],
                rng: RandomSource, prime: bool = True) -> Tuple[DynamicRelease, TwoStreamState]:
        ins, dels = self._split(updates)
        stream = self.stream
        ra, a = stream.advance(state.insertions, tick, ins, rng.derive('insertions'), prime)
        rb, b = stream.advance(state.deletions, tick, dels, rng.derive('deletions'), prime)
        answer = tuple(x - y for x, y in zip(ra.answer, rb.answer))
        closes = tuple(sorted(ra.closes + rb.closes, key=lambda c: c.close_tick))
        return DynamicRelease(tick, closes, answer), TwoStreamState(a, b, answer)

    def step(self, state: TwoStreamState, value: Sequence[Update],
             rng: RandomSource) -> Tuple[DynamicRelease, TwoStreamState]:
        return self.advance(state, state.insertions.partition.tick + 1, value, rng, prime=False)

    def prime(self, state: TwoStreamState, rng: RandomSource) -> TwoStreamState:
        s = self.stream
        return dataclasses.replace(state,
                                   insertions=s.prime(state.insertions, rng.derive('insertions')),
                                   deletions=s.prime(state.deletions, rng.derive('deletions')))

    def next_event_tick(self, state: TwoStreamState) -> int:
        s = self.stream
        return min(s.next_event_tick(state.insertions), s.next_event_tick(state.deletions))


# --- C9 -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class FullyDynamicState:
    """Immutable C9 state (all fields private except ``answer``).

    ``live`` maps every live record id of CLOSED segments to (insertion segment, bin);
    ``pending`` the open segment's surviving insertions (id → bin); ``pending_deletes`` the open
    segment's valid deletions of older records; ``nodes`` the active chain (index → NodeState).
    """
    partition: PartitionerState
    segments: int
    live: Dict[Hashable, Tuple[int, int]]
    pending: Dict[Hashable, int]
    pending_deletes: frozenset
    nodes: Dict[int, NodeState]
    answer: Tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class FullyDynamicCounter(SegmentedParams):
    """C9 for counts (dimension 1) and histograms (dimension d).

    Args:
      epsilon: total ε = ε_p + ε_tree (pure); ``partition_fraction`` = ε_p/ε (default ½).
      beta: failure probability, half to the partitioner, half to the tree (public).
      c_theta, max_segment_ticks, monotone, skip_ahead: the partitioner's.
      dimension: number of bins.
      debug: ``NoiseFreeDebug`` for structural tests only.
      plugin: a ``StaticLinearMechanism`` over ``dimension`` bins (``beam_dp.mechanisms.plugin``):
        Qiu & Yi's black-box route — every node releases the plug-in's answers to its query
        class 𝒬 and runs it on its deletions (Algorithm 3, four components per round); the
        answer is then the |𝒬| query answers instead of the bins. None: the Laplace
        histogram (counts and histograms).
    """
    debug: Optional[NoiseFreeDebug] = None
    plugin: Optional[object] = None

    def __post_init__(self):
        owner = type(self).__name__
        object.__setattr__(self, 'epsilon', v.check_positive(owner, 'epsilon', self.epsilon))
        v.check_probability(owner, 'partition_fraction', self.partition_fraction,
                            allow_zero=False)
        # The partitioner gets beta / 2, which alone would accept beta in [1, 2).
        v.check_probability(owner, 'beta', self.beta, allow_zero=False)
        v.check_positive_int(owner, 'dimension', self.dimension)
        if self.debug is not None and not isinstance(self.debug, NoiseFreeDebug):
            v._fail(owner, f'debug must be a NoiseFreeDebug or None, got {self.debug!r}.')
        if self.plugin is not None and not isinstance(self.plugin, StaticLinearMechanism):
            v._fail(owner, f'plugin must be a StaticLinearMechanism or None, got '
                           f'{self.plugin!r:.80}.')
        self.partitioner
        self.node_mechanism(1)          # validates the first node's noise scales

    @property
    def epsilon_tree(self) -> float:
        return self.epsilon - self.epsilon_partition

    @property
    def partitioner(self) -> TimePartitioner:
        return self.segment_partitioner(self.beta / 2)

    def level_epsilon(self, level: int) -> float:
        return self.epsilon_tree * basel_weight(level)

    @functools.lru_cache(maxsize=128)
    def node_mechanism(self, level: int) -> NodeMechanism:
        """Level 1 is checked at construction; deeper levels (ε ∝ 1/level², built as the
        public segment count grows) halt a node whose noise would be past the samplers' range
        rather than raise mid-stream (its answer is 0: the records it holds are then not
        counted, at a noise scale above 2**40 where no count is meaningful)."""
        return NodeMechanism(self.level_epsilon(level), self.beta / 2 * basel_weight(level),
                             self.dimension, self.debug, halt_unsamplable=level > 1,
                             plugin=self.plugin)

    @property
    def answer_dimension(self) -> int:
        """Bins, or |𝒬| with a plug-in."""
        return self.dimension if self.plugin is None else len(self.plugin.queries)

    def privacy_cost(self) -> PrivacyCost:
        if self.debug is not None:
            raise UnsupportedMechanismError('FullyDynamicCounter: debug mode is not private and '
                                            'has no privacy cost.')
        return PrivacyCost(epsilon=self.epsilon)

    def init_state(self) -> FullyDynamicState:
        return FullyDynamicState(self.partitioner.init_state(), 0, {}, {}, frozenset(), {},
                                 (0.0,) * self.answer_dimension)

    def _ingest(self, live, pending, pending_deletes, updates):
        """Dataset logic for one tick's updates (ignored ones are still counted)."""
        pending, deletes = dict(pending), set(pending_deletes)
        for u in _ordered(updates):
            rid = u.record_id
            if rid is None or u.op not in (INSERT, DELETE):
                continue
            if u.op == INSERT:
                if (rid in live and rid not in deletes) or rid in pending:
                    continue                                  # duplicate
                if not 0 <= u.item < self.dimension:
                    continue                                  # out of the declared bins
                pending[rid] = u.item
            elif rid in pending:
                del pending[rid]                              # same-segment pair: netted out
            elif rid in live and rid not in deletes:
                deletes.add(rid)
            # else: invalid deletion, ignored
        return pending, frozenset(deletes)

    def _close_segment(self, state: FullyDynamicState, k: int,
                       rng: RandomSource) -> FullyDynamicState:
        live = dict(state.live)
        by_node: Dict[int, Dict[Hashable, int]] = {}
        chain_prev = fenwick.prefix_chain(k - 1)
        for rid in state.pending_deletes:
            seg, item = live.pop(rid)
            node = next(a for a in chain_prev if fenwick.covers(a, seg))
            by_node.setdefault(node, {})[rid] = item
        nodes: Dict[int, NodeState] = {}
        merged: Dict[Hashable, int] = {}
        retiring = set(fenwick.retiring_nodes(k))
        for a in chain_prev:
            node_state = state.nodes[a]
            if a in retiring:
                gone = by_node.get(a, {})
                merged.update({rid: it for rid, it in node_state.live_records().items()
                               if rid not in gone})
                continue
            mech = self.node_mechanism(fenwick.node_level(a))
            _, nodes[a] = mech.step(node_state, by_node.get(a, {}), rng)
        merged.update(state.pending)
        for rid, item in state.pending.items():
            live[rid] = (k, item)
        mech = self.node_mechanism(fenwick.node_level(k))
        nodes[k] = mech.build(k, merged, rng)
        answer = np.zeros(self.answer_dimension)
        for a in fenwick.prefix_chain(k):
            answer += np.asarray(nodes[a].answer)
        return dataclasses.replace(state, segments=k, live=live, pending={},
                                   pending_deletes=frozenset(), nodes=nodes,
                                   answer=tuple(float(x) for x in answer))

    def advance(self, state: FullyDynamicState, tick: int, updates: Sequence[Update],
                rng: RandomSource, prime: bool = True) -> Tuple[DynamicRelease,
                                                                FullyDynamicState]:
        """Processes ticks (state tick, ``tick``]; ``tick`` carries ``updates``."""
        check_debug(type(self).__name__, self.debug, rng)
        updates = tuple(updates)
        closes, part = self.partitioner.advance(state.partition, tick, len(updates),
                                                rng.derive('partition'), prime=prime)
        for close in closes:
            if close.close_tick == tick:
                pending, deletes = self._ingest(state.live, state.pending,
                                                state.pending_deletes, updates)
                state = dataclasses.replace(state, pending=pending, pending_deletes=deletes)
            state = self._close_segment(state, close.segment, rng)
        if not closes or closes[-1].close_tick < tick:
            pending, deletes = self._ingest(state.live, state.pending, state.pending_deletes,
                                            updates)
            state = dataclasses.replace(state, pending=pending, pending_deletes=deletes)
        state = dataclasses.replace(state, partition=part)
        return DynamicRelease(tick, tuple(closes), state.answer), state
