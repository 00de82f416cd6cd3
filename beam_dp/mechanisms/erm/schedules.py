"""Side-effect-free release schedules of Watson et al. (spec 003): Alg 2 multi-resolution release
(+ Alg 6 sampling) and Alg 4 continual release (+ Alg 8 sampling, + App. C chained baseline).

Time is counted in *blocks* of b0 records (nominal; the driver pads or subsamples every block to
exactly n_max records, so block sizes are public). A schedule is a pure state machine:
``on_block(state, t)`` is called when the t-th block (0-based index t−1) has closed and returns
a ``ScheduleStep`` — the ``TrainJob``s to run now, in dependency order, with their privacy
calibration — and a new state. It never sees data; it only names block ranges and the release ids
of the centres (every centre is a previously released, noised model: trap T4).

Privacy calibration of a job on n = (hi − lo)·n_max records: the model is released with
L2-Laplace noise of scale b = Δ₂(n)/``eps_noise``, Δ₂(n) = 2L/(μn); each record of the range then
pays ``eps_cost`` (= eps_noise, or the amplified ln(1 + p(e^{eps_noise} − 1)) when the range is
Poisson-subsampled with probability ``sample_prob``). Constants (paper λ ≡ μ/2; honest Δ₂ is the
paper's halved, so the noise is half the paper's at equal ε):

* Alg 2 node (k, q) on 2^k·B: eps_noise = ε/2^{k+1} → b = 4L/(μBε) for every node; Alg 6:
  eps_noise = ε/2, p_k = (e^{ε/2^{k+1}} − 1)/(e^{ε/2} − 1), eps_cost = ε/2^{k+1}.
* Alg 4 base at t = 2^k·B: as the Alg 2 prefix node, with ε_base. Large update on i = 2^j blocks
  after the base: ε_u/2^{j+1} (Alg 3 constant scale 4L/(μ·b0·ε_u)); Alg 8: eps_noise ε_u/2,
  p_j, eps_cost ε_u/2^{j+1}. Small update on the last block: ε_u/2. Per record ≤ ε_base + ε_u.
"""

import dataclasses
import math
from typing import Optional, Tuple

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError

__all__ = [
    'ContinualReleaseSchedule',
    'ContinualState',
    'DyadicERMSchedule',
    'DyadicState',
    'ScheduleStep',
    'TrainJob',
    'amplified_cost',
    'sample_prob_for',
]


@dataclasses.dataclass(frozen=True)
class TrainJob:
    """One model to train and release. Blocks [lo, hi) (0-based, half-open); ``center`` is the
    release id of the model to regularise toward (None: from scratch at 0)."""
    job_id: str
    algo: str
    kind: str
    level: int
    lo: int
    hi: int
    center: Optional[str]
    eps_noise: float
    eps_cost: float
    component: str
    sample_prob: float = 1.0
    publish: bool = True

    @property
    def blocks(self) -> int:
        return self.hi - self.lo


@dataclasses.dataclass(frozen=True)
class ScheduleStep:
    """What closing one block triggers. ``keep_from``: the first block any future job may read
    (older raw blocks can be dropped). ``retire``: (component, before) ledger retirements.
    ``live``: release ids future jobs may use as centres (other models can be dropped)."""
    jobs: Tuple[TrainJob, ...] = ()
    keep_from: int = 0
    retire: Tuple[Tuple[str, int], ...] = ()
    live: Tuple[str, ...] = ()


def amplified_cost(eps0: float, p: float) -> float:
    """ln(1 + p(e^{ε0} − 1)): the cost of an ε0-DP mechanism on a Poisson-p subsample."""
    return math.log1p(p * math.expm1(eps0))


def sample_prob_for(eps0: float, target: float) -> float:
    """p with ln(1 + p(e^{ε0} − 1)) = target: (e^{target} − 1)/(e^{ε0} − 1) (spec 003 §6)."""
    return math.expm1(target) / math.expm1(eps0)


