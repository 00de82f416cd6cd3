"""PMWG: private multiplicative weights for growing databases (Cummings, Krehbiel, Lai,
Tantipongpipat, "Differential Privacy for Growing Databases", NeurIPS 2018, Algorithm 3 /
Eq. B.5; docs/growing_databases.md).

Static PMW (``pmw.py``) plus two changes for a database that grows by one record per step:
the noise function ξ_t grows with t (so the Numeric Sparse noise shrinks relative to the
sensitivity 1/t), and, before a query at size t, the public histogram is mixed towards uniform,
y ← (t_last/t)·y + ((t − t_last)/t)·(1/N) — the lazy form of one update per arrival, treating new
data as uniform (a function of the public size only). The hard-query cap grows accordingly:
cap(t) = (36/α²)(ln N + Σ_{τ=n+1}^t b_τ), b_τ = ln N/τ + ln(τ−1)/τ + ln(τ/(τ−1)) (Lemma 15,
Corollary 16); it is enforced before a hard answer is released and a halted instance refuses
forever. The public state (``PMWGPublic``) is a deterministic function of the sizes,
queries and released answers: ``PMWG.replay`` rebuilds it from a transcript.
"""

import dataclasses
import math
from typing import Iterable, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms.growing_svt import PowerNoise
from beam_dp.mechanisms.growing_svt import SVTRound
from beam_dp.mechanisms.growing_svt import add_records
from beam_dp.mechanisms.pmw import PMWAnswer
from beam_dp.mechanisms.pmw import PMWParams
from beam_dp.mechanisms.pmw import check_pmw_params
from beam_dp.mechanisms.pmw import ledger_epsilon
from beam_dp.mechanisms.pmw import mw_update
from beam_dp.mechanisms.pmw import pmw_classify
from beam_dp.mechanisms.pmw import public_estimate
from beam_dp.mechanisms.pmw import uniform_log_histogram
from beam_dp.noise import RandomSource
from beam_dp.queries import LinearQuery

__all__ = [
    'PMWG',
    'PMWGPublic',
    'PMWGState',
    'b_sum',
    'pmwg_xi_constant',
    'uniform_mix',
]

#: Lazy b-sums over jumps longer than this use the closed-form lower bound.
_EXACT_JUMP = 4_000_000
_CHUNK = 1_000_000
#: Safety margin on the ledger comparison (float partial sums).
_LEDGER_MARGIN = 1e-9


def b_sum(lo: int, hi: int, domain_size: int) -> float:
    """Σ_{τ=lo+1}^{hi} b_τ (Lemma 15), exactly for jumps ≤ 4·10⁶, else a lower bound.

    A lower bound is the safe side: the hard cap must never exceed (36/α²)(ln N + Σ b_τ).
    It uses Σ ln(τ/(τ−1)) = ln(hi/lo) (telescoping), Σ 1/τ ≥ ln((hi+1)/(lo+1)) and
    ln(τ−1)/τ ≥ ln τ/τ − 1/(τ(τ−1)) with Σ ln τ/τ ≥ ∫ ln x/x dx (decreasing for τ ≥ 3).
    """
    if hi <= lo:
        return 0.0
    log_n = math.log(domain_size)
    if hi - lo <= _EXACT_JUMP or lo < 3:
        parts = []
        for start in range(lo + 1, hi + 1, _CHUNK):
            tau = np.arange(start, min(hi, start + _CHUNK - 1) + 1, dtype=np.float64)
            parts.append(float(np.sum(log_n / tau + np.log(tau - 1) / tau
                                      + np.log(tau / (tau - 1)))))
        return math.fsum(parts)
    a, b = lo + 1, hi
    harmonic = math.log((b + 1) / a)
    log_over = (math.log(b + 1) ** 2 - math.log(a) ** 2) / 2 - (1 / (a - 1) - 1 / b)
    telescoped = math.log(b / (a - 1))
    return (log_n * harmonic + log_over + telescoped) * (1 - 1e-12)


def uniform_mix(log_y: np.ndarray, t_last: int, t: int) -> np.ndarray:
    """y ← (t_last/t)·y + ((t − t_last)/t)/N in log space (Alg 3's uniform update, lazily).

    Equal to t − t_last single steps y ← (s/(s+1))·y + 1/((s+1)N) (they telescope); uses only the
    public sizes. A weight (t − t_last)/t near 1 is correct.
    """
    if t <= t_last:
        return log_y
    n_dom = log_y.shape[0]
    mixed = np.logaddexp(log_y + math.log(t_last / t),
                         math.log((t - t_last) / t) - math.log(n_dom))
    mixed.setflags(write=False)
    return mixed


