"""beam_dp: differentially private continual release for Apache Beam.

The public surface, one import per line. Layers: ``noise`` (the only randomness) →
``accounting``, ``mechanisms``, ``queries`` (pure Python + numpy) → ``drivers`` (pure: what a
family's DoFns call) → ``transforms`` (Beam: wiring, state and timers on one shared shell).
Documentation (privacy model, algorithms with their papers, parameters, accuracy): ``docs/``,
starting at ``docs/index.md``.
"""

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.erm import ERMLedgerRow
from beam_dp.io.erm import ModelRelease
from beam_dp.io.queries import QueryAnswer
from beam_dp.io.records import DeadLetter
from beam_dp.io.bounds import BoundsRecommendation
from beam_dp.io.quantiles import QuantileRelease
from beam_dp.io.records import Release
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import UserLevel
from beam_dp.queries import LinearQuery
from beam_dp.transforms import ArrivalOutputs
from beam_dp.transforms import ArrivalTimeLateness
from beam_dp.transforms import BBImproverQueries
from beam_dp.transforms import BBSchedulerQueries
from beam_dp.transforms import BoostOutputs
from beam_dp.transforms import BoostQueries
from beam_dp.transforms import BoundContributions
from beam_dp.transforms import BoundedOutputs
from beam_dp.transforms import BoundsOutputs
from beam_dp.transforms import ChooseContributionBounds
from beam_dp.transforms import ContinualCountPerKey
from beam_dp.transforms import ContinualDistinctCountPerKey
from beam_dp.transforms import ContinualERM
from beam_dp.transforms import ContinualHistogramPerKey
from beam_dp.transforms import ContinualMeanPerKey
from beam_dp.transforms import ContinualOutputs
from beam_dp.transforms import ContinualQuantilesPerKey
from beam_dp.transforms import ContinualSumPerKey
from beam_dp.transforms import ContinualVariancePerKey
from beam_dp.transforms import DynamicCountPerKey
from beam_dp.transforms import DynamicHistogramPerKey
from beam_dp.transforms import DynamicLinearQueriesPerKey
from beam_dp.transforms import ERMGQueries
from beam_dp.transforms import ERMOutputs
from beam_dp.transforms import GrowingDatabaseOutputs
from beam_dp.transforms import KeySelectionOutputs
from beam_dp.transforms import SelectKeys
from beam_dp.transforms import SlidingWindowERM
from beam_dp.transforms import SmallDBGQueries
from beam_dp.transforms import SparseContinualCountPerKey
from beam_dp.transforms import SparseContinualHistogramPerKey
from beam_dp.transforms import WarmUpContinualCountPerKey
from beam_dp.transforms import WarmUpOutputs
from beam_dp.transforms import WindowedPMWG
# Subpackages the docs name as ``beam_dp.analysis.units_needed(...)`` /
# ``beam_dp.postprocess.isotonic_counts(...)``: reachable after a plain ``import beam_dp``.
from beam_dp import analysis  # noqa: F401
from beam_dp import postprocess  # noqa: F401

__version__ = '0.1.0'

__all__ = [
    'ArrivalOutputs',
    'ArrivalTimeLateness',
    'BBImproverQueries',
    'BBSchedulerQueries',
    'BLTCounter',
    'BinaryTreeCounter',
    'BoostOutputs',
    'BoostQueries',
    'BoostQueryRecord',
    'BoundContributions',
    'BoundedOutputs',
    'BoundsOutputs',
    'BoundsRecommendation',
    'BudgetAccountant',
    'BudgetExceededError',
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
    'DeadLetter',
    'DynamicCountPerKey',
    'DynamicHistogramPerKey',
    'DynamicLinearQueriesPerKey',
    'ERMGQueries',
    'ERMLedgerRow',
    'ERMOutputs',
    'EventLevel',
    'GrowingDatabaseOutputs',
    'InfiniteTreeCounter',
    'InvalidParamsError',
    'InvalidRecordError',
    'KaryTreeCounter',
    'KeySelectionOutputs',
    'LinearQuery',
    'ModelRelease',
    'PerStepCounter',
    'PrivacyBudget',
    'PrivacyCost',
    'PrivateKeys',
    'QuantileRelease',
    'QueryAnswer',
    'Release',
    'SelectKeys',
    'SlidingWindowERM',
    'SmallDBGQueries',
    'SparseContinualCountPerKey',
    'SparseContinualHistogramPerKey',
    'UnsupportedMechanismError',
    'UserLevel',
    'WarmUpContinualCountPerKey',
    'WarmUpOutputs',
    'WindowedPMWG',
]
