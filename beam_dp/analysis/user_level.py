"""The error of a user-level count at given bounds, before running it: the bounding bias
(estimated from a contribution histogram: released by ``ChooseContributionBounds``, or one the
user has), the release noise (public) and, with private key selection, the probability that a
key is released.

``user_level_error(unit, budget, horizon)`` needs only public parameters for the noise; with
``histograms`` it adds the predicted bias of a key holding ``key_share`` of the records; with
``key_selection`` (the ``PrivateKeys`` budget) and ``key_units`` the probability that a key with
that many distinct units is ever released within the horizon (``release_probability``).
``python -m beam_dp.analysis user-level --help`` is the command line.

What is predicted, and how (the same computations the transforms run):

* noise: the standard deviation of the key's release at the last step, from the counter
  ``ContinualCountPerKey`` runs at these bounds (``Release.noise_stddev`` exactly; with private
  keys, a key selected at its first step);
* bias: ``key_share`` × the records the bounds drop, from the histograms coupled
  comonotonically (``beam_dp.drivers.bounds.BoundsChooser.predicted_bias``);
* with ``release_final_share=f`` (the transform's ``final_share=f``): the noise is the last
  release's, the inverse-variance combination, and ``UserLevelError.final_share`` (a
  ``FinalShareError``, ``beam_dp.analysis.final_release``) adds the sd of every step before it;
* release probability: ``ContinualKeySelection`` (an SVT per key on its distinct-unit count,
  noise DLap(2K/ε) once for the threshold and fresh per step) for a key whose ``key_units``
  units have all arrived by its first step ``first_step``, in closed form:
  1 − Σ_z P[Z = z] Π_{t = first_step}^{horizon} P[Y_t < τ_t + z − n + 1].
"""

import dataclasses
import math
from typing import Mapping, Optional

import numpy as np

from beam_dp.accounting import PrivacyBudget
from beam_dp.errors import InvalidParamsError

__all__ = [
    'STATISTICS',
    'UserLevelError',
    'exact_histograms',
    'release_probability',
    'user_level_error',
]

#: The per-unit statistics of a contribution histogram (``beam_dp.drivers.bounds``).
STATISTICS = ('keys_per_unit', 'contributions_per_step', 'steps_per_key', 'total_contributions')
_OWNER = 'user_level_error'
#: Longest horizon the closed forms evaluate (the counters' own limit is larger).
MAX_HORIZON = 1 << 22


@dataclasses.dataclass(frozen=True)
class UserLevelError:
    """Predicted ``bias`` (records; None without histograms), ``noise`` (the last release's
    standard deviation), ``total`` = √(bias² + noise²), the ``mechanism`` that would run,
    ``release_probability`` (None without a key selection), and with ``release_final_share``
    the ``final_share`` prediction (``FinalShareError``: the sd at every step; None without)."""
    bias: Optional[float]
    noise: float
    total: float
    mechanism: str
    release_probability: Optional[float] = None
    final_share: Optional[object] = None


def _check_int(name, value, lo=1, hi=None, optional=False):
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo or (
            hi is not None and value > hi):
        bound = f' and at most {hi}' if hi is not None else ''
        raise InvalidParamsError(f'{_OWNER}: {name} must be an integer at least {lo}{bound}, '
                                 f'got {value!r}.')
    return int(value)


