"""Pure mechanisms (no Beam): continual counters, and the building blocks of the transforms."""

from beam_dp.mechanisms.base import ContinualMechanism
from beam_dp.mechanisms.base import InteractiveMechanism
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.binary_tree import TreeState
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeState
from beam_dp.mechanisms.keyed_release import KeyLayout
from beam_dp.mechanisms.keyed_release import KeyedReleaseSpec

__all__ = [
    'BinaryTreeCounter',
    'ContinualMechanism',
    'InfiniteTreeCounter',
    'InfiniteTreeState',
    'InteractiveMechanism',
    'KeyLayout',
    'KeyedReleaseSpec',
    'TreeState',
]
