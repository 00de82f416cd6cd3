"""The records and the immutable state of ``TreePMWBypass`` (spec 002 §5.2 state table)."""

import dataclasses
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from beam_dp.mechanisms.boost.cache import BoundedCache
from beam_dp.mechanisms.boost.cache import PMap
from beam_dp.mechanisms.boost.filters import BlockFilters
from beam_dp.mechanisms.boost.heuristic import readonly
from beam_dp.mechanisms.boost.histogram import NodeHistogram
from beam_dp.queries import LinearQuery

__all__ = [
    'BoostAnswer',
    'BoostRequest',
    'BoostState',
    'Run',
    'node_size',
    'readonly',
    'refused',
    'request_refusal',
    'true_value',
]


@dataclasses.dataclass(frozen=True)
class BoostRequest:
    """A linear query over the inclusive window [first, last] of block ids."""
    query: LinearQuery
    first: int
    last: int
    query_id: str = ''


@dataclasses.dataclass(frozen=True)
class BoostAnswer:
    """One answer. ``status``: 'ok' or 'refused' (then ``value``/``path`` are None and
    ``reason`` says why). ``charges``: the ledger rows (block, purpose, ε) of this query, in
    order. ``value`` is a DP output (a fraction); nothing here is a true answer."""
    query_id: str
    status: str
    value: Optional[float]
    path: Optional[str]
    reason: Optional[str]
    first: int
    last: int
    charges: Tuple[Tuple[int, str, float], ...] = ()

    @property
    def epsilon(self) -> float:
        """The largest per-block charge of this query (block composition)."""
        per: Dict[int, float] = {}
        for b, _, eps in self.charges:
            per[b] = per.get(b, 0.0) + eps
        return max(per.values(), default=0.0)


@dataclasses.dataclass(frozen=True)
class BoostState:
    """Immutable state. SECRET: ``cum`` (prefix sums of the sealed blocks' counts; row i is
    the sum of blocks before ``cum_base + i``) and the thresholds inside ``svs``. Public: block
    ``sizes``, ``nodes`` (histograms), ``cache`` (DP outputs), ``filters``, ``cum_base`` (the
    first unexpired block, ``retention``)."""
    cum: np.ndarray
    sizes: Tuple[int, ...]
    nodes: Mapping[tuple, NodeHistogram]
    svs: Mapping[tuple, object]
    cache: Union[PMap, BoundedCache]
    filters: BlockFilters
    answered: int = 0
    cum_base: int = 0

    @property
    def num_blocks(self) -> int:
        return len(self.sizes)


@dataclasses.dataclass
class Run:
    """The mutable scratch of one answer (never escapes ``answer``)."""
    state: BoostState
    nodes: Dict[tuple, NodeHistogram]
    svs: Dict[tuple, object]
    cache: Union[PMap, BoundedCache]
    filters: BlockFilters
    charges: List[Tuple[int, str, float]]
    support: np.ndarray

    def pay(self, blocks, purpose: str, eps: float, start: Optional[tuple] = None):
        charges = {b: eps for b in blocks}
        new = (self.filters.start(start, charges) if start is not None
               else self.filters.charge(charges))
        assert new is not None, 'admission checked the worst case'
        self.filters = new
        self.charges.extend((b, purpose, eps) for b in sorted(blocks))


def request_refusal(state: BoostState, request, domain_size: int,
                    window_bound: Optional[int]) -> Optional[str]:
    """The public reason a request cannot be answered on ``state`` (or None); ``window_bound``:
    the longest window of the tree planner (None: any)."""
    if not isinstance(request, BoostRequest) or not isinstance(request.query, LinearQuery):
        return 'invalid_query'
    if request.query.domain_size != domain_size:
        return 'invalid_query'
    if not 0 <= request.first <= request.last:
        return 'invalid_window'
    if request.last >= state.num_blocks:
        return 'window_not_sealed'
    if request.first < state.cum_base:
        return 'window_expired'
    if window_bound is not None and request.last - request.first + 1 > window_bound:
        return 'window_too_long'
    return None


def refused(request, reason: str) -> BoostAnswer:
    """The refusal of ``request`` with a public ``reason``."""
    first, last = getattr(request, 'first', -1), getattr(request, 'last', -1)
    return BoostAnswer(getattr(request, 'query_id', ''), 'refused', None, None, reason, first,
                       last)


def node_size(state: BoostState, node: tuple) -> int:
    """n of node (κ, a, b): the public sizes of blocks a..b."""
    return int(sum(state.sizes[node[1]:node[2] + 1]))


def true_value(state: BoostState, node_set, q: LinearQuery) -> float:
    """q(Data) on the union of ``node_set`` (SECRET: only ever compared or noised)."""
    base = state.cum_base
    counts = sum(state.cum[b + 1 - base] - state.cum[a - base] for _, a, b in node_set)
    n = sum(node_size(state, node) for node in node_set)
    return q.evaluate(counts) / n
