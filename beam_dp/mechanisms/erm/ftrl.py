"""DP-FTRL on a continual counter: one noisy prefix sum of grid-rounded gradients per block
(Kairouz, McMahan, Song, Thakkar, Thakurta, Xu 2021), on beam_dp's own pure-ε counters.

The streaming alternative to Watson et al.'s Alg 4 (``ERMRelease``), with the same block shape:
the driver closes event-time blocks in index order, each padded or uniformly subsampled to
exactly n_max nominal records (padding slots have zero gradient), and ``step`` releases one
model per block. For block b (0-based, t = b + 1 blocks closed):

1. every record's features are clipped to ‖x‖₂ ≤ C (``clip_features``, the loss's public clip
   norm, as on every ERM path);
2. its gradient of the loss's data term is taken at the *current released model* w_b (public:
   the previous release, 0 before the first), multiplied by 2^k (``grid_bits`` = k), rounded to
   the nearest integer per coordinate and the block's integer vectors summed exactly
   (``grid_gradient_sum``);
3. that int64 vector is ONE step of the counter, which returns the noisy prefix sum S_t of all
   blocks' vectors so far (exact integers plus discrete noise);
4. the released model is the FTRL solution of the linearised, strongly convex objective

       w_{b+1} = argmin_w ⟨S_t/2^k, w⟩ + ((μ·N_t + 1/η)/2)·‖w‖² = −(S_t/2^k) / (μ·N_t + 1/η)

   (``ftrl_weights``), N_t = t·n_max the nominal records so far (public), μ ≥ 0 the strong
   convexity per record of the regulariser, η > 0 the learning rate (1/η the base
   regularisation). w is post-processing of the counter's output and of public constants, so
   the whole sequence of models has exactly the counter's guarantee.

Privacy unit and neighbours: event level, one record; substitution of one record (``swap_one``,
as the other ERM mechanisms declare; add/remove reduces to substitution with a padding slot).
One record enters one block and so one counter step. Its integer vector has ‖·‖₁ ≤
L₁·2^k + D/2 (L₁ = ``loss.lipschitz_l1(d)`` bounds ‖∇ℓ‖₁ for clipped features; each of the
D = n_params coordinates moves by ≤ ½ in rounding), so a substitution changes that step by at
most ``step_l1_sensitivity`` = 2·(L₁·2^k + D/2) in L1 and no other step's input (later gradients
are taken at released models: post-processing of an ε-DP output; the counters' guarantees hold
for adaptively chosen inputs). The counter, calibrated to that L1 with ε, makes every record's
total cost ≤ ε over the whole (unbounded, for an infinite-horizon counter) release. The ledger
charges ε to block b when block b enters the counter — its only charge — and checks the bound.

Counter: ``counter_selection.select_counter`` for the known ``horizon`` (number of blocks =
releases; per-step noise summed for T ≤ 34, the balanced tree beyond) unless an explicit pure-ε
``counter`` is given (its L1 sensitivity must cover the step's, its dimension be D, its cost
≤ ε, and a known-horizon counter's horizon ≥ ``horizon``). An unbounded horizon (None) is
refused unless the counter runs forever (``InfiniteTreeCounter``, ``PerStepCounter``).
The counter's noise scale is checked at construction (``check_noise_scale``).

Integer range: a coordinate of one record's rounded gradient is at most L·2^k + ½ in absolute
value (|∂ℓ/∂w_j| ≤ ‖∇ℓ‖₂ ≤ L = ``loss.lipschitz``, with a 1e-9 relative slack for clipping), so
a block's sum is at most B = n_max·(L·2^k·(1 + 1e-9) + ½) and a prefix of T blocks at most T·B
(``prefix_bound``). Construction refuses (naming grid_bits, records_per_block and horizon) unless
T·B ≤ 2^62 — T = ``horizon``, or ``MAX_UNBOUNDED_BLOCKS`` = 2^32 for an unbounded horizon — so
the block sums and the int64 running totals of the per-step and tree counters are exact, with
2^62 of headroom for their noise (each draw's scale ≤ 2^40). ``grid_gradient_sum`` itself sums
in int64 only when its rows' bound proves the sum exact, in Python ints beyond.

Exact vs floating point: the integer sums and the counter's noise are exact; gradients, their
rounding and the model are float64 post-processing of public values and of the data (the
sensitivity bound holds for the rounded integers whatever the float error of a gradient, up to
the 1-ulp slack of clipping). Noise addresses: ``rng.derive('dp_ftrl', b)`` per block (no other
ERM path uses the label). ``ReleasedModel.noise_scale`` here is the standard deviation of one
weight coordinate's noise, √Var(S_t)/2^k/(μN_t + 1/η) (not an L2-Laplace b).
"""

