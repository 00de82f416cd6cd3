"""Private partition (key) selection: which group-by keys may appear in the output
(docs/partitioning.md, docs/privacy_model.md).

Privacy unit and neighbours: add/remove one privacy unit (user-level) that contributes to at
most ``max_partitions`` keys, and counts at most once per key (distinct-user counts). A key
whose only user is the added one must appear with probability ≤ δ (per key δ/k).

Static (bounded input; one decision per key on its final distinct-user count n):
  * ``TruncatedGeometricSelection`` — the optimal (ε, δ) rule of Desfontaines, Voss, Gipson,
    Mandayam, "Differentially private partition selection" (PoPETs 2022): release with
    probability π(n), π(0) = 0, π(n) = min(e^ε π(n-1) + δ, 1 - e^{-ε}(1 - π(n-1) - δ), 1), with
    (ε, δ) = (ε/k, δ/k) per key. It is equivalent to truncated-geometric noise + threshold; the
    decision is sampled exactly (lazy rigorous comparison of a uniform with π(n)).
  * ``LaplaceThresholdSelection`` — PipelineDP-style: n + DLap(k/ε) ≥ τ with the smallest
    integer τ such that P[1 + DLap ≥ τ] ≤ δ/k. (ε, δ)-DP.
  * ``GaussianThresholdSelection`` — n + DGauss(σ²) ≥ τ, σ for (ε, δ/2) via zCDP with L2
    sensitivity √k; τ with P[1 + noise ≥ τ] ≤ δ/(2k). (ε, δ)-DP.

Continual (unbounded stream): ``ContinualKeySelection`` — per key an SVT on its running
distinct-user count, tested at EVERY global step from the key's first contribution:
select at step t iff count_t + Y_t > τ_t + Z, Z ~ DLap(2/ε') drawn once (ε' = ε/k), Y_t ~
DLap(2/ε') fresh (counts are monotone, Lyu-Su-Li), thresholds on the GLOBAL step clock
τ_t = z0 + m_t - 1, where P[Z ≤ -z0] ≤ δ_f/2 and P[Y ≥ m_t] ≤ (δ_f/2)·6/(π² t²). Then for a key
whose count never exceeds 1, P[selected ever] ≤ δ_f/2 + Σ_t (δ_f/2)·6/(π² t²) = δ_f over the
whole unbounded horizon (union bound; a convergent Basel series). A key is selected once, stays
selected, and nothing before its selection step is ever released (no back-fill).
Guarantee: per key the selection time is an SVT output (ε'-DP) except that steps before the key
exists are not evaluated; that event has probability ≤ δ_f, so a key is (ε', (1+e^{ε'})δ_f)-DP,
and with δ_f = δ/(k(1+e^{ε'})) a user in ≤ k keys gets (ε, δ).
"""

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Optional, Tuple

import numpy as np
from mpmath.libmp import libmpf
from mpmath.libmp import libmpi

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import epsilon_from_rho
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.errors import InvalidParamsError
from beam_dp.noise import RandomSource
from beam_dp.noise import discrete_gaussian
from beam_dp.noise import discrete_laplace
from beam_dp.noise.geometric import bernoulli_dlap_tail
from beam_dp.noise.geometric import bernoulli_from_enclosure
from beam_dp.noise.geometric import dlap_tail
from beam_dp.noise.geometric import geometric_dlap_tail
from beam_dp.noise.geometric import log_dlap_tail
from beam_dp.noise.samplers import bernoulli_exp
from beam_dp.noise.samplers import as_rational_up
from beam_dp.noise.samplers import check_noise_scale

__all__ = [
    'ContinualKeySelection',
    'GaussianThresholdSelection',
    'KeySelectionState',
    'LaplaceThresholdSelection',
    'TruncatedGeometricSelection',
    'dlap_threshold',
]


#: ``advance_lazy``: gaps below this are tested step by step (q_t is not small there, a
#: selection is near); the skip-ahead sampler caps a skip at ``_SKIP_LIMIT`` steps.
_SKIP_MIN_GAP = 4
#: ... unless q_t is below 2**-64 even there (a per-key ε' above ~29: the gap-3 test then
#: almost never succeeds, and testing step by step would walk an idle key through every step):
#: such a gap ≥ 1 is skipped ahead too (the thinning is exact for every gap ≥ 1).
_LOG_SMALL_Q = -64 * math.log(2.0)
_SKIP_LIMIT = 1 << 40
_LOG2 = math.log(2.0)


