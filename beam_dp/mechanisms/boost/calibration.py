"""Boost noise calibration: accuracy (α, β) to ε (spec 002 §2, C1-C6).

Every calibration fixes the "noise-to-accuracy" product x = α·n·ε, so ε = x/(nα) and every noise
value in fraction units depends on (α, β) alone (spec §2 "scale invariance").

* C1 one-node Laplace: x = ln(1/β) (tail Pr[|Lap(b)| > α] = e^{-α/b}).
* C2 PMW / SV (Alg. 1 ``CalibrateBudget``): loose x = 4 ln(1/β); tight (Thm A.3) the least x
  with e^{-x} + (1/2 + x/8) e^{-x/2} ≤ β (Lemma A.2), found by bisection.
* C3 tree SV: C2 at β/2 (the Laplace part of Alg. 2 takes the other half; ``PMWBypass``).
* C4 Laplace over k nodes with equal ε_Lap: the least x with Pr[|S_k| > x] ≤ β_L, S_k a sum of k
  i.i.d. Lap(1). The seed solves it by Monte-Carlo with an unspecified margin (erratum 15); here
  the exact closed form of the k-fold Laplace tail replaces it.
* C5' Gaussian over k nodes (``noise='gaussian'``, zCDP): node i gets N(0, σ_i²) with
  σ_i = 1/(n_i √(2ρ)) (ρ-zCDP for its sensitivity-1/n_i fraction, the same ρ on every node so
  each block is charged ρ once); the n-weighted aggregate is exactly N(0, k/(2ρ n_Lap²)) (a
  sum of independent Gaussians), so Pr[|·| > α] ≤ β_L iff ρ ≥ k z²/(2 n_Lap² α²) with
  z = Φ⁻¹(1 − β_L/2): the closed form of ``calibrate_gaussian``. (The discrete Gaussian on a
  grid meets the same tail up to the grid margin, ``boost.gaussian``.) A pure-ε cost (the
  sparse vector keeps its Laplace noise) enters a zCDP filter as ε²/2 (``pure_to_zcdp``).

All functions are pure floating-point arithmetic on public parameters.
"""

import functools
import math
import statistics
from fractions import Fraction

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost

__all__ = [
    'calibrate_gaussian',
    'calibrate_laplace',
    'calibrate_pmw',
    'calibrate_pmw_loose',
    'calibrate_pmw_tight',
    'gaussian_z',
    'k_laplace_tail',
    'k_laplace_x',
    'pmw_tail',
    'pmw_tight_x',
    'pure_to_zcdp',
]

_OWNER = 'boost.calibration'


def _check(alpha: float, beta: float, n: float) -> None:
    v.check_probability(_OWNER, 'alpha', alpha, allow_zero=False, allow_one=True)
    v.check_probability(_OWNER, 'beta', beta, allow_zero=False)
    v.check_positive(_OWNER, 'n', n)


def _least_x(tail, beta: float) -> float:
    """The least x > 0 with tail(x) ≤ β for a decreasing tail, by bisection (to 1e-12 relative);
    the returned x satisfies tail(x) ≤ β (approached from above in x, i.e. from below in β)."""
    lo, hi = 0.0, 1.0
    while tail(hi) > beta:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if tail(mid) > beta:
            lo = mid
        else:
            hi = mid
    return hi


def pmw_tail(x: float) -> float:
    """Lemma A.2: the PMW branch error tail e^{-x} + (1/2 + x/8) e^{-x/2} at x = αnε."""
    return math.exp(-x) + (0.5 + x / 8.0) * math.exp(-x / 2.0)


@functools.lru_cache(maxsize=256)
def pmw_tight_x(beta: float) -> float:
    """Thm A.3 tight form: the least x with ``pmw_tail(x) ≤ β`` (15.609 at β = 1e-3)."""
    v.check_probability(_OWNER, 'beta', beta, allow_zero=False)
    return _least_x(pmw_tail, beta)


def calibrate_pmw_loose(alpha: float, beta: float, n: float) -> float:
    """C2 loose: ε = 4 ln(1/β)/(nα) (the seed's Alg. 1 ``CalibrateBudget``)."""
    _check(alpha, beta, n)
    return 4.0 * math.log(1.0 / beta) / (n * alpha)


