"""Which counter a keyed continual transform runs (``mechanism=``), and its name in
``Release.mechanism``. Pure: public parameters only.

Which counter (``mechanism='auto'``, the default): the known horizon is the number of steps from
``start`` to ``end`` (capped by ``horizon_steps``), None without either;
``mechanisms.counter_selection.select_counter`` (exported by ``beam_dp.analysis``) then
picks, from public parameters only, the counter with the lowest expected RMSE per step (per
bin) for that horizon and the budget's notion: ρ → BLT (ρ-zCDP) for T ≥ 2 or unbounded, the
pure counters at ε = √(2ρ) where they are better (T = 1: one noisy node);
ε → per-step noise summed for T = 2 … 34 (at any ε), the negative-digit k-ary tree
(``BalancedTreeCounter``, odd k = 9 … 33) for longer known horizons, the unbounded
negative-digit tree (``UnboundedTreeCounter``: 2.3–3.5× the known-horizon tree's mean variance,
3.1–4.1× below the infinite-horizon tree's for T = 2^10 … 2^24) when unbounded.
(ε, δ > 0): the pure counters at ε compete with the Gaussian ones (BLT, ...) at ρ = ``rho_for_epsilon_delta(ε, δ)``, the largest ρ
whose zCDP converts to at most (ε, δ)-DP (Canonne, Kamath, Steinke 2020, Corollary 13, the
conversion the accountant applies); the lower expected RMSE wins. A Gaussian counter then
declares its ρ-zCDP cost, which the accountant checks as (ε, δ) through that same conversion
(``check_cost_fits``). ``mechanism='blt' | 'balanced_tree' | 'kary_tree' | 'binary_tree' |
'infinite_tree' | 'unbounded_tree' | 'per_step' | 'per_cell' | 'banded' | 'banded_inverse'``
forces one (the binary,
infinite and k-ary trees take ``estimator``);
``estimator=`` with ``mechanism='auto'`` overrides the choice with a tree counter:
the binary tree over ``horizon_steps`` if given, else the infinite tree.

User level: the counters are calibrated to the unit's (L1, L2) of per-key totals
(``PrivacyUnit.sensitivity``: K·m·S or the total bound C, whichever is tighter). Over public keys
the unit's participation pattern (``PrivacyUnit.participation``: ≤ K keys, ≤ S steps per key,
≤ m·B per step, ≤ C·B in all) is known, and under a Gaussian budget ('auto' with ρ or (ε, δ > 0))
the choice compares in closed form, besides the counters above: fresh per-cell noise
(``mechanism='per_cell'``, ``PerCellCounter``: a Gaussian per (key, step) cell calibrated to one
cell's contribution m·B and composed over the unit's ≤ K·S cells), BLT with the
multi-participation bound, the banded square-root factorization (``mechanism='banded'``,
``BandedCounter``, its band chosen for S participations per key) and, with a known horizon, the
banded inverse square root (``mechanism='banded_inverse'``, ``BandedInverseCounter``), and runs
the one with the
lowest expected RMSE. Per-cell noise is always among the candidates, so at user level under ρ the
chosen counter's expected noise is never above it at the same bounds. With private keys a key's
first counter step merges all steps up to its selection, so the pattern does not hold and the
safe bound (per-key totals) is used. ``Release.noise_stddev`` is the chosen counter's exact
``release_variance``.
"""

import dataclasses
import math
from typing import Optional

from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import epsilon_from_rho
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.mechanisms.final_release import FinalReleaseCounter
from beam_dp.mechanisms.counter_selection import expected_error
from beam_dp.mechanisms.counter_selection import select_counter
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.banded import BandedCounter
from beam_dp.mechanisms.banded import BandedInverseCounter
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.per_cell import PerCellCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.mechanisms.unbounded_tree import UnboundedTreeCounter
from beam_dp.mechanisms.window import WindowCounter

__all__ = [
    'MECHANISMS',
    'check_cost_fits',
    'choose_counter',
    'choose_final_release',
    'mechanism_name',
    'window_counter',
]

#: The ``mechanism=`` choices of the keyed continual transforms.
MECHANISMS = ('auto', 'blt', 'balanced_tree', 'kary_tree', 'binary_tree', 'infinite_tree',
              'unbounded_tree', 'per_step', 'per_cell', 'banded', 'banded_inverse')
_KINDS = {'blt': BLTCounter, 'balanced_tree': BalancedTreeCounter, 'kary_tree': KaryTreeCounter,
          'binary_tree': BinaryTreeCounter, 'infinite_tree': InfiniteTreeCounter,
          'unbounded_tree': UnboundedTreeCounter, 'per_step': PerStepCounter,
          'per_cell': PerCellCounter, 'banded': BandedCounter,
          'banded_inverse': BandedInverseCounter}
