"""Exact samplers for the discrete-Laplace tail event and its geometric waiting time.

The sparse vector technique (SVT) halts at a tick when ``c + Y > θ̂`` with Y ~ DLap(b) fresh per
tick (P[Y = y] ∝ a^|y|, a = exp(-1/b)). With the integer k = θ̂ - c + 1 the per-tick halting
probability has the closed form (sum the two-sided geometric pmf)

    q(k) = P[Y ≥ k] = a^k / (1 + a)              for k ≥ 1,
    q(k) = 1 - a^(1-k) / (1 + a)                for k ≤ 0,

and while the count stays constant the halting tick is geometric with success probability q:
P[G ≥ m] = (1 - q)^m for the number G of non-halting ticks before the halt (the SVT of Qiu &
Yi, "Differential Privacy on Dynamic Data", Algorithm 1).

Two exact samplers (no floating point touches a sampled value):

* ``bernoulli_dlap_tail``: one tick. Bernoulli(a^k) is ``bernoulli_exp(k·d, n)`` for the rational
  scale b = n/d, and Bernoulli(1/(1+a)) is "a Geometric(a) variate is even" (its law is
  Σ_i (1-a)a^(2i) = 1/(1+a)); the product of the two independent events has probability q(k),
  and its negation gives the k ≤ 0 case.
* ``geometric_dlap_tail``: the whole waiting time, by inversion with *lazy rigorous interval
  arithmetic*: G = ⌊ln U / ln(1-q)⌋ for U ~ Uniform(0, 1) has P[G ≥ m] = (1-q)^m exactly. U is
  drawn 64 bits at a time, and ln U and ln(1-q) are enclosed with outward-rounded interval
  arithmetic (mpmath's ``libmpi``: every endpoint is rounded away from the true value, so the
  true number is always inside the interval). When the enclosure of G = ⌊f(U)⌋ over all U
  consistent with the bits drawn so far is a single integer, that integer is exactly G; otherwise
  64 more bits of U are drawn and the precision is raised. This is the Ziv/"lazy evaluation"
  scheme of exact samplers: the output distribution is exactly geometric (the loop stops with
  probability one; it never rounds a sampled value). For tiny q the series enclosure
  -ln(1-q) ∈ [q + q²/2, q + q²/2 + q³/(3(1-q))] replaces ln(1-q) so no precision is lost.
  ``limit`` caps the answer: ``min(G, limit)`` is exact too and needs far fewer bits when q is
  astronomically small (the SVT only needs to know whether it halts before a forced close).

The scale is a rational rounded up to the 2**-20 grid exactly as ``discrete_laplace`` rounds it,
so the per-tick sampler, the skip-ahead sampler and ``discrete_laplace`` agree on the law.
"""

import functools
import math
from fractions import Fraction
from typing import Optional

from mpmath.libmp import libmpf
from mpmath.libmp import libmpi

from beam_dp.noise.rng import RandomSource
from beam_dp.noise.samplers import Rational
from beam_dp.noise.samplers import _bernoulli_exp_scalar
from beam_dp.noise.samplers import _scale_nd       # memoised per scale (typed)

__all__ = [
    'bernoulli_dlap_tail',
    'bernoulli_from_enclosure',
    'dlap_tail',
    'geometric_dlap_tail',
    'log_dlap_tail',
]

_WORD = 64
_SERIES_CUTOFF = -40          # use the series for ln(1-q) when q < 2**-40


def log_dlap_tail(scale: Rational, k: int) -> float:
    """ln P[DLap(scale) ≥ k] in floating point (for thresholds, tests and docs; never sampled)."""
    n, d = _scale_nd(scale)
    log_a = -d / n
    log1p_a = math.log1p(math.exp(log_a))
    if k >= 1:
        return k * log_a - log1p_a
    return math.log1p(-math.exp((1 - k) * log_a - log1p_a))


def dlap_tail(scale: Rational, k: int) -> float:
    """P[DLap(scale) ≥ k] in floating point (closed form; for tests and bounds only)."""
    return math.exp(log_dlap_tail(scale, k))


def _bernoulli_inv_one_plus_a(rng: RandomSource, n: int, d: int) -> bool:
    """Exact Bernoulli(1/(1+a)), a = exp(-d/n): a Geometric(a) count of successes is even."""
    even = True
    while _bernoulli_exp_scalar(rng, d, n):
        even = not even
    return even


def bernoulli_dlap_tail(rng: RandomSource, scale: Rational, k: int) -> bool:
    """Exact Bernoulli(P[Y ≥ k]) for Y ~ DLap(scale): one SVT tick with integer gap k."""
    n, d = _scale_nd(scale)
    k = int(k)
    if k >= 1:
        return _bernoulli_exp_scalar(rng, k * d, n) and _bernoulli_inv_one_plus_a(rng, n, d)
    # P[Y ≥ k] = 1 - P[Y ≥ 1 - k] by symmetry.
    return not (_bernoulli_exp_scalar(rng, (1 - k) * d, n)
                and _bernoulli_inv_one_plus_a(rng, n, d))


# --- Rigorous interval enclosures (libmpi rounds every endpoint outward). ---------------------

