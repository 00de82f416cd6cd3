"""Alg 5, PSWERM: the private sliding-window chain (spec 003 §5), as a pure schedule.

Window w = (2^k − 1)·w0 records = W = 2^k − 1 blocks of w0. Buckets of 2^i blocks, one per level
i = 0..k−1. Level k−1 (the *base*, 2^{k−1} blocks) is trained from scratch (Alg 1, cost ε/3);
level i < k−1 is fine-tuned by PBERM toward the released model of level i+1 (cost ε/(6·2^i),
constant scale 12L/(λ·w0·ε) in the paper's λ). The released model is the chain end f^{(0)}.

Update rule (§5.2, reproduces Example 1 exactly): s counts steps since the last refresh; the
left (old) side holds 2^{k−1}−1−s blocks split oldest-smallest, the right (new) side s blocks as
a binary counter; their sizes sum to 2^{k−1}−1, so every level 0..k−2 is present exactly once.
On each new block, i = trailing_ones(s):

* i = k−1, refresh: the base becomes the newest 2^{k−1} blocks, the old base minus its oldest
  block is re-split into left levels 0..k−2, every level is retrained, s = 0;
* else the left bucket of level i loses its oldest block and is re-split into left levels
  0..i−1; right levels 0..i−1 and the new block merge into the right bucket of level i; levels
  i..0 are retrained top-down; s += 1.

So 1 + trailing_ones(s) models per step. A block's cost: rising right merges ≤ ε/3, one base
ε/3, falling left splits ≤ ε/3: ≤ ε over an unbounded horizon (Thm 7). State: the W blocks of
the window (the driver adds the open block: w + w0 records) and k bucket descriptors.

Sampling (App. B, [FIX]): fine-tunes at level j use eps_noise ε/6 (size-aware scale
12L/(λ·2^j·w0·ε)) on a Poisson subsample with p_j = (e^{ε/(6·2^j)} − 1)/(e^{ε/6} − 1).
"""

import dataclasses
import math
from typing import Optional, Tuple

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm.schedules import ScheduleStep
from beam_dp.mechanisms.erm.schedules import TrainJob
from beam_dp.mechanisms.erm.schedules import amplified_cost
from beam_dp.mechanisms.erm.schedules import sample_prob_for

__all__ = [
    'RELEASE_POLICIES',
    'SlidingState',
    'SlidingWindowChain',
    'trailing_ones',
]

RELEASE_POLICIES = ('chain_end', 'newest_bucket', 'all_levels')


def trailing_ones(s: int) -> int:
    return (~s & (s + 1)).bit_length() - 1


@dataclasses.dataclass(frozen=True)
class SlidingState:
    """t: blocks closed. s: steps since the last refresh. buckets[i]: (lo, hi) block range of
    level i. models[i]: release id of level i's current model."""
    t: int = 0
    s: int = 0
    buckets: Tuple[Tuple[int, int], ...] = ()
    models: Tuple[str, ...] = ()


def _left_split(start: int, levels: int):
    """Blocks [start, start + 2^levels − 1) split oldest-smallest into levels 0..levels−1."""
    return [(start + (1 << i) - 1, start + (1 << (i + 1)) - 1) for i in range(levels)]