def calibrate_pmw_tight(alpha: float, beta: float, n: float) -> float:
    """C2 tight (Thm A.3): ε = x*/(nα) with x* = ``pmw_tight_x(β)``."""
    _check(alpha, beta, n)
    return pmw_tight_x(beta) / (n * alpha)


def calibrate_pmw(alpha: float, beta: float, n: float, tight: bool = True) -> float:
    """C2, tight or loose."""
    return (calibrate_pmw_tight if tight else calibrate_pmw_loose)(alpha, beta, n)


def _k_laplace_coefficients(k: int):
    """c_j = (2k-2-j)! 2^j / ((k-1-j)! (k-1)! 2^{2k-1}) for j < k (exact rationals as floats)."""
    base = math.factorial(k - 1) * 2 ** (2 * k - 1)
    return [float(Fraction(math.factorial(2 * k - 2 - j) * 2 ** j,
                           math.factorial(k - 1 - j) * base)) for j in range(k)]


def k_laplace_tail(k: int, x: float) -> float:
    """Pr[|S_k| > x] for S_k a sum of k i.i.d. Lap(1) (spec C4, exact closed form):

        2 e^{-x}/((k-1)! 2^{2k-1}) · Σ_{j<k} [(2k-2-j)!/(j!(k-1-j)!)] 2^j j! Σ_{m≤j} x^m/m!

    (the j! of the numerator and the denominator cancel, which the coefficients use).
    """
    k = v.check_positive_int(_OWNER, 'k', k)
    if x <= 0:
        return 1.0
    total = 0.0
    partial, term = 0.0, 1.0           # Σ_{m≤j} x^m/m! and x^j/j!
    for j, c in enumerate(_k_laplace_coefficients(k)):
        if j > 0:
            term *= x / j
        partial += term
        total += c * partial
    return min(1.0, 2.0 * math.exp(-x) * total)


@functools.lru_cache(maxsize=1024)
def k_laplace_x(k: int, beta: float) -> float:
    """The least x with Pr[|S_k| > x] ≤ β (C4 table: k = 2 → 9.3357 at β = 5e-4)."""
    v.check_probability(_OWNER, 'beta', beta, allow_zero=False)
    return _least_x(lambda x: k_laplace_tail(k, x), beta)


def calibrate_laplace(alpha: float, beta: float, n: float, k: int = 1) -> float:
    """C1 (k = 1: ε = ln(1/β)/(nα)) and C4 (k nodes, n = n_Lap = Σ n_i, every node gets the
    same ε_Lap with noise Lap(1/(ε_Lap n_i))): ε_Lap = x_k(β)/(n_Lap α)."""
    _check(alpha, beta, n)
    if k == 1:
        return math.log(1.0 / beta) / (n * alpha)
    return k_laplace_x(k, beta) / (n * alpha)


# --- Optional Gaussian noise under zCDP (C5', ``noise='gaussian'``). ------------------------------

@functools.lru_cache(maxsize=256)
def gaussian_z(beta: float) -> float:
    """z = Φ⁻¹(1 − β/2): Pr[|N(0, 1)| > z] = β (3.2905 at β = 1e-3)."""
    v.check_probability(_OWNER, 'beta', beta, allow_zero=False)
    return statistics.NormalDist().inv_cdf(1.0 - beta / 2.0)


def calibrate_gaussian(alpha: float, beta: float, n: float, k: int = 1) -> float:
    """ρ per node (C5'): the least ρ such that k nodes of total size n = n_Lap, node i noised
    with N(0, 1/(2ρ n_i²)) in fraction units, aggregate n-weighted within α w.p. ≥ 1 − β:
    ρ = k z²/(2 n² α²), z = ``gaussian_z(β)``."""
    _check(alpha, beta, n)
    k = v.check_positive_int(_OWNER, 'k', k)
    z = gaussian_z(beta)
    return k * z * z / (2.0 * (n * alpha) ** 2)


def pure_to_zcdp(epsilon: float) -> float:
    """An ε-DP cost as zCDP: ε²/2 (Bun & Steinke 2016, Prop. 1.4), the accountant's own
    conversion (``PrivacyCost.to_rho``). It holds for an interactive mechanism as a whole (its
    transcript is ε-DP against any analyst), so it charges a whole sparse vector."""
    return PrivacyCost(epsilon=v.check_non_negative(_OWNER, 'epsilon', epsilon)).to_rho()
