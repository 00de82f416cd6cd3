"""Which counter to run: the expected error of every continual counter, from public parameters
only, and the counter with the lowest expected error (what a transform or ``DPFTRL`` runs when
no counter is named; ``beam_dp.analysis`` exports it with its command line).

Everything is a closed form (each mechanism's exact ``release_variance``, vectorised over
t = 1..T); nothing touches data or draws noise. For an unbounded horizon the errors are
evaluated over t = 1..``evaluation_horizon`` (the run length you expect; default 2^20), with
counters that are private for every t.

The unbounded negative-digit tree (``UnboundedTreeCounter``, pure ε) is private for every t and
is listed for every horizon; without a known horizon it is the pure counter with the lowest
expected error when the errors are averaged over 320 steps or more (the default evaluation
horizon 2^20 included; per-step noise summed below).

Budgets: pure ε (δ = 0) → pure counters (discrete Laplace). ρ (zCDP) → the Gaussian counters at
ρ and the pure counters at ε = √(2ρ) (ε-DP implies ε²/2-zCDP). (ε, δ > 0) → the Gaussian counters
at the largest ρ whose zCDP converts to (ε, δ) (CKS 2020) and the pure counters at ε.

The square-root factorization (Henzinger, Upadhyay, Upadhyay 2023) is listed as a reference
(continuous Gaussian, not runnable here): BLT is within 2% of it.
"""

import dataclasses
import functools
import math
from typing import Dict, Optional, Tuple

import numpy as np

from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms import blt_optimize
from beam_dp.mechanisms.banded import BandedCounter
from beam_dp.mechanisms.banded import MAX_INVERSE_HORIZON
from beam_dp.mechanisms.banded import BandedInverseCounter
from beam_dp.mechanisms.banded import band_candidates
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.balanced_tree import balanced_best_k
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.kary_tree import best_k
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.per_cell import PerCellCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.mechanisms.unbounded_tree import UnboundedTreeCounter

__all__ = [
    'CounterEstimate',
    'ErrorReport',
    'best_pure_counter',
    'counter_variances',
    'expected_error',
    'select_counter',
]

DEFAULT_EVALUATION_HORIZON = 1 << 20
REFERENCE = 'sqrt_factorization'


@dataclasses.dataclass(frozen=True)
class CounterEstimate:
    """One counter's expected error per bin: ``rmse`` = √(mean_t Var[release_t]) over the
    evaluated horizon, ``max_std`` = max_t √Var. ``kwargs`` rebuild it (``build``); the
    reference (``runnable`` False) has none."""
    name: str
    notion: str                  # 'pure' or 'zcdp'
    rmse: float
    max_std: float
    runnable: bool
    kind: Optional[type] = None
    kwargs: Tuple[Tuple[str, object], ...] = ()

    def build(self):
        if not self.runnable:
            raise InvalidParamsError(f'{self.name} is a reference, not a runnable counter.')
        return self.kind(**dict(self.kwargs))


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    """Every counter's expected error, best first, and the one a transform picks."""
    budget: PrivacyBudget
    horizon: Optional[int]
    evaluated_steps: int
    objective: str
    estimates: Tuple[CounterEstimate, ...]
    chosen: CounterEstimate
    curves: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict, compare=False,
                                                       repr=False)


def _binary_tree_variances(m: BinaryTreeCounter, steps: int) -> np.ndarray:
    s2 = m.node_noise.variance()
    per_level = ([s2] * m.levels if m.estimator == 'textbook'
                 else _dyadic.reduced_variances([s2] * m.levels))
    t = np.arange(1, steps + 1, dtype=np.int64)
    return sum(((t >> h) & 1) * v for h, v in enumerate(per_level))


def _infinite_variances(m: InfiniteTreeCounter, steps: int) -> np.ndarray:
    reduced = m.estimator == 'variance_reduced'
    out = np.zeros(steps)
    completed = 0.0                         # Variance of all completed blocks before block i.
    i = 0
    while (1 << i) <= steps:
        node = m.tree_noise(i).variance() if i else 0.0
        per_level = _dyadic.reduced_variances([node] * i) if reduced else [node] * i
        block = m.block_noise().variance()
        if reduced and i >= 1:
            block = _dyadic._combined_variance(block, per_level[-1])
        lo, hi = 1 << i, min(steps, (1 << (i + 1)) - 1)
        r = np.arange(1, hi - lo + 2, dtype=np.int64)          # steps into block i
        part = np.full(r.shape, completed)
        part += sum(((r >> h) & 1) * v for h, v in enumerate(per_level))
        full = r == (1 << i)
        part[full] = completed + block
        out[lo - 1:hi] = part
        completed += block
        i += 1
    return out


def counter_variances(mechanism, steps: int) -> np.ndarray:
    """Var[release_t] per bin for t = 1..steps, for any counter in beam_dp.mechanisms."""
    if isinstance(mechanism, BinaryTreeCounter):
        return _binary_tree_variances(mechanism, steps)
    if isinstance(mechanism, InfiniteTreeCounter):
        return _infinite_variances(mechanism, steps)
    return np.asarray(mechanism.variances(steps), dtype=float)


