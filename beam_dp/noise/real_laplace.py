"""Exact Laplace noise for real-valued statistics, released on a public power-of-two grid.

The statistics of the growing-database mechanisms (docs/growing_databases.md) are reals: a
linear query on a fractional histogram, ``f(x) = <f, counts>/t`` with sensitivity Δ = 1/t.
Textbook floating-point Laplace on such values is attackable (Mironov, "On Significance of the
Least Significant Bits for Differential Privacy", 2012), so every real-valued release here is
built from exact integer noise:

1. pick a public grid 2^-k with Δ·2^k ≥ 2^GRID_HEADROOM_BITS (``grid_bits``; k depends only on
   the public sensitivity);
2. floor the statistic onto the grid, ``s = floor(value·2^k)``. Two neighbouring statistics then
   differ by at most ``ceil(Δ·2^k) + 1`` grid units; one more unit absorbs the floating-point
   error of computing ``value`` (≪ 2^-k), so ``grid_sensitivity`` = ceil(Δ·2^k) + 2;
3. add exact discrete Laplace noise of integer scale ``b·grid_sensitivity/Δ``: its privacy cost is
   grid_sensitivity/scale = Δ/b, exactly the cost of continuous Lap(b) on a sensitivity-Δ
   statistic, and its scale in value units lies in [b, b·(1 + 3·2^-10)];
4. release ``(s + noise)/2^k``.

So a caller who wants "Lap(b) on a sensitivity-Δ real statistic" gets at most b·(1 + 0.3%) of
noise and exactly the privacy cost Δ/b. ``discrete_laplace_any`` lifts the 2^40 scale cap of
``samplers.discrete_laplace`` (Python integers have no cap), which large grids need.
"""

import fractions
import math
from typing import Union

import numpy as np

from beam_dp.noise.rng import RandomSource
from beam_dp.noise.samplers import as_rational_up
from beam_dp.noise.samplers import _discrete_laplace_scalar as _discrete_laplace_big
from beam_dp.noise.samplers import discrete_laplace

__all__ = [
    'GRID_HEADROOM_BITS',
    'discrete_laplace_any',
    'floor_to_grid',
    'from_grid',
    'grid_bits',
    'grid_laplace',
    'grid_laplace_scale',
    'grid_sensitivity',
]

#: Δ·2^k ≥ 2^GRID_HEADROOM_BITS: flooring onto the grid costs at most 3·2^-10 relative noise.
GRID_HEADROOM_BITS = 10
_CAP = 1 << 40
#: Up to this many samples the scalar Python-int loop beats the vectorised sampler.
_SMALL = 64

Real = Union[int, float, fractions.Fraction]


def _round_up(x: Real, name: str) -> fractions.Fraction:
    """``x`` > 0 as a Fraction with denominator ≤ 2**SCALE_GRID_BITS, rounded up, no cap."""
    return as_rational_up(x, name, cap=False)


def discrete_laplace_any(rng: RandomSource, scale: Real, size=None):
    """Exact discrete Laplace, P[Y = y] ∝ exp(-|y|/scale), for any positive rational scale.

    Identical in law to ``samplers.discrete_laplace`` (the scale is rounded up to the same
    2^-20 grid) but without its 2^40 cap: scales above the cap use Python integers.

    Args:
      rng: the random source.
      scale: the scale, > 0 (float or Fraction).
      size: None for one Python int, else the shape of an int64 array (object array above the
        int64 range, which only astronomically large scales reach).

    Returns:
      The sample(s).

    Raises:
      TypeError, ValueError: for a non-real, non-finite or non-positive scale.
    """
    frac = _round_up(scale, 'scale')
    count = 1 if size is None else int(np.prod(size))
    if frac <= _CAP and (size is None or count > _SMALL):
        return discrete_laplace(rng, frac, size)
    n, d = frac.numerator, frac.denominator
    if size is None:
        return _discrete_laplace_big(rng, n, d)
    values = [_discrete_laplace_big(rng, n, d) for _ in range(count)]
    if all(abs(x) < (1 << 62) for x in values):
        return np.asarray(values, dtype=np.int64).reshape(size)
    return np.asarray(values, dtype=object).reshape(size)


def grid_bits(sensitivity: float) -> int:
    """The smallest k ≥ 0 with sensitivity·2^k ≥ 2^GRID_HEADROOM_BITS (exact, no log rounding)."""
    if not sensitivity > 0 or not math.isfinite(sensitivity):
        raise ValueError(f'grid_bits: sensitivity must be positive and finite, got {sensitivity!r}.')
    target = 1 << GRID_HEADROOM_BITS
    k = max(0, math.ceil(math.log2(target / sensitivity)))
    while math.ldexp(sensitivity, k) < target:
        k += 1
    while k > 0 and math.ldexp(sensitivity, k - 1) >= target:
        k -= 1
    return k


def grid_sensitivity(sensitivity: float, bits: int) -> int:
    """Neighbouring grid statistics differ by at most this many units: ceil(Δ·2^k) + 2
    (+1 for the floor, +1 for floating-point error in computing the statistic)."""
    return math.ceil(math.ldexp(sensitivity, bits)) + 2


def grid_laplace_scale(scale: float, sensitivity: float, bits: int) -> fractions.Fraction:
    """Integer-unit discrete Laplace scale whose cost on the grid statistic is Δ/scale."""
    units = grid_sensitivity(sensitivity, bits)
    return _round_up(fractions.Fraction(scale) * units / fractions.Fraction(sensitivity),
                     'scale')


def floor_to_grid(value, bits: int):
    """floor(value·2^k): a Python int for a scalar, an int64 array for an array."""
    if np.ndim(value) == 0:
        return math.floor(math.ldexp(float(value), bits))
    return np.floor(np.ldexp(np.asarray(value, dtype=np.float64), bits)).astype(np.int64)


def from_grid(units, bits: int):
    """units·2^-k as float(s)."""
    if np.ndim(units) == 0:
        return math.ldexp(float(units), -bits)
    return np.ldexp(np.asarray(units, dtype=np.float64), -bits)


def grid_laplace(rng: RandomSource, value, scale: float, sensitivity: float, size=None):
    """Releases value + Lap(scale) on the public grid for a statistic of sensitivity Δ.

    The cost is exactly Δ/scale-DP for a scalar. For a vector, ``sensitivity`` is each
    coordinate's own sensitivity and every coordinate costs Δ/scale (compose them: k coordinates
    cost kΔ/scale). The released noise has scale in [scale, scale·(1 + 3·2^-10)] in value units.
    See the module docstring.

    Returns:
      (released, bits): the released float(s) and the public grid exponent k.
    """
    bits = grid_bits(sensitivity)
    int_scale = grid_laplace_scale(scale, sensitivity, bits)
    base = floor_to_grid(value, bits)
    if np.ndim(value) == 0:
        return from_grid(base + discrete_laplace_any(rng, int_scale), bits), bits
    noise = discrete_laplace_any(rng, int_scale, np.shape(value))
    return from_grid(np.asarray(base, dtype=object) + noise if noise.dtype == object
                     else base + noise, bits), bits