_GAUSSIAN = (BLTCounter, BandedCounter, BandedInverseCounter)
_NAMES = {kind: name for name, kind in _KINDS.items()}
_TREES = (KaryTreeCounter, BinaryTreeCounter, InfiniteTreeCounter)
_OWNER = 'KeyedReleaseDriver'


def _privacy_args(budget: PrivacyBudget, gaussian: bool = False):
    """The counter's privacy field: ρ for a zCDP budget; ε for an ε budget, or — for a Gaussian
    counter (``gaussian``) under an (ε, δ > 0) budget — the largest ρ that converts to it."""
    if budget.is_zcdp:
        return {'rho': budget.rho}
    if gaussian and budget.delta > 0:
        return {'rho': rho_for_epsilon_delta(budget.epsilon, budget.delta)}
    return {'epsilon': budget.epsilon}


def check_cost_fits(cost: PrivacyCost, budget: PrivacyBudget) -> None:
    """Raises InvalidParamsError unless a counter's ``cost`` fits ``budget`` on its own: a ρ
    cost under an (ε, δ) budget converts to (epsilon_from_rho(ρ, δ), δ) (the accountant's
    conversion); a pure cost under a ρ budget to ε²/2."""
    if budget.is_zcdp:
        ok = cost.delta == 0 and cost.to_rho() <= budget.rho * (1 + 1e-9)
    elif cost.is_zcdp:
        ok = budget.delta > 0 and epsilon_from_rho(cost.rho, budget.delta) <= budget.epsilon * (
            1 + 1e-9)
    else:
        ok = cost.epsilon <= budget.epsilon * (1 + 1e-9) and cost.delta <= budget.delta
    if not ok:
        raise InvalidParamsError(f'{_OWNER}: the counter costs {cost}, more than {budget}.')


def choose_counter(mechanism: str, estimator: Optional[str], budget: PrivacyBudget,
                   horizon: Optional[int], horizon_steps: Optional[int], l1: float, l2: float,
                   dimension: int, participation: Optional[Participation] = None):
    """The counter of one key (``dimension`` bins), ready to widen with ``dataclasses.replace``.

    Args:
      mechanism: one of ``MECHANISMS``; estimator: None or a tree estimator.
      horizon: the known number of steps (None: unbounded); horizon_steps: the binary
        tree's T (only with ``estimator`` and 'auto').
      l1, l2: the unit's sensitivities; participation: its multi-participation pattern (None:
        event level or private keys), used by a BLT.

    Raises:
      InvalidParamsError: for a mechanism that cannot run with these parameters, named.
    """
    if estimator is not None and mechanism in ('blt', 'balanced_tree', 'unbounded_tree',
                                                'per_step', 'per_cell', 'banded',
                                                'banded_inverse'):
        raise InvalidParamsError(f"{_OWNER}: estimator applies to the tree mechanisms, not to "
                                 f"mechanism={mechanism!r}.")
    common = dict(l1_sensitivity=l1, l2_sensitivity=l2, dimension=dimension)
    if (not budget.is_zcdp and budget.delta > 0
            and mechanism not in ('auto', 'blt', 'banded', 'banded_inverse', 'per_cell')) or (
            mechanism == 'auto' and estimator is not None and not budget.is_zcdp
            and budget.delta > 0):
        what = f'mechanism={mechanism!r}' + (f' with estimator={estimator!r}' if estimator
                                              else '')
        raise InvalidParamsError(
            f"{_OWNER}: {what} is pure epsilon-DP and would not spend delta={budget.delta:g} "
            f"(the releases would claim a delta the accountant never recorded): give "
            f"PrivacyBudget(epsilon={budget.epsilon:g}), or mechanism='auto' / 'blt' / 'banded' "
            f"/ 'per_cell', which turn delta into Gaussian noise where that is better.")
    if mechanism == 'auto' and estimator is not None:                   # binary or infinite tree
        if horizon_steps is not None:
            return BinaryTreeCounter(horizon=horizon_steps, estimator=estimator, **common,
                                     **_privacy_args(budget))
        return InfiniteTreeCounter(estimator=estimator, **common, **_privacy_args(budget))
    if mechanism == 'auto':
        chosen = select_counter(budget, horizon, dimension, l1, l2, participation=participation)
    else:
        chosen = _explicit(mechanism, estimator, budget, horizon, common, participation)
    if isinstance(chosen, BLTCounter) and participation is not None:
        chosen = dataclasses.replace(chosen, participation=participation)
    check_cost_fits(chosen.privacy_cost(), budget)
    return chosen