def _sqrt_reference(rho: float, l2: float, steps: int) -> np.ndarray:
    return l2 * l2 / (2 * rho) * blt_optimize.sqrt_factorization_variances(steps)


def _privacy_args(budget: PrivacyBudget) -> Tuple[Optional[float], Optional[float]]:
    """(ε for the pure counters, ρ for the Gaussian ones); either may be None."""
    if budget.is_zcdp:
        return math.sqrt(2 * budget.rho), budget.rho
    if budget.delta == 0:
        return budget.epsilon, None
    return budget.epsilon, rho_for_epsilon_delta(budget.epsilon, budget.delta)


def _participation_candidates(horizon, rho, common, steps, participation):
    """The Gaussian counters calibrated to a unit's participation pattern: fresh per-cell noise,
    BLT with the multi-participation bound, the banded square root for each band."""
    base = dict(common, rho=rho, participation=participation)
    out = [('per_cell', 'zcdp', PerCellCounter, base)]
    blt = dict(base, horizon=horizon)
    if horizon is None:
        blt['design_horizon'] = steps
    out.append(('blt+participation', 'zcdp', BLTCounter, blt))
    for bands in band_candidates(horizon):
        out.append((f'banded[p={bands}]', 'zcdp', BandedCounter,
                    dict(base, bands=bands, horizon=horizon)))
    if horizon is not None and horizon <= MAX_INVERSE_HORIZON:     # it needs a known horizon
        for bands in band_candidates(horizon):
            out.append((f'banded_inverse[p={bands}]', 'zcdp', BandedInverseCounter,
                        dict(base, bands=bands, horizon=horizon)))
    return out


def _candidates(horizon, epsilon, rho, common, design_horizon, participation=None):
    """(name, notion, class, kwargs) of every runnable counter for this horizon."""
    out = []
    if participation is not None and rho is not None:
        out.extend(_participation_candidates(horizon, rho, common, design_horizon,
                                             participation))
    for notion, privacy in (('pure', {'epsilon': epsilon}), ('zcdp', {'rho': rho})):
        if next(iter(privacy.values())) is None:
            continue
        base = dict(common, **privacy)
        for estimator in ('variance_reduced', 'textbook'):
            if horizon is not None:
                out.append((f'binary_tree[{estimator}]', notion, BinaryTreeCounter,
                            dict(base, horizon=horizon, estimator=estimator)))
            out.append((f'infinite_tree[{estimator}]', notion, InfiniteTreeCounter,
                        dict(base, estimator=estimator)))
        out.append(('per_step_summed', notion, PerStepCounter, base))
        if notion == 'pure':
            try:
                unbounded = UnboundedTreeCounter(**base)
            except InvalidParamsError:    # its smallest node share is out of the samplers' range
                unbounded = None
            if unbounded is not None:
                out.append((f'unbounded_tree[k={unbounded.k}]', notion, UnboundedTreeCounter,
                            dict(base, k=unbounded.k)))
        if horizon is not None:
            # The default k of each (a function of the horizon and the notion only): building
            # the counter here would raise for a noise outside the samplers' range.
            k = best_k(horizon)
            out.append((f'kary_tree[k={k}]', notion, KaryTreeCounter,
                        dict(base, horizon=horizon, k=k)))
            k = balanced_best_k(horizon, notion == 'zcdp')
            out.append((f'balanced_tree[k={k}]', notion, BalancedTreeCounter,
                        dict(base, horizon=horizon, k=k)))
        if notion == 'zcdp' and participation is None:      # else 'blt+participation'
            blt = dict(base, horizon=horizon)
            if horizon is None:
                blt['design_horizon'] = design_horizon
            out.append(('blt', notion, BLTCounter, blt))
    return out