def pmwg_xi_constant(epsilon: float, delta: float, alpha: float, n: int, domain_size: int,
                     p: Optional[float]) -> Tuple[float, float]:
    """(c, exponent) of ξ_t = c·t^exponent (Alg 3; Eq. B.5 for a given p).

    Alg 3 (p None): δ = 0: c = α²√n ε/(162 ln(Nn)); δ > 0: c = α√n ε/(48 √ln(Nn) √ln(1/δ));
    exponent 1/2. Eq. B.5 (p given): δ = 0: c = α²(1−p)² n^{1−p} ε/(126 ln(Nn));
    δ > 0: c = α(1−p) n^{1−p} ε/(24 √ln(Nn) √ln(1/δ)); exponent p.
    """
    log_nn = math.log(int(domain_size) * int(n))      # Python ints: no int64 wrap
    if p is None:
        if delta == 0:
            return alpha ** 2 * math.sqrt(n) * epsilon / (162 * log_nn), 0.5
        return (alpha * math.sqrt(n) * epsilon
                / (48 * math.sqrt(log_nn) * math.sqrt(math.log(1 / delta))), 0.5)
    q = 1 - p
    if delta == 0:
        return alpha ** 2 * q ** 2 * n ** q * epsilon / (126 * log_nn), p
    return (alpha * q * n ** q * epsilon
            / (24 * math.sqrt(log_nn) * math.sqrt(math.log(1 / delta))), p)


@dataclasses.dataclass(frozen=True)
class PMWGPublic:
    """The public part of the state: a function of (sizes, queries, released answers) only.

    ``log_y``: the public histogram; ``t_last``: size at the last uniform update; ``b_total``:
    ln N + Σ b_τ up to t_last; ``hard``: hard answers released (H); ``halted``; ``first``/
    ``hard_sum``: ledger terms (ξ_nΔ_n and Σ_hard ξ_tΔ_t, squared for δ > 0); ``queries``."""
    log_y: np.ndarray
    t_last: int
    b_total: float
    hard: int = 0
    halted: bool = False
    first: float = 0.0
    hard_sum: float = 0.0
    queries: int = 0


@dataclasses.dataclass(frozen=True)
class PMWGState:
    """Immutable state. Secret: ``counts`` and ``round.eta_units``; public: ``t`` and ``public``."""
    t: int
    counts: np.ndarray
    public: PMWGPublic
    round: SVTRound


