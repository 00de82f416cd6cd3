"""The budget accountant: composes the costs that transforms declare and refuses over-allocation
while the pipeline is being built, before any data is read.

Usage::

    accountant = beam_dp.BudgetAccountant(beam_dp.PrivacyBudget(epsilon=1.0, delta=1e-6))
    counts = events | beam_dp.ContinualCountPerKey(..., budget=PrivacyBudget(epsilon=0.5),
                                                   accountant=accountant)

Every transform calls ``accountant.spend(label, cost)`` from ``expand()``; the call raises
``BudgetExceededError`` if the composition of everything spent so far exceeds the budget.
Sequential composition is the default; ``spend_parallel`` composes costs of mechanisms that read
disjoint parts of the data fixed in advance (a max, McSherry 2009 / Qiu & Yi Theorem 3).

One accountant composes costs of ONE neighbouring relation (``PrivacyCost.relation``): fixed by
``relation=`` or by the first non-zero cost spent; a cost of the other relation is refused with
``InvalidParamsError`` (its total would hold under neither). ``cost.as_swap_one()`` is the
documented explicit conversion of an add/remove cost (ε ⇒ 2ε).
"""

import dataclasses
import functools
import math
from typing import List, Optional, Sequence, Tuple

from beam_dp.accounting.budget import RELATIONS
from beam_dp.accounting.budget import PrivacyBudget
from beam_dp.accounting.budget import PrivacyCost
from beam_dp.accounting.budget import check_same_relation
from beam_dp.accounting.budget import epsilon_from_rho
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError

__all__ = [
    'BudgetAccountant',
    'LedgerEntry',
    'basel_weight',
    'compose_parallel',
    'compose_sequential',
    'series_weight',
]

_TOLERANCE = 1e-9


def basel_weight(j: int) -> float:
    """w_j = 6/(π² j²), j ≥ 1: Σ_j w_j = 1 (the series Qiu & Yi use for unbounded indices)."""
    if j < 1:
        raise ValueError(f'basel_weight: j must be >= 1, got {j}.')
    return 6.0 / (math.pi ** 2 * j * j)


def series_weight(j: int, exponent: float = 2.0) -> float:
    """w_j = j^(-s)/ζ(s), j ≥ 1, s > 1: a convergent split of a budget over an unbounded index."""
    if j < 1 or exponent <= 1:
        raise ValueError(f'series_weight: need j >= 1 and exponent > 1, got {j}, {exponent}.')
    if exponent == 2.0:
        return basel_weight(j)
    return j ** -exponent / _zeta(exponent)


@functools.lru_cache(maxsize=64)
def _zeta(s: float) -> float:
    # Euler-Maclaurin tail after N terms: accurate to ~1e-12 for s > 1.
    n = 1000
    head = sum(k ** -s for k in range(1, n))
    return head + n ** (1 - s) / (s - 1) + 0.5 * n ** -s + s * n ** (-s - 1) / 12


def compose_parallel(costs: Sequence[PrivacyCost]) -> PrivacyCost:
    """Parallel composition over disjoint parts fixed in advance: the componentwise max."""
    costs = list(costs)
    if not costs:
        return PrivacyCost()
    relation = check_same_relation('compose_parallel', costs)
    if any(c.is_zcdp for c in costs):
        return PrivacyCost(rho=max(c.to_rho() for c in costs), relation=relation)
    return PrivacyCost(epsilon=max(c.epsilon for c in costs), delta=max(c.delta for c in costs),
                       relation=relation)


