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
    'readonly',
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