def _shares(total: float, share: float):
    """(continual, final) parts of ``total`` summing to at most ``total`` in floating point."""
    continual = total * (1.0 - share)
    final = total - continual
    while continual + final > total:
        final = math.nextafter(final, 0.0)
    return continual, final


def choose_final_release(mechanism: str, estimator: Optional[str], budget: PrivacyBudget,
                         horizon: Optional[int], horizon_steps: Optional[int], l1: float,
                         l2: float, dimension: int, participation: Optional[Participation],
                         share: float) -> FinalReleaseCounter:
    """The counter of one key with ``share`` of ``budget`` on a one-shot release of the total
    at the known last step (``FinalReleaseCounter``): the continual counter is chosen as by
    ``choose_counter`` at the rest of the budget.

    Split: ε → (1 − f)ε and fε (discrete Laplace one-shot); ρ → (1 − f)ρ and fρ (discrete
    Gaussian); (ε, δ > 0) → whichever has the lower final-step variance of the pure split at ε
    (δ unspent) and the zCDP split of ρ = ``rho_for_epsilon_delta(ε, δ)`` (both counters
    ρ-zCDP or pure at ε = √(2ρ_c), composed in ρ and checked as (ε, δ) through the CKS
    conversion, as a Gaussian counter alone is). Exact: the sum of the two parts never exceeds
    the budget (``_shares``) and the composed cost is checked against it here.

    Raises:
      InvalidParamsError: without a known horizon, or as ``choose_counter``.
    """
    if horizon is None:
        raise InvalidParamsError(f'{_OWNER}: final_share needs a known last step: pass end= '
                                 f'(or horizon_steps=).')
    common = dict(l1_sensitivity=l1, l2_sensitivity=l2, dimension=dimension)
    splits = []
    if budget.is_zcdp:
        splits.append(('rho', budget.rho))
    else:
        splits.append(('epsilon', budget.epsilon))
        if budget.delta > 0:
            splits.append(('rho', rho_for_epsilon_delta(budget.epsilon, budget.delta)))
    best, error = None, None
    for kind, total in splits:
        continual, final = _shares(total, share)
        try:
            inner = choose_counter(mechanism, estimator, PrivacyBudget(**{kind: continual}),
                                   horizon, horizon_steps, l1, l2, dimension, participation)
            one_shot = PerStepCounter(**{kind: final}, **common)
            wrapped = FinalReleaseCounter(inner, one_shot, final_steps=horizon,
                                          share=float(share), dimension=dimension)
        except InvalidParamsError as e:     # e.g. a pure mechanism asked of a ρ split
            error = error or e
            continue
        if best is None or (wrapped.release_variance(horizon)
                            < best.release_variance(horizon)):
            best = wrapped
    if best is None:
        raise error
    check_cost_fits(best.privacy_cost(), budget)
    return best


def _best_banded(budget, horizon, common, participation, kind=BandedCounter):
    """The banded counter (``kind``: square root or inverse square root) whose band has the
    lowest expected RMSE (closed form)."""
    if kind is BandedInverseCounter and horizon is None:
        raise InvalidParamsError(f"{_OWNER}: mechanism='banded_inverse' needs a known horizon: "
                                 f"pass end= (or horizon_steps=).")
    report = expected_error(budget, horizon, l1_sensitivity=common['l1_sensitivity'],
                            l2_sensitivity=common['l2_sensitivity'],
                            dimension=common['dimension'],
                            participation=participation or _no_participation(common))
    banded = [e for e in report.estimates if e.kind is kind]
    counter = banded[0].build()
    return dataclasses.replace(counter, participation=participation)


def _no_participation(common) -> Participation:
    """A pattern that adds nothing to the per-key totals' bound (used only to list the bands):
    one group, one step, at most l1 — every candidate's bound is then min(l2, l1) = its own.
    (One step, not "unlimited" steps: the BLT candidate's bound sums the overlaps over S.)"""
    l1 = common['l1_sensitivity']
    return Participation(1, 1, l1, l1)


