"""Per-block privacy filters with atomic all-or-nothing charging, and Alg. 3
(PrivacyFilterConComp) for concurrently running interactive mechanisms (spec 002 §3.10).

Block composition: ``pay(I, ε)`` charges ε to every block I covers; block j's filter has capacity
ε_G. Under event-level replace-one adjacency a changed row lives in exactly one block, and
everything that read that block is charged to its filter, so the whole run is ε_G-DP (Thm A.1,
A.5; seed A.3 citing Sage).

Alg. 3 semantics (erratum 6: the budget check sums the j mechanisms started so far, and the new
mechanism's budget is ε'): ``start(mech_id, charges)`` admits a new interactive mechanism only if
every touched block can pay its *entire* cost up front (3ε for an SV), charges it, and records the
mechanism as live on those blocks; continuing a live mechanism is free and needs no new check
(Thm B.1: valid under concurrent composition with adaptive parameters); ``halt`` ends it. A
one-shot Laplace answer is a mechanism that halts after one answer (``charge``). A refused
request is as if the analyst had not sent it: refusals depend only on public parameters and
already-accounted outputs, never on data (spec §9.6), so the other mechanisms keep running (the
seed's HALT-everything is the conservative special case).

``ZCDPFilters`` (``noise='gaussian'``) are the same filters in ρ-zCDP: capacity ρ_G, charges
are ρ (zCDP composes additively, also adaptively and concurrently: a zCDP cost is the RDP curve
a ↦ ρa, so refusing iff consumed + ρ' > ρ_G is the Alg. 3 / Thm B.1 filter at every order at
once, hence ρ_G-zCDP). Pure-ε parts (the sparse vector, 3ε for a whole SV) enter as
(3ε)²/2 (ε-DP ⇒ ε²/2-zCDP, Bun & Steinke Prop. 1.4, the accountant's ``to_rho``), which is
sound for the interactive SV as a whole; spent budget is reported as (ε, δ) with the
accountant's conversion (``epsilon_from_rho``).

``RenyiFilters`` is the RDP variant (Thm B.2): consumption is a vector over orders and a request
is refused only if, for *every* order, consumed + cost > capacity.
"""

import dataclasses
from typing import Dict, FrozenSet, Hashable, Mapping, Optional, Sequence, Tuple

from beam_dp import _validation as v
from beam_dp.accounting import epsilon_from_rho

__all__ = [
    'BlockFilters',
    'RenyiFilters',
    'ZCDPFilters',
    'to_epsilon',
]

_TOLERANCE = 1e-12


def _charge_map(charges) -> Dict[int, float]:
    out: Dict[int, float] = {}
    for block, eps in (charges.items() if isinstance(charges, Mapping) else charges):
        out[block] = out.get(block, 0.0) + float(eps)
    return out


@dataclasses.dataclass(frozen=True)
class BlockFilters:
    """Immutable per-block pure-DP filters of capacity ``capacity`` (ε_G).

    ``consumed``: block → ε spent. ``live``: mechanism id → the blocks it is live on.
    """
    capacity: float
    consumed: Mapping[int, float] = dataclasses.field(default_factory=dict)
    live: Mapping[Hashable, FrozenSet[int]] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        v.check_positive(type(self).__name__, 'capacity', self.capacity, allow_inf=True)

    def spent(self, block: int) -> float:
        return self.consumed.get(block, 0.0)

    def remaining(self, block: int) -> float:
        return self.capacity - self.spent(block)

    def affordable(self, charges) -> bool:
        """Whether every block can pay its charge: consumed + cost ≤ ε_G on all of them."""
        return all(self.spent(b) + eps <= self.capacity * (1 + _TOLERANCE)
                   for b, eps in _charge_map(charges).items())

    def charge(self, charges) -> Optional['BlockFilters']:
        """All-or-nothing: the filters with every charge applied, or None (nothing applied)."""
        charges = _charge_map(charges)
        if not self.affordable(charges):
            return None
        consumed = dict(self.consumed)
        for b, eps in charges.items():
            consumed[b] = consumed.get(b, 0.0) + eps
        return dataclasses.replace(self, consumed=consumed)

    def start(self, mech_id: Hashable, charges) -> Optional['BlockFilters']:
        """Alg. 3: start an interactive mechanism, paying its whole cost now (or None)."""
        charged = self.charge(charges)
        if charged is None:
            return None
        live = dict(self.live)
        live[mech_id] = frozenset(_charge_map(charges))
        return dataclasses.replace(charged, live=live)

    def is_live(self, mech_id: Hashable) -> bool:
        return mech_id in self.live

    def halt(self, mech_id: Hashable) -> 'BlockFilters':
        if mech_id not in self.live:
            return self
        live = dict(self.live)
        del live[mech_id]
        return dataclasses.replace(self, live=live)

    def total(self) -> float:
        return sum(self.consumed.values())


@dataclasses.dataclass(frozen=True)
class ZCDPFilters(BlockFilters):
    """Per-block ρ-zCDP filters of capacity ``capacity`` (ρ_G); charges are ρ (module
    docstring). Atomic all-or-nothing charging and Alg. 3 as ``BlockFilters``."""

    def epsilon_spent(self, block: int, delta: float) -> float:
        """The (ε, δ)-DP ε of what ``block`` spent (the accountant's zCDP conversion)."""
        return to_epsilon(self.spent(block), delta)


def to_epsilon(rho: float, delta: float) -> float:
    """ρ-zCDP ⇒ (ε, δ)-DP exactly as the accountant converts (CKS 2020, Cor. 13)."""
    return epsilon_from_rho(max(0.0, rho), delta)


@dataclasses.dataclass(frozen=True)
class RenyiFilters:
    """Per-block RDP filters over ``orders`` (Thm B.2): ``capacity`` is ε_G(a) per order;
    a charge is a per-order cost vector; refuse iff every order would exceed its capacity."""
    orders: Tuple[float, ...]
    capacity: Tuple[float, ...]
    consumed: Mapping[int, Tuple[float, ...]] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        owner = type(self).__name__
        if not self.orders or len(self.orders) != len(self.capacity):
            v._fail(owner, 'orders and capacity must be non-empty and of equal length.')
        for a in self.orders:
            if v.check_real(owner, 'order', a) <= 1:
                v._fail(owner, f'orders must be > 1, got {a:g}.')

    def _after(self, block: int, cost: Sequence[float]) -> Tuple[float, ...]:
        base = self.consumed.get(block, (0.0,) * len(self.orders))
        return tuple(c + x for c, x in zip(base, cost))

    def affordable(self, charges) -> bool:
        items = charges.items() if isinstance(charges, Mapping) else charges
        return all(any(x <= cap * (1 + _TOLERANCE) for x, cap in
                       zip(self._after(b, cost), self.capacity)) for b, cost in items)

    def charge(self, charges) -> Optional['RenyiFilters']:
        items = list(charges.items() if isinstance(charges, Mapping) else charges)
        if not self.affordable(items):
            return None
        consumed = dict(self.consumed)
        for b, cost in items:
            consumed[b] = self._after(b, cost) if b not in consumed else tuple(
                c + x for c, x in zip(consumed[b], cost))
        return dataclasses.replace(self, consumed=consumed)
