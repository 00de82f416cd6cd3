"""Runs an ERM schedule over a stream of blocks: the continual-mechanism form of Alg 2/4/5 and
the baselines (``step(state, block, rng) -> (events, state)``; DESIGN.md contract).

Each closed block (already padded/subsampled to at most ``records_per_block`` = n_max records,
features clipped, by the driver) is appended to the retained raw blocks; the schedule names the
jobs; for each job, in order, the ledger is charged *before* anything is trained (a schedule that
mis-accounts raises ``BudgetExceededError`` and releases nothing), the job's blocks are gathered,
Poisson-subsampled if the job says so, and trained by ``PSGD.release`` on n_nominal =
blocks × n_max slots, regularised toward the *released* model named by ``job.center``. Raw blocks
older than the schedule's ``keep_from`` and models no future job can centre on are dropped, so
the state is bounded whenever the schedule is (Alg 5, capped Alg 2/4, the baselines).

Noise addresses: ``rng.derive('job', job_id)`` per job (inside it 'sample', 'sgd' and 'noise'),
so a replay with the same source releases bit-identical models.
"""

import dataclasses
import math
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import SWAP_ONE
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm.ledger import BlockLedger
from beam_dp.mechanisms.erm.psgd import PSGD
from beam_dp.mechanisms.erm.psgd import ReleasedModel
from beam_dp.mechanisms.erm.schedules import TrainJob
from beam_dp.noise import RandomSource
from beam_dp.noise import uniform_below

__all__ = [
    'ERMRelease',
    'ReleaseEvent',
    'ReleaseState',
    'check_block',
    'poisson_mask',
]

_P_BITS = 53


class ReleaseEvent(NamedTuple):
    """One trained, noised model. t: blocks closed when it was released. ledger_worst: the
    ledger's bound on any record's cost after charging it (public)."""
    t: int
    job: TrainJob
    model: ReleasedModel
    ledger_worst: float


@dataclasses.dataclass(frozen=True)
class ReleaseState:
    """t: blocks closed. blocks: retained (index, x, y). models: live (release id, model)."""
    t: int
    blocks: Tuple[Tuple[int, np.ndarray, np.ndarray], ...]
    models: Tuple[Tuple[str, ReleasedModel], ...]
    ledger: BlockLedger
    schedule: Any

    def retained_records(self) -> int:
        return sum(len(y) for _, _, y in self.blocks)


def check_block(owner: str, block, records_per_block: int, feature_dim: int,
                num_classes: Optional[int] = None):
    """(x, y) of a closed block as read-only float64 (n, d) and int64 (n,) arrays, n ≤ n_max.

    Raises InvalidParamsError on non-finite features or a label that is not an integer in
    [0, num_classes) (when given): the driver dead-letters such records before a block closes,
    so only a direct caller of the mechanism reaches this."""
    x, y = block
    x = np.asarray(x, dtype=np.float64).reshape(-1, feature_dim)
    labels = np.asarray(y).reshape(-1)
    if labels.dtype.kind not in 'biuf' or not np.all(np.isfinite(labels)):
        raise InvalidParamsError(f'{owner}: labels must be finite integers, got dtype '
                                 f'{labels.dtype}.')
    y = labels.astype(np.int64)
    if len(x) != len(y) or len(y) > records_per_block:
        raise InvalidParamsError(
            f'{owner}: a block holds at most {records_per_block} records with one label '
            f'each, got x {x.shape}, y {y.shape}.')
    if not np.all(np.isfinite(x)):
        raise InvalidParamsError(f'{owner}: features must be finite (a block has NaN or inf).')
    if labels.dtype.kind in 'bf' and not np.array_equal(y, labels):
        raise InvalidParamsError(f'{owner}: labels must be integers, got {labels.dtype}.')
    if num_classes is not None and len(y) and not (y.min() >= 0 and y.max() < num_classes):
        raise InvalidParamsError(f'{owner}: labels must lie in [0, {num_classes}), got '
                                 f'[{y.min()}, {y.max()}].')
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


def poisson_mask(rng: RandomSource, n: int, p: float) -> np.ndarray:
    """Exact Bernoulli(p') per record, p' = ⌊p·2^53⌋/2^53 ≤ p (a smaller p only lowers the
    amplified cost)."""
    threshold = math.floor(p * (1 << _P_BITS))
    return uniform_below(rng, 1 << _P_BITS, n) < threshold


