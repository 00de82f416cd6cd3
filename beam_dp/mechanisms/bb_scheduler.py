"""BBScheduler and BBImprover: rerun a static ε-DP black box as a database grows (Cummings,
Krehbiel, Lai, Tantipongpipat, "Differential Privacy for Growing Databases", NeurIPS 2018,
Algorithms 1-2, Theorems 10-13; docs/growing_databases.md).

A black box (``StaticMechanism``, ``beam_dp.mechanisms.black_boxes``) is pure ε-DP on a database
snapshot and returns an *epoch object* that answers every query of its epoch by post-processing:
``LaplaceQueryVector`` (Lap(k/(εt)) on k fixed linear queries), ``StaticPMWBox`` (static PMW run
on the snapshot) or ``CallableBlackBox`` (any user function that promises pure ε-DP).

BBScheduler runs the box once per epoch, at sizes t_i = ⌈(1+γ)^i n⌉, with
ε_i = γ²(i+1)ε/(1+γ)^{i+2} (δ = 0; Σ ε_i = ε exactly) or
ε_i = γ^{1.5}(i+1)ε/((1+γ)^{i+1.5}·3√ln(1/δ)) (δ > 0; CDP-composed ≤ ε), β_i = (β/(1+β))^{i+1}
(Σ β_i = β). BBImprover runs it at every size t (lazily: at the first query at a new t) with
ε_t = √c ε/(3√ln(1/δ) t^{1/2+c}), β_t = β/(2t²). Both schedules read only public quantities.
"""

import dataclasses
import math
from typing import Any, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms.black_boxes import check_black_box
from beam_dp.mechanisms.growing_svt import add_records
from beam_dp.noise import RandomSource
from beam_dp.queries import LinearQuery

__all__ = [
    'BBAnswer',
    'BBImprover',
    'BBScheduler',
    'BBState',
    'EpochRelease',
    'bbimprover_alpha',
    'bbimprover_epsilon',
    'bbscheduler_alpha',
    'bbscheduler_epsilon',
    'bbscheduler_gamma',
    'bbscheduler_ln_inv_beta',
    'bbscheduler_schedule',
    'bbscheduler_start',
    'cdp_epsilon',
]

#: Schedules are calibrated with ε·(1 − 1e-9) so float partial sums never exceed ε.
SAFETY_MARGIN = 1e-9


# Schedules (pure functions of public parameters) -----------------------------------------------

def bbscheduler_gamma(epsilon: float, delta: float, beta: float, n: int, p: float,
                      g: float) -> float:
    """γ = g^{1/(2p+1)} Z^{p/(2p+1)}, Z = ln((1+β)/β)/(εn) (δ = 0), or
    γ = g^{1/(1.5p+1)} Z^{p/(1.5p+1)}, Z = 3√ln(1/δ)·ln((1+β)/β)/(εn) (δ > 0).

    Spec E2: Alg 1 prints ln(1/β); the proof's ln((1+β)/β) makes α_i epoch-independent.
    Spec E3: Alg 1 omits 3√ln(1/δ) in Z for δ > 0; the proof and Theorem 10 use it.
    """
    lb = math.log((1 + beta) / beta)
    if delta == 0:
        z = lb / (epsilon * n)
        return g ** (1 / (2 * p + 1)) * z ** (p / (2 * p + 1))
    z = 3 * math.sqrt(math.log(1 / delta)) * lb / (epsilon * n)
    return g ** (1 / (1.5 * p + 1)) * z ** (p / (1.5 * p + 1))


def bbscheduler_start(n: int, gamma: float, i: int) -> int:
    """t_i = ⌈(1+γ)^i n⌉ with a relative tolerance (1.1²·1000 = 1210.0000000000002 in
    floats must give 1210, not 1211); ``math.inf``-safe for huge i (returns a huge int)."""
    try:
        x = n * (1 + gamma) ** i
    except OverflowError:
        return 1 << 200
    if not math.isfinite(x):
        return 1 << 200
    return max(n, math.ceil(x * (1 - 1e-12)))


def bbscheduler_schedule(n: int, gamma: float, num_epochs: int) -> Tuple[int, ...]:
    """t_0, ..., t_{num_epochs-1}, made non-decreasing."""
    starts, last = [], n
    for i in range(num_epochs):
        last = max(last, bbscheduler_start(n, gamma, i))
        starts.append(last)
    return tuple(starts)