def expected_error(budget: PrivacyBudget, horizon: Optional[int] = None, *,
                   dimension: int = 1, l1_sensitivity: float = 1.0,
                   l2_sensitivity: Optional[float] = None,
                   evaluation_horizon: Optional[int] = None,
                   objective: str = 'rmse',
                   participation: Optional[Participation] = None) -> ErrorReport:
    """Expected per-step error (per bin) of every available counter, and the best one. A
    counter that refuses these parameters (e.g. a noise outside the exact samplers' range,
    ``beam_dp.noise.noise_scale_problem``) is not available; if none is, its error is raised.

    Args:
      budget: the budget the counter may spend (``PrivacyBudget``).
      horizon: the number of steps if known (then finite-horizon counters qualify), else None.
      dimension: bins per step (d); the error is per bin and does not depend on d.
      l1_sensitivity / l2_sensitivity: one privacy unit's contribution bounds (as the counters).
      evaluation_horizon: steps the error is averaged over when ``horizon`` is None (default
        2^20; also the design horizon of the unbounded BLT).
      objective: 'rmse' (mean over steps) or 'max_std' — what "best" minimises.
      participation: a user-level unit's pattern (``Participation``: ≤ K keys, ≤ S steps per
        key, ≤ m per step, ≤ C in all) or None. With it and a Gaussian budget the candidates
        also include fresh per-cell noise (``PerCellCounter``), BLT with the multi-participation
        bound, the banded square root (``BandedCounter``, bands 2, 4, … ≤ 512) and, with a
        known horizon, the banded inverse square root (``BandedInverseCounter``), each
        calibrated to that pattern; per-cell noise is always a candidate, so the chosen
        counter's error is never above it (for the same objective).

    Returns:
      An ``ErrorReport``; ``report.chosen.build()`` constructs the chosen counter.
    """
    if not isinstance(budget, PrivacyBudget):
        raise InvalidParamsError(f'expected_error: budget must be a PrivacyBudget, got {budget!r}.')
    if objective not in ('rmse', 'max_std'):
        raise InvalidParamsError(f"expected_error: objective must be 'rmse' or 'max_std', got "
                                 f'{objective!r}.')
    if participation is not None and not isinstance(participation, Participation):
        raise InvalidParamsError(f'expected_error: participation must be a Participation or '
                                 f'None, got {participation!r}.')
    if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int)
                                or horizon < 1):
        raise InvalidParamsError(f'expected_error: horizon must be a positive int or None, got '
                                 f'{horizon!r}.')
    steps = horizon or evaluation_horizon or DEFAULT_EVALUATION_HORIZON
    epsilon, rho = _privacy_args(budget)
    common = dict(l1_sensitivity=l1_sensitivity, l2_sensitivity=l2_sensitivity,
                  dimension=dimension)
    estimates, curves, refused = [], {}, []
    for name, notion, kind, kwargs in _candidates(horizon, epsilon, rho, common, steps,
                                                  participation):
        if notion == 'pure':
            kwargs = {k: val for k, val in kwargs.items() if k != 'l2_sensitivity'}
        try:
            counter = kind(**kwargs)
        except InvalidParamsError as e:       # e.g. its noise is outside the samplers' range:
            refused.append(e)                 # not available for these parameters (issue 21)
            continue
        variances = counter_variances(counter, steps)
        label = f'{name}' if notion == 'zcdp' or rho is None else f'{name} (pure)'
        curves[label] = variances
        estimates.append(CounterEstimate(label, notion, math.sqrt(float(np.mean(variances))),
                                         math.sqrt(float(np.max(variances))), True, kind,
                                         tuple(sorted(kwargs.items()))))
    if rho is not None:
        l2 = l1_sensitivity if l2_sensitivity is None else l2_sensitivity
        ref = _sqrt_reference(rho, l2, steps)
        curves[REFERENCE] = ref
        estimates.append(CounterEstimate(REFERENCE, 'zcdp', math.sqrt(float(np.mean(ref))),
                                         math.sqrt(float(np.max(ref))), False))
    key = (lambda e: e.rmse) if objective == 'rmse' else (lambda e: e.max_std)
    estimates.sort(key=key)
    runnable = [e for e in estimates if e.runnable]
    if not runnable:
        raise refused[0]
    chosen = min(runnable, key=key)
    return ErrorReport(budget, horizon, steps, objective, tuple(estimates), chosen, curves)


def select_counter(budget: PrivacyBudget, horizon_steps: Optional[int] = None,
                   dimension: int = 1, l1_sensitivity: float = 1.0,
                   l2_sensitivity: Optional[float] = None, objective: str = 'rmse',
                   evaluation_horizon: Optional[int] = None,
                   participation: Optional[Participation] = None):
    """The counter (a ready mechanism instance) with the lowest expected error.

    Pure function of public parameters: the same arguments always give the same counter. It
    spends at most ``budget`` (its ``privacy_cost()`` says exactly what). See ``expected_error``.
    """
    return _chosen(budget, horizon_steps, dimension, l1_sensitivity, l2_sensitivity, objective,
                   evaluation_horizon, participation).build()


@functools.lru_cache(maxsize=128)
def _chosen(budget, horizon, dimension, l1, l2, objective, evaluation_horizon,
            participation=None) -> CounterEstimate:
    """The (immutable) chosen estimate, cached: a pipeline with many transforms pays once."""
    return expected_error(budget, horizon, dimension=dimension, l1_sensitivity=l1,
                          l2_sensitivity=l2, evaluation_horizon=evaluation_horizon,
                          objective=objective, participation=participation).chosen


def best_pure_counter(horizon: Optional[int], epsilon: float, dimension: int = 1,
                      l1_sensitivity: float = 1.0):
    """The ε-DP counter with the lowest mean variance for this horizon (negative-digit or
    k-ary tree, binary or infinite tree, or per-step noise summed)."""
    return select_counter(PrivacyBudget(epsilon=epsilon), horizon, dimension, l1_sensitivity)
