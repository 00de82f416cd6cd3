"""Privacy budgets and costs, and the conversions between pure DP, approximate DP and zCDP.

A ``PrivacyBudget`` is what the user grants (ε with δ ≥ 0, or ρ for ρ-zCDP); a ``PrivacyCost``
is what one mechanism or transform consumes for one privacy unit whose contribution is bounded as
it declares. Both are frozen and validated on construction.

Neighbouring relations. Every cost holds for one relation: ``'add_remove'`` (neighbouring
streams differ by adding or removing one privacy unit: the continual counts, key selection,
sparse/dynamic release) or ``'swap_one'`` (same size, one unit's records replaced: the growing-
database mechanisms PMWG, BBScheduler/BBImprover and their sparse vector, whose schedules read
the public size). Costs of different relations never compose (``__add__`` and the accountant
refuse); the one explicit conversion is ``as_swap_one()``: a swap is a removal followed by an
addition, so group privacy for two add/remove steps gives ε ⇒ 2ε, ρ ⇒ 4ρ (Bun & Steinke 2016,
Proposition 1.9: k²ρ for groups of k) and (ε, δ) ⇒ (2ε, (1 + e^ε)δ). The reverse has no general
conversion (a swap-one mechanism may publish the exact size) and is not offered.

Conversions (all for one and the same neighbouring relation):
  * ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Proposition 1.4);
  * ρ-zCDP ⇒ (ε, δ)-DP with ε = inf_{α>1} ρα + (ln(1/δ) + (α-1)ln(1-1/α) - ln α)/(α-1)
    (Canonne, Kamath & Steinke 2020, Corollary 13), never worse than the classic
    ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Proposition 1.3).
"""

import dataclasses
import math
from typing import Optional

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError

__all__ = [
    'ADD_REMOVE',
    'RELATIONS',
    'SWAP_ONE',
    'PrivacyBudget',
    'PrivacyCost',
    'epsilon_from_rho',
    'epsilon_from_rho_simple',
    'rho_for_epsilon_delta',
]


ADD_REMOVE = 'add_remove'
SWAP_ONE = 'swap_one'
RELATIONS = (ADD_REMOVE, SWAP_ONE)


def check_same_relation(owner: str, costs) -> str:
    """The common relation of the non-zero ``costs`` (ADD_REMOVE if none), or InvalidParamsError."""
    relations = {c.relation for c in costs if not c.is_zero}
    if len(relations) > 1:
        raise InvalidParamsError(
            f'{owner}: cannot compose costs of different neighbouring relations '
            f'({" and ".join(sorted(relations))}); the total would hold under neither. Keep one '
            f'accountant per relation, or convert add/remove costs explicitly with '
            f'cost.as_swap_one() (epsilon => 2*epsilon).')
    return relations.pop() if relations else ADD_REMOVE