def bbscheduler_epsilon(i: int, epsilon: float, gamma: float, delta: float = 0.0) -> float:
    """ε_i, computed in log space (no underflow for large i).

    Spec E6: the 004 seed renders the δ > 0 numerator γ^{1.5(i+1)}; the proof's sum needs
    γ^{1.5}·(i+1).
    """
    if delta == 0:
        log_e = 2 * math.log(gamma) + math.log(i + 1) - (i + 2) * math.log1p(gamma)
        return epsilon * math.exp(log_e)
    log_e = (1.5 * math.log(gamma) + math.log(i + 1) - (i + 1.5) * math.log1p(gamma)
             - math.log(3 * math.sqrt(math.log(1 / delta))))
    return epsilon * math.exp(log_e)


def bbscheduler_ln_inv_beta(i: int, beta: float) -> float:
    """ln(1/β_i) = (i+1)·ln((1+β)/β), never underflowing. Σ β_i = β exactly."""
    return (i + 1) * math.log((1 + beta) / beta)


def bbscheduler_alpha(i: int, epsilon_i: float, gamma: float, n: int, beta: float, p: float,
                      g: float) -> float:
    """α_i = g·(ln(1/β_i)/(ε_i (1+γ)^i n))^p (the black box's accuracy in epoch i)."""
    log_ratio = (math.log(bbscheduler_ln_inv_beta(i, beta)) - math.log(epsilon_i)
                 - i * math.log1p(gamma) - math.log(n))
    return g * math.exp(p * log_ratio)


def bbimprover_epsilon(t: int, epsilon: float, delta: float, c: float) -> float:
    """ε_t = √c·ε/(3√ln(1/δ)·t^{1/2+c}) (Alg 2; the proof's first line drops the factor)."""
    return math.sqrt(c) * epsilon / (3 * math.sqrt(math.log(1 / delta)) * t ** (0.5 + c))


def bbimprover_alpha(t: int, epsilon_t: float, beta: float, p: float, p1: float, p2: float,
                     g: float) -> float:
    """α_t = g(1/(ε_t t))^p (ln t)^{p''} (ln(1/β_t))^{p'}, β_t = β/(2t²).

    Spec E5: Alg 2 prints ε_i, log n and log(1/β); the proof uses ε_t, log t, log(1/β_t).
    """
    ln_inv_beta_t = math.log(2 * t * t / beta)
    return g * (1 / (epsilon_t * t)) ** p * math.log(t) ** p2 * ln_inv_beta_t ** p1


def cdp_epsilon(sum_squares: float, delta: float) -> float:
    """Theorem 4: ε_i-DP pieces compose to (½Σε_i² + √(2Σε_i² ln(1/δ)), δ)-DP."""
    return sum_squares / 2 + math.sqrt(2 * sum_squares * math.log(1 / delta))


# Scheduler state machines ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class EpochRelease:
    """Public metadata of one black-box run (epoch i, or time t for BBImprover)."""
    epoch: int
    t: int
    epsilon: float
    alpha: float
    ln_inv_beta: float


@dataclasses.dataclass(frozen=True)
class BBAnswer:
    """``status``: 'answered', 'not_started', 'unknown_query' (the box cannot answer it) or
    'budget_exhausted'; ``epsilon_spent`` is the ledger's (converted) ε."""
    status: str
    value: Optional[float]
    t: int
    epsilon_spent: float
    epoch: int


@dataclasses.dataclass(frozen=True)
class BBState:
    """Immutable state: t and counts (secret counts), the last run (epoch index or time, its
    metadata and epoch object — public outputs of the box), and the ledger (Σε, Σε²)."""
    t: int
    counts: np.ndarray
    epoch: int = -1
    release: Optional[EpochRelease] = None
    output: Any = None
    spent: float = 0.0
    spent_squares: float = 0.0
    runs: int = 0