def release_probability(key_selection: PrivacyBudget, max_keys_per_unit: int, units: int,
                        horizon: int, first_step: int = 1,
                        final_share: Optional[float] = None) -> float:
    """P[a key with ``units`` distinct units (all there from global step ``first_step``) is
    selected at or before step ``horizon``] under ``PrivateKeys(key_selection,
    final_share=final_share)`` at user level with K = ``max_keys_per_unit`` (module docstring),
    for a release whose last step is ``horizon`` (``end``): the continual SVT's part in closed
    form, combined with the final test's exact π (independent draws). ``final_share`` None:
    the ``PrivateKeys`` default; 0: the SVT alone (a stream without ``end``). Float."""
    # pylint: disable=import-outside-toplevel  (drivers import analysis: import at call time)
    from beam_dp.drivers.private_keys import PrivateKeys
    from beam_dp.noise.geometric import _scale_nd
    if not isinstance(key_selection, PrivacyBudget):
        raise InvalidParamsError(f'{_OWNER}: key_selection must be a PrivacyBudget(epsilon=..., '
                                 f'delta=...), got {key_selection!r}.')
    k = _check_int('max_keys_per_unit', max_keys_per_unit)
    n = _check_int('key_units', units, lo=0)
    horizon = _check_int('horizon', horizon, hi=MAX_HORIZON)
    first_step = _check_int('first_step', first_step, hi=horizon)
    keys = (PrivateKeys(key_selection) if final_share is None
            else PrivateKeys(key_selection, final_share=final_share))
    selection, final = keys.horizon_selection(k, True)
    num, den = _scale_nd(selection.scale)
    log_a = -den / num
    a = math.exp(log_a)
    thresholds = np.array([selection.threshold(t) for t in range(first_step, horizon + 1)],
                          dtype=float)
    spread = int(math.ceil(60 * num / den)) + 2        # Z beyond ±spread: P < e^-60
    z = np.arange(-spread, spread + 1, dtype=float)
    log_pz = math.log((1 - a) / (1 + a)) + np.abs(z) * log_a
    gap = thresholds[None, :] + z[:, None] - n + 1             # selected at t ⟺ Y_t ≥ gap
    # ln P[Y_t < gap]: gap ≤ 0: a^(1-gap)/(1+a); gap ≥ 1: 1 − a^gap/(1+a)
    with np.errstate(divide='ignore', over='ignore', invalid='ignore'):
        below = np.where(gap <= 0, (1 - gap) * log_a - math.log1p(a),
                         np.log1p(-np.exp(np.maximum(gap, 1) * log_a - math.log1p(a))))
    log_never = np.sum(below, axis=1)
    never = float(np.sum(np.exp(log_pz + log_never)))
    if final is not None:               # the known end's test on the final count
        from beam_dp.drivers.private_keys import FINAL_COUNT_CAP
        never *= 1.0 - final.selection_probability(min(n, FINAL_COUNT_CAP))
    return min(1.0, max(0.0, 1.0 - never))


def exact_histograms(histogram: Mapping[str, Mapping[int, int]]):
    """NoisyHistograms (exact, one bucket per value) from {statistic: {value: units}}."""
    # pylint: disable=import-outside-toplevel
    from beam_dp.mechanisms.contribution_histogram import NoisyHistogram
    if not isinstance(histogram, Mapping) or set(histogram) != set(STATISTICS):
        raise InvalidParamsError(f'{_OWNER}: histograms must be a BoundsRecommendation or a '
                                 f'contribution histogram mapping each of {STATISTICS} '
                                 f'to {{value: units}}, got keys '
                                 f'{sorted(histogram) if isinstance(histogram, Mapping) else histogram!r}.')
    out = {}
    for name in STATISTICS:
        counts = histogram[name]
        if not isinstance(counts, Mapping) or not counts:
            raise InvalidParamsError(f'{_OWNER}: histogram[{name!r}] must be a non-empty '
                                     f'{{value: units}} mapping, got {counts!r}.')
        try:
            pairs = {int(val): int(units) for val, units in counts.items()}
        except (TypeError, ValueError) as e:
            raise InvalidParamsError(f'{_OWNER}: histogram[{name!r}] must map positive integer '
                                     f'values to unit counts, got {counts!r}.') from e
        if min(pairs) < 1 or min(pairs.values()) < 0 or max(pairs) > (1 << 40):
            raise InvalidParamsError(f'{_OWNER}: histogram[{name!r}] values must be in 1..2^40 '
                                     f'with unit counts >= 0, got {counts!r}.')
        edges = sorted(set(pairs) | {val + 1 for val in pairs})
        out[name] = NoisyHistogram(tuple(edges), tuple(pairs.get(e, 0) for e in edges), 1)
    return out


def _released_histograms(histograms):
    # pylint: disable=import-outside-toplevel
    from beam_dp.mechanisms.contribution_histogram import NoisyHistogram
    edges = getattr(histograms, 'bucket_edges', None)
    if edges is None:
        return exact_histograms(histograms)
    try:
        return {n: NoisyHistogram(tuple(edges), tuple(getattr(histograms, n)), int(t))
                for n, t in zip(STATISTICS, histograms.thresholds)}
    except (AttributeError, TypeError, ValueError) as e:
        raise InvalidParamsError(f'{_OWNER}: histograms must be a BoundsRecommendation or '
                                 f'{{statistic: {{value: units}}}}, got '
                                 f'{type(histograms).__name__}.') from e


