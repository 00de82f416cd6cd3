"""Static private multiplicative weights (PMW; Hardt & Rothblum 2010, in the Numeric Sparse form of
Dwork & Roth 2014 §4.2 with the constants of Cummings et al. 2018, Algorithm 3).

The analyst's adaptive stream of linear queries is answered from a public histogram y (kept in
log space), initially uniform. Each query f is checked by Numeric Sparse against y's
estimate v = <f, y>: first g1 = f(x) − v, and only if that is below threshold g2 = v − f(x)
(one NATG halt per query at most). Both below ⇒ *easy*: the answer is v, no fresh noise.
Otherwise *hard*: the answer a is the noisy value and y takes a multiplicative-weights step with
learning rate α/6 in the direction given by a vs v (released values only). Each hard
query lowers RE(x‖y) ≤ ln N by ≥ α²/36 while the sparse vector is α/3-accurate, so the number of
hard queries is capped at ⌊36 ln N/α²⌋; the cap is checked before a hard answer is released and
the instance then stays halted.

The helpers here (``public_estimate``, ``mw_update``, ``pmw_classify``) are shared with PMWG.
"""

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms.growing_svt import SVTRound
from beam_dp.mechanisms.growing_svt import add_records
from beam_dp.mechanisms.growing_svt import svt_query
from beam_dp.noise import RandomSource
from beam_dp.queries import LinearQuery

__all__ = [
    'PMWAnswer',
    'PMWParams',
    'PMWState',
    'PrivateMultiplicativeWeights',
    'mw_update',
    'pmw_classify',
    'public_estimate',
]

#: The zCDP weight of one hard query relative to (ξΔ)²: the ATG part 1 plus the numeric
#: answer's (1/8)² (Lemma 23: 585/16 = 36·65/64).
_HARD_SQUARE_WEIGHT = 65.0 / 64.0


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def uniform_log_histogram(domain_size: int) -> np.ndarray:
    return _readonly(np.full(domain_size, -math.log(domain_size)))


def public_estimate(log_y: np.ndarray, query: LinearQuery) -> float:
    """v = <f, y> on the public histogram (a function of public values only).

    Cummings et al. 2018, Alg 3: the text's a_{t,j} = f_j(y_{t,j}) is a garble of
    f_{t,j}(y_{t,j}).
    """
    return query.evaluate(np.exp(log_y))


def mw_update(log_y: np.ndarray, query: LinearQuery, learning_rate: float,
              answer: float, estimate: float) -> np.ndarray:
    """One multiplicative-weights step: y_i ∝ y_i·exp(-lr·r_i), r = f if a < v else 1 − f.

    Uses only the released answer a and the public estimate v; a is the unclipped
    noisy answer. Returns a new normalised read-only log histogram.
    """
    f = query.dense()
    r = f if answer < estimate else 1.0 - f
    new = log_y - learning_rate * r
    top = new.max()
    new = new - (top + math.log(np.exp(new - top).sum()))
    return _readonly(new)


def pmw_classify(rnd: SVTRound, true_value: float, estimate: float, t: int, xi_t: float,
                 xi_delta_t: float, threshold: float,
                 rng: RandomSource) -> Tuple[Optional[float], SVTRound]:
    """The Numeric Sparse part of one (static or growing) PMW query.

    Sends g1 = f(x) − v; only if it is below threshold sends g2 = v − f(x) (the proof
    charges one NATG halt per hard query). Returns (a, new_round): the noisy
    answer a for a hard query, None for an easy one. The paper's index a'_{t,2j-i} is a
    typo for a'_{t,2j-1}: this choice of which numeric answer to use.
    """
    above, numeric, rnd = svt_query(rnd, true_value - estimate, t, xi_t, xi_delta_t, threshold,
                                    True, rng)
    if above:
        return estimate + numeric, rnd
    above, numeric, rnd = svt_query(rnd, estimate - true_value, t, xi_t, xi_delta_t, threshold,
                                    True, rng)
    if above:
        return estimate - numeric, rnd
    return None, rnd