def _check(owner, epsilon, delta, max_partitions):
    v.check_positive(owner, 'epsilon', epsilon)
    v.check_probability(owner, 'delta', delta, allow_zero=False)
    v.check_positive_int(owner, 'max_partitions', max_partitions)


def dlap_threshold(scale: float, target: Optional[float] = None,
                   log_target: Optional[float] = None) -> int:
    """The smallest integer m ≥ 1 with P[DLap(scale) ≥ m] ≤ target (public, float).

    Give ``target`` or its logarithm ``log_target``: in log space a target below the float
    range (a large per-key ε makes δ_f = δ/(k(1 + e^ε')) underflow) still has its threshold,
    and nothing overflows for any ε (issue 21)."""
    if log_target is None:
        log_target = math.log(target)
    b = float(as_rational_up(scale))
    log1p_a = math.log1p(math.exp(-1.0 / b))
    m = max(1, math.ceil(b * (-log_target - log1p_a)))
    while log_dlap_tail(scale, m) > log_target + _LOG_SLACK:
        m += 1
    return m


#: ln(1 - 1e-9): the relative slack of ``dlap_threshold``'s comparison (float rounding).
_LOG_SLACK = math.log1p(-1e-9)


def _log1p_exp(x: float) -> float:
    """ln(1 + e^x) without overflow."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def _log_basel_weight(j: int) -> float:
    """ln(6/(π² j²)) (``basel_weight`` in log space: no underflow for any step)."""
    if j < 1:
        raise ValueError(f'basel_weight: j must be >= 1, got {j}.')
    return math.log(6.0 / math.pi ** 2) - 2.0 * math.log(j)


@dataclasses.dataclass(frozen=True)
class _SelectionParams:
    """(ε, δ) for a privacy unit contributing to at most ``max_partitions`` keys; checked at
    construction. Every selection below spends exactly (ε, δ) unless it overrides this."""
    epsilon: float
    delta: float
    max_partitions: int = 1

    def __post_init__(self):
        owner = next(c.__name__ for c in type(self).__mro__ if not c.__name__.startswith('_'))
        _check(owner, self.epsilon, self.delta, self.max_partitions)
        for scale, kind in self.noise_scales():
            check_noise_scale(owner, scale, 'raise epsilon or lower max_partitions (in a '
                              'transform: raise the selection budget, or lower the privacy '
                              "unit's max_keys_per_unit)", kind)

    def noise_scales(self) -> Tuple[Tuple[float, str], ...]:
        """(scale, kind) of every noise the selection draws: checked at construction against
        the exact samplers' range (``beam_dp.noise.noise_scale_problem``)."""
        return ()

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon, delta=self.delta)


@dataclasses.dataclass(frozen=True)
class TruncatedGeometricSelection(_SelectionParams):
    """Optimal static (ε, δ) partition selection (Desfontaines et al. 2022)."""
    def selection_probability(self, n: int) -> float:
        eps, delta = self.epsilon / self.max_partitions, self.delta / self.max_partitions
        pi = 0.0
        for _ in range(int(n)):
            # e^ε·π without overflow: once it would exceed 1 the min is the other term.
            log_grown = eps + math.log(pi) if pi > 0 else -math.inf
            grown = math.exp(log_grown) if log_grown < 1.0 else math.e
            pi = min(grown + delta, 1 - math.exp(-eps) * (1 - pi - delta), 1.0)
        return pi

    def _enclosure(self, n: int, prec: int):
        k = self.max_partitions
        eps = (libmpf.from_rational(*Fraction(self.epsilon).as_integer_ratio(), prec,
                                    libmpf.round_floor),) * 2
        eps = libmpi.mpi_div(eps, (libmpf.from_int(k),) * 2, prec)
        d = Fraction(self.delta) / k
        delta = (libmpf.from_rational(d.numerator, d.denominator, prec, libmpf.round_floor),
                 libmpf.from_rational(d.numerator, d.denominator, prec, libmpf.round_ceiling))
        e_pos = libmpi.mpi_exp(eps, prec)
        e_neg = libmpi.mpi_exp(libmpi.mpi_neg(eps), prec)
        one = (libmpf.fone, libmpf.fone)
        pi = (libmpf.fzero, libmpf.fzero)
        for _ in range(int(n)):
            a = libmpi.mpi_add(libmpi.mpi_mul(e_pos, pi, prec), delta, prec)
            b = libmpi.mpi_sub(one, libmpi.mpi_mul(e_neg, libmpi.mpi_sub(
                libmpi.mpi_sub(one, pi, prec), delta, prec), prec), prec)
            lo = min((a[0], b[0], libmpf.fone), key=lambda x: Fraction(*libmpf.to_rational(x)))
            hi = min((a[1], b[1], libmpf.fone), key=lambda x: Fraction(*libmpf.to_rational(x)))
            pi = (lo, hi)
            if lo == libmpf.fone:
                break
        return (Fraction(*libmpf.to_rational(pi[0])), Fraction(*libmpf.to_rational(pi[1])))

    def select(self, n: int, rng: RandomSource) -> bool:
        """Exact Bernoulli(π(n)) for a key with n distinct users."""
        if n <= 0:
            return False
        return bernoulli_from_enclosure(rng, lambda prec: self._enclosure(n, prec))