def user_level_error(unit, budget: PrivacyBudget, horizon: int, *, histograms=None,
                     key_share: float = 0.1, mechanism: str = 'auto',
                     key_selection: Optional[PrivacyBudget] = None,
                     key_units: Optional[int] = None, first_step: int = 1,
                     final_share: Optional[float] = None,
                     release_final_share: Optional[float] = None) -> UserLevelError:
    """Predicted error of a user-level count's last release at the bounds of ``unit``.

    Args:
      unit: a ``UserLevel`` (its K, m, S and C; ``max_units`` is not modelled and refused).
      budget: the release's budget; horizon: its steps; mechanism: its ``mechanism=``.
      histograms: a ``BoundsRecommendation`` (its released histograms), an exact contribution
        histogram ``{statistic: {value: units}}`` over ``STATISTICS``, or None.
      key_share: the share of all records held by the key whose error is predicted.
      key_selection: the ``PrivateKeys`` budget (ε, δ) when keys are selected privately; then
        ``key_units`` (distinct units of the key) gives ``release_probability``.
      first_step: the key's first step (1-based) for the release probability.
      final_share: ``PrivateKeys.final_share`` (None: its default) for the release probability
        (the key selection's share, not the count's: that is ``release_final_share``).
      release_final_share: the count's ``final_share=`` (None: off): the noise is then the last
        release's combined sd, and ``UserLevelError.final_share`` holds the sd of every step.

    Raises:
      InvalidParamsError: on a bad argument, naming it.
    """
    # pylint: disable=import-outside-toplevel  (drivers import analysis: import at call time)
    from beam_dp.drivers.bounds import BoundsChooser
    from beam_dp.drivers.clock import StepClock
    from beam_dp.drivers.keyed import KeyedReleaseDriver
    from beam_dp.drivers.private_keys import PrivateKeys
    from beam_dp.privacy_unit import UserLevel
    from beam_dp.analysis.final_release import check_final_share
    from beam_dp.analysis.final_release import batch_variance
    from beam_dp.analysis.final_release import from_counters
    if not isinstance(unit, UserLevel):
        raise InvalidParamsError(f'{_OWNER}: unit must be a UserLevel, got {unit!r}.')
    if unit.max_units is not None:
        raise InvalidParamsError(f'{_OWNER}: max_units is not modelled here; leave it None.')
    if not isinstance(budget, PrivacyBudget):
        raise InvalidParamsError(f'{_OWNER}: budget must be a PrivacyBudget, got {budget!r}.')
    horizon = _check_int('horizon', horizon, hi=MAX_HORIZON)
    share = check_final_share(_OWNER, release_final_share, 'release_final_share')
    if key_units is not None and key_selection is None:
        raise InvalidParamsError(f'{_OWNER}: key_units needs key_selection (the PrivateKeys '
                                 f'budget).')
    chooser = BoundsChooser(None, budget, horizon, mechanism=mechanism, key_share=key_share,
                            non_private_histograms=True)
    bounds = (unit.max_keys_per_unit, unit.max_contributions_per_step, unit.max_steps_per_unit,
              unit.max_total_contributions)
    probability = None
    clock = StepClock(0, 1, last_step=horizon - 1)
    detail = None
    if key_selection is None:
        noise, name = chooser.predicted_noise(*bounds)
        if not math.isfinite(noise) or share is not None:   # say why / the final_share split
            driver = KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=unit,
                                        clock=clock, layout=_one_key_layout(),
                                        mechanism=mechanism, final_share=share)
            steps = horizon
    else:
        keys = PrivateKeys(key_selection) if isinstance(key_selection, PrivacyBudget) else None
        if keys is None:
            raise InvalidParamsError(f'{_OWNER}: key_selection must be a PrivacyBudget, got '
                                     f'{key_selection!r}.')
        driver = KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=unit,
                                    clock=clock, private_keys=keys, mechanism=mechanism,
                                    final_share=share)
        steps = horizon - _check_int('first_step', first_step, hi=horizon) + 1
        noise = (driver.counter_noise_stddev(steps, steps) if share
                 else driver.counter_noise_stddev(steps))
        name = driver.mechanism_name
        if key_units is not None:
            probability = release_probability(key_selection, unit.max_keys_per_unit, key_units,
                                              horizon, first_step, final_share)
    if share is not None:
        whole = dataclasses.replace(driver, final_share=None)
        detail = from_counters(driver.counter(1), whole.counter(1), steps, share,
                               batch_variance=batch_variance(budget, *driver.sensitivity()))
        noise, name = detail.final_stddev, detail.mechanism
    if histograms is None:
        return UserLevelError(None, noise, noise, name, probability, detail)
    bias = chooser.predicted_bias(_released_histograms(histograms), *bounds)
    return UserLevelError(bias, noise, math.hypot(bias, noise), name, probability, detail)


def _one_key_layout():
    from beam_dp.drivers.key_layout import KeyLayout  # pylint: disable=import-outside-toplevel
    return KeyLayout.of(['key'], 1)
