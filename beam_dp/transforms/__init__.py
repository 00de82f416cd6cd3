"""Beam PTransforms of beam_dp (thin: wiring, state and timers around pure drivers, on the one
shared shell ``beam_dp.transforms.shell``)."""

from beam_dp.transforms.arrival import ArrivalOutputs
from beam_dp.transforms.arrival import ArrivalTimeLateness
from beam_dp.transforms.bb_scheduler import BBImproverQueries
from beam_dp.transforms.bb_scheduler import BBSchedulerQueries
from beam_dp.transforms.boost import BoostOutputs
from beam_dp.transforms.boost import BoostQueries
from beam_dp.transforms.choose_bounds import BoundsOutputs
from beam_dp.transforms.choose_bounds import ChooseContributionBounds
from beam_dp.transforms.continual import ContinualCountPerKey
from beam_dp.transforms.continual import ContinualHistogramPerKey
from beam_dp.transforms.continual import ContinualMeanPerKey
from beam_dp.transforms.continual import ContinualSumPerKey
from beam_dp.transforms.distinct import ContinualDistinctCountPerKey
from beam_dp.transforms.continual import ContinualVariancePerKey
from beam_dp.transforms.contribution_bounding import BoundContributions
from beam_dp.transforms.contribution_bounding import BoundedOutputs
from beam_dp.transforms.dynamic import DynamicCountPerKey
from beam_dp.transforms.dynamic import DynamicHistogramPerKey
from beam_dp.transforms.dynamic import DynamicLinearQueriesPerKey
from beam_dp.transforms.erm import ContinualERM
from beam_dp.transforms.erm import ERMOutputs
from beam_dp.transforms.erm import SlidingWindowERM
from beam_dp.transforms.ermg import ERMGQueries
from beam_dp.transforms.growing_database import GrowingDatabaseOutputs
from beam_dp.transforms.pmwg import WindowedPMWG
from beam_dp.transforms.quantiles import ContinualQuantilesPerKey
from beam_dp.transforms.select_keys import KeySelectionOutputs
from beam_dp.transforms.select_keys import SelectKeys
from beam_dp.transforms.shell import ContinualOutputs
from beam_dp.transforms.smalldbg import SmallDBGQueries
from beam_dp.transforms.sparse_continual import SparseContinualCountPerKey
from beam_dp.transforms.sparse_continual import SparseContinualHistogramPerKey
from beam_dp.transforms.warm_up import WarmUpContinualCountPerKey
from beam_dp.transforms.warm_up import WarmUpOutputs

__all__ = [
    'ArrivalOutputs',
    'ArrivalTimeLateness',
    'BBImproverQueries',
    'BBSchedulerQueries',
    'BoostOutputs',
    'BoostQueries',
    'BoundContributions',
    'BoundedOutputs',
    'BoundsOutputs',
    'ChooseContributionBounds',
    'ContinualCountPerKey',
    'ContinualDistinctCountPerKey',
    'ContinualERM',
    'ContinualHistogramPerKey',
    'ContinualMeanPerKey',
    'ContinualOutputs',
    'ContinualQuantilesPerKey',
    'ContinualSumPerKey',
    'ContinualVariancePerKey',
    'DynamicCountPerKey',
    'DynamicHistogramPerKey',
    'DynamicLinearQueriesPerKey',
    'ERMGQueries',
    'ERMOutputs',
    'GrowingDatabaseOutputs',
    'KeySelectionOutputs',
    'SelectKeys',
    'SlidingWindowERM',
    'SmallDBGQueries',
    'SparseContinualCountPerKey',
    'SparseContinualHistogramPerKey',
    'WarmUpContinualCountPerKey',
    'WarmUpOutputs',
    'WindowedPMWG',
]