def _explicit(mechanism, estimator, budget, horizon, common, participation=None):
    kind = _KINDS[mechanism]
    gaussian = kind in _GAUSSIAN or (kind is PerCellCounter and (budget.is_zcdp
                                                                 or budget.delta > 0))
    kwargs = dict(common, **_privacy_args(budget, gaussian=gaussian))
    if kind in _GAUSSIAN and not budget.is_zcdp and budget.delta == 0:
        raise InvalidParamsError(f"{_OWNER}: mechanism={mechanism!r} needs a zCDP budget "
                                 f"(PrivacyBudget(rho=...)) or an (epsilon, delta > 0) one, "
                                 f"got {budget}.")
    if kind is PerCellCounter:
        return PerCellCounter(participation=participation, **kwargs)
    if kind in (BandedCounter, BandedInverseCounter):
        return _best_banded(budget, horizon, common, participation, kind)
    if kind is BLTCounter:
        kwargs['horizon'] = horizon
    elif kind is UnboundedTreeCounter and 'epsilon' not in kwargs:
        raise InvalidParamsError(f"{_OWNER}: mechanism='unbounded_tree' is pure ε: it needs an "
                                 f"epsilon budget, got {budget}.")
    elif kind in (BinaryTreeCounter, KaryTreeCounter, BalancedTreeCounter):
        if horizon is None:
            raise InvalidParamsError(f'{_OWNER}: mechanism={mechanism!r} needs a known horizon: '
                                     f'pass end= (or horizon_steps=).')
        kwargs['horizon'] = horizon
    if kind in _TREES:
        kwargs['estimator'] = estimator or 'variance_reduced'
    return kind(**kwargs)


def window_counter(window: int, budget: PrivacyBudget, l1: float, l2: float, dimension: int,
                   participation=None) -> WindowCounter:
    """The per-step (W = 1) / sliding-window counter of one key for ``budget``: pure ε for an
    ε budget, ρ for a ρ budget; for (ε, δ > 0) whichever of the pure counter at ε and the
    Gaussian one at the converted ρ has the smaller worst-case variance. ``participation``:
    (per step and bin cap, steps per key, L1 total) of one change at user level, which lowers
    the Gaussian nodes' sensitivity (``WindowCounter.level_l2_squared``)."""
    common = dict(window=window, l1_sensitivity=l1, l2_sensitivity=l2, dimension=dimension,
                  participation=participation)
    chosen = WindowCounter(**common, **_privacy_args(budget))
    if not budget.is_zcdp and budget.delta > 0:
        try:
            gaussian = WindowCounter(**common, **_privacy_args(budget, gaussian=True))
        except InvalidParamsError:       # its σ² outside the exact sampler's range: not a choice
            gaussian = None
        if gaussian is not None and gaussian.worst_variance() < chosen.worst_variance():
            chosen = gaussian
    check_cost_fits(chosen.privacy_cost(), budget)
    return chosen


# '<counter>/<variant>' of the counters that do not use an estimator, checked in this order
# (subclasses first); ``mp`` marks multi-participation.
_LABELS = (
    (BLTCounter, lambda c, mp: f'blt/{c.buffers}_buffers{mp}'),
    (PerCellCounter, lambda c, mp: 'per_cell/summed'),
    (BandedInverseCounter, lambda c, mp: f'banded_inverse[p={c.bands}]/inverse_sqrt{mp}'),
    (BandedCounter, lambda c, mp: f'banded[p={c.bands}]/sqrt{mp}'),
    (PerStepCounter, lambda c, mp: 'per_step/summed'),
    (BalancedTreeCounter, lambda c, mp: f'balanced_tree[k={c.k}]/signed_digits'),
    (UnboundedTreeCounter, lambda c, mp: f'unbounded_tree[k={c.k}]/signed_digits'),
)


def mechanism_name(counter) -> str:
    """'<counter>/<estimator or variant>/<noise>', e.g. 'blt/4_buffers/discrete_gaussian',
    'kary_tree[k=17]/variance_reduced/discrete_laplace', 'per_step/summed/discrete_laplace',
    'balanced_tree[k=21]/signed_digits/discrete_laplace',
    'unbounded_tree[k=13]/signed_digits/discrete_laplace'."""
    if isinstance(counter, FinalReleaseCounter):
        final = 'discrete_gaussian' if counter.final.rho else 'discrete_laplace'
        return (f'{mechanism_name(counter.continual)}+final_one_shot[share={counter.share:g}]/'
                f'{final}')
    noise = 'discrete_gaussian' if getattr(counter, 'rho', None) else 'discrete_laplace'
    if isinstance(counter, WindowCounter):
        tree = ('fresh_per_step' if counter.levels == 1
                else f'tree[k={counter.arity},levels={counter.levels}]/range_decomposition')
        return f'window[W={counter.window}]/{tree}/{noise}'
    mp = ('+multi_participation' if getattr(counter, 'participation', None) is not None
          else '')
    for kind, name in _LABELS:
        if isinstance(counter, kind):
            return f'{name(counter, mp)}/{noise}'
    base = (f'kary_tree[k={counter.k}]' if isinstance(counter, KaryTreeCounter)
            else _NAMES[type(counter)])
    return f'{base}/{counter.estimator}/{noise}'