@dataclasses.dataclass(frozen=True)
class PMWG(PMWParams):
    """PMWG: answers an adaptive stream of linear queries on a growing database (Alg 3 / Eq. B.5).

    Privacy unit and neighbouring relation: one record under the paper's swap-one model — two
    streams are neighbours if, from some time t* on, they differ in exactly one record and have
    equal sizes at every time. The database size t is therefore PUBLIC (docs/privacy_model.md): the
    uniform update, ξ_t, Δ_t = 1/t and the cap all read it. Under add/remove neighbours the
    caller must drive ``add_data`` on a data-independent schedule or from a private size
    estimate; this class does not hide t. Event-level, or user-level if each user adds one record.

    Sensitivity and guarantee: f ∈ [0, 1]^N (validated), Δ_t = 1/t. δ = 0: ε-DP (Theorem 18 with
    Alg 3's ξ, Theorem 14; generalised p: Lemma 20, Theorem 22), requiring N ≥ 3 and n ≥ 21 (Alg
    3) or n ≥ 5 (p given). δ > 0: (ε, δ)-DP by zCDP composition (Lemma 23, Theorems 17/24),
    ε ∈ (0, 1], δ ∈ (0, 1/e), n ≥ 3 — composing per-round costs fixed adaptively under a fixed
    worst-case cap (via zCDP filters). ``privacy_bound()`` evaluates the
    exact sum (B.1 / B.11) numerically; the answers carry the realised ledger
    (ξ_nΔ_n + (9/8)Σ_hard ξ_tΔ_t, or its zCDP analogue).

    Releases: per query at size t ≥ n: 'easy' (value = <f, y>, no fresh noise) or 'hard' (a noisy
    value; y takes an MW step), or the refusals 'not_started' (t < n) and 'halted' (forever once
    cumulative hard answers would exceed cap(t), checked before release).

    Not guaranteed: accuracy, which needs α ≥ the bounds of Theorems 14/17 (Theorem 19's factor 3
    should be 4, since a query may issue two NSG queries) (vacuous below n ≈ 10⁸; measured:
    docs/growing_databases.md) and a query budget the algorithm does not enforce; ordering of
    records and queries is the caller's.

    Cite: Cummings et al. 2018, Alg 3, Eq. B.5, Lemma 15, Cor 16, Theorems 14, 17-24.

    Args:
      epsilon, delta: the budget. alpha: target accuracy in (0, 1] (threshold 2α/3, learning rate
        α/6). n: initial size. domain_size: N ≥ 3. p: None for Alg 3's ξ_t ∝ t^{1/2}, else the
        exponent of Eq. B.5 in [0, 1).

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    p: Optional[float] = None

    def __post_init__(self):
        check_pmw_params(self, min_domain=3, why=' (Theorems 14, 17)')
        owner = type(self).__name__
        if self.p is not None:
            p = v.check_real(owner, 'p', self.p)
            if not 0 <= p < 1:
                raise InvalidParamsError(f'{owner}: p must be in [0, 1), got {p:g}.')
        min_n = 3 if self.delta > 0 else (21 if self.p is None else 5)
        if self.n < min_n:
            raise InvalidParamsError(f'{owner}: n must be at least {min_n} for this variant '
                                     f'(spec 000 §5.5), got {self.n}.')
        if self.delta > 0 and self.epsilon > 1:
            raise InvalidParamsError(f'{owner}: epsilon must be in (0, 1] when delta > 0 '
                                     f'(Theorem 17), got {self.epsilon:g}.')
        c, exponent = pmwg_xi_constant(self.epsilon, self.delta, self.alpha, self.n,
                                       self.domain_size, self.p)
        object.__setattr__(self, '_noise', PowerNoise(c, exponent))

    # Public schedule ---------------------------------------------------------------------------

    @property
    def noise(self) -> PowerNoise:
        return self._noise

    def xi(self, t: int) -> float:
        return self._noise.xi(t)

    @property
    def threshold(self) -> float:
        return 2 * self.alpha / 3

    @property
    def learning_rate(self) -> float:
        return self.alpha / 6

    def cap(self, b_total: float) -> float:
        """(36/α²)·B for B = ln N + Σ b_τ."""
        return 36.0 / self.alpha ** 2 * b_total

    def cap_at(self, t: int) -> float:
        """cap(t) = (36/α²)(ln N + Σ_{τ=n+1}^t b_τ) (Corollary 16)."""
        return self.cap(math.log(self.domain_size) + b_sum(self.n, t, self.domain_size))

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta, relation=SWAP_ONE)

    def privacy_bound(self, horizon: int = 1_000_000) -> float:
        """The privacy expression summed numerically (exact to ``n + horizon``, tail bounded).

        δ = 0 (B.1): (1 + (81/(2α²)) ln N)ξ_nΔ_n + (81/(2α²))Σ_{t>n} b_t ξ_tΔ_t.
        δ > 0 (B.11): τ = (1 + (585/(16α²)) ln N)(ξ_nΔ_n)² + (585/(16α²))Σ_{t>n} b_t(ξ_tΔ_t)²,
        reported as τ/2 + √(2τ ln(1/δ)) (Theorem 4; Lemma 23's "585² ln N/8α²" is
        a garble of 585c² ln N/(8α²)). Worst case: hard queries as early as the cap
        allows (ξ_tΔ_t is non-increasing). Tail beyond M: b_t ≤ (A + ln t)/t, A = ln N + 1 + 1/M,
        and Σ_{t>M} (A + ln t)t^{-1-s} ≤ M^{-s}((A + ln M)/s + 1/s²).
        """
        n_dom, a2 = self.domain_size, self.alpha ** 2
        weight = 81 / (2 * a2) if self.delta == 0 else 585 / (16 * a2)
        power = 1 if self.delta == 0 else 2
        c, ex = self._noise.c, self._noise.p
        total = (1 + weight * math.log(n_dom)) * (c * self.n ** (ex - 1)) ** power
        m = self.n + horizon
        parts = []
        log_n = math.log(n_dom)
        for start in range(self.n + 1, m + 1, _CHUNK):
            tau = np.arange(start, min(m, start + _CHUNK - 1) + 1, dtype=np.float64)
            b = log_n / tau + np.log(tau - 1) / tau + np.log(tau / (tau - 1))
            parts.append(float(np.sum(b * (c * tau ** (ex - 1)) ** power)))
        s = power * (1 - ex)
        a = log_n + 1 + 1 / m
        tail = c ** power * m ** -s * ((a + math.log(m)) / s + 1 / s ** 2)
        total += weight * (math.fsum(parts) + tail)
        if self.delta == 0:
            return total
        return total / 2 + math.sqrt(2 * total * math.log(1 / self.delta))

    def ledger(self, public: PMWGPublic) -> float:
        """Realised ε of the transcript so far (0 before the first query)."""
        if public.queries == 0:
            return 0.0
        return ledger_epsilon(public.first, public.hard_sum, self.delta)

    # State machine -----------------------------------------------------------------------------

    def init_state(self) -> PMWGState:
        public = PMWGPublic(uniform_log_histogram(self.domain_size), self.n,
                            math.log(self.domain_size))
        counts = np.zeros(self.domain_size, dtype=np.int64)
        counts.setflags(write=False)
        return PMWGState(0, counts, public, SVTRound())

    def add_data(self, state: PMWGState, data, rng: RandomSource) -> PMWGState:
        """Appends records (element indices in [0, N)); t grows by their number. O(batch).

        Raises:
          InvalidRecordError: on a bad index (state unchanged).
        """
        del rng
        counts, t = add_records(state.counts, state.t, data, self.domain_size, type(self).__name__)
        return dataclasses.replace(state, counts=counts, t=t)

    def _advance(self, public: PMWGPublic, t: int) -> PMWGPublic:
        """The uniform update and b-sum up to size t (public; Alg 3 lines for t > t_last)."""
        if t <= public.t_last:
            return public
        return dataclasses.replace(
            public, log_y=uniform_mix(public.log_y, public.t_last, t), t_last=t,
            b_total=public.b_total + b_sum(public.t_last, t, self.domain_size))

    def _first_term(self) -> float:
        xd = self._noise.xi_delta(self.n)
        return xd if self.delta == 0 else xd * xd

    def _hard_term(self, t: int) -> float:
        xd = self._noise.xi_delta(t)
        return xd if self.delta == 0 else xd * xd

    def _answer_of(self, public: PMWGPublic, status: str, value: Optional[float],
                   t: int) -> PMWAnswer:
        return PMWAnswer(status, value, t, self.ledger(public), self.delta)

    def _public_step(self, public: PMWGPublic, query: LinearQuery, t: int,
                     noisy: Optional[float], estimate: float) -> Tuple[str, PMWGPublic]:
        """Everything PMWG does after classification; public inputs only."""
        queries = public.queries + 1
        first = public.first or self._first_term()
        if noisy is None:
            return 'easy', dataclasses.replace(public, queries=queries, first=first)
        hard = public.hard + 1
        hard_sum = public.hard_sum + self._hard_term(t)
        trial = dataclasses.replace(public, queries=queries, first=first)
        over_budget = ledger_epsilon(first, hard_sum, self.delta) > self.epsilon * (
            1 + _LEDGER_MARGIN)
        # Spec P2: check the cap BEFORE the hard answer is released; the ledger check is a
        # belt-and-braces check (it cannot fire while the cap holds, Theorem 18/24).
        if hard > self.cap(public.b_total) or over_budget:
            return 'halted', dataclasses.replace(trial, halted=True)
        log_y = mw_update(public.log_y, query, self.learning_rate, noisy, estimate)
        return 'hard', dataclasses.replace(trial, log_y=log_y, hard=hard, hard_sum=hard_sum)

    def _check_query(self, query) -> None:
        owner = type(self).__name__
        if not isinstance(query, LinearQuery):
            raise InvalidRecordError(f'{owner}: query must be a LinearQuery, got {query!r:.80}.')
        query.check_domain(self.domain_size, owner)

    def answer(self, state: PMWGState, query: LinearQuery,
               rng: RandomSource) -> Tuple[PMWAnswer, PMWGState]:
        """Answers ``query`` at the current size t (see the class docstring). O(N).

        Raises:
          InvalidRecordError: for a non-LinearQuery or one over another domain (state unchanged).
        """
        self._check_query(query)
        t, public = state.t, state.public
        if public.halted:
            return self._answer_of(public, 'halted', None, t), state
        if t < self.n:
            return self._answer_of(public, 'not_started', None, t), state
        public = self._advance(public, t)
        estimate = public_estimate(public.log_y, query)
        true_value = query.evaluate(state.counts) / t
        noisy, rnd = pmw_classify(state.round, true_value, estimate, t, self.xi(t),
                                  self._noise.xi_delta(t), self.threshold, rng)
        status, public = self._public_step(public, query, t, noisy, estimate)
        value = {'easy': estimate, 'hard': noisy}.get(status)
        new = dataclasses.replace(state, public=public, round=rnd)
        return self._answer_of(public, status, value, t), new

    def replay(self, transcript: Iterable[Tuple[int, LinearQuery, PMWAnswer]]) -> PMWGPublic:
        """Rebuilds the public state from released (t, query, answer) triples — no data, no rng.

        Raises:
          InvalidRecordError: if the transcript is inconsistent with the public rules.
        """
        public = self.init_state().public
        for t, query, ans in transcript:
            self._check_query(query)
            if public.halted or ans.status == 'not_started':
                continue
            public = self._advance(public, t)
            estimate = public_estimate(public.log_y, query)
            # A halted answer was classified hard; the value is irrelevant (the cap is checked
            # before the MW step), so the public estimate stands in for it.
            noisy = {'easy': None, 'hard': ans.value}.get(ans.status, estimate)
            status, public = self._public_step(public, query, t, noisy, estimate)
            if status != ans.status:
                raise InvalidRecordError(f'PMWG.replay: transcript says {ans.status!r} at t={t} '
                                         f'but the public rules give {status!r}.')
        return public