@dataclasses.dataclass(frozen=True)
class SlidingWindowChain:
    """Alg 5 over blocks of w0 records: window W = 2^k − 1 blocks (k ≥ 2).

    Args:
      levels: k (the experiments' w = 7·w0 is k = 3).
      epsilon: the total ε per record of the whole unbounded release.
      release_policy: 'chain_end' (paper: f^{(0)}), 'newest_bucket' (the retrained model whose
        bucket holds the newest block) or 'all_levels' (every retrained model; free
        post-processing, all are noised and accounted).
      sampling: App. B fine-tune sampling.
    """
    levels: int
    epsilon: float
    release_policy: str = 'chain_end'
    sampling: bool = False

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive_int(owner, 'levels', self.levels)
        if self.levels < 2:
            raise InvalidParamsError(f'{owner}: levels must be at least 2, got {self.levels}.')
        v.check_positive(owner, 'epsilon', self.epsilon, allow_inf=True)
        v.check_choice(owner, 'release_policy', self.release_policy, RELEASE_POLICIES)
        if self.sampling and math.isinf(self.epsilon):
            raise InvalidParamsError(f'{owner}: sampling needs a finite epsilon.')

    @property
    def window_blocks(self) -> int:
        return (1 << self.levels) - 1

    def init_state(self) -> SlidingState:
        return SlidingState()

    def _job(self, t: int, level: int, bucket, center: Optional[str]) -> TrainJob:
        lo, hi = bucket
        common = dict(job_id=f'a5:l{level}:t{t}', algo='alg5', level=level, lo=lo, hi=hi,
                      center=center, component='window', publish=False)
        if level == self.levels - 1:
            eps = self.epsilon / 3.0
            return TrainJob(kind='base', eps_noise=eps, eps_cost=eps, **common)
        target = self.epsilon / (6.0 * (1 << level))
        if not self.sampling or level == 0:
            return TrainJob(kind='fine_tune', eps_noise=target, eps_cost=target, **common)
        p = sample_prob_for(self.epsilon / 6.0, target)
        return TrainJob(kind='fine_tune', eps_noise=self.epsilon / 6.0,
                        eps_cost=amplified_cost(self.epsilon / 6.0, p), sample_prob=p, **common)

    def on_block(self, state: SlidingState, t: int) -> Tuple[ScheduleStep, SlidingState]:
        if t != state.t + 1:
            raise InvalidParamsError(f'{type(self).__name__}: blocks must close in order; '
                                     f'expected {state.t + 1}, got {t}.')
        k, big = self.levels, 1 << (self.levels - 1)
        window = self.window_blocks
        if t < window:
            return ScheduleStep(keep_from=0), dataclasses.replace(state, t=t)
        if t == window or trailing_ones(state.s) == k - 1:
            # Initial fill or refresh: new base = newest 2^{k-1} blocks; the older 2^{k-1} − 1
            # blocks of the window (the old base minus its oldest) split oldest-smallest.
            buckets = _left_split(t - window, k - 1) + [(t - big, t)]
            top, s = k - 1, 0
        else:
            i = trailing_ones(state.s)
            buckets = list(state.buckets)
            lo, hi = buckets[i]
            if hi - lo != 1 << i:
                raise AssertionError('sliding window invariant broken')   # never
            buckets[:i] = _left_split(lo + 1, i)
            buckets[i] = (t - (1 << i), t)
            top, s = i, state.s + 1
        models = list(state.models) if state.models else [''] * k
        jobs = []
        for level in range(top, -1, -1):
            center = None if level == k - 1 else models[level + 1]
            job = self._job(t, level, buckets[level], center)
            models[level] = job.job_id
            jobs.append(job)
        jobs = self._publish(jobs, t)
        new = SlidingState(t=t, s=s, buckets=tuple(buckets), models=tuple(models))
        self._check(new)
        return (ScheduleStep(tuple(jobs), keep_from=t - window, retire=(('window', t - window),),
                             live=tuple(sorted(models))), new)

    def _publish(self, jobs, t: int):
        if self.release_policy == 'all_levels':
            chosen = set(range(len(jobs)))
        elif self.release_policy == 'chain_end':
            chosen = {len(jobs) - 1}
        else:
            chosen = {n for n, j in enumerate(jobs) if j.lo <= t - 1 < j.hi}
        return [dataclasses.replace(j, publish=n in chosen) for n, j in enumerate(jobs)]

    def _check(self, state: SlidingState) -> None:
        """Buckets tile the window exactly, level i holds 2^i blocks (a cheap invariant)."""
        spans = sorted(state.buckets)
        lo = state.t - self.window_blocks
        for a, b in spans:
            if a != lo:
                raise AssertionError(f'sliding window buckets do not tile: {spans}')   # never
            lo = b
        if lo != state.t or any(b - a != 1 << i for i, (a, b) in enumerate(state.buckets)):
            raise AssertionError(f'sliding window buckets malformed: {state.buckets}')  # never
