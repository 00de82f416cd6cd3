"""Utility analysis from public parameters only: expected error of every continual counter and
the one with the lowest expected error (``python -m beam_dp.analysis --help``)."""

from beam_dp.analysis import utility
from beam_dp.analysis.utility import CounterEstimate
from beam_dp.analysis.utility import ErrorReport
from beam_dp.analysis.utility import best_pure_counter
from beam_dp.analysis.utility import counter_variances
from beam_dp.analysis.utility import expected_error
from beam_dp.analysis.utility import select_counter
from beam_dp.analysis import user_level
from beam_dp.analysis.user_level import UserLevelError
from beam_dp.analysis.user_level import user_level_error

# The package exports exactly what analysis.utility and analysis.user_level do.
__all__ = sorted(list(utility.__all__) + list(user_level.__all__))