import dataclasses
import math
from typing import Any, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import SWAP_ONE
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.mechanisms.counter_selection import select_counter
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm.ledger import BlockLedger
from beam_dp.mechanisms.erm.losses import Loss
from beam_dp.mechanisms.erm.losses import clip_features
from beam_dp.mechanisms.erm.psgd import ReleasedModel
from beam_dp.mechanisms.erm.release import ReleaseEvent
from beam_dp.mechanisms.erm.release import check_block
from beam_dp.mechanisms.erm.schedules import TrainJob
from beam_dp.noise import RandomSource
from beam_dp.noise import check_noise_scale

__all__ = [
    'DPFTRL',
    'FTRLState',
    'check_grid_bits',
    'ftrl_weights',
    'grid_gradient_sum',
    'prefix_bound',
    'step_l1_sensitivity',
]

COMPONENT = 'dp_ftrl'
_MAX_GRID_BITS = 30
MAX_UNBOUNDED_BLOCKS = 1 << 32     # the prefix-bound horizon of an unbounded release
_SAFE_TOTAL = 1 << 62              # every |prefix sum| of the data stays below (noise headroom)
_CLIP_SLACK = 1e-9


def check_grid_bits(owner: str, grid_bits) -> int:
    """Raises InvalidParamsError unless ``grid_bits`` is an int in [0, 30]."""
    if (isinstance(grid_bits, bool) or not isinstance(grid_bits, int)
            or not 0 <= grid_bits <= _MAX_GRID_BITS):
        raise InvalidParamsError(f'{owner}: grid_bits must be an int in [0, {_MAX_GRID_BITS}], '
                                 f'got {grid_bits!r}.')
    return grid_bits


def grid_gradient_sum(loss: Loss, w: np.ndarray, x: np.ndarray, y: np.ndarray,
                      grid_bits: int) -> np.ndarray:
    """Σ_i rint(2^k·∇ℓ(w; x_i, y_i)) exactly (zeros for an empty block): int64 when n·max|row|
    ≤ 2^62 proves the sum exact (always, for a ``DPFTRL``'s clipped blocks), else Python ints.
    Raises InvalidParamsError on a non-finite gradient."""
    dim = len(w)
    if len(y) == 0:
        return np.zeros(dim, dtype=np.int64)
    scaled = np.rint(loss.per_example_grads(w, x, y) * (1 << grid_bits))
    if not np.all(np.isfinite(scaled)):
        raise InvalidParamsError('grid_gradient_sum: a gradient is not finite.')
    if len(y) * float(np.abs(scaled).max()) <= _SAFE_TOTAL:
        return scaled.astype(np.int64).sum(axis=0)
    return np.array([int(v) for v in scaled.ravel()], dtype=object).reshape(scaled.shape).sum(
        axis=0)


def prefix_bound(loss: Loss, records_per_block: int, grid_bits: int, blocks: int) -> float:
    """An upper bound on |any coordinate of the exact sum of ``blocks`` block sums| of clipped
    records: blocks·n_max·(L·2^k·(1 + 1e-9) + ½)."""
    per_record = loss.lipschitz * (1 << grid_bits) * (1 + _CLIP_SLACK) + 0.5
    return float(blocks) * records_per_block * per_record


def ftrl_weights(total, grid_bits: int, mu: float, n_nominal: int, inv_eta: float) -> np.ndarray:
    """w = −(S/2^k)/(μ·N + 1/η): the FTRL model of the (noisy) prefix sum S."""
    return -np.asarray(total, dtype=np.float64) / (1 << grid_bits) / (mu * n_nominal + inv_eta)


def step_l1_sensitivity(loss: Loss, feature_dim: int, grid_bits: int) -> float:
    """2·(L₁·2^k + D/2): one record's substitution changes one block's integer sum by at most
    this in L1 (L₁ = ``loss.lipschitz_l1(feature_dim)``, D = n_params)."""
    return 2.0 * (loss.lipschitz_l1(feature_dim) * (1 << grid_bits)
                  + loss.n_params(feature_dim) / 2.0)


def _noises(counter):
    """The discrete noises a counter draws (what ``check_noise_scale`` bounds)."""
    out = []
    for name in ('step_noise', 'node_noise', 'level_noise', 'block_noise'):
        value = getattr(counter, name, None)
        value = value() if callable(value) else value
        if value is not None:
            out.extend(value if isinstance(value, tuple) else (value,))
    return out


