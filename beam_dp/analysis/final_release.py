"""The noise of a ``final_share`` release before running it: the last step's sd and what the
steps before it pay (``final_share_error``; ``python -m beam_dp.analysis --final-share f`` and
``python -m beam_dp.analysis user-level --final-share f``).

A keyed transform with ``end=`` and ``final_share=f`` runs its continual counter at (1 − f) of
the budget and spends f on one release of every key's total at the last step, combined there by
inverse variance (``beam_dp.mechanisms.final_release``, docs/continual_counts.md). This module
builds the very counter the transform builds (``beam_dp.drivers.counter_choice
.choose_final_release``, same public arguments) and reads its exact variances:

* ``final_stddev``: the sd of the last release, √(v_c·v_o / (v_c + v_o)) — what
  ``Release.noise_stddev`` reports at the last step;
* ``stddevs``: the sd of the release after each step 1..T (the continual counter's at
  (1 − f) of the budget before the last step; ``Release.noise_stddev`` of those steps), and
  ``other_rmse`` / ``other_max_std`` over steps 1..T − 1;
* ``without_final_stddev`` / ``without_other_rmse``: the same with ``final_share=None`` (the
  whole budget on the continual counter), and ``batch_stddev``: one release of the total at the
  whole budget (the best a one-shot release can do).

Per bin and in the counter's units (records for a count; divide by 2^grid_bits for a sum's grid).
Public parameters only: nothing touches data or draws noise.
"""

import dataclasses
import math
from typing import Optional

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.drivers import counter_choice
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.counter_selection import counter_variances
from beam_dp.mechanisms.final_release import FinalReleaseCounter
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.per_step import PerStepCounter

__all__ = ['FinalShareError', 'final_share_error']

_OWNER = 'final_share_error'
#: Longest horizon evaluated (the per-step arrays are O(horizon)).
MAX_HORIZON = 1 << 24