@dataclasses.dataclass(frozen=True)
class PMWAnswer:
    """One PMW/PMWG answer. ``status``: 'easy', 'hard', 'halted' or 'not_started' (refusals have
    ``value`` None). ``value`` is the released answer, unclipped (``clipped`` clips to [0, 1],
    free post-processing). ``epsilon_spent``/``delta_spent``: the instance's realised ledger."""
    status: str
    value: Optional[float]
    t: int
    epsilon_spent: float
    delta_spent: float = 0.0

    @property
    def hard(self) -> Optional[bool]:
        return {'easy': False, 'hard': True}.get(self.status)

    @property
    def clipped(self) -> Optional[float]:
        return None if self.value is None else min(1.0, max(0.0, self.value))


@dataclasses.dataclass(frozen=True)
class PMWState:
    """Immutable state. Secret: ``counts`` and ``round.eta_units``. Public: everything else
    (``log_y`` is a function of the released transcript)."""
    t: int
    counts: np.ndarray
    log_y: np.ndarray
    round: SVTRound
    hard: int = 0
    halted: bool = False
    queries: int = 0


def ledger_epsilon(first: float, hard_sum: float, delta: float) -> float:
    """Realised ε of Numeric Sparse: pure: ξ_nΔ_n + (9/8)Σ_hard ξ_tΔ_t (Thm 29); δ > 0: the
    zCDP sum τ = (ξ_nΔ_n)² + (65/64)Σ_hard (ξ_tΔ_t)² converted by Theorem 4,
    ε = τ/2 + √(2τ ln(1/δ)). ``first``/``hard_sum`` are the (squared, for δ > 0) terms."""
    if delta == 0:
        return first + 9.0 / 8.0 * hard_sum
    tau = first + _HARD_SQUARE_WEIGHT * hard_sum
    return tau / 2 + math.sqrt(2 * tau * math.log(1 / delta))


@dataclasses.dataclass(frozen=True)
class PMWParams:
    """The parameters every PMW variant takes (``check_pmw_params``): the budget (epsilon,
    delta), the target accuracy alpha, the (initial) database size n and the domain size N."""
    epsilon: float
    alpha: float
    n: int
    domain_size: int
    delta: float = 0.0


