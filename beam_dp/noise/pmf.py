"""Closed-form probability mass functions and variances of the discrete noise (for tests,
closed-form error bounds and benchmarks; nothing here draws randomness)."""

import math

__all__ = [
    'discrete_gaussian_pmf',
    'discrete_gaussian_variance',
    'discrete_laplace_pmf',
    'discrete_laplace_variance',
]


def discrete_laplace_pmf(y: int, scale: float) -> float:
    """P[Y = y] for the discrete Laplace with P ∝ exp(-|y|/scale)."""
    a = math.exp(-1.0 / scale)
    return (1 - a) / (1 + a) * a ** abs(y)


def discrete_laplace_variance(scale: float) -> float:
    """Var[Y] = 2a/(1-a)² with a = exp(-1/scale)."""
    a = math.exp(-1.0 / scale)
    return 2 * a / (1 - a) ** 2


def _gaussian_normaliser(sigma2: float) -> float:
    radius = int(math.ceil(12 * math.sqrt(sigma2))) + 2
    return sum(math.exp(-k * k / (2 * sigma2)) for k in range(-radius, radius + 1))


def discrete_gaussian_pmf(y: int, sigma2: float) -> float:
    """P[Y = y] ∝ exp(-y²/(2σ²))."""
    return math.exp(-y * y / (2 * sigma2)) / _gaussian_normaliser(sigma2)


def discrete_gaussian_variance(sigma2: float) -> float:
    """Exact variance by summation (it is below σ², CKS Proposition 19)."""
    radius = int(math.ceil(12 * math.sqrt(sigma2))) + 2
    z = _gaussian_normaliser(sigma2)
    return sum(k * k * math.exp(-k * k / (2 * sigma2)) for k in range(-radius, radius + 1)) / z