@dataclasses.dataclass(frozen=True)
class ERMRelease:
    """A schedule driven over blocks of at most n_max records, trained by ``psgd``.

    Args:
      schedule: ``DyadicERMSchedule``, ``ContinualReleaseSchedule``, ``SlidingWindowChain`` or a
        baseline.
      psgd: the optimiser and loss (``PSGD``).
      records_per_block: n_max, the nominal size of every block (public).
      feature_dim: d of a clipped feature vector (with the bias column).
      trainer: what trains a job (default ``psgd``; tests pass a recording fake with the same
        ``release`` signature).
      update_psgd: the optimiser of the jobs *with* a centre (PBERM updates and fine-tunes);
        default ``psgd``. Same loss (so the same L), its own μ: a PBERM's noise scale is
        Δ₂(n)/eps_noise with Δ₂ = 2L/(μ_update·n), so the per-record cost the ledger charges is
        unchanged, while a larger μ_update keeps an update on one small block close to its
        (released) centre — signal and noise of the update both shrink like 1/μ_update.
    """
    schedule: Any
    psgd: PSGD
    records_per_block: int
    feature_dim: int
    trainer: Optional[Any] = None
    update_psgd: Optional[PSGD] = None

    def __post_init__(self):
        owner = type(self).__name__
        if not isinstance(self.psgd, PSGD):
            raise InvalidParamsError(f'{owner}: psgd must be a PSGD, got {self.psgd!r}.')
        v.check_positive_int(owner, 'records_per_block', self.records_per_block)
        v.check_positive_int(owner, 'feature_dim', self.feature_dim)
        if self.update_psgd is not None and not (
                isinstance(self.update_psgd, PSGD) and self.update_psgd.loss == self.psgd.loss
                and self.update_psgd.reproduce_paper == self.psgd.reproduce_paper):
            raise InvalidParamsError(f'{owner}: update_psgd must be a PSGD with the same loss '
                                     f'and reproduce_paper as psgd, got {self.update_psgd!r}.')
        if not hasattr(self.schedule, 'on_block'):
            raise InvalidParamsError(f'{owner}: schedule must have on_block, got '
                                     f'{self.schedule!r}.')

    @property
    def epsilon(self) -> float:
        return self.schedule.epsilon

    @property
    def ledger_budget(self) -> Optional[float]:
        return getattr(self.schedule, 'ledger_budget', self.schedule.epsilon)

    @property
    def loss(self):
        """The loss of every job (``psgd.loss``; what the driver validates labels against)."""
        return self.psgd.loss

    @property
    def n_params(self) -> int:
        return self.psgd.loss.n_params(self.feature_dim)

    def privacy_cost(self) -> PrivacyCost:
        """Event-level pure ε-DP of the whole unbounded release (Thm 1/4/7; ledger-checked)."""
        if self.ledger_budget is None or math.isinf(self.epsilon):
            raise InvalidParamsError(f'{type(self).__name__}: no finite privacy cost '
                                     f'(epsilon={self.epsilon}, naive or non-private).')
        # Declared swap_one: the guarantee is for replacing one example (blocks padded or
        # subsampled to a public n_max), so an accountant refuses to add it to add/remove costs
        # unless they are converted explicitly (PrivacyCost.as_swap_one).
        return PrivacyCost(epsilon=self.epsilon, relation=SWAP_ONE)

    def init_state(self) -> ReleaseState:
        return ReleaseState(t=0, blocks=(), models=(), ledger=BlockLedger(self.ledger_budget),
                            schedule=self.schedule.init_state())

    def _gather(self, blocks, lo: int, hi: int):
        chosen = [b for b in blocks if lo <= b[0] < hi]
        if len(chosen) != hi - lo:
            raise AssertionError(f'blocks [{lo}, {hi}) not retained')     # a schedule bug
        xs = [x for _, x, _ in chosen]
        ys = [y for _, _, y in chosen]
        return (np.concatenate(xs) if xs else np.zeros((0, self.feature_dim)),
                np.concatenate(ys) if ys else np.zeros(0, dtype=np.int64))

    def _check_block(self, block):
        return check_block(type(self).__name__, block, self.records_per_block,
                           self.feature_dim, self.psgd.loss.num_classes)

    def _trainer(self, center: Optional[ReleasedModel]):
        if self.trainer is not None:
            return self.trainer
        if center is not None and self.update_psgd is not None:
            return self.update_psgd
        return self.psgd

    def step(self, state: ReleaseState, block, rng: RandomSource
             ) -> Tuple[Tuple[ReleaseEvent, ...], ReleaseState]:
        """Closes the next block ``(x, y)`` and runs the jobs it triggers."""
        x, y = self._check_block(block)
        t = state.t + 1
        blocks = state.blocks + ((t - 1, x, y),)
        plan, sched = self.schedule.on_block(state.schedule, t)
        models = dict(state.models)
        ledger = state.ledger
        events = []
        for job in plan.jobs:
            ledger = ledger.charge(job.component, job.lo, job.hi, job.eps_cost)
            job_rng = rng.derive('job', job.job_id)
            xs, ys = self._gather(blocks, job.lo, job.hi)
            if job.sample_prob < 1.0:
                keep = poisson_mask(job_rng.derive('sample'), len(ys), job.sample_prob)
                xs, ys = xs[keep], ys[keep]
            center = None if job.center is None else models[job.center]
            model = self._trainer(center).release(
                xs, ys, job.blocks * self.records_per_block, job.eps_noise, job_rng, job.job_id,
                center=center)
            models[job.job_id] = model
            events.append(ReleaseEvent(t, job, model, ledger.worst()))
        for component, before in plan.retire:
            ledger = ledger.retire(component, before)
        kept = tuple(b for b in blocks if b[0] >= plan.keep_from)
        live = tuple((rid, models[rid]) for rid in plan.live)
        return tuple(events), ReleaseState(t, kept, live, ledger, sched)
