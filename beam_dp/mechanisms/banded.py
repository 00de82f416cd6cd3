"""Banded square-root factorization for ρ-zCDP, calibrated to a unit that participates in at most
S steps per key (banded matrix factorization: McKenna et al. 2024 "Scaling up the banded matrix
factorization mechanism", the BandMF of ``jax_privacy.matrix_factorization.toeplitz``; the banded
square root of Kalinin & Lampert 2024, "Banded square root matrix factorization for
differentially private model training"). Pure numpy.

Privacy unit and neighbours: as ``BLTCounter`` — any change whose per-bin totals of absolute
changes have L2 norm ≤ ``l2_sensitivity`` (default ``l1_sensitivity``); with
``participation=Participation(...)`` (≤ ``max_groups`` keys, ≤ S steps per key, ≤ a per step,
≤ ``total_bound`` in all) the smaller multi-participation bound of
``beam_dp.mechanisms.participation`` is used; add/remove neighbours.

Construction. C is the lower-triangular Toeplitz matrix with p = ``bands`` coefficients
c_0 = 1 ≥ c_1 ≥ … ≥ c_{p-1} > 0 and zeros beyond: the first p coefficients of the square-root
factorization (c_k = binom(2k, k)/4^k) rounded to dyadic rationals P_k/2^B (B = ``COEF_BITS``;
rounding to nearest keeps them positive and non-increasing; ``exact_coefficients`` are the ones
used everywhere). Per step t and bin:
  1. encoder (exact integers): u_t = Σ_{k<p} P_k·x_{t-k} = 2^B·(Cx)_t — exact, no rounding;
  2. y_t = u_t + g_t, g_t an exact discrete Gaussian with integer variance parameter σ_B² ≥
     (2^B·Δ)²/(2ρ) — the only randomness;
  3. decoder (float64 post-processing of y only): x̂ = C⁻¹(y·2^-B), release_t = Σ_{s≤t} x̂_s.
p = 1 is fresh per-step noise; p = T the square-root factorization. The band trades the
per-participation column norm ‖c‖ (small for small p) against the correlation that lowers
the error of prefix sums (large p), and against how many of a unit's S participations overlap
within a band.

Privacy. y is the discrete Gaussian mechanism on the integer vector u(x) (CKS 2020, Thm 14 per
coordinate, composed): ρ = ‖u(x) − u(x')‖²/(2σ_B²) ≤ (2^B·Δ)²/(2σ_B²) ≤ ρ, with Δ ≥ sup ‖C(x − x')‖
over neighbours:
  * without ``participation``: Δ = ‖c‖·l2 (C ≥ 0 and every column has norm ≤ ‖c‖: a bin's change
    with L1 total n moves C·x by at most n‖c‖);
  * with it: Δ = ‖c‖·min(l2, capped_l2(total, a·r_S, groups)), r_S = √(U(S)/g_0) from the
    overlaps g_d = Σ_m c_m c_{m+d} (zero for d ≥ p), which are non-increasing because c is
    (``beam_dp.mechanisms.participation`` derives the bound; it is checked against the brute-force
    supremum in tests/mechanisms/test_banded.py).
The overlaps are the untruncated sums, an upper bound at every horizon, so ``horizon=None`` runs
forever. Floats (‖c‖, g_d) are inflated by 1e-9 relative; σ_B² is rounded up to an integer.

Exact: the encoder, the grid values u, the noise law. Float: the decoder and the releases
(post-processing), ``release_variance`` = V·Σ_{j<t} b_j², b = prefix sums of C⁻¹'s coefficients,
V = Var(g)/4^B (the discrete Gaussian's exact variance). State per bin: the last p − 1 inputs
(ints) and decoded values (floats), the running release, t.
"""

import dataclasses
import fractions
import functools
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.participation import banded_bound
from beam_dp.mechanisms.participation import capped_l2
from beam_dp.noise import RandomSource
from beam_dp.noise.wide_gaussian import discrete_gaussian_any
from beam_dp.noise.wide_gaussian import discrete_gaussian_variance_any

__all__ = [
    'BandedCounter',
    'BandedInverseCounter',
    'BandedState',
    'MAX_BANDS',
    'band_candidates',
    'inverse_sqrt_coefficients',
    'series_inverse',
    'sqrt_coefficients',
]