@dataclasses.dataclass(frozen=True)
class LaplaceThresholdSelection(_SelectionParams):
    """Static selection by n + DLap(k/ε) ≥ τ (PipelineDP's Laplace thresholding)."""
    @property
    def scale(self) -> float:
        return self.max_partitions / self.epsilon

    def noise_scales(self) -> Tuple[Tuple[float, str], ...]:
        return ((self.scale, 'laplace'),)

    @property
    def threshold(self) -> int:
        # P[1 + Y ≥ τ] = P[Y ≥ τ - 1] ≤ δ/k.
        return 1 + dlap_threshold(self.scale, self.delta / self.max_partitions)

    def selection_probability(self, n: int) -> float:
        return 0.0 if n <= 0 else dlap_tail(self.scale, self.threshold - n)

    def select(self, n: int, rng: RandomSource) -> bool:
        return n > 0 and bernoulli_dlap_tail(rng, self.scale, self.threshold - n)


@functools.lru_cache(maxsize=4096)
def _dgauss_tail(s2: float, m: int) -> float:
    """P[DGauss(σ²) ≥ m] by direct summation (public; float)."""
    radius = int(40 * math.sqrt(s2)) + 10
    y = np.arange(-radius, radius + 1)
    w = np.exp(-y.astype(float) ** 2 / (2 * s2))
    return min(1.0, float(w[y >= m].sum() / w.sum()))     # float sums may exceed 1


@dataclasses.dataclass(frozen=True)
class GaussianThresholdSelection(_SelectionParams):
    """Static selection by n + DGauss(σ²) ≥ τ; σ from (ε, δ/2) via zCDP, τ from δ/(2k)."""
    @property
    def sigma2(self) -> float:
        rho = rho_for_epsilon_delta(self.epsilon, self.delta / 2)
        return self.max_partitions / (2 * rho)          # ρ = Δ₂²/(2σ²), Δ₂² = k.

    def noise_scales(self) -> Tuple[Tuple[float, str], ...]:
        rho = rho_for_epsilon_delta(self.epsilon, self.delta / 2)
        # ρ underflows to 0 for a tiny ε: σ² is then infinite (refused, not a ZeroDivisionError).
        return ((self.max_partitions / (2 * rho) if rho > 0 else math.inf, 'gaussian'),)

    def _tail(self, m: int) -> float:
        return _dgauss_tail(float(as_rational_up(self.sigma2)), int(m))

    @property
    def threshold(self) -> int:
        target = self.delta / (2 * self.max_partitions)
        m = 1
        while self._tail(m) > target:
            m += max(1, int(math.sqrt(self.sigma2) / 4))
        while m > 1 and self._tail(m - 1) <= target:
            m -= 1
        return 1 + m

    def privacy_cost(self) -> PrivacyCost:
        rho = self.max_partitions / (2 * float(as_rational_up(self.sigma2)))
        return PrivacyCost(epsilon=min(self.epsilon, epsilon_from_rho(rho, self.delta / 2)),
                           delta=self.delta)

    def selection_probability(self, n: int) -> float:
        return 0.0 if n <= 0 else self._tail(self.threshold - n)

    def select(self, n: int, rng: RandomSource) -> bool:
        return n > 0 and n + discrete_gaussian(rng, self.sigma2) >= self.threshold