@dataclasses.dataclass(frozen=True)
class FTRLState:
    """t: blocks closed. counter: the counter's state. weights: the last released model
    (read-only; zeros before the first). ledger: the per-block ledger."""
    t: int
    counter: Any
    weights: np.ndarray
    ledger: BlockLedger

    def retained_records(self) -> int:
        return 0                       # no raw record outlives its block


@dataclasses.dataclass(frozen=True)
class DPFTRL:
    """DP-FTRL over blocks of at most n_max records (see the module docstring).

    Args:
      loss: a ``Loss`` (clip norm C, L₁ bound ``lipschitz_l1``).
      records_per_block: n_max, the public nominal size of every block.
      feature_dim: d of a feature vector with the bias column.
      epsilon: ε of the whole release (pure ε-DP; finite).
      horizon: the number of blocks that will be released (known from a public end), or None
        (unbounded: needs an infinite-horizon ``counter``).
      mu: μ ≥ 0, strong convexity per nominal record (default 0.002, benchmarks/erm's digits).
      learning_rate: η > 0 (1/η is the base regularisation; default 0.5).
      grid_bits: k, the gradient grid 2^-k (default 8).
      counter: None (``select_counter`` for the horizon) or a pure-ε counter instance.

    Raises:
      InvalidParamsError: on a bad parameter, named.
    """
    loss: Loss
    records_per_block: int
    feature_dim: int
    epsilon: float
    horizon: Optional[int] = None
    mu: float = 0.002
    learning_rate: float = 0.5
    grid_bits: int = 8
    counter: Optional[Any] = None

    def __post_init__(self):
        owner = type(self).__name__
        if not isinstance(self.loss, Loss):
            raise InvalidParamsError(f'{owner}: loss must be a Loss, got {self.loss!r}.')
        v.check_positive_int(owner, 'records_per_block', self.records_per_block)
        v.check_positive_int(owner, 'feature_dim', self.feature_dim)
        v.check_positive(owner, 'epsilon', self.epsilon)
        if not math.isfinite(self.epsilon):
            raise InvalidParamsError(f'{owner}: epsilon must be finite, got {self.epsilon!r}.')
        if self.horizon is not None:
            v.check_positive_int(owner, 'horizon', self.horizon)
        if not (isinstance(self.mu, (int, float)) and math.isfinite(self.mu) and self.mu >= 0):
            raise InvalidParamsError(f'{owner}: mu must be a finite number ≥ 0, got {self.mu!r}.')
        v.check_positive(owner, 'learning_rate', self.learning_rate)
        check_grid_bits(owner, self.grid_bits)
        self._check_integer_range(owner)
        if self.counter is None:
            if self.horizon is None:
                raise InvalidParamsError(
                    f'{owner}: horizon is None (unbounded) and no counter was given: '
                    f'select_counter needs the known number of blocks; pass horizon= or an '
                    f'infinite-horizon counter (InfiniteTreeCounter, PerStepCounter).')
            object.__setattr__(self, 'counter', select_counter(
                PrivacyBudget(epsilon=self.epsilon), self.horizon, self.n_params,
                self.l1_sensitivity))
        self._check_counter(owner)

    def _check_integer_range(self, owner: str) -> None:
        blocks = MAX_UNBOUNDED_BLOCKS if self.horizon is None else self.horizon
        bound = prefix_bound(self.loss, self.records_per_block, self.grid_bits, blocks)
        if not bound <= _SAFE_TOTAL:
            raise InvalidParamsError(
                f'{owner}: grid_bits={self.grid_bits}, records_per_block='
                f'{self.records_per_block} and horizon={self.horizon} (clip_norm '
                f'{self.loss.clip_norm:g}) let a prefix sum of grid units reach {bound:.4g} '
                f'(horizon·records_per_block·(L·2^grid_bits + 1/2), {blocks} blocks'
                f'{" for an unbounded horizon" if self.horizon is None else ""}) > 2^62, past '
                f'exact int64; lower grid_bits, records_per_block or horizon.')

    def _check_counter(self, owner: str) -> None:
        counter = self.counter
        if not all(hasattr(counter, a) for a in ('init_state', 'step', 'privacy_cost')):
            raise InvalidParamsError(f'{owner}: counter must be a continual counter, got '
                                     f'{counter!r}.')
        cost = counter.privacy_cost()
        if cost.is_zcdp or cost.delta or cost.epsilon > self.epsilon * (1 + 1e-9):
            raise InvalidParamsError(f'{owner}: counter must be pure ε-DP at most epsilon='
                                     f'{self.epsilon:g}, costs {cost}.')
        if getattr(counter, 'dimension', None) != self.n_params:
            raise InvalidParamsError(f'{owner}: counter dimension must be n_params = '
                                     f'{self.n_params}, got {getattr(counter, "dimension", None)}.')
        if counter.l1_sensitivity < self.l1_sensitivity * (1 - 1e-12):
            raise InvalidParamsError(
                f'{owner}: counter l1_sensitivity {counter.l1_sensitivity:g} is below one '
                f'record\'s substitution bound 2·(L₁·2^k + D/2) = {self.l1_sensitivity:g}.')
        counter_horizon = getattr(counter, 'horizon', None)
        if counter_horizon is not None and (self.horizon is None
                                            or counter_horizon < self.horizon):
            raise InvalidParamsError(
                f'{owner}: horizon={self.horizon} but the counter stops after '
                f'{counter_horizon} steps; an unbounded horizon needs an infinite-horizon '
                f'counter (InfiniteTreeCounter, PerStepCounter).')
        for noise in _noises(counter):
            check_noise_scale(owner, noise.param, 'raise epsilon or lower grid_bits, clip_norm '
                              'or the number of features', noise.kind)

    @property
    def n_params(self) -> int:
        return self.loss.n_params(self.feature_dim)

    @property
    def l1_sensitivity(self) -> float:
        return step_l1_sensitivity(self.loss, self.feature_dim, self.grid_bits)

    @property
    def ledger_budget(self) -> float:
        return self.epsilon

    def privacy_cost(self) -> PrivacyCost:
        """Event-level pure ε-DP of the whole release, substitution neighbours (``swap_one``,
        like ``ERMRelease``)."""
        return PrivacyCost(epsilon=self.counter.privacy_cost().epsilon, relation=SWAP_ONE)

    def init_state(self) -> FTRLState:
        weights = np.zeros(self.n_params)
        weights.setflags(write=False)
        return FTRLState(0, self.counter.init_state(), weights, BlockLedger(self.epsilon))

    def noise_std(self, t: int) -> float:
        """Std of one weight coordinate's noise in the release after t blocks (public)."""
        variance = self.counter.release_variance(t)
        return math.sqrt(variance) / (1 << self.grid_bits) / (
            self.mu * t * self.records_per_block + 1.0 / self.learning_rate)

    def release_block(self, state: FTRLState, x, y, block_rng: RandomSource
                      ) -> Tuple[ReleaseEvent, FTRLState]:
        """Block t = state.t: its counter step drawn from ``block_rng`` (no derivation; ``step``
        passes ``rng.derive('dp_ftrl', b)``). Returns the release event and the new state."""
        x, y = check_block(type(self).__name__, (x, y), self.records_per_block,
                           self.feature_dim, self.loss.num_classes)
        b, t = state.t, state.t + 1
        # Earlier blocks are final (their one charge kept as the retired maximum): bounded state.
        ledger = state.ledger.retire(COMPONENT, b).charge(COMPONENT, b, t, self.epsilon)
        if len(y):
            x = clip_features(x, self.loss.clip_norm)
        units = grid_gradient_sum(self.loss, state.weights, x, y, self.grid_bits)
        total, counter_state = self.counter.step(state.counter, units, block_rng)
        n_nominal = t * self.records_per_block
        weights = ftrl_weights(total, self.grid_bits, self.mu, n_nominal,
                               1.0 / self.learning_rate)
        weights.setflags(write=False)
        job = TrainJob(job_id=f'ftrl:t{b}', algo='dp_ftrl', kind='prefix', level=0, lo=b,
                       hi=t, center=None, eps_noise=self.epsilon, eps_cost=self.epsilon,
                       component=COMPONENT)
        model = ReleasedModel(job.job_id, weights, self.noise_std(t), self.epsilon, n_nominal)
        event = ReleaseEvent(t, job, model, ledger.worst())
        return event, FTRLState(t, counter_state, weights, ledger)

    def step(self, state: FTRLState, block, rng: RandomSource
             ) -> Tuple[Tuple[ReleaseEvent, ...], FTRLState]:
        """Closes the next block ``(x, y)`` (the ``ERMRelease.step`` contract: one event)."""
        x, y = block
        event, new = self.release_block(state, x, y, rng.derive(COMPONENT, state.t))
        return (event,), new