#: Fractional bits of the dyadic coefficients.
COEF_BITS = 32
#: Largest band (state is O(bands) per bin).
MAX_BANDS = 512
_INFLATION = 1 + 1e-9


def sqrt_coefficients(count: int) -> np.ndarray:
    """The first ``count`` coefficients of the square-root factorization, binom(2k, k)/4^k."""
    k = np.arange(1, count, dtype=float)
    return np.concatenate([[1.0], np.cumprod((2 * k - 1) / (2 * k))])


def _newton_inverse(c: np.ndarray, n: int) -> np.ndarray:
    g = np.array([1.0 / c[0]])
    k = 1
    while k < n:
        k = min(2 * k, n)
        ck = np.zeros(k)
        ck[:min(k, len(c))] = c[:k]
        size = 1 << (2 * k - 1).bit_length()
        fg = np.fft.rfft(g, size)
        prod = np.fft.irfft(np.fft.rfft(ck, size) * fg, size)[:k]       # c·g mod x^k
        corr = -prod
        corr[0] += 2.0
        g = np.fft.irfft(fg * np.fft.rfft(corr, size), size)[:k]         # g·(2 − c·g)
    return g[:n]


def series_inverse(c: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients h of 1/c(x), c a polynomial with c_0 ≠ 0: Newton iteration (FFT
    products) for the first L = max(1024, 8·len(c)) terms G, then blocks of L: within a block
    c∗h = e, e the (≤ len(c) − 1) terms the previous values force, so the block is G∗e."""
    c = np.asarray(c, dtype=float)
    p = len(c)
    block = 1 << max(10, (8 * p - 1).bit_length())
    head = _newton_inverse(c, min(n, block))
    if n <= block or p == 1:
        return np.concatenate([head, np.zeros(max(0, n - len(head)))])
    out = np.empty(n)
    out[:block] = head
    size = 1 << (2 * block - 1).bit_length()
    g_hat = np.fft.rfft(head, size)
    start = block
    while start < n:
        prev = out[start - (p - 1):start]
        e = -np.convolve(prev, c)[p - 1:2 * p - 2]
        length = min(block, n - start)
        out[start:start + length] = np.fft.irfft(np.fft.rfft(e, size) * g_hat, size)[:length]
        start += length
    return out


def band_candidates(horizon: Optional[int]) -> Tuple[int, ...]:
    """The bands tried by the counter choice: 2, 4, 8, … up to min(horizon, ``MAX_BANDS``);
    for an unbounded horizon (evaluated over 2^20 steps by default) 2, 8, 32, 128, 512; for a
    one-step horizon the single band 1 (nothing to correlate)."""
    if horizon is None:
        return tuple(p for p in (2, 8, 32, 128, 512) if p <= MAX_BANDS)
    if horizon < 2:
        return (1,)
    out, p = [], 2
    while p <= min(horizon, MAX_BANDS):
        out.append(p)
        p *= 2
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _b_squared_cumsum(dyadic_coefficients: Tuple[int, ...], n: int) -> np.ndarray:
    """Σ_{m≤j} b_m² for j = 0..n−1, b the prefix sums of C⁻¹'s coefficients (read-only; shared
    by every counter with these coefficients: they do not depend on ρ or the bounds)."""
    c = np.ldexp(np.array(dyadic_coefficients, dtype=float), -COEF_BITS)
    b = np.cumsum(series_inverse(c, n))
    return _dyadic.readonly(np.cumsum(b * b))


@dataclasses.dataclass(frozen=True)
class BandedState:
    """t steps consumed; ``inputs`` (p−1, d) the last inputs, newest first (Python ints);
    ``decoded`` (p−1, d) the last x̂, newest first; ``release`` (d,). Read-only arrays."""
    t: int
    inputs: np.ndarray
    decoded: np.ndarray
    release: np.ndarray

    def nbytes(self) -> int:
        ints = sum((int(x).bit_length() + 7) // 8 + 1 for x in self.inputs.flat)
        return ints + self.decoded.nbytes + self.release.nbytes + 8


@dataclasses.dataclass(frozen=True)
class BandedCounter:
    """Continual prefix sums under ρ-zCDP with banded square-root correlated noise.

    Args:
      rho: total ρ (zCDP).
      bands: p, the number of non-zero coefficients of C (1 … ``MAX_BANDS``).
      horizon: T (public) or None (runs forever; the horizon never affects privacy here).
      l1_sensitivity, l2_sensitivity, dimension: as ``BLTCounter``.
      participation: optional ``Participation``: multi-participation calibration (above).

    Raises:
      InvalidParamsError: on a bad parameter, with the argument named.
    """
    rho: float
    bands: int = 16
    horizon: Optional[int] = None
    l1_sensitivity: float = 1.0
    l2_sensitivity: Optional[float] = None
    dimension: int = 1
    participation: Optional[Participation] = None

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive(owner, 'rho', self.rho)
        v.check_positive_int(owner, 'bands', self.bands)
        if self.bands > MAX_BANDS:
            raise InvalidParamsError(f'{owner}: bands must be at most {MAX_BANDS}, got '
                                     f'{self.bands}.')
        object.__setattr__(self, 'bands', int(self.bands))
        if self.horizon is not None:
            v.check_positive_int(owner, 'horizon', self.horizon)
            object.__setattr__(self, 'horizon', int(self.horizon))
        _dyadic.check_privacy_params(owner, None, self.rho, self.l1_sensitivity,
                                     self.l2_sensitivity)
        v.check_positive_int(owner, 'dimension', self.dimension)
        if self.participation is not None and not isinstance(self.participation, Participation):
            raise InvalidParamsError(f'{owner}: participation must be a Participation, got '
                                     f'{self.participation!r}.')
        try:
            finite = math.isfinite(self.sensitivity ** 2 / self.rho) and self.sigma2_grid > 0
        except (OverflowError, ValueError, ZeroDivisionError):
            finite = False
        if not finite:
            raise InvalidParamsError(f'{owner}: l2_sensitivity and rho give no finite noise '
                                     f'(rho={self.rho!r}).')

    # ----------------------------------------------------------------- parameters
    @functools.cached_property
    def _dyadic_coefficients(self) -> Tuple[int, ...]:
        return tuple(max(1, round(math.ldexp(c, COEF_BITS)))
                     for c in sqrt_coefficients(self.bands))

    @functools.cached_property
    def exact_coefficients(self) -> np.ndarray:
        """c_0..c_{p-1} as used (dyadic, exactly representable as float64)."""
        return np.ldexp(np.array(self._dyadic_coefficients, dtype=float), -COEF_BITS)

    @functools.cached_property
    def overlaps(self) -> np.ndarray:
        """g_d = Σ_m c_m c_{m+d} for d = 0..p−1 (untruncated; zero beyond)."""
        c = self.exact_coefficients
        return np.array([float(np.dot(c[:len(c) - d], c[d:])) for d in range(len(c))])

    @property
    def column_norm(self) -> float:
        """‖c‖ (inflated by 1e-9 for float error)."""
        return math.sqrt(self.overlaps[0] * _INFLATION)

    def effective_participations(self) -> float:
        """r_S = √(U(S)/g_0) ≤ S (S = the participation's steps, capped at the horizon)."""
        p = self.participation
        steps = p.max_steps if self.horizon is None else min(p.max_steps, self.horizon)
        g = self.overlaps                 # zero beyond the band: O(p) for any S
        return min(float(steps), math.sqrt(banded_bound(g, steps) / g[0] * _INFLATION))

    @functools.cached_property
    def effective_l2(self) -> float:
        """l2, or with ``participation`` min(l2, capped_l2(total, a·r_S, groups))."""
        l2 = self.l1_sensitivity if self.l2_sensitivity is None else self.l2_sensitivity
        if self.participation is None:
            return l2
        p = self.participation
        cap = p.step_bound * self.effective_participations()
        local = (math.sqrt(p.total_bound * p.step_bound * _INFLATION)
                 * float(np.sum(self.exact_coefficients)) / self.column_norm)
        return min(l2, capped_l2(p.total_bound, cap, p.max_groups), local)

    @functools.cached_property
    def sensitivity(self) -> float:
        """Δ in value units: ‖c‖·effective_l2."""
        return self.column_norm * self.effective_l2

    @functools.cached_property
    def sigma2_grid(self) -> fractions.Fraction:
        """σ_B² (grid units 2^-B, an integer): ⌈(2^B Δ)²/(2ρ)⌉."""
        value = math.ldexp(self.sensitivity, COEF_BITS) ** 2 / (2 * self.rho)
        return fractions.Fraction(math.ceil(value * (1 + 1e-12)))

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(rho=self.rho)

    @functools.cached_property
    def step_noise_variance(self) -> float:
        """V = Var(g)/4^B: the variance of one step's noise in value units."""
        return discrete_gaussian_variance_any(self.sigma2_grid) / 4.0 ** COEF_BITS

    @property
    def noise_stddev(self) -> float:
        return math.sqrt(self.step_noise_variance)

    # ----------------------------------------------------------------- the mechanism
    def init_state(self) -> BandedState:
        n, d = self.bands - 1, self.dimension
        inputs = np.empty((n, d), dtype=object)
        inputs[...] = 0
        return BandedState(0, _dyadic.readonly(inputs), _dyadic.readonly(np.zeros((n, d))),
                           _dyadic.readonly(np.zeros(d)))

    def encode(self, inputs: np.ndarray, value) -> Tuple[np.ndarray, np.ndarray]:
        """(u_t = Σ_k P_k x_{t-k} as Python ints, the new input history). Exact."""
        x = np.asarray(_dyadic.exact_ints(value, self.dimension)).astype(object)
        p = self._dyadic_coefficients
        u = x * p[0]
        for k in range(1, self.bands):
            u = u + inputs[k - 1] * p[k]
        new = np.concatenate([x[None, :], inputs[:-1]], axis=0) if self.bands > 1 else inputs
        return u, new

    def step(self, state: BandedState, value, rng: RandomSource) -> Tuple[np.ndarray, BandedState]:
        """Consumes step t+1's integer vector (already bounded); returns the prefix estimate."""
        if self.horizon is not None and state.t >= self.horizon:
            raise UnsupportedMechanismError(
                f'{type(self).__name__}: horizon {self.horizon} reached; releasing step '
                f'{state.t + 1} would exceed the declared privacy cost.')
        u, inputs = self.encode(state.inputs, value)
        y = u + discrete_gaussian_any(rng, self.sigma2_grid, self.dimension).astype(object)
        y_value = np.array([math.ldexp(float(e), -COEF_BITS) for e in y.tolist()], dtype=float)
        c = self.exact_coefficients
        x_hat = y_value - c[1:] @ state.decoded if self.bands > 1 else y_value
        decoded = (np.concatenate([x_hat[None, :], state.decoded[:-1]], axis=0)
                   if self.bands > 1 else state.decoded)
        release = state.release + x_hat
        return release.copy(), BandedState(state.t + 1, _dyadic.readonly(inputs),
                                           _dyadic.readonly(decoded), _dyadic.readonly(release))

    # ----------------------------------------------------------------- closed forms
    def _b_squared_cumsum(self, n: int) -> np.ndarray:
        return _b_squared_cumsum(self._dyadic_coefficients, n)

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after step t: V·Σ_{j<t} b_j²."""
        if t <= 0:
            return 0.0
        n = 1 << max(4, (t - 1).bit_length())
        return float(self.step_noise_variance * self._b_squared_cumsum(n)[t - 1])

    def variances(self, horizon: int) -> np.ndarray:
        n = 1 << max(4, (horizon - 1).bit_length())
        return self.step_noise_variance * self._b_squared_cumsum(n)[:horizon]


# -- the banded INVERSE square root (BISR) ---------------------------------------------------------

def inverse_sqrt_coefficients(count: int) -> np.ndarray:
    """The first ``count`` coefficients of √(1 − x), the inverse square root of the prefix-sum
    matrix: r_0 = 1, r_k = −binom(2k, k)/(4^k (2k − 1))."""
    a = sqrt_coefficients(count)
    k = np.arange(1, count, dtype=float)
    return np.concatenate([[1.0], -a[1:] / (2 * k - 1)])


#: Largest horizon of a ``BandedInverseCounter`` (its sensitivity reads T coefficients and
#: overlaps: O(T) memory, O(T log T) time at construction).
MAX_INVERSE_HORIZON = 1 << 21

#: Absolute float error allowed on each coefficient of C = R⁻¹ (series inversion by FFT): the
#: sensitivity uses a non-increasing majorant of |c| + this.
_COEF_TOL = 1e-12


@functools.lru_cache(maxsize=64)
def _inverse_encoder(dyadic_r: Tuple[int, ...], horizon: int) -> Tuple[np.ndarray, np.ndarray]:
    """(c, overlaps): c = the first ``horizon`` coefficients of 1/r̃(x) bounded above (a
    non-increasing majorant of |c| + ``_COEF_TOL``) and g_d = Σ_m c_m c_{m+d}, d < horizon
    (FFT autocorrelation; read-only)."""
    r = np.ldexp(np.array(dyadic_r, dtype=float), -COEF_BITS)
    c = np.abs(series_inverse(r, horizon)) + _COEF_TOL
    c = np.maximum.accumulate(c[::-1])[::-1]
    size = 1 << (2 * horizon - 1).bit_length()
    f = np.fft.rfft(c, size)
    g = np.fft.irfft(f * np.conj(f), size)[:horizon]
    g = np.maximum(g, 0.0) * _INFLATION + horizon * 1e-15 * float(c[0]) ** 2
    return _dyadic.readonly(c), _dyadic.readonly(np.maximum.accumulate(g[::-1])[::-1])


@dataclasses.dataclass(frozen=True)
class BandedInverseCounter(BandedCounter):
    """Continual prefix sums under ρ-zCDP with the banded INVERSE square-root factorization
    (BISR: Kalinin & Lampert 2024; "Back to square roots", 2025; ``jax_privacy``'s banded
    inverse): the decoder side of the square-root factorization is banded instead of the
    encoder.

    Construction. R = C⁻¹ is the lower-triangular Toeplitz matrix with the p = ``bands`` first
    coefficients of √(1 − x) (r_0 = 1 > 0 > r_1 ≥ …), rounded to dyadic P_k/2^B, zero beyond;
    the encoder C = R⁻¹ is dense (its coefficients c = 1/r̃(x): non-negative, non-increasing,
    summable: the columns' norms stay bounded as the horizon grows, unlike the square root's),
    B = A·R. Per step t and bin, with V_t = 2^B·v_t:
      1. encoder (exact integers, a p-term recursion: R v = x): V_t = round(2^B x_t −
         Σ_{k=1}^{p-1} P_k V_{t-k} / 2^B), so v = C(x + e) with |e_t| ≤ 2^-(B+1) (the rounding);
      2. y_t = V_t + z_t, z_t an exact discrete Gaussian of integer variance parameter
         σ_B² ≥ (2^B Δ)²/(2ρ) — the only randomness;
      3. decoder (post-processing of y): x̂_t = 2^-B (y_t + Σ_k r̃_k y_{t-k}) = x_t + e_t +
         2^-B (R z)_t, release_t = Σ_{s≤t} x̂_s.
    State per bin: the last p − 1 values of V and of y (ints) and the running release.

    Privacy. y is the discrete Gaussian mechanism on the integer vector V(x) (CKS 2020, Thm 14
    per coordinate, composed): ρ-zCDP if Δ ≥ sup ‖v(x) − v(x')‖ over neighbours. With
    v = C(x + e): ‖v(x) − v(x')‖ ≤ ‖C(x − x')‖ + ‖C(e − e')‖. The first term is bounded as for
    ``BandedCounter`` (a non-negative, non-increasing Toeplitz C: ‖c‖·l2, the S-participation
    bound from the overlaps, the local bound √(total·m)·Σc), with c replaced by a
    non-increasing majorant of |c| + 1e-12 (the series inversion's float error) over the
    horizon. The second: e differs only on the coordinates the change touches (an untouched
    coordinate has the same input stream, so the same rounding), at most l1 of them (each is
    changed by an integer ≥ 1), so ‖C(e − e')‖ ≤ ‖C‖_op·‖e − e'‖ ≤ Σc·2^-B·√(T·l1) ≤
    Σc·2^-B·√T·l1 (the linear form is used). Δ is their sum. A horizon is required (the bounds are over its T columns).

    Exact: the encoder, y, the noise law. Float: the decoder, the releases. ``release_variance``
    = V·Σ_{n<t} b_n², b_n = Σ_{k≤min(n, p−1)} r̃_k, V = Var(z)/4^B (exact); the releases also
    carry the rounding Σ_{s≤t} e_s, at most t·2^-(B+1) (< 10^-4 for t < 10^6), not noise.

    Args: as ``BandedCounter``; ``horizon`` is required.
    """

    def __post_init__(self):
        if self.horizon is None:
            raise InvalidParamsError(f'{type(self).__name__}: horizon must be set (the '
                                     f'sensitivity is bounded over the horizon\'s columns).')
        if isinstance(self.horizon, int) and self.horizon > MAX_INVERSE_HORIZON:
            raise InvalidParamsError(f'{type(self).__name__}: horizon must be at most '
                                     f'{MAX_INVERSE_HORIZON}, got {self.horizon}.')
        super().__post_init__()

    @functools.cached_property
    def _dyadic_inverse(self) -> Tuple[int, ...]:
        return tuple(round(math.ldexp(r, COEF_BITS))
                     for r in inverse_sqrt_coefficients(self.bands))

    @functools.cached_property
    def decoder_coefficients(self) -> np.ndarray:
        """r̃_0..r̃_{p−1} as used (dyadic, exact in float64)."""
        return np.ldexp(np.array(self._dyadic_inverse, dtype=float), -COEF_BITS)

    @functools.cached_property
    def exact_coefficients(self) -> np.ndarray:
        """The encoder's coefficients c_0..c_{T−1} as bounded (a majorant, see above)."""
        return _inverse_encoder(self._dyadic_inverse, self.horizon)[0]

    @functools.cached_property
    def overlaps(self) -> np.ndarray:
        return _inverse_encoder(self._dyadic_inverse, self.horizon)[1]

    @functools.cached_property
    def sensitivity(self) -> float:
        """Δ = ‖c‖·effective_l2 + Σc·2^-B·√T·l1 (the rounding's share; l1 ≥ √l1 whenever a
        change touches a coordinate, so it bounds √(T·touched), and it scales linearly with the
        calibration, e.g. exactly ×2 for two units)."""
        rounding = (float(np.sum(self.exact_coefficients))
                    * math.ldexp(math.sqrt(self.horizon), -COEF_BITS) * self.l1_sensitivity)
        return (self.column_norm * self.effective_l2 + rounding) * _INFLATION

    # ----------------------------------------------------------------- the mechanism
    def step(self, state: BandedState, value, rng: RandomSource) -> Tuple[np.ndarray, BandedState]:
        if state.t >= self.horizon:
            raise UnsupportedMechanismError(
                f'{type(self).__name__}: horizon {self.horizon} reached; releasing step '
                f'{state.t + 1} would exceed the declared privacy cost.')
        x = np.asarray(_dyadic.exact_ints(value, self.dimension)).astype(object)
        p = self._dyadic_inverse
        q = x * (1 << (2 * COEF_BITS))
        for k in range(1, self.bands):
            q = q - state.inputs[k - 1] * p[k]
        v = np.array([(int(e) + (1 << (COEF_BITS - 1))) >> COEF_BITS for e in q.tolist()],
                     dtype=object)
        y = v + discrete_gaussian_any(rng, self.sigma2_grid, self.dimension).astype(object)
        num = y * (1 << COEF_BITS)
        for k in range(1, self.bands):
            num = num + state.decoded[k - 1] * p[k]
        x_hat = np.array([math.ldexp(float(e), -2 * COEF_BITS) for e in num.tolist()],
                         dtype=float)
        if self.bands > 1:
            inputs = np.concatenate([v[None, :], state.inputs[:-1]], axis=0)
            decoded = np.concatenate([y[None, :], state.decoded[:-1]], axis=0)
        else:
            inputs, decoded = state.inputs, state.decoded
        release = state.release + x_hat
        return release.copy(), BandedState(state.t + 1, _dyadic.readonly(inputs),
                                           _dyadic.readonly(decoded), _dyadic.readonly(release))

    def init_state(self) -> BandedState:
        n, d = self.bands - 1, self.dimension
        inputs = np.empty((n, d), dtype=object)
        inputs[...] = 0
        decoded = np.empty((n, d), dtype=object)
        decoded[...] = 0
        return BandedState(0, _dyadic.readonly(inputs), _dyadic.readonly(decoded),
                           _dyadic.readonly(np.zeros(d)))

    # ----------------------------------------------------------------- closed forms
    def _b_squared_cumsum(self, n: int) -> np.ndarray:
        b = np.cumsum(self.decoder_coefficients)
        if n > len(b):
            b = np.concatenate([b, np.full(n - len(b), b[-1])])
        return np.cumsum(b[:n] * b[:n])

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after step t: V·Σ_{n<t} b_n²."""
        if t <= 0:
            return 0.0
        return float(self.step_noise_variance * self._b_squared_cumsum(t)[t - 1])

    def variances(self, horizon: int) -> np.ndarray:
        return self.step_noise_variance * self._b_squared_cumsum(horizon)[:horizon]
