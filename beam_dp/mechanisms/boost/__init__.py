"""Boost / Turbo (spec 002): caching DP answers over time blocks -- PMW-Bypass (Alg. 1), the
exact-match cache, tree-structured PMW-Bypass over dyadic block intervals (Alg. 2), warm start,
overlapping trees for unbounded streams (Thm A.8) and per-block privacy filters (Alg. 3).
Pure Python + numpy; no Beam import."""

from beam_dp.mechanisms.boost.filters import BlockFilters
from beam_dp.mechanisms.boost.filters import RenyiFilters
from beam_dp.mechanisms.boost.heuristic import COVID_LEARNING_RATE
from beam_dp.mechanisms.boost.heuristic import LearningRate
from beam_dp.mechanisms.boost.heuristic import Readiness
from beam_dp.mechanisms.boost.state import BoostAnswer
from beam_dp.mechanisms.boost.state import BoostRequest
from beam_dp.mechanisms.boost.state import BoostState
from beam_dp.mechanisms.boost.pmw_bypass import TreePMWBypass
from beam_dp.mechanisms.boost.presets import preset

__all__ = [
    'BlockFilters',
    'BoostAnswer',
    'BoostRequest',
    'BoostState',
    'COVID_LEARNING_RATE',
    'LearningRate',
    'Readiness',
    'RenyiFilters',
    'TreePMWBypass',
    'preset',
]