@dataclasses.dataclass(frozen=True)
class KeySelectionState:
    """One key: its private running count, Z (drawn once), last evaluated global step, the
    step at which it was selected (None while not selected), and for ``advance_lazy`` the drawn
    schedule ``due = (T, mode, g0)`` of the next step whose test is drawn (None: not drawn)."""
    step: int
    count: int = 0
    noise: Optional[int] = None
    selected_step: Optional[int] = None
    due: Optional[Tuple[int, str, Optional[int]]] = None


@dataclasses.dataclass(frozen=True)
class ContinualKeySelection(_SelectionParams):
    """Continual, never-back-filled key selection on an unbounded stream (see module doc).

    Args:
      epsilon, delta: the (ε, δ) a unit contributing to ≤ ``max_partitions`` keys gets.
      max_partitions: k, keys per privacy unit (each counted once per key).
    """
    @property
    def key_epsilon(self) -> float:
        return self.epsilon / self.max_partitions

    @property
    def log_failure_probability(self) -> float:
        """ln δ_f = ln δ - ln k - ln(1 + e^ε') (log space: finite for every ε)."""
        return (math.log(self.delta) - math.log(self.max_partitions)
                - _log1p_exp(self.key_epsilon))

    @property
    def failure_probability(self) -> float:
        """δ_f: the bound on P[a key whose count stays ≤ 1 is ever selected] (0.0 once it is
        below the float range: the thresholds use ``log_failure_probability``)."""
        return math.exp(self.log_failure_probability)

    @property
    def scale(self) -> float:
        return 2 / self.key_epsilon

    def noise_scales(self) -> Tuple[Tuple[float, str], ...]:
        return ((self.scale, 'laplace'),)

    @property
    def noise_floor(self) -> int:
        """z0 with P[Z ≤ -z0] ≤ δ_f/2."""
        return dlap_threshold(self.scale, log_target=self.log_failure_probability - _LOG2)

    def threshold(self, step: int) -> int:
        """τ_t on the global step clock (public)."""
        m_t = dlap_threshold(self.scale, log_target=(self.log_failure_probability - _LOG2
                                                     + _log_basel_weight(step)))
        return self.noise_floor + m_t - 1

    def init_state(self, first_step: int = 1) -> KeySelectionState:
        """A key first seen at global step ``first_step`` (it is tested from that step on)."""
        if first_step < 1:
            raise InvalidParamsError(f'ContinualKeySelection: first_step must be >= 1, got '
                                     f'{first_step}.')
        return KeySelectionState(step=first_step - 1)

    def advance(self, state: KeySelectionState, step: int, new_units: int,
                rng: RandomSource) -> Tuple[bool, KeySelectionState]:
        """Evaluates every global step in (state.step, step]; ``step`` adds ``new_units``
        distinct units. Returns (selected as of ``step``, state)."""
        if step <= state.step or new_units < 0:
            raise InvalidParamsError(f'ContinualKeySelection: need step > {state.step} and '
                                     f'new_units >= 0, got {step}, {new_units}.')
        if state.selected_step is not None:
            return True, dataclasses.replace(state, step=step)
        noise = state.noise
        if noise is None:
            noise = discrete_laplace(rng.derive('key-threshold'), self.scale)
        count = state.count
        for t in range(state.step + 1, step + 1):
            if t == step:
                count += int(new_units)
            gap = self.threshold(t) + noise - count + 1     # select ⟺ Y ≥ τ_t + Z - count + 1
            if bernoulli_dlap_tail(rng.derive('key-step', t), self.scale, gap):
                return True, KeySelectionState(step, count + (new_units if t < step else 0),
                                               noise, t)
        return False, KeySelectionState(step, count, noise, None)

    def step(self, state: KeySelectionState, value: int,
             rng: RandomSource) -> Tuple[bool, KeySelectionState]:
        return self.advance(state, state.step + 1, value, rng)

    # -- Lazy evaluation (skip-ahead): the same law without a draw per step -------------------

    def advance_lazy(self, state: KeySelectionState, step: int, new_units: int,
                     rng: RandomSource) -> Tuple[bool, KeySelectionState]:
        """``advance`` with the SAME law (see ``_lazy_tests``) but without a draw per step:
        while the count is constant, the next step whose test can succeed is sampled ahead
        (``state.due``), so a caller may skip the steps before it. Returns (selected as of
        ``step``, state); ``selected_step`` may be any step in (state.step, step]."""
        if step <= state.step or new_units < 0:
            raise InvalidParamsError(f'ContinualKeySelection: need step > {state.step} and '
                                     f'new_units >= 0, got {step}, {new_units}.')
        if state.selected_step is not None:
            return True, dataclasses.replace(state, step=step, due=None)
        noise = state.noise
        if noise is None:
            noise = discrete_laplace(rng.derive('key-threshold'), self.scale)
        count, due = state.count, state.due
        # Steps before ``step`` keep the count; at ``step`` it grows (the schedule is redrawn).
        spans = [(state.step + 1, step - 1, count)] if new_units else []
        spans.append((step if new_units else state.step + 1, step, count + int(new_units)))
        for i, (lo, hi, c) in enumerate(spans):
            if i == 1:
                due = None
            chosen, due = self._lazy_tests(lo, hi, c, noise, due, rng)
            if chosen is not None:
                return True, KeySelectionState(step, count + int(new_units), noise, chosen)
        return False, KeySelectionState(step, count + int(new_units), noise, None, due)

    def schedule(self, state: KeySelectionState, rng: RandomSource) -> KeySelectionState:
        """The state with its schedule drawn (``state.due`` set) from step ``state.step + 1``
        on, so a caller knows when to evaluate next (``due[0]``: a global step)."""
        if state.selected_step is not None or state.due is not None:
            return state
        noise = state.noise
        if noise is None:
            noise = discrete_laplace(rng.derive('key-threshold'), self.scale)
        due = self._draw_due(state.step + 1, state.count, noise, rng)
        return dataclasses.replace(state, noise=noise, due=due)

    def _gap(self, t: int, count: int, noise: int) -> int:
        return self.threshold(t) + noise - count + 1       # select at t ⟺ Y_t ≥ gap

    def _lazy_tests(self, lo: int, hi: int, count: int, noise: int, due, rng: RandomSource):
        """The tests of steps lo..hi at a constant count: (selection step or None, schedule).

        Law. With the count constant, the tests are independent Bernoulli(q_t) with
        q_t = P[Y ≥ g_t], g_t = τ_t + Z - count + 1 non-decreasing in t (τ_t is), so q_t is
        non-increasing. Thinning: from step t0, i.i.d. Bernoulli(q_t0) trials B_t (their first
        success after G ~ Geometric failures, one exact draw ``geometric_dlap_tail``), and at a
        candidate T an acceptance Bernoulli(q_T/q_t0) = Bernoulli(a^(g_T - g_t0)) (g ≥ 1:
        q(g) = a^g/(1+a)); on rejection a fresh schedule from T + 1. Each step's test is then
        a fresh Bernoulli(q_t) given every earlier step failed (memorylessness of the trials;
        a new count or the cap ``_SKIP_LIMIT`` also restarts from a step no trial has used),
        which is exactly ``advance``'s law. Small gaps (q not small) are tested step by step
        at ``advance``'s own address. Every draw has its own address: ('key-skip', t0),
        ('key-accept', T), ('key-step', t); t0 and T strictly increase for one key.
        """
        while lo <= hi:
            if due is None or due[0] < lo:
                due = self._draw_due(lo, count, noise, rng)
            when, mode, g0 = due
            if when > hi:
                break
            if mode == 'test':
                hit = bernoulli_dlap_tail(rng.derive('key-step', when), self.scale,
                                          self._gap(when, count, noise))
            elif mode == 'thin':
                excess = self._gap(when, count, noise) - g0
                n, d = as_rational_up(self.scale).as_integer_ratio()
                hit = bool(bernoulli_exp(rng.derive('key-accept', when), excess * d, n))
            else:                                          # 'redraw': no trial at or after it
                lo, due = when, None
                continue
            if hit:
                return when, None
            lo, due = when + 1, None
        return None, due

    def _draw_due(self, t0: int, count: int, noise: int, rng: RandomSource):
        g0 = self._gap(t0, count, noise)
        if g0 < 1 or (g0 < _SKIP_MIN_GAP and log_dlap_tail(self.scale, g0) > _LOG_SMALL_Q):
            return (t0, 'test', None)
        skip = geometric_dlap_tail(rng.derive('key-skip', t0), self.scale, g0, _SKIP_LIMIT)
        return (t0 + skip, 'redraw' if skip >= _SKIP_LIMIT else 'thin', g0)
