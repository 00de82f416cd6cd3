"""Continual and sliding-window private ERM (Watson, Ghosh, Rozemberczki, Sarkar 2022; spec 003).

Pure numpy: losses with honest constants, PSGD/PBERM output perturbation with L2-Laplace noise,
the release schedules (Alg 2/4/5, sampling variants, baselines) as side-effect-free state
machines, the per-block ledger, ``ERMRelease`` that runs a schedule over blocks, ``DPFTRL``
(DP-FTRL: one noisy prefix sum of grid-rounded gradients per block on a pure-ε continual
counter, ``ftrl``), and ``combine``: weighted averages of published models (post-processing).
Event-level privacy (one record), substitution neighbours (add/remove reduces to substitution
with a padding slot, since every block is padded to its public nominal size).
"""

from beam_dp.mechanisms.erm.baselines import IndependentBlocks
from beam_dp.mechanisms.erm.baselines import NaivePerRound
from beam_dp.mechanisms.erm.baselines import chained_basic
from beam_dp.mechanisms.erm.combine import RunningCombination
from beam_dp.mechanisms.erm.combine import combine_releases
from beam_dp.mechanisms.erm.combine import inverse_variance_weights
from beam_dp.mechanisms.erm.ftrl import DPFTRL
from beam_dp.mechanisms.erm.ftrl import FTRLState
from beam_dp.mechanisms.erm.ledger import BlockLedger
from beam_dp.mechanisms.erm.losses import BinaryLogistic
from beam_dp.mechanisms.erm.losses import HuberSVM
from beam_dp.mechanisms.erm.losses import Loss
from beam_dp.mechanisms.erm.losses import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm.losses import clip_features
from beam_dp.mechanisms.erm.pberm import pberm_release
from beam_dp.mechanisms.erm.psgd import NOT_DP_LABEL
from beam_dp.mechanisms.erm.psgd import PSGD
from beam_dp.mechanisms.erm.psgd import ReleasedModel
from beam_dp.mechanisms.erm.release import ERMRelease
from beam_dp.mechanisms.erm.release import ReleaseEvent
from beam_dp.mechanisms.erm.schedules import ContinualReleaseSchedule
from beam_dp.mechanisms.erm.schedules import DyadicERMSchedule
from beam_dp.mechanisms.erm.schedules import TrainJob
from beam_dp.mechanisms.erm.sliding import SlidingWindowChain

__all__ = [
    'BinaryLogistic',
    'BlockLedger',
    'ContinualReleaseSchedule',
    'DPFTRL',
    'DyadicERMSchedule',
    'ERMRelease',
    'FTRLState',
    'HuberSVM',
    'IndependentBlocks',
    'Loss',
    'NOT_DP_LABEL',
    'NaivePerRound',
    'PSGD',
    'ReleaseEvent',
    'ReleasedModel',
    'RunningCombination',
    'SlidingWindowChain',
    'SoftmaxCrossEntropy',
    'TrainJob',
    'chained_basic',
    'clip_features',
    'combine_releases',
    'inverse_variance_weights',
    'pberm_release',
]