def _ivl_rational(p: int, q: int, prec: int):
    return (libmpf.from_rational(p, q, prec, libmpf.round_floor),
            libmpf.from_rational(p, q, prec, libmpf.round_ceiling))


def _ivl_int(x: int):
    v = libmpf.from_int(x)
    return v, v


@functools.lru_cache(maxsize=4096)
def _log_one_minus_q(n: int, d: int, k: int, prec: int):
    """An interval containing ln(1 - q(k)) (a negative number); a pure function of its ints,
    memoised (the same interval: mpmath values are immutable tuples)."""
    x = _ivl_rational(d, n, prec)                        # 1/b = d/n
    a = libmpi.mpi_exp(libmpi.mpi_neg(x), prec)          # a = exp(-d/n)
    one = _ivl_int(1)
    one_plus_a = libmpi.mpi_add(one, a, prec)
    if k <= 0:
        # 1 - q = a^(1-k)/(1+a): ln(1-q) = -(1-k)·d/n - ln(1+a).
        lin = libmpi.mpi_mul(_ivl_int(1 - k), x, prec)
        return libmpi.mpi_neg(libmpi.mpi_add(lin, libmpi.mpi_log(one_plus_a, prec), prec))
    ak = libmpi.mpi_exp(libmpi.mpi_neg(libmpi.mpi_mul(_ivl_int(k), x, prec)), prec)
    q = libmpi.mpi_div(ak, one_plus_a, prec)
    q_hi = q[1]
    if libmpf.mpf_lt(q_hi, libmpf.mpf_shift(libmpf.fone, _SERIES_CUTOFF)):
        # -ln(1-q) = q + q²/2 + R with 0 ≤ R ≤ q³/(3(1-q)) ≤ q³ for q ≤ 1/2.
        q2 = libmpi.mpi_mul(q, q, prec)
        half_q2 = (libmpf.mpf_shift(q2[0], -1), libmpf.mpf_shift(q2[1], -1))
        s = libmpi.mpi_add(q, half_q2, prec)
        r_hi = libmpf.mpf_mul(q2[1], q_hi, prec, libmpf.round_ceiling)
        s = libmpi.mpi_add(s, (libmpf.fzero, r_hi), prec)
        return libmpi.mpi_neg(s)
    return libmpi.mpi_log(libmpi.mpi_sub(one, q, prec), prec)


def _floor_lo(interval) -> int:
    return libmpf.to_int(interval[0], libmpf.round_floor)


def _floor_hi(interval) -> int:
    return libmpf.to_int(interval[1], libmpf.round_floor)


def geometric_dlap_tail(rng: RandomSource, scale: Rational, k: int,
                        limit: Optional[int] = None) -> int:
    """Exact min(G, limit) for G = #failures before the first success of i.i.d.
    Bernoulli(q(k)) trials, q(k) = P[DLap(scale) ≥ k] (P[G ≥ m] = (1-q)^m).

    ``limit=None`` means uncapped (then q must not be astronomically small, or the precision
    needed to pin G down grows with log2 G). Returns a Python int.
    """
    n, d = _scale_nd(scale)
    k = int(k)
    if limit is not None:
        limit = int(limit)
        if limit <= 0:
            return 0
    bits = 0
    w = 0                                   # U ∈ (w/2^bits, (w+1)/2^bits]
    while True:
        w = (w << _WORD) | rng.randbits(_WORD)
        bits += _WORD
        prec = bits + 64
        log_r = _log_one_minus_q(n, d, k, prec)
        # f(U) = ln U / ln(1-q) decreases in U, so G ∈ [⌊f(U_hi)⌋, ⌊f(U_lo)⌋].
        u_hi = _ivl_rational(w + 1, 1 << bits, prec)
        g_lo = max(0, _floor_lo(libmpi.mpi_div(libmpi.mpi_log(u_hi, prec), log_r, prec)))
        if limit is not None and g_lo >= limit:
            return limit
        if w == 0:
            continue                        # U may be arbitrarily small: draw more bits.
        u_lo = _ivl_rational(w, 1 << bits, prec)
        g_hi = _floor_hi(libmpi.mpi_div(libmpi.mpi_log(u_lo, prec), log_r, prec))
        if g_lo == g_hi:
            return g_lo if limit is None else min(g_lo, limit)
        if limit is not None and g_lo >= limit:
            return limit


def bernoulli_from_enclosure(rng: RandomSource, enclosure) -> bool:
    """Exact Bernoulli(p) for a real p given by rigorous enclosures: ``enclosure(prec)``
    returns (lo, hi) Fractions (or mpmath interval endpoints as Fractions) with lo ≤ p ≤ hi
    whose width shrinks as ``prec`` grows. Compares a lazily drawn uniform U with p: U < p."""
    bits = 0
    w = 0
    while True:
        w = (w << _WORD) | rng.randbits(_WORD)
        bits += _WORD
        lo, hi = enclosure(bits + 64)
        u_lo, u_hi = Fraction(w, 1 << bits), Fraction(w + 1, 1 << bits)
        if u_hi <= lo:
            return True
        if u_lo >= hi:
            return False