@dataclasses.dataclass(frozen=True)
class _Base:
    """Shared fields (the box, then keyword-only: the budget's ε, the failure probability β,
    the initial size n, the domain size N) and add/answer logic; subclasses define ``_due`` and
    ``_params_for``."""
    mechanism: Any
    _: dataclasses.KW_ONLY
    epsilon: float
    beta: float
    n: int
    domain_size: int

    def _owner(self) -> str:
        return type(self).__name__

    def init_state(self) -> BBState:
        counts = np.zeros(self.domain_size, dtype=np.int64)
        counts.setflags(write=False)
        return BBState(0, counts)

    def epsilon_spent(self, state: BBState) -> float:
        if self.delta == 0:
            return state.spent
        return cdp_epsilon(state.spent_squares, self.delta) if state.spent_squares else 0.0

    def _run(self, state: BBState, key: int, t: int, counts: np.ndarray,
             rng: RandomSource) -> Tuple[Optional[EpochRelease], BBState]:
        eps_k, alpha_k, ln_inv_beta_k = self._params_for(key)
        cost = self.mechanism.cost(eps_k)
        if not isinstance(cost, PrivacyCost) or not cost.is_pure or cost.epsilon > eps_k * (
                1 + 1e-12):
            raise UnsupportedMechanismError(f'{self._owner()}: the black box must be pure '
                                            f'ε-DP with cost ≤ ε_i (spec P7), got {cost!r}.')
        spent = state.spent + cost.epsilon
        squares = state.spent_squares + cost.epsilon ** 2
        total = spent if self.delta == 0 else cdp_epsilon(squares, self.delta)
        if total > self.epsilon:
            return None, state            # Never release beyond the budget.
        output = self.mechanism.run(counts, t, eps_k, alpha_k, ln_inv_beta_k,
                                    rng.derive(self._owner(), key))
        release = EpochRelease(key, t, eps_k, alpha_k, ln_inv_beta_k)
        return release, dataclasses.replace(state, epoch=key, release=release, output=output,
                                            spent=spent, spent_squares=squares,
                                            runs=state.runs + 1)

    def answer(self, state: BBState, query: LinearQuery,
               rng: RandomSource) -> Tuple[BBAnswer, BBState]:
        """Answers from the current run (running the box first in lazy mode when due).

        Raises:
          InvalidRecordError: for a non-LinearQuery or one over another domain (state unchanged).
        """
        if not isinstance(query, LinearQuery):
            raise InvalidRecordError(f'{self._owner()}: query must be a LinearQuery, got '
                                     f'{query!r:.80}.')
        query.check_domain(self.domain_size, self._owner())
        if self.lazy:
            key = self._due(state, state.t)
            if key is not None:
                _, state = self._run(state, key, state.t, state.counts, rng)
        if state.output is None:
            status = 'not_started' if state.t < self.n else 'budget_exhausted'
            return BBAnswer(status, None, state.t, self.epsilon_spent(state), state.epoch), state
        value, output = self.mechanism.answer(state.output, query, rng)
        state = dataclasses.replace(state, output=output)
        status = 'answered' if value is not None else 'unknown_query'
        return BBAnswer(status, value, state.t, self.epsilon_spent(state), state.epoch), state

    def add_data(self, state: BBState, data, rng: RandomSource) -> BBState:
        return self.add_data_with_releases(state, data, rng)[1]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BBScheduler(_Base):
    """BBScheduler: fixed accuracy as data accumulate, by rerunning a black box per epoch (Alg 1).

    Privacy unit and relation: one record under the swap-one model (neighbouring streams differ
    in one record from its insertion on; sizes equal and PUBLIC, docs/privacy_model.md: epochs are
    triggered by the size). Event-level, or user-level if each user adds one record.

    Sensitivity and guarantee: the box is pure ε_i-DP for Δ = 1/t. δ = 0:
    Σ ε_i ≤ ε by basic composition (Σ ε_i = ε exactly in real arithmetic; calibrated with
    ε(1 − 1e-9)). δ > 0: CDP composition (Theorem 4), ½Σε_i² + √(2Σε_i² ln(1/δ)) ≤ ε.
    Queries are post-processing. The ledger is checked before every run.

    Releases: one run per epoch, at t_i = ⌈(1+γ)^i n⌉ (eager: in ``add_data``, on the snapshot
    x_{t_i}; if one batch crosses several starts only the last runs, skipping is privacy-safe —
    ``beam_dp.drivers.growing.BBEngine`` cuts batches at the starts so every epoch runs, in a
    notebook as in the Beam job) or at the first query of the epoch on the current x_t
    (``lazy``). Queries before n: 'not_started'.

    Not guaranteed: accuracy, which is α_i + γ/(1+γ) per epoch w.p. 1 − β_i (Lemma 11), with
    α_i = γ(1+γ)^{2p} (δ = 0) or γ(1+γ)^{1.5p} (δ > 0) for every epoch; requires 0 < γ < 1.

    Cite: Cummings et al. 2018, Alg 1, Theorem 10, Lemma 11, with the constants of the proof
    (Lb = ln((1+β)/β); for δ > 0 Z carries the factor 3√ln(1/δ) and ε_i uses γ^{1.5}·(i+1)).

    Args:
      mechanism: a ``StaticMechanism``. epsilon, delta: the budget (δ ∈ [0, 1)). beta: (0, 1).
      n: initial size. domain_size: N. p, g: override the box's declared constants. lazy.

    Raises:
      InvalidParamsError: on a bad parameter or γ ∉ (0, 1).
    """
    delta: float = 0.0
    p: Optional[float] = None
    g: Optional[float] = None
    lazy: bool = False

    def __post_init__(self):
        owner = 'BBScheduler'
        check_black_box(owner, self.mechanism)
        v.check_positive(owner, 'epsilon', self.epsilon)
        v.check_probability(owner, 'beta', self.beta, allow_zero=False)
        v.check_probability(owner, 'delta', self.delta)
        v.check_positive_int(owner, 'n', self.n)
        v.check_positive_int(owner, 'domain_size', self.domain_size)
        p = self.mechanism.p if self.p is None else v.check_positive(owner, 'p', self.p)
        g = self.mechanism.g if self.g is None else v.check_positive(owner, 'g', self.g)
        object.__setattr__(self, 'p', float(p))
        object.__setattr__(self, 'g', float(g))
        gamma = bbscheduler_gamma(self.epsilon, self.delta, self.beta, self.n, self.p, self.g)
        if not 0 < gamma < 1:
            raise InvalidParamsError(f'{owner}: gamma must be in (0, 1) (spec P13), got '
                                     f'{gamma:g}; increase n or epsilon.')
        object.__setattr__(self, '_gamma', gamma)

    @property
    def gamma(self) -> float:
        return self._gamma

    @property
    def calibrated_epsilon(self) -> float:
        return self.epsilon * (1 - SAFETY_MARGIN)

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta, relation=SWAP_ONE)

    def start(self, i: int) -> int:
        return bbscheduler_start(self.n, self._gamma, i)

    def guaranteed_error(self) -> float:
        """α_i + γ/(1+γ), with α_i = γ(1+γ)^{2p} (δ = 0) or γ(1+γ)^{1.5p} (δ > 0).

        Spec E4: the paper's algebra prints Z^{p − p²/(2p+1)} and (½γ)^{1.5p}; the correct
        exponents Z^{p/(2p+1)} and (½γ)^{-1.5p} give these closed forms.
        """
        gm = self._gamma
        expo = 2 * self.p if self.delta == 0 else 1.5 * self.p
        return gm * (1 + gm) ** expo + gm / (1 + gm)

    def _params_for(self, i: int):
        eps_i = bbscheduler_epsilon(i, self.calibrated_epsilon, self._gamma, self.delta)
        alpha_i = bbscheduler_alpha(i, eps_i, self._gamma, self.n, self.beta, self.p, self.g)
        return eps_i, alpha_i, bbscheduler_ln_inv_beta(i, self.beta)

    def _last_epoch(self, after: int, t: int) -> Optional[int]:
        """The largest i > after with start(i) ≤ t (a while loop, never an equality)."""
        i = after
        while self.start(i + 1) <= t:
            i += 1
        return i if i > after else None

    def _due(self, state: BBState, t: int) -> Optional[int]:
        return self._last_epoch(state.epoch, t)

    def add_data_with_releases(self, state: BBState, data,
                               rng: RandomSource) -> Tuple[Tuple[EpochRelease, ...], BBState]:
        """Appends records; in eager mode runs the box at the last epoch start crossed, on the
        snapshot at that start (``BBEngine.add`` feeds one epoch at a time so none is skipped).
        Returns (releases, new_state).

        Raises:
          InvalidRecordError: on a bad record (state unchanged).
        """
        arr = np.atleast_1d(np.asarray(data))
        counts, t = add_records(state.counts, state.t, arr, self.domain_size, self._owner())
        new = dataclasses.replace(state, counts=counts, t=t)
        if self.lazy:
            return (), new
        i = self._last_epoch(state.epoch, t)
        if i is None:
            return (), new
        at = self.start(i)
        snapshot = state.counts + np.bincount(arr[:at - state.t],
                                              minlength=self.domain_size).astype(np.int64)
        release, new = self._run(new, i, at, snapshot, rng)
        return (() if release is None else (release,)), new


