"""The exact discrete Gaussian for any rational σ² (no 2^40 cap), and its variance.

``samplers.discrete_gaussian`` refuses σ² > 2^40. The BLT counter (mechanisms/blt.py) puts its
noise on a fine power-of-two grid whose resolution grows with the step, so σ² in grid units can
exceed that cap. The algorithm is the same (Canonne, Kamath, Steinke 2020, Algorithm 3): a
discrete Laplace proposal of integer scale t = ⌊σ⌋ + 1 (drawn by ``discrete_laplace_any``),
accepted with probability exp(-(|y| - σ²/t)²/(2σ²)), all in integer arithmetic (Python ints), so
the output law is exactly P[Y = y] ∝ exp(-y²/(2σ²)) for the given rational σ² (not rounded).
"""

import fractions
import math

import numpy as np

from beam_dp.noise.real_laplace import discrete_laplace_any
from beam_dp.noise.pmf import discrete_gaussian_variance
from beam_dp.noise.rng import RandomSource
from beam_dp.noise.samplers import _bernoulli_exp_scalar
from beam_dp.noise.samplers import discrete_gaussian

__all__ = [
    'discrete_gaussian_any',
    'discrete_gaussian_variance_any',
]

_SAMPLER_CAP = 1 << 40
#: Above this σ², Var = σ²·(1 - η) with 0 < η < 8π²σ²·exp(-2π²σ²) < 1e-800: σ² in float64.
_EXACT_VARIANCE_BELOW = 100


def discrete_gaussian_any(rng: RandomSource, sigma2: fractions.Fraction, size: int) -> np.ndarray:
    """``size`` exact discrete Gaussian samples with the *exact* rational variance parameter σ².

    σ² must have a denominator ≤ 2^20 (then ``samplers.discrete_gaussian`` does not round it
    either). Returns an int64 array, or an object array of Python ints if a sample overflows.
    """
    s2 = fractions.Fraction(sigma2)
    if s2 <= 0 or s2.denominator > (1 << 20):
        raise ValueError(f'discrete_gaussian_any: sigma2 must be positive with a denominator '
                         f'<= 2**20, got {sigma2!r}.')
    if s2 <= _SAMPLER_CAP:
        return discrete_gaussian(rng, s2, size)
    p, q = s2.numerator, s2.denominator
    t = math.isqrt(p // q) + 1
    den = 2 * p * q * t * t
    out = [0] * size
    todo = list(range(size))
    while todo:
        proposals = discrete_laplace_any(rng, t, len(todo))
        left = []
        for i, y in zip(todo, proposals.tolist()):
            if _bernoulli_exp_scalar(rng, (abs(y) * t * q - p) ** 2, den):
                out[i] = y
            else:
                left.append(i)
        todo = left
    if all(abs(y) < (1 << 62) for y in out):
        return np.asarray(out, dtype=np.int64)
    return np.asarray(out, dtype=object)


def discrete_gaussian_variance_any(sigma2) -> float:
    """Var of the discrete Gaussian with parameter σ²: exact summation below σ² = 100, σ² above
    (the difference is below 1e-800 relative, invisible in float64)."""
    s2 = float(sigma2)
    if s2 < _EXACT_VARIANCE_BELOW:
        return discrete_gaussian_variance(s2)
    return s2
