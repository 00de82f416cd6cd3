"""The baselines of spec 003 §7, as schedules with the same interface as Alg 2/4/5.

1. ``IndependentBlocks`` (Fig. 4(d)): every block trained from scratch by Alg 1 and noised on its
   own; each record is used once and pays ε.
2. ``chained_basic`` (App. C): a base at every t = 2^k·B, then a chain of small updates, each
   centred on the previous release (Alg 4 without large updates).
3. Non-private references: any schedule with ε = ∞ (noise scale 0, labelled by the runner).
4. ``NaivePerRound`` (accountant only): the prefix ERM re-released after every block with a
   constant noise scale calibrated to one block; the release after t blocks costs ε/t, so a
   record of block s pays Σ_{t>s} ε/t ≈ ε·ln(T/s): unbounded. Its ledger has no budget (it is
   the negative example the per-block ledger exists to catch).
"""

import dataclasses
from typing import Optional, Tuple

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm.schedules import ContinualReleaseSchedule
from beam_dp.mechanisms.erm.schedules import ScheduleStep
from beam_dp.mechanisms.erm.schedules import TrainJob

__all__ = [
    'IndependentBlocks',
    'NaivePerRound',
    'chained_basic',
]


@dataclasses.dataclass(frozen=True)
class _Clock:
    t: int = 0


def _advance(owner: str, state: _Clock, t: int) -> None:
    if t != state.t + 1:
        raise InvalidParamsError(f'{owner}: blocks must close in order; expected '
                                 f'{state.t + 1}, got {t}.')


@dataclasses.dataclass(frozen=True)
class IndependentBlocks:
    """PSGD on each block alone with the whole ε (per-record cost ε, state: one block)."""
    epsilon: float

    def __post_init__(self):
        v.check_positive(type(self).__name__, 'epsilon', self.epsilon, allow_inf=True)

    def init_state(self) -> _Clock:
        return _Clock()

    def on_block(self, state: _Clock, t: int) -> Tuple[ScheduleStep, _Clock]:
        _advance(type(self).__name__, state, t)
        job = TrainJob(job_id=f'ind:t{t}', algo='independent', kind='block', level=0,
                       lo=t - 1, hi=t, center=None, eps_noise=self.epsilon,
                       eps_cost=self.epsilon, component='blocks')
        return ScheduleStep((job,), keep_from=t - 1, retire=(('blocks', t - 1),)), _Clock(t)


@dataclasses.dataclass(frozen=True)
class NaivePerRound:
    """Re-releases the prefix ERM after every block with eps_noise = ε/t (constant scale)."""
    epsilon: float
    ledger_budget: Optional[float] = None     # None: record the unbounded growth

    def __post_init__(self):
        v.check_positive(type(self).__name__, 'epsilon', self.epsilon)

    def init_state(self) -> _Clock:
        return _Clock()

    def on_block(self, state: _Clock, t: int) -> Tuple[ScheduleStep, _Clock]:
        _advance(type(self).__name__, state, t)
        eps = self.epsilon / t
        job = TrainJob(job_id=f'naive:t{t}', algo='naive', kind='prefix', level=0, lo=0, hi=t,
                       center=None, eps_noise=eps, eps_cost=eps, component='prefix')
        return ScheduleStep((job,), keep_from=0), _Clock(t)


def chained_basic(blocks_per_base: int, epsilon: float, base_fraction: float = 0.5,
                  max_level: Optional[int] = None) -> ContinualReleaseSchedule:
    """App. C's basic continual release: Alg 4 with every update centred on the previous one."""
    return ContinualReleaseSchedule(blocks_per_base=blocks_per_base, epsilon=epsilon,
                                    base_fraction=base_fraction, variant='chain',
                                    max_level=max_level)
