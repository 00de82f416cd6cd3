"""The per-block privacy ledger of the ERM schedules: proves that every record's cost is ≤ ε.

Every trained model charges its per-record cost ε_job = Δ₂(n)/b (amplified, when subsampled) to
every block of its data range. The ledger keeps, per *component* (e.g. ``base`` and ``update`` of
continual release, whose budgets are split), an interval map of the exact per-block totals, with
adjacent equal totals merged. A component can ``retire`` the blocks that no future job of it can
touch (a closed segment, blocks that left the sliding window): their maximum is kept, the
intervals dropped, so the state stays bounded whenever the schedule's is.

``worst()`` = Σ_components max_block(component total) ≥ the true worst per-record total (equal
when one component); ``charge`` raises ``BudgetExceededError`` if it would exceed the budget, so a
schedule that mis-accounts can never release. ``block_cost(b)`` is exact for unretired blocks.
Event-level privacy: one record is in exactly one block, so a block's total is the cost of each
of its records.
"""

import dataclasses
import math
from typing import Optional, Tuple

from beam_dp.errors import BudgetExceededError

__all__ = [
    'BlockLedger',
]

_TOL = 1e-9
Pieces = Tuple[Tuple[int, int, float], ...]


def _add(pieces: Pieces, lo: int, hi: int, eps: float) -> Pieces:
    """Adds eps to every block of [lo, hi) in a sorted disjoint interval map."""
    out = []
    cursor = lo
    for a, b, c in pieces:
        if b <= lo or a >= hi:
            out.append((a, b, c))
            continue
        if a < lo:
            out.append((a, lo, c))
        if cursor < max(a, lo):
            out.append((cursor, max(a, lo), eps))
        out.append((max(a, lo), min(b, hi), c + eps))
        if b > hi:
            out.append((hi, b, c))
        cursor = min(b, hi)
    if cursor < hi:
        out.append((cursor, hi, eps))
    out.sort()
    merged = []
    for a, b, c in out:
        if merged and merged[-1][1] == a and math.isclose(merged[-1][2], c, rel_tol=1e-12):
            merged[-1] = (merged[-1][0], b, max(merged[-1][2], c))
        else:
            merged.append((a, b, c))
    return tuple(merged)


@dataclasses.dataclass(frozen=True)
class BlockLedger:
    """Immutable per-block ledger. ``budget`` None: record only (the naive baseline)."""
    budget: Optional[float]
    pieces: Tuple[Tuple[str, Pieces], ...] = ()
    retired: Tuple[Tuple[str, float], ...] = ()

    def _get(self, table, component, default):
        return dict(table).get(component, default)

    def component_max(self, component: str) -> float:
        live = max((c for _, _, c in self._get(self.pieces, component, ())), default=0.0)
        return max(live, self._get(self.retired, component, 0.0))

    def components(self) -> Tuple[str, ...]:
        return tuple(sorted({c for c, _ in self.pieces} | {c for c, _ in self.retired}))

    def worst(self) -> float:
        """An upper bound on any block's total over all components (exact for one component)."""
        return sum(self.component_max(c) for c in self.components())

    def block_cost(self, block: int) -> float:
        """The exact total of an unretired block over all components."""
        total = 0.0
        for _, pieces in self.pieces:
            total += sum(c for a, b, c in pieces if a <= block < b)
        return total

    def charge(self, component: str, lo: int, hi: int, eps: float) -> 'BlockLedger':
        """Charges eps to blocks [lo, hi) of ``component``; raises if the bound would exceed
        the budget."""
        table = dict(self.pieces)
        table[component] = _add(table.get(component, ()), lo, hi, eps)
        new = dataclasses.replace(self, pieces=tuple(sorted(table.items())))
        if self.budget is not None and new.worst() > self.budget * (1 + _TOL):
            raise BudgetExceededError(
                f'BlockLedger: charging {eps:g} to blocks [{lo}, {hi}) of {component!r} makes '
                f'the worst per-record cost {new.worst():g} > budget {self.budget:g}.')
        return new

    def retire(self, component: str, before: int) -> 'BlockLedger':
        """Drops the blocks < ``before`` of ``component`` (no future job of it touches them),
        keeping their maximum."""
        table = dict(self.pieces)
        pieces = table.get(component, ())
        gone = [c for a, b, c in pieces if a < before]
        if not gone:
            return self
        kept = tuple((max(a, before), b, c) for a, b, c in pieces if b > before)
        retired = dict(self.retired)
        retired[component] = max([retired.get(component, 0.0)] + gone)
        table[component] = kept
        return dataclasses.replace(self, pieces=tuple(sorted(table.items())),
                                   retired=tuple(sorted(retired.items())))

    def size(self) -> int:
        """Number of stored intervals (the ledger's state size)."""
        return sum(len(p) for _, p in self.pieces)
