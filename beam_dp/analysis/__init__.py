"""Utility analysis from public parameters only: expected error of every continual counter and
the one with the lowest expected error (``python -m beam_dp.analysis --help``)."""

from beam_dp.analysis import utility
from beam_dp.analysis.utility import CounterEstimate
from beam_dp.analysis.utility import ErrorReport
from beam_dp.analysis.utility import best_pure_counter
from beam_dp.analysis.utility import counter_variances
from beam_dp.analysis.utility import expected_error
from beam_dp.analysis.utility import select_counter

# The package exports exactly what analysis.utility does.
__all__ = list(utility.__all__)