@dataclasses.dataclass(frozen=True, kw_only=True)
class BBImprover(_Base):
    """BBImprover: accuracy improving with t, rerunning a black box at every size (Alg 2).

    Privacy unit and relation: as ``BBScheduler`` (swap-one; t public).

    Sensitivity and guarantee: (ε, δ)-DP only (no δ = 0 variant): Σ_t ε_t² ≤ ε²/(9 ln(1/δ))
    (needs c ≤ n/2) and Theorem 4 gives ≤ ε for ε < 1; the ledger is checked before every run.

    Releases: the box runs at most once per size t — lazily at the first query at a new t
    (default) or at the end of each ``add_data`` batch (eager); skipped sizes are never spent.

    Not guaranteed: useful accuracy before t ≈ 10⁸; α_t (``bbimprover_alpha``) w.p.
    1 − β_t per run, Σ β_t ≤ π²β/12.

    Cite: Cummings et al. 2018, Alg 2, Theorem 13 (α_t with ε_t, ln t and ln(1/β_t), as in the
    proof).

    Args:
      mechanism, epsilon ∈ (0, 1), delta ∈ (0, 1/e], beta, n, domain_size, c > 0 (≤ n/2),
      p1 (= p'), p2 (= p''), lazy.

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    delta: float
    c: float = 0.1
    p1: Optional[float] = None
    p2: float = 0.0
    lazy: bool = True

    def __post_init__(self):
        owner = 'BBImprover'
        check_black_box(owner, self.mechanism)
        eps = v.check_positive(owner, 'epsilon', self.epsilon)
        if eps >= 1:
            raise InvalidParamsError(f'{owner}: epsilon must be in (0, 1), got {eps:g}.')
        d = v.check_positive(owner, 'delta', self.delta)
        if d > math.exp(-1):
            raise InvalidParamsError(f'{owner}: delta must be in (0, 1/e], got {d:g}.')
        v.check_probability(owner, 'beta', self.beta, allow_zero=False)
        v.check_positive_int(owner, 'n', self.n)
        v.check_positive_int(owner, 'domain_size', self.domain_size)
        c = v.check_positive(owner, 'c', self.c)
        if c > self.n / 2:
            raise InvalidParamsError(f'{owner}: c must be at most n/2, got {c:g}.')
        if self.p1 is None:
            object.__setattr__(self, 'p1', float(self.mechanism.p))
        v.check_non_negative(owner, 'p2', self.p2)

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta, relation=SWAP_ONE)

    def _params_for(self, t: int):
        eps_t = bbimprover_epsilon(t, self.epsilon * (1 - SAFETY_MARGIN), self.delta, self.c)
        alpha_t = bbimprover_alpha(t, eps_t, self.beta, self.mechanism.p, self.p1, self.p2,
                                   self.mechanism.g)
        return eps_t, alpha_t, math.log(2 * t * t / self.beta)

    def _due(self, state: BBState, t: int) -> Optional[int]:
        return t if t >= self.n and t > state.epoch else None

    def add_data_with_releases(self, state: BBState, data,
                               rng: RandomSource) -> Tuple[Tuple[EpochRelease, ...], BBState]:
        """Appends records; in eager mode runs the box once at the batch's final size."""
        counts, t = add_records(state.counts, state.t, data, self.domain_size, self._owner())
        new = dataclasses.replace(state, counts=counts, t=t)
        if self.lazy or self._due(new, t) is None:
            return (), new
        release, new = self._run(new, t, t, counts, rng)
        return (() if release is None else (release,)), new