def _power_of_two(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def _v2(x: int) -> int:
    return (x & -x).bit_length() - 1


def _check_common(schedule) -> None:
    """blocks_per_base, epsilon (∞ = the non-private reference), max_level, sampling."""
    owner = type(schedule).__name__
    v.check_positive_int(owner, 'blocks_per_base', schedule.blocks_per_base)
    v.check_positive(owner, 'epsilon', schedule.epsilon, allow_inf=True)
    if schedule.max_level is not None:
        v.check_non_negative_int(owner, 'max_level', schedule.max_level)
    if schedule.sampling and math.isinf(schedule.epsilon):
        raise InvalidParamsError(f'{owner}: sampling needs a finite epsilon.')


def _sized_job(eps: float, sampling: bool, k: int, **fields) -> TrainJob:
    """A job on 2^k·(unit) records whose per-record cost is eps/2^{k+1}: constant scale (Alg 2,
    Alg 3) or, with sampling, size-aware scale and amplification (Alg 6, Alg 7/8)."""
    target = eps / 2.0 ** (k + 1)
    if not sampling or k == 0:
        return TrainJob(eps_noise=target, eps_cost=target, **fields)
    p = sample_prob_for(eps / 2.0, target)
    return TrainJob(eps_noise=eps / 2.0, eps_cost=amplified_cost(eps / 2.0, p),
                    sample_prob=p, **fields)


@dataclasses.dataclass(frozen=True)
class DyadicState:
    t: int = 0


@dataclasses.dataclass(frozen=True)
class DyadicERMSchedule:
    """Alg 2: at t = q·2^k·B (blocks; B = ``blocks_per_base`` blocks) train node (k, q) on the
    last 2^k·B blocks from scratch, for every k with 2^k·B | t (k ≤ ``max_level``). Nodes of a
    level are disjoint, so a record pays Σ_k ε/2^{k+1} < ε over an unbounded horizon.

    ``max_level`` caps the levels (bounded state: 2^K·B blocks retained); None keeps all
    history (state O(t), trap T9). ``sampling``: Alg 6.
    """
    blocks_per_base: int
    epsilon: float
    max_level: Optional[int] = None
    sampling: bool = False

    def __post_init__(self):
        _check_common(self)

    def init_state(self) -> DyadicState:
        return DyadicState()

    def on_block(self, state: DyadicState, t: int) -> Tuple[ScheduleStep, DyadicState]:
        if t != state.t + 1:
            raise InvalidParamsError(f'{type(self).__name__}: blocks must close in order; '
                                     f'expected {state.t + 1}, got {t}.')
        m = self.blocks_per_base
        jobs = []
        if t % m == 0:
            q = t // m
            top = _v2(q) if self.max_level is None else min(_v2(q), self.max_level)
            for k in range(top + 1):
                jobs.append(_sized_job(
                    self.epsilon, self.sampling, k, job_id=f'a2:k{k}:q{q >> k}', algo='alg2',
                    kind='node', level=k, lo=t - (m << k), hi=t, center=None,
                    component='nodes'))
        keep = 0
        if self.max_level is not None:
            span = m << self.max_level
            keep = (t // span) * span
        retire = (('nodes', keep),) if keep else ()
        return ScheduleStep(tuple(jobs), keep, retire, ()), DyadicState(t)


@dataclasses.dataclass(frozen=True)
class ContinualState:
    """t: blocks closed. t_g: block count at the last base (None before t = B). base / anchor /
    last: release ids of the base f_g, the centre of small updates f_c (latest large update or
    base), and the latest release (the chained baseline's centre)."""
    t: int = 0
    t_g: Optional[int] = None
    base: Optional[str] = None
    anchor: Optional[str] = None
    last: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class ContinualReleaseSchedule:
    """Alg 4 (cumulative continual release) with its Alg 2 prefix bases; Alg 8 with ``sampling``;
    App. C's chained basic release with ``variant='chain'``.

    Args:
      blocks_per_base: B/b0 (B must be a multiple of b0).
      epsilon: the total budget ε of the whole unbounded release (event-level).
      base_fraction: share of ε for the prefix bases (the rest pays the updates); default ½ (T6).
      variant: 'pseudocode' (small updates centred on the latest large update, the paper's
        pseudocode and Fig. 2) or 'chain' (each update centred on the previous release).
      max_level: None for prefix bases at every t = 2^k·B (all history kept, trap T9); K to stop
        doubling at 2^K·B: later bases are Alg 2's disjoint level-K nodes (the last 2^K·B
        blocks), so state stays ≤ 2^{K+1}·B blocks and the cost bound is unchanged.
      sampling: Alg 8 (large updates subsampled with size-aware noise; bases as Alg 6).
    """
    blocks_per_base: int
    epsilon: float
    base_fraction: float = 0.5
    variant: str = 'pseudocode'
    max_level: Optional[int] = None
    sampling: bool = False

    def __post_init__(self):
        _check_common(self)
        owner = type(self).__name__
        v.check_probability(owner, 'base_fraction', self.base_fraction, allow_zero=False)
        v.check_choice(owner, 'variant', self.variant, ('pseudocode', 'chain'))

    @property
    def epsilon_base(self) -> float:
        return self.epsilon * self.base_fraction

    @property
    def epsilon_update(self) -> float:
        return self.epsilon * (1.0 - self.base_fraction)

    def init_state(self) -> ContinualState:
        return ContinualState()

    def _base_level(self, t: int) -> Optional[int]:
        m = self.blocks_per_base
        if t % m:
            return None
        q = t // m
        if _power_of_two(q) and (self.max_level is None or _v2(q) <= self.max_level):
            return _v2(q)
        if self.max_level is not None and q % (1 << self.max_level) == 0:
            return self.max_level
        return None

    def on_block(self, state: ContinualState, t: int) -> Tuple[ScheduleStep, ContinualState]:
        if t != state.t + 1:
            raise InvalidParamsError(f'{type(self).__name__}: blocks must close in order; '
                                     f'expected {state.t + 1}, got {t}.')
        level = self._base_level(t)
        if level is not None:
            return self._base(state, t, level)
        if state.t_g is None:
            return ScheduleStep(), dataclasses.replace(state, t=t)
        i = t - state.t_g
        common = dict(algo='alg4', component='update')
        if self.variant == 'chain':
            job = TrainJob(job_id=f'a4:small:t{t}', kind='small', level=0, lo=t - 1, hi=t,
                           center=state.last, eps_noise=self.epsilon_update,
                           eps_cost=self.epsilon_update, **common)
            new = dataclasses.replace(state, t=t, last=job.job_id)
        elif _power_of_two(i):
            job = _sized_job(self.epsilon_update, self.sampling, _v2(i), job_id=f'a4:large:t{t}',
                             kind='large', level=_v2(i), lo=state.t_g, hi=t, center=state.base,
                             **common)
            new = dataclasses.replace(state, t=t, anchor=job.job_id, last=job.job_id)
        else:
            eps = self.epsilon_update / 2.0
            job = TrainJob(job_id=f'a4:small:t{t}', kind='small', level=0, lo=t - 1, hi=t,
                           center=state.anchor, eps_noise=eps, eps_cost=eps, **common)
            new = dataclasses.replace(state, t=t, last=job.job_id)
        return ScheduleStep((job,), self._keep_from(state.t_g, t), (),
                            self._live(new)), new

    def _base(self, state: ContinualState, t: int, level: int):
        span = self.blocks_per_base << level
        prefix = span == t
        job = _sized_job(self.epsilon_base, self.sampling, level,
                         job_id=f'a4:base:t{t}', algo='alg4', kind='base', level=level,
                         lo=0 if prefix else t - span, hi=t, center=None, component='base')
        new = ContinualState(t=t, t_g=t, base=job.job_id, anchor=job.job_id, last=job.job_id)
        retire = [('update', t)]
        if not prefix:
            retire.append(('base', t))        # later level-K nodes start at t
        return ScheduleStep((job,), self._keep_from(t, t), tuple(retire), self._live(new)), new

    def _keep_from(self, t_g: Optional[int], t: int) -> int:
        """Future jobs read the open segment (t_g, ·] and, uncapped, every prefix (0, ·]."""
        if self.max_level is None or t_g is None:
            return 0
        return 0 if t < (self.blocks_per_base << self.max_level) else t_g

    @staticmethod
    def _live(state: ContinualState) -> Tuple[str, ...]:
        return tuple(sorted({r for r in (state.base, state.anchor, state.last) if r}))
