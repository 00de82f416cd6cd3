"""Pure mechanisms (no Beam): continual counters (binary, infinite, k-ary and negative-digit
k-ary trees, the unbounded negative-digit tree, BLT, per-step noise summed), private partitioning, dynamic release, key selection, and the growing-database mechanisms (PMW, PMWG, BBScheduler/BBImprover)."""

from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.balanced_tree import BalancedTreeState
from beam_dp.mechanisms.base import ContinualMechanism
from beam_dp.mechanisms.base import InteractiveMechanism
from beam_dp.mechanisms.bb_scheduler import BBAnswer
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import BBState
from beam_dp.mechanisms.bb_scheduler import EpochRelease
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.blt import BLTState
from beam_dp.mechanisms.banded import BandedCounter
from beam_dp.mechanisms.banded import BandedInverseCounter
from beam_dp.mechanisms.banded import BandedState
from beam_dp.mechanisms.black_boxes import CallableBlackBox
from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
from beam_dp.mechanisms.black_boxes import StaticMechanism
from beam_dp.mechanisms.black_boxes import StaticPMWBox
from beam_dp.mechanisms.binary_tree import TreeState
from beam_dp.mechanisms.contribution_histogram import ContributionHistogram
from beam_dp.mechanisms.contribution_histogram import NoisyHistogram
from beam_dp.mechanisms.dynamic import DynamicRelease
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import FullyDynamicState
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.dynamic import TwoStreamState
from beam_dp.mechanisms.dynamic import Update
from beam_dp.mechanisms.dynamic_node import NodeMechanism
from beam_dp.mechanisms.dynamic_node import NodeState
from beam_dp.mechanisms.dynamic_node import NoiseFreeDebug
from beam_dp.mechanisms.growing_svt import AboveThresholdGrowing
from beam_dp.mechanisms.growing_svt import GrowingSVTState
from beam_dp.mechanisms.growing_svt import NumericAboveThresholdGrowing
from beam_dp.mechanisms.growing_svt import NumericSparseGrowing
from beam_dp.mechanisms.growing_svt import SVTAnswer
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeState
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.kary_tree import KaryTreeState
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import GaussianThresholdSelection
from beam_dp.mechanisms.key_selection import KeySelectionState
from beam_dp.mechanisms.key_selection import LaplaceThresholdSelection
from beam_dp.mechanisms.key_selection import TruncatedGeometricSelection
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.hierarchical_histogram import HierarchicalHistogramCounter
from beam_dp.mechanisms.per_cell import PerCellCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.mechanisms.per_step import PerStepState
from beam_dp.mechanisms.pmw import PMWAnswer
from beam_dp.mechanisms.pmw import PMWState
from beam_dp.mechanisms.pmw import PrivateMultiplicativeWeights
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.mechanisms.pmwg import PMWGPublic
from beam_dp.mechanisms.pmwg import PMWGState
from beam_dp.mechanisms.sparse_counter import SparseCounter
from beam_dp.mechanisms.sparse_counter import SparseCounterRelease
from beam_dp.mechanisms.sparse_counter import SparseCounterState
from beam_dp.mechanisms.sparse_vector import SparseVector
from beam_dp.mechanisms.sparse_vector import SparseVectorState
from beam_dp.mechanisms.time_partition import PAPER_C_THETA
from beam_dp.mechanisms.time_partition import PartitionerState
from beam_dp.mechanisms.time_partition import SegmentClose
from beam_dp.mechanisms.time_partition import TimePartitioner
from beam_dp.mechanisms.unbounded_tree import UnboundedTreeCounter
from beam_dp.mechanisms.unbounded_tree import UnboundedTreeState
from beam_dp.mechanisms.window import WindowCounter
from beam_dp.mechanisms.window import WindowState

__all__ = [
    'AboveThresholdGrowing',
    'BBAnswer',
    'BBImprover',
    'BBScheduler',
    'BBState',
    'BLTCounter',
    'BLTState',
    'BalancedTreeCounter',
    'BalancedTreeState',
    'BandedCounter',
    'BandedInverseCounter',
    'BandedState',
    'BinaryTreeCounter',
    'CallableBlackBox',
    'ContinualKeySelection',
    'ContinualMechanism',
    'ContributionHistogram',
    'DynamicRelease',
    'EpochRelease',
    'FullyDynamicCounter',
    'FullyDynamicState',
    'GaussianThresholdSelection',
    'GrowingSVTState',
    'HierarchicalHistogramCounter',
    'InfiniteTreeCounter',
    'InfiniteTreeState',
    'InteractiveMechanism',
    'KaryTreeCounter',
    'KaryTreeState',
    'KeySelectionState',
    'LaplaceQueryVector',
    'LaplaceThresholdSelection',
    'NodeMechanism',
    'NodeState',
    'NoiseFreeDebug',
    'NoisyHistogram',
    'NumericAboveThresholdGrowing',
    'NumericSparseGrowing',
    'PAPER_C_THETA',
    'PMWAnswer',
    'PMWG',
    'PMWGPublic',
    'PMWGState',
    'PMWState',
    'Participation',
    'PartitionerState',
    'PerCellCounter',
    'PerStepCounter',
    'PerStepState',
    'PrivateMultiplicativeWeights',
    'SVTAnswer',
    'SegmentClose',
    'SparseCounter',
    'SparseCounterRelease',
    'SparseCounterState',
    'SparseVector',
    'SparseVectorState',
    'StaticMechanism',
    'StaticPMWBox',
    'TimePartitioner',
    'TreeState',
    'TruncatedGeometricSelection',
    'TwoStreamCounter',
    'TwoStreamState',
    'UnboundedTreeCounter',
    'UnboundedTreeState',
    'Update',
    'WindowCounter',
    'WindowState',
]
