"""The error of a user-level count at given bounds, before running it: the bounding bias
(estimated from a contribution histogram, released by ``ChooseContributionBounds`` or exact)
and the release noise (public), as ``beam_dp.drivers.bounds.BoundsChooser`` predicts them.

``user_level_error(unit, budget, horizon)`` needs only public parameters for the noise; with
``histograms`` (a ``BoundsRecommendation``, whose released histograms it reads) it adds the
predicted bias of a key holding ``key_share`` of the records.
"""

import dataclasses
import math
from typing import Optional

from beam_dp.accounting import PrivacyBudget
from beam_dp.errors import InvalidParamsError

__all__ = [
    'UserLevelError',
    'user_level_error',
]


@dataclasses.dataclass(frozen=True)
class UserLevelError:
    """Predicted ``bias`` (records; None without histograms), ``noise`` (the final release's
    standard deviation), ``total`` = √(bias² + noise²) and the ``mechanism`` that would run."""
    bias: Optional[float]
    noise: float
    total: float
    mechanism: str


def user_level_error(unit, budget: PrivacyBudget, horizon: int, *, histograms=None,
                     key_share: float = 0.1, mechanism: str = 'auto') -> UserLevelError:
    """Predicted error of a user-level count's final total at the bounds of ``unit``.

    Args:
      unit: a ``UserLevel`` (its K, m, S and C; ``max_units`` is not modelled and refused).
      budget: the release's budget; horizon: its steps; mechanism: its ``mechanism=``.
      histograms: a ``BoundsRecommendation`` (its released histograms), or None.
      key_share: the share of all records held by the key whose error is predicted.

    Raises:
      InvalidParamsError: on a bad argument, naming it.
    """
    # pylint: disable=import-outside-toplevel  (drivers import analysis: import at call time)
    from beam_dp.drivers.bounds import STATISTICS
    from beam_dp.drivers.bounds import BoundsChooser
    from beam_dp.mechanisms.contribution_histogram import NoisyHistogram
    from beam_dp.privacy_unit import UserLevel
    owner = 'user_level_error'
    if not isinstance(unit, UserLevel):
        raise InvalidParamsError(f'{owner}: unit must be a UserLevel, got {unit!r}.')
    if unit.max_units is not None:
        raise InvalidParamsError(f'{owner}: max_units is not modelled here; leave it None.')
    chooser = BoundsChooser(None, budget, horizon, mechanism=mechanism, key_share=key_share,
                            non_private_histograms=True)
    bounds = (unit.max_keys_per_unit, unit.max_contributions_per_step, unit.max_steps_per_unit,
              unit.max_total_contributions)
    noise, name = chooser.predicted_noise(*bounds)
    if histograms is None:
        return UserLevelError(None, noise, noise, name)
    try:
        hists = {n: NoisyHistogram(tuple(histograms.bucket_edges), tuple(getattr(histograms, n)),
                                   int(t))
                 for n, t in zip(STATISTICS, histograms.thresholds)}
    except (AttributeError, TypeError) as e:
        raise InvalidParamsError(f'{owner}: histograms must be a BoundsRecommendation, got '
                                 f'{type(histograms).__name__}.') from e
    bias = chooser.predicted_bias(hists, *bounds)
    return UserLevelError(bias, noise, math.hypot(bias, noise), name)
