"""The record ``ChooseContributionBounds`` outputs: recommended ``UserLevel`` bounds, their
predicted error, and the (noisy, or with ``non_private_histograms`` exact) histograms they were
chosen from. A plain NamedTuple (no Beam); ``beam_dp.io.coders`` registers its ``RowCoder``."""

import typing
from typing import List, NamedTuple, Optional

__all__ = [
    'BoundsRecommendation',
    'RECORD_TYPES',
]


class BoundsRecommendation(NamedTuple):
    """Recommended user-level bounds for a counter released at ``release_budget`` over
    ``horizon`` steps.

    max_keys_per_unit (K), max_contributions_per_step (m), max_steps_per_unit (S),
    max_total_contributions (C): the bounds (``to_user_level`` builds the ``UserLevel``).
    predicted_bias: the predicted records lost to bounding for a key holding ``key_share`` of
    all records (in records, over the whole data); predicted_noise: the noise standard deviation
    of that counter's final release at these bounds (public: a function of the bounds);
    predicted_error: √(bias² + noise²). mechanism: the counter the release would run.
    private: False only with ``non_private_histograms`` (then the histograms are EXACT and
    nothing below is differentially private). epsilon, delta, rho: the histograms' cost.
    bucket_edges: the public lower edges; keys_per_unit, contributions_per_step,
    steps_per_key, total_contributions: the released unit counts per bucket; thresholds: the
    public threshold of each (in that order) under which a released count is read as 0.
    """
    max_keys_per_unit: int
    max_contributions_per_step: int
    max_steps_per_unit: int
    max_total_contributions: int
    predicted_bias: float
    predicted_noise: float
    predicted_error: float
    mechanism: str
    private: bool
    epsilon: float
    delta: float
    rho: float
    bucket_edges: List[int]
    keys_per_unit: List[int]
    contributions_per_step: List[int]
    steps_per_key: List[int]
    total_contributions: List[int]
    thresholds: List[int]

    def to_user_level(self, unit_fn, max_units: Optional[int] = None):
        """The ``UserLevel`` privacy unit with these bounds."""
        from beam_dp.privacy_unit import UserLevel   # pylint: disable=import-outside-toplevel
        return UserLevel(unit_fn=unit_fn, max_keys_per_unit=self.max_keys_per_unit,
                         max_contributions_per_step=self.max_contributions_per_step,
                         max_steps_per_unit=self.max_steps_per_unit,
                         max_total_contributions=self.max_total_contributions,
                         max_units=max_units)


RECORD_TYPES = (BoundsRecommendation,)

del typing