def compose_sequential(costs: Sequence[PrivacyCost], delta: float = 0.0) -> Tuple[float, float]:
    """(ε, δ) of the sequential composition of ``costs``; zCDP parts are converted at ``delta``.

    Pure costs are composed either linearly or as zCDP, whichever gives the smaller ε.
    All costs must hold for the same neighbouring relation.
    """
    check_same_relation('compose_sequential', costs)
    approx = [c for c in costs if not c.is_zcdp and c.delta > 0]
    pure = [c for c in costs if c.is_pure]
    zcdp = [c for c in costs if c.is_zcdp]
    eps_approx = sum(c.epsilon for c in approx)
    delta_approx = min(1.0, sum(c.delta for c in approx))
    rho = sum(c.rho for c in zcdp)
    eps_pure = sum(c.epsilon for c in pure)
    if rho == 0:
        if delta > 0 and eps_pure > 0:
            via_zcdp = epsilon_from_rho(sum(c.epsilon ** 2 / 2 for c in pure), delta)
            if via_zcdp < eps_pure:
                return eps_approx + via_zcdp, min(1.0, delta_approx + delta)
        return eps_approx + eps_pure, delta_approx
    if delta <= 0:
        return math.inf, delta_approx
    linear = eps_pure + epsilon_from_rho(rho, delta)
    as_zcdp = epsilon_from_rho(rho + sum(c.epsilon ** 2 / 2 for c in pure), delta)
    return eps_approx + min(linear, as_zcdp), min(1.0, delta_approx + delta)


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One spend: who spent it and what."""
    label: str
    cost: PrivacyCost


class BudgetAccountant:
    """Composes declared costs against a ``PrivacyBudget`` at pipeline construction.

    Args:
      budget: the total budget for everything this accountant is handed.
      relation: 'add_remove' or 'swap_one'; None adopts the relation of the first non-zero cost.

    Raises:
      BudgetExceededError: from ``spend`` when a cost would exceed the budget; nothing is
        recorded then, so the pipeline under construction can be fixed and rebuilt.
    """

    def __init__(self, budget: PrivacyBudget, relation: Optional[str] = None):
        if not isinstance(budget, PrivacyBudget):
            raise InvalidParamsError(f'BudgetAccountant: budget must be a PrivacyBudget, got {budget!r}.')
        if relation is not None and relation not in RELATIONS:
            raise InvalidParamsError(f'BudgetAccountant: relation must be one of {RELATIONS} or '
                                     f'None, got {relation!r}.')
        self._budget = budget
        self._relation = relation
        self._ledger: List[LedgerEntry] = []

    @property
    def relation(self) -> Optional[str]:
        """The neighbouring relation of this accountant (None until the first non-zero cost)."""
        if self._relation is not None:
            return self._relation
        return next((e.cost.relation for e in self._ledger if not e.cost.is_zero), None)

    def _check_relation(self, label: str, cost: PrivacyCost) -> None:
        relation = self.relation
        if cost.is_zero or relation is None or cost.relation == relation:
            return
        first = next((e.label for e in self._ledger if not e.cost.is_zero), 'its constructor')
        raise InvalidParamsError(
            f'BudgetAccountant: {label} declares a {cost.relation} cost ({cost}), but this '
            f'accountant composes {relation} costs (set by {first}); a total across neighbouring '
            f'relations holds under neither. Use one accountant per relation, or convert an '
            f'add_remove cost explicitly with cost.as_swap_one() (epsilon => 2*epsilon).')

    @property
    def budget(self) -> PrivacyBudget:
        return self._budget

    @property
    def ledger(self) -> Tuple[LedgerEntry, ...]:
        return tuple(self._ledger)

    def spent(self) -> PrivacyBudget:
        """The composed total so far, in the budget's own notion (an all-zero spend is ε=0)."""
        costs = [e.cost for e in self._ledger]
        if self._budget.is_zcdp:
            return _RhoTotal(sum(c.to_rho() for c in costs))
        eps, delta = self._compose(costs)
        return _EpsTotal(eps, delta)

    def _compose(self, costs):
        zcdp_delta = 0.0
        if any(c.is_zcdp for c in costs):
            zcdp_delta = self._budget.delta - sum(c.delta for c in costs)
            if zcdp_delta <= 0:
                return math.inf, 1.0
        elif self._budget.delta > 0 and any(c.is_pure and c.epsilon for c in costs):
            zcdp_delta = max(0.0, self._budget.delta - sum(c.delta for c in costs))
        return compose_sequential(costs, zcdp_delta)

    def fits(self, cost: PrivacyCost) -> bool:
        """Whether ``cost`` could still be spent (InvalidParamsError for a foreign relation)."""
        self._check_relation('fits', cost)
        costs = [e.cost for e in self._ledger] + [cost]
        if self._budget.is_zcdp:
            if any(c.delta > 0 for c in costs):
                return False
            return sum(c.to_rho() for c in costs) <= self._budget.rho * (1 + _TOLERANCE)
        eps, delta = self._compose(costs)
        return (eps <= self._budget.epsilon * (1 + _TOLERANCE)
                and delta <= self._budget.delta * (1 + _TOLERANCE) + 1e-300)

    def spend(self, label: str, cost: PrivacyCost, owner: Optional[str] = None) -> None:
        """Records ``cost`` (sequential composition) or raises ``BudgetExceededError``.

        ``owner`` (e.g. the transform's class name) only makes the message read naturally:
        "ContinualCountPerKey 'X' asks for ε=1 but the accountant has ε=0.5 left of ε=0.5
        (spent: nothing yet)".
        """
        if not isinstance(cost, PrivacyCost):
            raise InvalidParamsError(f'BudgetAccountant.spend: cost must be a PrivacyCost, got {cost!r}.')
        self._check_relation(label, cost)
        who = f'{owner} {label!r}' if owner else repr(label)
        if self._budget.is_zcdp and cost.delta > 0:
            raise BudgetExceededError(
                f'{who} asks for {_amount(cost)}, but a zCDP budget ({_amount(self._budget)}) '
                f'cannot pay for delta > 0.')
        if not self._budget.is_zcdp and not self._budget.delta and (cost.delta > 0
                                                                     or cost.is_zcdp):
            why = ('' if cost.delta > 0 else
                   ' (a zCDP cost converts to (epsilon, delta)-DP only with delta > 0; or give '
                   'the transform budget=PrivacyBudget(epsilon=...))')
            raise BudgetExceededError(
                f'{who} asks for {_amount(cost)}, but the accountant\'s budget '
                f'({_amount(self._budget)}) has no delta{why}: give it one, e.g. '
                f'BudgetAccountant(PrivacyBudget(epsilon={self._budget.epsilon:g}, '
                f'delta={cost.delta or 1e-6:g})) (the beam_dp_delta pipeline option, in YAML '
                f'under options:).')
        if not self.fits(cost):
            raise BudgetExceededError(
                f'{who} asks for {_amount(cost)} but the accountant has {self._left()} left of '
                f'{_amount(self._budget)} (spent: {self._spent_by()}). Give this transform a '
                f'smaller budget= or the accountant a larger one (a pipeline budget: the '
                f'beam_dp_epsilon / beam_dp_delta / beam_dp_rho pipeline option, in YAML under '
                f'options:).')
        self._ledger.append(LedgerEntry(label, cost))

    def _left(self) -> str:
        """What the budget still holds, in its own notion (composition is not always linear, so
        this is the budget minus the composed total, floored at 0)."""
        spent = self.spent()
        if self._budget.is_zcdp:
            return _amount(_RhoTotal(max(0.0, self._budget.rho - spent.rho)))
        return _amount(_EpsTotal(max(0.0, self._budget.epsilon - spent.epsilon),
                                 max(0.0, self._budget.delta - spent.delta)))

    def _spent_by(self) -> str:
        entries = [e for e in self._ledger if not e.cost.is_zero]
        if not entries:
            return 'nothing yet'
        return ', '.join(f'{e.label!r} {_amount(e.cost)}' for e in entries)

    def check(self, costs: Sequence[Tuple[str, PrivacyCost]], owner: Optional[str] = None) -> None:
        """Raises ``BudgetExceededError`` unless all ``(label, cost)`` pairs fit together on top
        of the ledger; records nothing (a transform calls it at construction). ``owner``: as
        in ``spend``."""
        scratch = BudgetAccountant(self._budget, self._relation)
        scratch._ledger = list(self._ledger)  # pylint: disable=protected-access
        for label, cost in costs:
            scratch.spend(label, cost, owner)

    def spend_all(self, costs: Sequence[Tuple[str, PrivacyCost]],
                  owner: Optional[str] = None) -> None:
        """Records all ``(label, cost)`` pairs, or none of them if they do not fit together."""
        self.check(costs, owner)
        for label, cost in costs:
            self.spend(label, cost, owner)

    def spend_parallel(self, label: str, costs: Sequence[PrivacyCost]) -> None:
        """Spends the parallel composition of ``costs`` (parts disjoint and fixed in advance)."""
        self.spend(label, compose_parallel(costs))


def _amount(value) -> str:
    """'ε=1' / 'ε=1, δ=1e-06' / 'ρ=0.5' of a budget, cost or composed total."""
    if isinstance(value, _RhoTotal) or getattr(value, 'is_zcdp', False):
        return f'ρ={value.rho:g}'
    text = f'ε={value.epsilon:g}'
    return text + (f', δ={value.delta:g}' if value.delta else '')


@dataclasses.dataclass(frozen=True)
class _EpsTotal:
    epsilon: float
    delta: float

    def __str__(self):
        return f'(epsilon={self.epsilon:g}, delta={self.delta:g})'


@dataclasses.dataclass(frozen=True)
class _RhoTotal:
    rho: float

    def __str__(self):
        return f'rho={self.rho:g}'