@dataclasses.dataclass(frozen=True)
class FinalShareError:
    """Predicted noise sd of a ``final_share`` release (module docstring) for a key whose
    release ends after ``steps`` counter steps (the horizon; with private keys, the steps from
    the key's first release to the end). ``stddevs[t - 1]`` is the sd after counter step t;
    ``other_*`` are NaN for a one-step release."""
    final_share: float
    steps: int
    mechanism: str
    final_stddev: float
    other_rmse: float
    other_max_std: float
    continual_final_stddev: float
    one_shot_stddev: float
    without_final_stddev: float
    without_other_rmse: float
    batch_stddev: float
    stddevs: np.ndarray = dataclasses.field(compare=False, repr=False, default=None)

    def as_dict(self):
        """The scalar fields (for JSON)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != 'stddevs'}


def check_final_share(owner: str, share, name: str = 'final_share') -> Optional[float]:
    """``share`` as the transforms accept it (None, or a real number in [0, 1)), as a float;
    InvalidParamsError otherwise."""
    if share is None:
        return None
    share = v.check_real(owner, name, share)
    if not 0 <= share < 1:
        raise InvalidParamsError(f'{owner}: {name} must be in [0, 1), got {share!r}.')
    return share


def _rms(variances: np.ndarray) -> float:
    return math.sqrt(float(np.mean(variances))) if len(variances) else math.nan


def _max_std(variances: np.ndarray) -> float:
    return math.sqrt(float(np.max(variances))) if len(variances) else math.nan


def from_counters(counter, whole, steps: int, share: float, scale: float = 1.0,
                  batch_variance: Optional[float] = None) -> FinalShareError:
    """The prediction for ``counter`` (a ``FinalReleaseCounter``, or the plain counter when the
    share is 0) against ``whole`` (the counter at the whole budget), for a key whose release
    ends after ``steps`` counter steps; sds divided by ``scale`` (a driver's units)."""
    wrapped = isinstance(counter, FinalReleaseCounter)
    continual = counter.continual if wrapped else counter
    curve = np.array(counter_variances(continual, steps), dtype=float)
    if wrapped:
        curve[-1] = counter.release_variance(steps, steps)
    plain = np.asarray(counter_variances(whole, steps), dtype=float)
    sd = np.sqrt(curve) / scale
    return FinalShareError(
        final_share=float(share), steps=int(steps),
        mechanism=counter_choice.mechanism_name(counter),
        final_stddev=float(sd[-1]),
        other_rmse=_rms(curve[:-1]) / scale, other_max_std=_max_std(curve[:-1]) / scale,
        continual_final_stddev=math.sqrt(continual.release_variance(steps)) / scale,
        one_shot_stddev=(math.sqrt(counter.one_shot_variance()) / scale if wrapped
                         else math.inf),
        without_final_stddev=math.sqrt(plain[-1]) / scale,
        without_other_rmse=_rms(plain[:-1]) / scale,
        batch_stddev=(math.sqrt(batch_variance) / scale if batch_variance is not None
                      else math.nan),
        stddevs=sd)


def batch_variance(budget: PrivacyBudget, l1: float, l2: float) -> float:
    """Variance of one release of a total at the whole ``budget`` (discrete Laplace at ε, or
    discrete Gaussian at ρ — for (ε, δ > 0) the lower of the two at the converted ρ)."""
    options = []
    for privacy in ([{'rho': budget.rho}] if budget.is_zcdp else
                    [{'epsilon': budget.epsilon}]
                    + ([{'rho': rho_for_epsilon_delta(budget.epsilon, budget.delta)}]
                       if budget.delta > 0 else [])):
        try:
            options.append(PerStepCounter(l1_sensitivity=l1, l2_sensitivity=l2,
                                          **privacy).release_variance(1))
        except InvalidParamsError:
            continue
    return min(options) if options else math.nan


def final_share_error(budget: PrivacyBudget, horizon: int, final_share: float, *,
                      mechanism: str = 'auto', dimension: int = 1,
                      l1_sensitivity: float = 1.0, l2_sensitivity: Optional[float] = None,
                      participation: Optional[Participation] = None) -> FinalShareError:
    """Predicted noise of a keyed release with ``end`` at ``horizon`` steps and
    ``final_share=final_share`` (module docstring): the counter the transform builds for these
    public parameters (``mechanism``, the unit's ``l1_sensitivity`` / ``l2_sensitivity``
    (default: l1), ``dimension`` bins per key, a user-level ``participation`` over public keys).
    ``final_share`` 0 is the continual counter alone (as the transforms take it).

    Raises:
      InvalidParamsError: on a bad argument (named), or for a counter the transform refuses.
    """
    if not isinstance(budget, PrivacyBudget):
        raise InvalidParamsError(f'{_OWNER}: budget must be a PrivacyBudget, got {budget!r}.')
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or not (
            1 <= horizon <= MAX_HORIZON):
        raise InvalidParamsError(f'{_OWNER}: horizon must be an integer in 1..{MAX_HORIZON} '
                                 f'(final_share needs a known last step), got {horizon!r}.')
    horizon = int(horizon)
    share = check_final_share(_OWNER, final_share)
    if share is None:
        raise InvalidParamsError(f'{_OWNER}: final_share must be a number in [0, 1), got None.')
    v.check_choice(_OWNER, 'mechanism', mechanism, counter_choice.MECHANISMS)
    dimension = v.check_positive_int(_OWNER, 'dimension', dimension)
    l1 = v.check_positive(_OWNER, 'l1_sensitivity', l1_sensitivity)
    l2 = l1 if l2_sensitivity is None else v.check_positive(_OWNER, 'l2_sensitivity',
                                                             l2_sensitivity)
    if l2 > l1 * (1 + 1e-12):
        raise InvalidParamsError(f'{_OWNER}: l2_sensitivity {l2:g} exceeds l1_sensitivity '
                                 f'{l1:g} (a unit\'s L2 is at most its L1).')
    if participation is not None and not isinstance(participation, Participation):
        raise InvalidParamsError(f'{_OWNER}: participation must be a Participation or None, '
                                 f'got {participation!r}.')
    args = (mechanism, None, budget, horizon, None, l1, l2, dimension, participation)
    whole = counter_choice.choose_counter(*args)
    counter = counter_choice.choose_final_release(*args, share) if share else whole
    return from_counters(counter, whole, horizon, share, batch_variance=batch_variance(
        budget, l1, l2))