@dataclasses.dataclass(frozen=True)
class PrivateMultiplicativeWeights(PMWParams):
    """Static PMW: answers an adaptive stream of linear queries on one database of n records.

    Privacy unit and relation: one record; replace-one neighbours on a database of public size n
    (event-level unless each user contributes one record).

    Sensitivity and guarantee: f ∈ [0, 1]^N, Δ = 1/n. With cap h = ⌊36 ln N/α²⌋ hard queries,
    Numeric Sparse costs ξΔ(1 + 9h/8) (pure) or, for δ > 0, ξΔ·√(2ρ/(1 + 65h/64)) with the ρ
    whose Theorem 4 conversion is exactly ε; ξ is solved so the whole run is (ε, δ)-DP.

    Releases: one answer per query once all n records are in ('not_started' before); after the
    cap, 'halted' forever. Easy answers are the public estimate (no fresh noise).

    Not guaranteed: accuracy (Thm 8: α ≥ C(ln N ln(k/β)/(εn))^{1/3}); more than n records are
    rejected.

    Cite: Hardt & Rothblum, FOCS 2010; Dwork & Roth 2014 §4.2; Cummings et al. 2018 (constants).

    Args:
      epsilon, delta: the budget (δ ∈ [0, 1/e)). alpha: target accuracy in (0, 1].
      n: database size. domain_size: N ≥ 2.

    Raises:
      InvalidParamsError: on a bad parameter.
    """

    def __post_init__(self):
        check_pmw_params(self, min_domain=2)

    @property
    def hard_cap(self) -> int:
        return int(math.floor(36 * math.log(self.domain_size) / self.alpha ** 2))

    @property
    def xi_delta(self) -> float:
        """ξΔ solved from the budget (see the class docstring)."""
        h = self.hard_cap
        if self.delta == 0:
            return self.epsilon / (1 + 9 * h / 8)
        log_inv = math.log(1 / self.delta)
        rho = (math.sqrt(log_inv + self.epsilon) - math.sqrt(log_inv)) ** 2
        return math.sqrt(2 * rho / (1 + _HARD_SQUARE_WEIGHT * h)) * (1 - 1e-12)

    @property
    def xi(self) -> float:
        return self.xi_delta * self.n

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)

    def init_state(self, counts=None) -> PMWState:
        """The empty state, or (``counts``: a length-N histogram of exactly n records) the full
        database at once."""
        state = PMWState(0, _readonly(np.zeros(self.domain_size, dtype=np.int64)),
                         uniform_log_histogram(self.domain_size), SVTRound())
        if counts is None:
            return state
        c = np.asarray(counts)
        if (c.shape != (self.domain_size,) or not np.issubdtype(c.dtype, np.integer)
                or c.min() < 0 or int(c.sum()) != self.n):
            raise InvalidRecordError(f'{type(self).__name__}: counts must be {self.domain_size} '
                                     f'non-negative integers summing to n={self.n}.')
        return dataclasses.replace(state, counts=_readonly(c.astype(np.int64)), t=self.n)

    def add_data(self, state: PMWState, data, rng: RandomSource) -> PMWState:
        """Appends records (element indices) until the database has its n records.

        Raises:
          InvalidRecordError: on a bad index or a record beyond the n-th (state unchanged).
        """
        del rng
        owner = type(self).__name__
        counts, t = add_records(state.counts, state.t, data, self.domain_size, owner)
        if t > self.n:
            raise InvalidRecordError(f'{owner}: the static database holds n={self.n} records, '
                                     f'got {t}.')
        return dataclasses.replace(state, counts=counts, t=t)

    def _ledger(self, hard: int) -> float:
        xd = self.xi_delta
        if self.delta == 0:
            return ledger_epsilon(xd, hard * xd, 0.0)
        return ledger_epsilon(xd * xd, hard * xd * xd, self.delta)

    def answer(self, state: PMWState, query: LinearQuery,
               rng: RandomSource) -> Tuple[PMWAnswer, PMWState]:
        """Answers ``query`` (see the class docstring).

        Raises:
          InvalidRecordError: for a non-LinearQuery or one over another domain (state unchanged).
        """
        owner = type(self).__name__
        if not isinstance(query, LinearQuery):
            raise InvalidRecordError(f'{owner}: query must be a LinearQuery, got {query!r:.80}.')
        query.check_domain(self.domain_size, owner)
        spent = self._ledger(state.hard)
        if state.halted:
            return PMWAnswer('halted', None, state.t, spent, self.delta), state
        if state.t < self.n:
            return PMWAnswer('not_started', None, state.t, spent, self.delta), state
        estimate = public_estimate(state.log_y, query)
        true_value = query.evaluate(state.counts) / self.n
        noisy, rnd = pmw_classify(state.round, true_value, estimate, self.n, self.xi,
                                  self.xi_delta, 2 * self.alpha / 3, rng)
        queries = state.queries + 1
        if noisy is None:
            new = dataclasses.replace(state, round=rnd, queries=queries)
            return PMWAnswer('easy', estimate, state.t, spent, self.delta), new
        hard = state.hard + 1
        if hard > self.hard_cap:
            # Spec P2: the cap is checked before the hard answer is released.
            new = dataclasses.replace(state, round=rnd, halted=True, queries=queries)
            return PMWAnswer('halted', None, state.t, spent, self.delta), new
        log_y = mw_update(state.log_y, query, self.alpha / 6, noisy, estimate)
        new = dataclasses.replace(state, round=rnd, log_y=log_y, hard=hard, queries=queries)
        return PMWAnswer('hard', noisy, state.t, self._ledger(hard), self.delta), new


def check_pmw_params(mech, min_domain: int, why: str = '') -> None:
    """Checks the (epsilon, alpha, n, domain_size, delta) every PMW variant takes, naming
    ``type(mech)``; ``why`` cites the result that needs domain_size ≥ ``min_domain``."""
    owner = type(mech).__name__
    v.check_positive(owner, 'epsilon', mech.epsilon)
    _check_alpha(owner, mech.alpha)
    v.check_positive_int(owner, 'n', mech.n)
    if v.check_positive_int(owner, 'domain_size', mech.domain_size) < min_domain:
        raise InvalidParamsError(f'{owner}: domain_size must be at least {min_domain}{why}, '
                                 f'got {mech.domain_size}.')
    _check_delta(owner, mech.delta)


def _check_alpha(owner: str, alpha: float) -> None:
    a = v.check_positive(owner, 'alpha', alpha)
    if a > 1:
        raise InvalidParamsError(f'{owner}: alpha must be in (0, 1], got {a:g}.')


def _check_delta(owner: str, delta: float) -> None:
    d = v.check_real(owner, 'delta', delta)
    if not 0 <= d < math.exp(-1):
        raise InvalidParamsError(f'{owner}: delta must be in [0, 1/e), got {d:g}.')
