"""BLT: the buffered-linear-Toeplitz factorization counter for ρ-zCDP (Dvijotham, McMahan,
Pillutla, Steinke, Thakurta 2024, "Efficient and near-optimal noise generation for streaming
differential privacy"), within 2% of the square-root factorization with 4 buffers per stream.

Privacy unit and neighbours: as ``BinaryTreeCounter`` — any change of the input stream whose
per-bin totals of absolute changes (summed over all steps) have L2 norm ≤ ``l2_sensitivity``
(default ``l1_sensitivity``) and L1 norm ≤ ``l1_sensitivity``; event- or user-level is fixed by
the transform that computes these bounds; add/remove neighbours. A change spread over several
steps is covered (triangle inequality over the columns of C, whose largest norm is the first);
with ``participation=Participation(...)`` (a unit touches ≤ S steps per group, ≤ a per step)
l2 below is replaced by the smaller multi-participation bound ``effective_l2``
(``beam_dp.mechanisms.participation``: sup ‖C·u‖ over such patterns, ≤ a·r_S·‖c‖, r_S ≤ S).

Construction. C is the lower-triangular Toeplitz matrix with c_0 = 1, c_m = Σ_i w_i θ_i^(m-1)
(``blt_optimize``); the release is A·C⁻¹(Cx + z) = prefix sums + correlated noise, with A the
all-ones lower-triangular matrix. Per step t and bin:
  1. encoder (exact integers): v_t = (Cx)_t in fixed point with ``FIXED_BITS`` fractional bits,
     from n integer buffers S_i ← ⌊θ_i S_i⌋ + x_t·2^F (θ_i, w_i are dyadic rationals P/2^52);
  2. u_t = ⌊v_t / 2^(F-k_t) + 1/2⌋, the value on the public grid 2^-k_t, k_t = k_0 + ⌈5⌈log₂t⌉/8⌉;
  3. y_t = u_t + g_t, g_t an exact discrete Gaussian with σ_t² = σ²·4^(k_t) (σ² a dyadic rational
     in value units) — the only randomness;
  4. decoder (float64 post-processing of y only): x̂ = C⁻¹(y·2^-k), release_t = Σ_{s≤t} x̂_s.
Privacy: y is the discrete Gaussian mechanism on the integer vector u(x). For neighbours,
|u_t(x) - u_t(x')| ≤ 2^(k_t)|(C(x-x'))_t| + 2 on every (step, touched bin) — one unit for the floor
and at most one for the fixed-point error, which is < 2^(F-k_t-1) by the choice of F (checked at
construction) — and 0 on untouched bins. So (CKS 2020 Thm 14 per coordinate, composed)
ρ ≤ Δ²/(2σ²) with, in value units,
    Δ = l2·‖c_{0..T-1}‖ + 2·√(min(d, ⌊l1⌋))·√(Σ_{s≤T} 4^(-k_s))      (Minkowski),
and σ² = Δ²/(2ρ) rounded up. For ``horizon=None`` the first term uses the limiting ‖c‖ (an upper
bound at every T) and the sum runs to ``MAX_STEPS`` = 2^62 steps, where the counter stops.

Exact: the encoder, the grid values u, the noise law, the privacy bound's rounding slack. Float:
choosing θ, w (then frozen as exact dyadics), ‖c‖² (closed form in float64, inflated by 1e-9
relative), the decoder and the releases (post-processing), ``release_variance``.

Releases: float prefix estimates; noise-free they equal the prefix sums up to ≈ 2^-k_0 per step.
Accuracy: with the horizon declared, within 2% of the square-root factorization's max std for
T ≤ 2^20 (4 buffers). Unbounded: within 2% at its design horizon; the error keeps growing past
it (roughly linearly once t ≫ the design horizon), so give the expected run length.
Noise variance at step t (per bin): Σ_{m<t} b_m²·V_{t-m}, b = prefix sums of C⁻¹'s coefficients,
V_s = Var(g_s)/4^(k_s) (= σ² once σ_s² ≥ 100). State per bin: 4 integer + 4 float buffers, the
running release, and t.

Cite: Dvijotham et al., arXiv:2404.16706 (2024), Sec. 3 (BLT, inverse BLT), Sec. 5 (optimising
the max loss); Canonne, Kamath, Steinke 2020 (discrete Gaussian).
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
from beam_dp.mechanisms import blt_optimize
from beam_dp.mechanisms import blt_tables
from beam_dp.mechanisms.participation import Participation
from beam_dp.noise import RandomSource
from beam_dp.noise.wide_gaussian import discrete_gaussian_any
from beam_dp.noise.wide_gaussian import discrete_gaussian_variance_any

__all__ = [
    'BLTCounter',
    'BLTState',
    'MAX_STEPS',
    'blt_parameters',
]

#: Fractional bits of the encoder's fixed point.
FIXED_BITS = 192
#: θ and w are dyadic rationals with this many fractional bits.
PARAM_BITS = 52
#: An unbounded-horizon counter stops after this many steps (its slack sum runs to it).
MAX_STEPS = 1 << 62
#: Beyond the tables, the optimiser holds O(horizon) floats: larger horizons are refused.
MAX_OPTIMISED_HORIZON = 1 << 24
#: Default bound on the fraction the rounding slack adds to the sensitivity.
SLACK_FRACTION = 1e-4
_SENS_INFLATION = 1 + 1e-9
_DEFAULT_DESIGN_HORIZON = 1 << 20


def grid_offset(t: int) -> int:
    """k_t - k_0 = ⌈5⌈log₂t⌉/8⌉ for t ≥ 1: the grid refines as t grows so Σ_t 4^-k_t converges."""
    j = (t - 1).bit_length()
    return (5 * j + 7) // 8


def _slack_sum(horizon: int) -> fractions.Fraction:
    """Σ_{s=1}^{T} 4^-(k_s - k_0), exactly (k_s is constant on s ∈ (2^(j-1), 2^j])."""
    total = fractions.Fraction(1)   # s = 1 (j = 0)
    j = 1
    while (1 << (j - 1)) < horizon:
        count = min(horizon, 1 << j) - (1 << (j - 1))
        total += fractions.Fraction(count, 4 ** ((5 * j + 7) // 8))
        j += 1
    return total


def blt_parameters(horizon: Optional[int], design_horizon: Optional[int] = None):
    """(θ, w) floats for a horizon (or None + a design horizon): the precomputed table for
    2^⌈log₂T⌉ (2^4 … 2^20); beyond 2^20 the optimiser runs (needs scipy), else the 2^20 entry."""
    target = horizon if horizon is not None else (design_horizon or _DEFAULT_DESIGN_HORIZON)
    exponent = max(4, (target - 1).bit_length())
    table = blt_tables.FINITE if horizon is not None else blt_tables.UNBOUNDED
    if exponent in table:
        return table[exponent]
    return _optimised(horizon, design_horizon or _DEFAULT_DESIGN_HORIZON)


@functools.lru_cache(maxsize=32)
def _optimised(horizon: Optional[int], design_horizon: int):
    try:
        theta, w, _ = blt_optimize.optimize(horizon, design_horizons=[design_horizon])
    except ImportError:                            # No scipy: the largest table entry.
        table = blt_tables.FINITE if horizon is not None else blt_tables.UNBOUNDED
        return table[max(table)]
    return list(theta), list(w)


def _to_dyadic(values, name: str, owner: str, upper: Optional[float]) -> Tuple[int, ...]:
    out = []
    for x in values:
        x = v.check_positive(owner, name, x)
        if upper is not None and not x < upper:
            raise InvalidParamsError(f'{owner}: every {name} must be below {upper:g}, got {x!r}.')
        out.append(max(1, round(math.ldexp(x, PARAM_BITS))))
    if not out or (upper is not None and max(out) >= (1 << PARAM_BITS)):
        raise InvalidParamsError(f'{owner}: {name} must have 1 to 8 entries in (0, 1), got '
                                 f'{values!r}.')
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class BLTState:
    """Immutable state over d bins: t steps consumed; ``encoder`` (n, d) exact fixed-point
    buffers (Python ints); ``decoder`` (n, d) float buffers of the post-processing; ``release``
    the running estimate (d,). Arrays are read-only."""
    t: int
    encoder: np.ndarray
    decoder: np.ndarray
    release: np.ndarray

    def nbytes(self) -> int:
        ints = sum((int(x).bit_length() + 7) // 8 + 1 for x in self.encoder.flat)
        return ints + self.decoder.nbytes + self.release.nbytes + 8


@dataclasses.dataclass(frozen=True)
class BLTCounter:
    """Continual prefix sums under ρ-zCDP with BLT-correlated discrete Gaussian noise.

    Args:
      rho: total ρ (zCDP).
      horizon: T (public); None for an unbounded stream (limiting sensitivity, every t private).
      design_horizon: for ``horizon=None``, the run length the parameters are tuned for
        (default 2^20); it never affects privacy.
      l1_sensitivity: max L1 norm of one unit's per-bin totals of absolute changes.
      l2_sensitivity: max L2 norm of the same totals (default l1_sensitivity).
      dimension: d, bins per step.
      theta, weights: explicit BLT parameters (each in (0, 1) / > 0; 1–8 buffers); default: the
        optimised table for the horizon.
      slack_fraction: the grid is fine enough that the rounding slack adds at most this fraction
        to the sensitivity (default 1e-4); smaller means a finer grid and more exact releases.
      participation: optional ``Participation`` (one unit's groups, steps per group, per-step
        and total bounds): the main sensitivity term becomes ‖c‖·min(l2, its capped L2 with
        the effective participations r_S ≤ S of this C) — multi-participation calibration
        (``beam_dp.mechanisms.participation`` derives it); None: ‖c‖·l2 (the triangle bound).

    Raises:
      InvalidParamsError: on a bad parameter, with the argument named.
    """
    rho: float
    horizon: Optional[int] = None
    design_horizon: Optional[int] = None
    l1_sensitivity: float = 1.0
    l2_sensitivity: Optional[float] = None
    dimension: int = 1
    theta: Optional[Tuple[float, ...]] = None
    weights: Optional[Tuple[float, ...]] = None
    slack_fraction: float = SLACK_FRACTION
    participation: Optional[Participation] = None

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive(owner, 'rho', self.rho)
        if self.horizon is not None:
            v.check_positive_int(owner, 'horizon', self.horizon)
            object.__setattr__(self, 'horizon', int(self.horizon))     # numpy ints too
            if self.design_horizon is not None:
                raise InvalidParamsError(f'{owner}: design_horizon is only for horizon=None, got '
                                         f'horizon={self.horizon}.')
        elif self.design_horizon is not None:
            v.check_positive_int(owner, 'design_horizon', self.design_horizon)
            object.__setattr__(self, 'design_horizon', int(self.design_horizon))
        target = self.horizon or self.design_horizon or _DEFAULT_DESIGN_HORIZON
        if self.theta is None and target > MAX_OPTIMISED_HORIZON:
            name = 'horizon' if self.horizon is not None else 'design_horizon'
            raise InvalidParamsError(
                f'{owner}: {name}={target} is beyond the tables (2^20) and the optimiser\'s '
                f'O({name}) memory limit 2^{MAX_OPTIMISED_HORIZON.bit_length() - 1}; give '
                f'theta and weights explicitly.')
        _dyadic.check_privacy_params(owner, None, self.rho, self.l1_sensitivity,
                                     self.l2_sensitivity)
        v.check_positive_int(owner, 'dimension', self.dimension)
        v.check_probability(owner, 'slack_fraction', self.slack_fraction, allow_zero=False)
        if (self.theta is None) != (self.weights is None):
            raise InvalidParamsError(f'{owner}: give both theta and weights or neither.')
        if self.theta is not None:
            try:
                object.__setattr__(self, 'theta', tuple(float(x) for x in self.theta))
                object.__setattr__(self, 'weights', tuple(float(x) for x in self.weights))
            except (TypeError, ValueError) as e:
                raise InvalidParamsError(f'{owner}: theta and weights must be sequences of '
                                         f'numbers, got {self.theta!r} and {self.weights!r}.'
                                         ) from e
            if len(self.theta) != len(self.weights) or len(self.theta) > 8:
                raise InvalidParamsError(f'{owner}: theta and weights must have the same length '
                                         f'(1 to 8), got {len(self.theta)} and '
                                         f'{len(self.weights)}.')
        if self.participation is not None and not isinstance(self.participation, Participation):
            raise InvalidParamsError(f'{owner}: participation must be a Participation, got '
                                     f'{self.participation!r}.')
        theta, w = self._float_params()
        _to_dyadic(theta, 'theta', owner, 1.0)
        _to_dyadic(w, 'weights', owner, None)
        try:
            grid_bits = self.grid_bits
        except (OverflowError, ValueError, ZeroDivisionError) as e:   # subnormal inputs
            raise InvalidParamsError(f'{owner}: l2_sensitivity, slack_fraction and rho give no '
                                     f'finite encoder grid ({e}).') from e
        if self._fixed_point_error_bits() + grid_bits + grid_offset(MAX_STEPS) + 1 \
                > FIXED_BITS:
            raise InvalidParamsError(f'{owner}: theta too close to 1 for the encoder precision.')

    # ----------------------------------------------------------------- parameters
    def _float_params(self):
        if self.theta is not None:
            return list(self.theta), list(self.weights)
        return blt_parameters(self.horizon, self.design_horizon)

    @functools.cached_property
    def _dyadic_params(self) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        theta, w = self._float_params()
        owner = type(self).__name__
        return _to_dyadic(theta, 'theta', owner, 1.0), _to_dyadic(w, 'weights', owner, None)

    @property
    def buffers(self) -> int:
        return len(self._dyadic_params[0])

    @functools.cached_property
    def exact_params(self) -> Tuple[np.ndarray, np.ndarray]:
        """The (θ, w) actually used, as float64 (exactly representable dyadics)."""
        p, q = self._dyadic_params
        return (np.ldexp(np.array(p, dtype=float), -PARAM_BITS),
                np.ldexp(np.array(q, dtype=float), -PARAM_BITS))

    def _fixed_point_error_bits(self) -> int:
        """log₂ of 2·E + margin, E = Σ_i w_i/(1-θ_i) + n: the encoder's error bound in 2^-F units."""
        theta, w = self.exact_params
        bound = 2 * (float(np.sum(w / (1.0 - theta))) + len(w) + 1)
        return max(1, math.ceil(math.log2(bound)))

    @functools.cached_property
    def column_norm(self) -> float:
        """‖c_{0..T-1}‖ (limiting ‖c‖ when horizon is None), inflated by 1e-9 for float error."""
        theta, w = self.exact_params
        return math.sqrt(blt_optimize.sensitivity_squared(theta, w, self.horizon)
                         * _SENS_INFLATION)

    @functools.cached_property
    def effective_l2(self) -> float:
        """The main sensitivity term over ‖c‖: l2, or with ``participation`` the smaller of l2
        and its multi-participation capped L2 (``Participation.l2_factor``)."""
        l2 = self.l1_sensitivity if self.l2_sensitivity is None else self.l2_sensitivity
        if self.participation is None:
            return l2
        theta, w = self.exact_params
        return min(l2, self.participation.l2_factor(theta, w, self.horizon))

    @property
    def _touched_bins(self) -> int:
        return max(1, min(self.dimension, math.floor(self.l1_sensitivity)))

    @functools.cached_property
    def grid_bits(self) -> int:
        """k_0: the slack term is at most ``SLACK_FRACTION`` of the main sensitivity term."""
        z = float(_slack_sum(self.horizon or MAX_STEPS))
        need = (2 * math.sqrt(self._touched_bins * z)
                / (self.slack_fraction * self.effective_l2 * self.column_norm))
        return max(0, math.ceil(math.log2(need)))

    @functools.cached_property
    def sensitivity(self) -> float:
        """Δ in value units, rounding slack included (module docstring)."""
        slack2 = _slack_sum(self.horizon or MAX_STEPS) / 4 ** self.grid_bits
        return (self.effective_l2 * self.column_norm
                + 2 * math.sqrt(self._touched_bins) * math.sqrt(float(slack2)) * _SENS_INFLATION)

    @functools.cached_property
    def sigma2(self) -> fractions.Fraction:
        """σ² in value units: Δ²/(2ρ), rounded up to a multiple of 2^-20·4^-k_0 (so every grid
        σ_t² = σ²·4^(k_t) has a denominator ≤ 2^20 and is sampled as is)."""
        grid = 1 << (20 + 2 * self.grid_bits)
        return fractions.Fraction(math.ceil(self.sensitivity ** 2 / (2 * self.rho) * grid
                                            * (1 + 1e-12)), grid)

    def grid_sigma2(self, t: int) -> fractions.Fraction:
        return self.sigma2 * 4 ** (self.grid_bits + grid_offset(t))

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(rho=self.rho)

    # ----------------------------------------------------------------- the mechanism
    def init_state(self) -> BLTState:
        n, d = self.buffers, self.dimension
        encoder = np.empty((n, d), dtype=object)
        encoder[...] = 0
        return BLTState(0, _dyadic.readonly(encoder), _dyadic.readonly(np.zeros((n, d))),
                        _dyadic.readonly(np.zeros(d)))

    def step(self, state: BLTState, value, rng: RandomSource) -> Tuple[np.ndarray, BLTState]:
        """Consumes step t+1's integer vector (already bounded); returns the prefix estimate."""
        limit = self.horizon or MAX_STEPS
        if state.t >= limit:
            raise UnsupportedMechanismError(
                f'{type(self).__name__}: horizon {limit} reached; releasing step {state.t + 1} '
                f'would exceed the declared privacy cost.')
        t = state.t + 1
        u, encoder = self.encode(state.encoder, value, t)
        k = self.grid_bits + grid_offset(t)
        noise = discrete_gaussian_any(rng, self.grid_sigma2(t), self.dimension)
        y = u + noise.astype(object)
        y_value = np.array([math.ldexp(float(e), -k) for e in y.tolist()], dtype=float)
        theta, w = self.exact_params
        x_hat = y_value - w @ state.decoder
        decoder = theta[:, None] * state.decoder + x_hat[None, :]
        release = state.release + x_hat
        new_state = BLTState(t, _dyadic.readonly(encoder), _dyadic.readonly(decoder),
                             _dyadic.readonly(release))
        return release.copy(), new_state

    def encode(self, encoder: np.ndarray, value, t: int) -> Tuple[np.ndarray, np.ndarray]:
        """(u_t, new encoder buffers): step t's exact integer grid values ⌊2^k_t (Cx)_t⌉ (object
        array of Python ints) — the vector the noise is added to. Pure integer arithmetic."""
        x = np.asarray(value, dtype=np.int64).reshape(self.dimension).astype(object)
        p, q = self._dyadic_params
        shifted = x * (1 << FIXED_BITS)
        v_t = shifted.copy()
        new = np.empty_like(encoder)
        for i in range(self.buffers):
            v_t = v_t + ((encoder[i] * q[i]) >> PARAM_BITS)
            new[i] = ((encoder[i] * p[i]) >> PARAM_BITS) + shifted
        shift = FIXED_BITS - (self.grid_bits + grid_offset(t))
        return (v_t + (1 << (shift - 1))) >> shift, new      # Nearest grid point (shifted floor).

    # ----------------------------------------------------------------- closed forms
    @functools.lru_cache(maxsize=4)
    def _b_squared_cumsum(self, n: int) -> np.ndarray:
        """Σ_{m<j} b_m² for j = 0..n (float64)."""
        theta, w = self.exact_params
        chat = blt_optimize.inverse_coefficients_fast(theta, w, n)
        b = np.cumsum(chat)
        return np.concatenate([[0.0], np.cumsum(b * b)])

    def step_noise_variance(self, s: int) -> float:
        """V_s = Var(g_s)/4^(k_s): the noise variance of y_s·2^-k_s in value units."""
        k = self.grid_bits + grid_offset(s)
        return discrete_gaussian_variance_any(self.grid_sigma2(s)) / 4.0 ** k

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after step t: Σ_{m<t} b_m²·V_{t-m}."""
        if t <= 0:
            return 0.0
        n = 1 << max(4, (t - 1).bit_length())
        cum = self._b_squared_cumsum(n)
        total = 0.0
        # V_s is constant for s in each group (2^(j-1), 2^j]; m = t - s.
        lo = 1
        j = 0
        while lo <= t:
            hi = min(t, 1 if j == 0 else 1 << j)
            total += self.step_noise_variance(lo) * (cum[t - lo + 1] - cum[t - hi])
            lo = hi + 1
            j += 1
        return float(total)

    def variances(self, horizon: int) -> np.ndarray:
        """release_variance(t) for t = 1..T, vectorised (same sums)."""
        n = 1 << max(4, (horizon - 1).bit_length())
        cum = self._b_squared_cumsum(n)
        t = np.arange(1, horizon + 1)
        total = np.zeros(horizon)
        lo, j = 1, 0
        while lo <= horizon:
            hi = 1 if j == 0 else 1 << j
            reached = t >= lo
            tt = t[reached]
            top = np.minimum(tt, hi)
            total[reached] += self.step_noise_variance(lo) * (cum[tt - lo + 1] - cum[tt - top])
            lo, j = hi + 1, j + 1
        return total

    @property
    def noise_stddev(self) -> float:
        """The largest per-step noise std up to the horizon (design horizon when unbounded)."""
        top = self.horizon or self.design_horizon or _DEFAULT_DESIGN_HORIZON
        return math.sqrt(self.release_variance(top))
