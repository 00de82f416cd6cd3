"""Beam PTransforms of beam_dp (thin: state, timers and wiring around pure mechanisms)."""

from beam_dp.transforms._common import ContinualOutputs
from beam_dp.transforms.continual import ContinualCountPerKey
from beam_dp.transforms.continual import ContinualHistogramPerKey
from beam_dp.transforms.continual import ContinualSumPerKey
from beam_dp.transforms.contribution_bounding import BoundContributions

__all__ = [
    'BoundContributions',
    'ContinualCountPerKey',
    'ContinualHistogramPerKey',
    'ContinualOutputs',
    'ContinualSumPerKey',
]