def epsilon_from_rho_simple(rho: float, delta: float) -> float:
    """ρ-zCDP ⇒ (ρ + 2√(ρ ln(1/δ)), δ)-DP (Bun & Steinke 2016, Proposition 1.3)."""
    if rho == 0:
        return 0.0
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def epsilon_from_rho(rho: float, delta: float) -> float:
    """The tight conversion of CKS 2020, Corollary 13 (minimised over the Rényi order α)."""
    if rho < 0 or not 0 < delta < 1:
        raise ValueError(f'epsilon_from_rho: need rho >= 0 and 0 < delta < 1, got {rho}, {delta}.')
    if rho == 0:
        return 0.0

    def eps_at(alpha: float) -> float:
        return (rho * alpha + (math.log(1 / delta) + (alpha - 1) * math.log(1 - 1 / alpha)
                               - math.log(alpha)) / (alpha - 1))

    # The objective is unimodal in α; golden-section search on a log scale.
    lo, hi = math.log(1 + 1e-9), math.log(1e7)
    phi = (math.sqrt(5) - 1) / 2
    a, b = hi - phi * (hi - lo), lo + phi * (hi - lo)
    fa, fb = eps_at(math.exp(a)), eps_at(math.exp(b))
    for _ in range(90):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - phi * (hi - lo)
            fa = eps_at(math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + phi * (hi - lo)
            fb = eps_at(math.exp(b))
    best = min(fa, fb)
    return max(0.0, min(best, epsilon_from_rho_simple(rho, delta)))


def rho_for_epsilon_delta(epsilon: float, delta: float) -> float:
    """The largest ρ whose zCDP guarantee converts to at most (ε, δ)-DP (bisection)."""
    lo, hi = 0.0, max(epsilon, 1e-12)
    while epsilon_from_rho(hi, delta) <= epsilon:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if epsilon_from_rho(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


@v.keyword_checked(hints={'noise_kind': 'the noise follows the budget: epsilon= draws '
                                        'discrete Laplace noise, rho= discrete Gaussian'})
@dataclasses.dataclass(frozen=True)
class PrivacyBudget:
    """A total privacy budget: ``PrivacyBudget(epsilon=1.0, delta=1e-6)`` or ``PrivacyBudget(rho=0.5)``.

    ε with δ = 0 is pure DP; ε with δ > 0 is approximate DP (ρ-zCDP costs are converted into it);
    ρ alone is a zCDP budget (pure-ε costs are converted into it as ε²/2; costs with δ > 0 cannot
    be and are refused).

    Raises:
      InvalidParamsError: for a non-positive ε or ρ, δ outside [0, 1), or both/neither of ε and ρ.
    """
    epsilon: Optional[float] = None
    delta: float = 0.0
    rho: Optional[float] = None

    def __post_init__(self):
        owner = 'PrivacyBudget'
        if (self.epsilon is None) == (self.rho is None):
            raise InvalidParamsError(f'{owner}: give exactly one of epsilon or rho, got '
                                     f'epsilon={self.epsilon!r}, rho={self.rho!r}.')
        if self.epsilon is not None:
            object.__setattr__(self, 'epsilon', v.check_positive(owner, 'epsilon', self.epsilon))
        else:
            object.__setattr__(self, 'rho', v.check_positive(owner, 'rho', self.rho))
            if self.delta:
                raise InvalidParamsError(f'{owner}: delta must be 0 for a rho (zCDP) budget, got '
                                         f'{self.delta:g}.')
        object.__setattr__(self, 'delta', v.check_probability(owner, 'delta', self.delta))

    @property
    def is_zcdp(self) -> bool:
        return self.rho is not None

    def split(self, *fractions: float) -> tuple:
        """Splits the budget into parts by fractions summing to at most 1 (sequential composition)."""
        if not fractions or any(f <= 0 for f in fractions) or sum(fractions) > 1 + 1e-12:
            raise InvalidParamsError(f'PrivacyBudget.split: fractions must be positive and sum to at '
                                     f'most 1, got {fractions!r}.')
        if self.is_zcdp:
            return tuple(PrivacyBudget(rho=self.rho * f) for f in fractions)
        return tuple(PrivacyBudget(epsilon=self.epsilon * f, delta=self.delta * f) for f in fractions)

    def as_cost(self, relation: str = ADD_REMOVE) -> 'PrivacyCost':
        """The cost of spending this whole budget (under ``relation``)."""
        if self.is_zcdp:
            return PrivacyCost(rho=self.rho, relation=relation)
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta, relation=relation)

    def __str__(self) -> str:
        if self.is_zcdp:
            return f'rho={self.rho:g}-zCDP'
        return f'(epsilon={self.epsilon:g}, delta={self.delta:g})-DP'


@dataclasses.dataclass(frozen=True)
class PrivacyCost:
    """What one mechanism consumes: ``PrivacyCost(epsilon=.., delta=..)`` or ``PrivacyCost(rho=..)``.

    Zero costs are allowed (a public computation costs nothing, under either relation).
    ``relation`` is the neighbouring relation the cost holds for: ``'add_remove'`` (default) or
    ``'swap_one'`` (module docstring).
    """
    epsilon: float = 0.0
    delta: float = 0.0
    rho: float = 0.0
    relation: str = ADD_REMOVE

    def __post_init__(self):
        owner = 'PrivacyCost'
        object.__setattr__(self, 'epsilon', v.check_non_negative(owner, 'epsilon', self.epsilon))
        object.__setattr__(self, 'delta', v.check_probability(owner, 'delta', self.delta,
                                                              allow_one=True))
        object.__setattr__(self, 'rho', v.check_non_negative(owner, 'rho', self.rho))
        if self.relation not in RELATIONS:
            raise InvalidParamsError(f'{owner}: relation must be one of {RELATIONS}, got '
                                     f'{self.relation!r}.')
        if self.rho and (self.epsilon or self.delta):
            raise InvalidParamsError(f'{owner}: a cost is either (epsilon, delta) or rho, got '
                                     f'epsilon={self.epsilon:g}, delta={self.delta:g}, '
                                     f'rho={self.rho:g}.')

    @property
    def is_zcdp(self) -> bool:
        return self.rho > 0

    @property
    def is_pure(self) -> bool:
        return not self.rho and not self.delta

    @property
    def is_zero(self) -> bool:
        return not (self.epsilon or self.delta or self.rho)

    def __add__(self, other: 'PrivacyCost') -> 'PrivacyCost':
        """Sequential composition within one notion and one neighbouring relation."""
        relation = check_same_relation('PrivacyCost', (self, other))
        if self.is_zcdp or other.is_zcdp:
            if not (self.is_pure or self.is_zcdp) or not (other.is_pure or other.is_zcdp):
                raise InvalidParamsError('PrivacyCost: cannot add a zCDP cost to an (epsilon, delta) '
                                         'cost with delta > 0; use a BudgetAccountant.')
            return PrivacyCost(rho=self.to_rho() + other.to_rho(), relation=relation)
        return PrivacyCost(epsilon=self.epsilon + other.epsilon,
                           delta=min(1.0, self.delta + other.delta), relation=relation)

    def scale(self, k: float) -> 'PrivacyCost':
        """k-fold sequential composition (group privacy is ``for_group``: k and k² instead)."""
        if self.is_zcdp:
            return PrivacyCost(rho=self.rho * k, relation=self.relation)
        return PrivacyCost(epsilon=self.epsilon * k, delta=min(1.0, self.delta * k),
                           relation=self.relation)

    def for_group(self, k: int) -> 'PrivacyCost':
        """What this cost guarantees to a group of ``k`` neighbouring steps: a person with ``k``
        records under an event-level (one record) cost, or with records in ``k`` blocks under a
        per-block cost. Pure ε ⇒ kε; ρ-zCDP ⇒ k²ρ (Bun & Steinke 2016, Proposition 1.9);
        (ε, δ) ⇒ (kε, k·e^{(k-1)ε}·δ) (Dwork & Roth 2014, Theorem 2.2 and its (ε, δ) form: the
        δ's of the k hops add up, each multiplied by the e^{iε} of the hops before it). The
        relation is kept: k swaps for a swap-one cost, k additions/removals for add/remove.
        ``k`` must be an integer ≥ 1 (k = 1 returns the cost itself)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidParamsError(f'PrivacyCost.for_group: k must be an integer >= 1 (the '
                                     f'number of records or blocks one person has), got {k!r}.')
        if self.is_zcdp:
            return PrivacyCost(rho=self.rho * k * k, relation=self.relation)
        delta = 0.0
        if self.delta:
            try:
                delta = min(1.0, k * math.exp((k - 1) * self.epsilon) * self.delta)
            except OverflowError:
                delta = 1.0
        return PrivacyCost(epsilon=self.epsilon * k, delta=delta, relation=self.relation)

    def as_swap_one(self) -> 'PrivacyCost':
        """This cost under swap-one neighbours (the one documented conversion, see the module
        docstring): add/remove ε ⇒ 2ε, ρ ⇒ 4ρ, (ε, δ) ⇒ (2ε, (1 + e^ε)δ); swap-one unchanged."""
        if self.relation == SWAP_ONE:
            return self
        if self.is_zcdp:
            return PrivacyCost(rho=4 * self.rho, relation=SWAP_ONE)
        return PrivacyCost(epsilon=2 * self.epsilon,
                           delta=min(1.0, (1 + math.exp(self.epsilon)) * self.delta),
                           relation=SWAP_ONE)

    def to_rho(self) -> float:
        """As zCDP: ρ itself, or ε²/2 for a pure cost."""
        if self.delta:
            raise InvalidParamsError(f'PrivacyCost: an (epsilon, delta) cost with delta={self.delta:g} '
                                     f'has no zCDP equivalent.')
        return self.rho if self.is_zcdp else self.epsilon ** 2 / 2

    def to_epsilon(self, delta: float) -> float:
        """ε of the (ε, δ')-DP guarantee, with δ' = own δ for (ε, δ) costs and δ for zCDP ones."""
        if self.is_zcdp:
            return epsilon_from_rho(self.rho, delta)
        return self.epsilon

    def __str__(self) -> str:
        tail = '' if self.relation == ADD_REMOVE else f', {self.relation}'
        if self.is_zcdp:
            return f'rho={self.rho:g}{tail}'
        return f'epsilon={self.epsilon:g}, delta={self.delta:g}{tail}'
