"""Utility analysis from public parameters only: expected error of every continual counter and
the one with the lowest expected error; at user level the noise, bounding bias and key release
probability; the last step's and the other steps' noise of a ``final_share`` release
(``python -m beam_dp.analysis --help``, ``python -m beam_dp.analysis user-level --help``)."""

from beam_dp.analysis import final_release
from beam_dp.analysis import key_selection
from beam_dp.analysis import user_level
from beam_dp.analysis.final_release import FinalShareError
from beam_dp.analysis.final_release import final_share_error
from beam_dp.analysis.user_level import STATISTICS
from beam_dp.analysis.key_selection import key_release_probability
from beam_dp.analysis.key_selection import units_needed
from beam_dp.analysis.user_level import UserLevelError
from beam_dp.analysis.user_level import exact_histograms
from beam_dp.analysis.user_level import release_probability
from beam_dp.analysis.user_level import user_level_error
from beam_dp.mechanisms import counter_selection
from beam_dp.mechanisms.counter_selection import CounterEstimate
from beam_dp.mechanisms.counter_selection import ErrorReport
from beam_dp.mechanisms.counter_selection import best_pure_counter
from beam_dp.mechanisms.counter_selection import counter_variances
from beam_dp.mechanisms.counter_selection import expected_error
from beam_dp.mechanisms.counter_selection import select_counter

# The package exports exactly what the counter choice, analysis.user_level,
# analysis.key_selection and analysis.final_release do.
__all__ = sorted(list(counter_selection.__all__) + list(user_level.__all__)
                 + list(key_selection.__all__) + list(final_release.__all__))
