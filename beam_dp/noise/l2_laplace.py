"""The d-dimensional L2 "Laplace" (K-norm) noise of private ERM output perturbation (spec 003 §2.2).

Density p(ν) ∝ exp(−‖ν‖₂/b) on R^d. Sampling: radius r ~ Gamma(shape=d, scale=b) times a
uniform direction on the sphere. Releasing f(D) + ν for a statistic of L2 sensitivity Δ is
(Δ/b)-DP, because |‖a−v‖ − ‖a'−v‖| ≤ ‖a−a'‖ (Chaudhuri, Monteleoni, Sarwate 2011). This is NOT
coordinate-wise Laplace: i.i.d. Laplace(Δ/ε) per coordinate calibrates to the L1 norm, which can
be √d times the L2 norm, and is not ε-DP for an L2 bound (trap T1). No code path here does that.

What is exact and what is floating point (trap T12):

* exact: the random words (the ``RandomSource``: OS CSPRNG in production, seeded PCG64 in tests)
  and the addressing (``rng.derive``), so a seeded run is bit-reproducible on every runner;
* floating point: the radius and the direction. Gamma(d, b) for integer d is b·Σ_{i≤d} −ln U_i
  with U_i = (w_i + 1/2)·2^-53 from 53-bit words (never 0 or 1); the direction is g/‖g‖ with g
  standard normal by Box–Muller from the same kind of uniforms. Their relative error is ~1e-16,
  far below anything the privacy analysis can see, but the *law* of a float sample is not exactly
  the continuous one, and the low-order bits of a float sum can in principle leak the unnoised
  value (Mironov 2012). Mitigation, not a proof: ``release_l2_laplace`` snaps every released
  coordinate to a public power-of-two grid 2^-k with 2^-k ≤ b·2^-``SNAP_BITS`` (rounding is
  post-processing, so the idealised guarantee is unchanged, and the grid hides the float
  rounding pattern far below the noise scale). A fully exact sampler for this continuous law is
  out of scope; the discrete samplers in ``samplers.py`` are exact and used everywhere else.
"""

import math

import numpy as np

from beam_dp.noise.rng import RandomSource

__all__ = [
    'SNAP_BITS',
    'l2_laplace',
    'l2_laplace_logpdf',
    'release_l2_laplace',
    'snap_to_grid',
]

#: Released coordinates are rounded to a grid at least 2^SNAP_BITS times finer than the scale.
SNAP_BITS = 24
_TWO53 = float(1 << 53)


def _uniform_open(rng: RandomSource, size: int) -> np.ndarray:
    """Uniforms in (0, 1): (w + 1/2)·2^-53 for 53-bit words w (never 0, never 1)."""
    words = rng.uint64(size) >> np.uint64(11)
    return (words.astype(np.float64) + 0.5) / _TWO53


def _standard_normal(rng: RandomSource, size: int) -> np.ndarray:
    """Box–Muller normals from open uniforms (floating point; see the module docstring)."""
    pairs = (size + 1) // 2
    u1 = _uniform_open(rng, pairs)
    u2 = _uniform_open(rng, pairs)
    radius = np.sqrt(-2.0 * np.log(u1))
    angle = 2.0 * math.pi * u2
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:size]


def l2_laplace(rng: RandomSource, dim: int, scale: float) -> np.ndarray:
    """One draw ν ∈ R^dim with density ∝ exp(−‖ν‖₂/scale): Gamma(dim, scale) radius × uniform
    direction. ``scale`` = 0 returns zeros (the non-private reference)."""
    dim = int(dim)
    if dim < 1:
        raise ValueError(f'l2_laplace: dim must be >= 1, got {dim}.')
    if not (scale >= 0 and math.isfinite(scale)):
        raise ValueError(f'l2_laplace: scale must be finite and >= 0, got {scale!r}.')
    if scale == 0:
        return np.zeros(dim)
    radius = scale * float(-np.log(_uniform_open(rng, dim)).sum())
    direction = _standard_normal(rng, dim)
    norm = float(np.linalg.norm(direction))
    while norm == 0.0:                       # probability ~0; redraw rather than divide by 0
        direction = _standard_normal(rng, dim)
        norm = float(np.linalg.norm(direction))
    return radius * direction / norm


def l2_laplace_logpdf(x, scale: float) -> float:
    """log p(x) = −‖x‖/b − ln(Γ(d)·b^d·|S^{d−1}|), |S^{d−1}| = 2π^{d/2}/Γ(d/2)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    d = x.size
    log_sphere = math.log(2.0) + 0.5 * d * math.log(math.pi) - math.lgamma(d / 2.0)
    log_norm = math.lgamma(d) + d * math.log(scale) + log_sphere
    return -float(np.linalg.norm(x)) / scale - log_norm


def snap_to_grid(values: np.ndarray, scale: float) -> np.ndarray:
    """Rounds to the public grid 2^-k, k the smallest with 2^-k ≤ scale·2^-SNAP_BITS."""
    if scale <= 0:
        return np.asarray(values, dtype=np.float64)
    bits = SNAP_BITS - math.floor(math.log2(scale))
    return np.ldexp(np.round(np.ldexp(np.asarray(values, dtype=np.float64), bits)), -bits)


def release_l2_laplace(rng: RandomSource, value, scale: float) -> np.ndarray:
    """value + ν (ν ~ L2-Laplace(scale)), snapped to the public grid: a (Δ/scale)-DP release of
    a statistic of L2 sensitivity Δ (idealised; see the module docstring)."""
    value = np.asarray(value, dtype=np.float64)
    noisy = value + l2_laplace(rng, value.size, scale).reshape(value.shape)
    return snap_to_grid(noisy, scale)
