"""Exact samplers for discrete noise (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for
Differential Privacy", Algorithms 1-3).

Everything here is integer arithmetic on uniform 64-bit words from a ``RandomSource``: no floating
point touches a sampled value, so the output distribution is exactly the stated one (Mironov 2012
shows what textbook floating-point Laplace leaks). Scales are rationals; a float scale is first
rounded *up* to the grid 2**-SCALE_GRID_BITS, which only adds noise.

The vectorised paths process whole arrays with masked rejection loops: every element runs the
same algorithm as the scalar version, just in lock-step.
"""

import fractions
import functools
import math
import numbers
from typing import Optional, Union

import numpy as np

from beam_dp.errors import InvalidParamsError
from beam_dp.noise.rng import RandomSource

__all__ = [
    'MAX_SCALE',
    'NOISE_KINDS',
    'SCALE_GRID_BITS',
    'as_rational_up',
    'bernoulli_exp',
    'check_noise_scale',
    'discrete_gaussian',
    'discrete_laplace',
    'noise_scale_problem',
    'samplable',
    'uniform_below',
]

#: Float scales are rounded up to a multiple of 2**-20 before sampling.
SCALE_GRID_BITS = 20
#: The largest Laplace scale / Gaussian σ² the vectorised samplers take (int64 arithmetic).
MAX_SCALE = 2 ** 40
_MAX_SCALE = MAX_SCALE
_INT64_MAX = (1 << 63) - 1

Rational = Union[int, float, fractions.Fraction]


def as_rational_up(x: Rational, name: str = 'scale', cap: bool = True) -> fractions.Fraction:
    """``x`` as a Fraction with denominator ≤ 2**SCALE_GRID_BITS, rounded up (never down).

    ``cap`` False lifts the 2**40 limit (for samplers that use Python integers)."""
    if isinstance(x, bool) or not isinstance(x, (numbers.Rational, float)):
        raise TypeError(f'{name} must be a real number, got {x!r}.')
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f'{name} must be finite, got {x!r}.')
    frac = fractions.Fraction(x)
    if frac <= 0:
        raise ValueError(f'{name} must be positive, got {x!r}.')
    if cap and frac > _MAX_SCALE:
        raise ValueError(f'{name} must be at most 2**40, got {x!r}.')
    grid = 1 << SCALE_GRID_BITS
    if frac.denominator > grid:
        frac = fractions.Fraction(-((-frac.numerator * grid) // frac.denominator), grid)
    return frac


#: The noise kinds ``noise_scale_problem`` knows: the discrete Laplace scale b, the discrete
#: Gaussian variance parameter σ².
NOISE_KINDS = ('laplace', 'gaussian')


def noise_scale_problem(scale, kind: str = 'laplace') -> Optional[str]:
    """Why the exact samplers cannot draw noise with this parameter, or None if they can.

    THE rule every mechanism's construction-time check derives from (``check_noise_scale``,
    ``samplable``): ``discrete_laplace`` takes a scale b and ``discrete_gaussian`` a variance
    parameter σ² that is a positive finite real at most ``MAX_SCALE`` = 2**40 (their numpy
    paths work in int64 on b or σ² times 2**SCALE_GRID_BITS); a positive value below the grid
    2**-SCALE_GRID_BITS is rounded up to it (more noise, never less), so there is no lower
    limit. Both are in the units the noise is added in (grid units for sums).
    """
    if kind not in NOISE_KINDS:
        raise ValueError(f'kind must be one of {NOISE_KINDS}, got {kind!r}.')
    what = 'discrete Gaussian variance sigma2' if kind == 'gaussian' else 'discrete Laplace scale'
    if (isinstance(scale, bool) or not isinstance(scale, (numbers.Rational, float))
            or not math.isfinite(scale) or not scale > 0):     # what as_rational_up takes
        return f'the {what} must be positive and finite, got {scale!r}'
    if scale > MAX_SCALE:
        return (f'the {what} {float(scale):.4g} exceeds the exact samplers\' range '
                f'(2**40 = {MAX_SCALE:.4g})')
    return None


def samplable(scale, kind: str = 'laplace') -> bool:
    """Whether ``discrete_laplace`` (kind 'laplace': scale b) or ``discrete_gaussian`` (kind
    'gaussian': σ²) draws with this parameter (``noise_scale_problem`` is None)."""
    return noise_scale_problem(scale, kind) is None


def check_noise_scale(owner: str, scale: float, change: str, kind: str = 'laplace') -> None:
    """Raises InvalidParamsError at construction if a noise parameter is outside the samplers'
    range (``noise_scale_problem``), naming what to change; mechanisms call it where they
    compute a scale.

    Args:
      owner: the class (or transform) in the message.
      scale: the discrete Laplace scale b, or the discrete Gaussian σ² (``kind='gaussian'``).
      change: the parameters that set it, e.g. "lower l1_sensitivity or raise epsilon".
    """
    problem = noise_scale_problem(scale, kind)
    if problem is not None:
        raise InvalidParamsError(f'{owner}: {problem}; {change}.')


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Exact bit length of each uint64 (0 for 0)."""
    x = np.asarray(x, dtype=np.uint64)
    bits = np.zeros(x.shape, dtype=np.int64)
    nz = x > 0
    approx = np.floor(np.log2(x[nz].astype(np.float64))).astype(np.int64) + 1
    approx = np.clip(approx, 1, 64)
    xv = x[nz]
    # float log2 may be off by one near powers of two: correct it exactly.
    too_small = (approx < 64) & ((xv >> np.minimum(approx, 63).astype(np.uint64)) > 0)
    approx[too_small] += 1
    too_big = (approx > 1) & ((xv >> (approx - 1).astype(np.uint64)) == 0)
    approx[too_big] -= 1
    bits[nz] = approx
    return bits


def uniform_below(rng: RandomSource, m, size=None) -> np.ndarray:
    """Exactly uniform integers in [0, m) by masked rejection (m ≥ 1, below 2**63)."""
    m = np.asarray(m, dtype=np.int64)
    if size is not None:
        m = np.broadcast_to(m, (size,) if isinstance(size, int) else size)
    if np.any(m < 1):
        raise ValueError('uniform_below: m must be at least 1.')
    if m.size and m.min() == m.max():
        return _uniform_below_scalar_m(rng, int(m.flat[0]), m.shape)
    shape = m.shape
    m = m.reshape(-1).astype(np.uint64)
    out = np.zeros(m.shape, dtype=np.uint64)
    shift = (64 - _bit_length(m - np.uint64(1))).astype(np.uint64)
    todo = np.nonzero(m > 1)[0]
    while todo.size:
        words = rng.uint64(todo.size)
        s = shift[todo]
        r = np.where(s >= 64, np.uint64(0), words >> np.minimum(s, np.uint64(63)))
        ok = r < m[todo]
        out[todo[ok]] = r[ok]
        todo = todo[~ok]
    return out.astype(np.int64).reshape(shape)


def _uniform_below_scalar_m(rng: RandomSource, m: int, shape) -> np.ndarray:
    """uniform_below for one common bound m: a single shift for every element."""
    count = int(np.prod(shape))
    if m == 1:
        return np.zeros(shape, dtype=np.int64)
    shift = np.uint64(64 - (m - 1).bit_length())
    bound = np.uint64(m)
    out = rng.uint64(count) >> shift
    bad = np.nonzero(out >= bound)[0]
    while bad.size:
        redo = rng.uint64(bad.size) >> shift
        out[bad] = redo
        bad = bad[redo >= bound]
    return out.astype(np.int64).reshape(shape)


def _bernoulli_exp_le1(rng: RandomSource, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Bernoulli(exp(-num/den)) for 0 ≤ num/den ≤ 1 (CKS Algorithm 1, first case)."""
    out = np.zeros(num.shape, dtype=bool)
    active = np.arange(num.size)
    den_max = int(den.max()) if den.size else 1
    k = 1
    while active.size:
        if den_max * k > _INT64_MAX:
            # den*k would wrap in int64 (huge rational scales): finish with Python ints.
            for i in active.tolist():
                out[i] = _bernoulli_exp_le1_scalar(rng, int(num[i]), int(den[i]), k)
            break
        # A ~ Bernoulli(gamma / k): uniform in [0, den*k) below num.
        a = uniform_below(rng, den[active] * k) < num[active]
        stopped = active[~a]
        out[stopped] = (k % 2 == 1)
        active = active[a]
        k += 1
    return out


def bernoulli_exp(rng: RandomSource, num, den) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) for integer arrays num ≥ 0, den ≥ 1 (CKS Algorithm 1)."""
    num, den = np.broadcast_arrays(np.asarray(num, dtype=np.int64), np.asarray(den, dtype=np.int64))
    shape = num.shape
    num = num.reshape(-1).copy()
    den = den.reshape(-1).copy()
    if np.any(num < 0) or np.any(den < 1):
        raise ValueError('bernoulli_exp: need num >= 0 and den >= 1.')
    result = np.ones(num.shape, dtype=bool)
    whole = num // den
    frac = num - whole * den
    ones = np.ones(num.shape, dtype=np.int64)
    # exp(-gamma) = exp(-1)**floor(gamma) * exp(-(gamma - floor(gamma))).
    active = np.nonzero(whole > 0)[0]
    while active.size:
        b = _bernoulli_exp_le1(rng, ones[active], ones[active])
        result[active[~b]] = False
        whole[active] -= 1
        active = active[b & (whole[active] > 0)]
    idx = np.nonzero(result)[0]
    if idx.size:
        result[idx] = _bernoulli_exp_le1(rng, frac[idx], den[idx])
    return result.reshape(shape)


def _geometric_exp1(rng: RandomSource, n: int) -> np.ndarray:
    """Number of successes of Bernoulli(exp(-1)) before the first failure, n times.

    Draws the Bernoulli trials in blocks of 8 per element (fewer, larger numpy rounds); the
    result is the index of the first failure, exactly as the sequential loop would count it.
    """
    width = 2
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        size = active.size * width
        trials = _bernoulli_exp_le1(rng, np.ones(size, dtype=np.int64),
                                    np.ones(size, dtype=np.int64)).reshape(-1, width)
        all_ones = trials.all(axis=1)
        v[active] += np.where(all_ones, width, np.argmin(trials, axis=1))
        active = active[all_ones]
    return v


def discrete_laplace(rng: RandomSource, scale: Rational, size=None):
    """Exact discrete Laplace: P[Y = y] ∝ exp(-|y| / scale) over the integers (CKS Algorithm 2).

    Adding it to an integer statistic of L1 sensitivity Δ gives (Δ/scale)-DP. ``size=None``
    returns a Python int; otherwise an int64 array.
    """
    n, d = _scale_nd(scale)                    # scale = n / d
    if size is None:
        return _discrete_laplace_scalar(rng, n, d)
    count = int(np.prod(size))
    if count <= SMALL_SIZE:
        out = np.asarray(_discrete_laplace_small(rng, n, d, count), dtype=np.int64)
    else:
        out = _discrete_laplace_vector(rng, n, d, count)
    return out.reshape(size)


def _discrete_laplace_vector(rng: RandomSource, n: int, d: int, count: int) -> np.ndarray:
    """The numpy rounds of ``discrete_laplace`` for ``count`` values of scale n/d."""
    out = np.zeros(count, dtype=np.int64)
    filled = 0
    rate = 0.6
    while filled < count:
        # Oversample: the first `needed` accepted candidates are i.i.d. from the target law.
        needed = count - filled
        m = int(needed / rate * 1.05) + 16
        u = uniform_below(rng, n, m)
        accept_u = bernoulli_exp(rng, u, n)            # Bernoulli(exp(-U/n))
        v = _geometric_exp1(rng, m)                     # Geometric(1 - exp(-1))
        if (int(v.max()) + 1) * n <= _INT64_MAX:
            y = (u + n * v) // d                        # Geometric(1 - exp(-d/n))
        else:                                           # n*v would wrap: exact Python ints
            y = np.asarray([(a + n * b) // d for a, b in zip(u.tolist(), v.tolist())],
                           dtype=np.int64)
        b = (rng.uint64(m) & np.uint64(1)).astype(bool)
        ok = accept_u & ~(b & (y == 0))
        rate = max(0.05, min(1.0, ok.mean()))
        accepted = np.where(b, -y, y)[ok][:needed]
        out[filled:filled + accepted.size] = accepted
        filled += accepted.size
    return out


#: ``discrete_laplace`` draws at most this many values with Python ints (numpy's per-call
#: overhead dominates small arrays; measured crossover, benchmarks/throughput/dlap_small.py).
SMALL_SIZE = 128


@functools.lru_cache(maxsize=256, typed=True)      # scales are few and public
def _scale_nd_cached(scale):
    frac = as_rational_up(scale)
    return frac.numerator, frac.denominator


def _scale_nd(scale: Rational):
    """(n, d) with scale rounded up to n/d (``as_rational_up``), memoised per scale."""
    try:
        return _scale_nd_cached(scale)
    except TypeError:                   # unhashable: as_rational_up raises the message
        frac = as_rational_up(scale)
        return frac.numerator, frac.denominator


def _discrete_laplace_small(rng: RandomSource, n: int, d: int, count: int) -> list:
    """``_discrete_laplace_vector`` with Python lists: the same rounds, the same ``rng.uint64``
    calls (sizes and order) and the same values, without numpy's per-operation overhead."""
    out = []
    rate = 0.6
    while len(out) < count:
        m = int((count - len(out)) / rate * 1.05) + 16
        u = _uniform_list(rng, n, m)
        accept_u = _bernoulli_exp_le1_list(rng, u, n)
        v = _geometric_exp1_list(rng, m)
        signs = rng.uint64(m).tolist()
        ok = 0
        for ui, vi, acc, word in zip(u, v, accept_u, signs):
            y = (ui + n * vi) // d
            negative = word & 1
            if acc and not (negative and y == 0):
                ok += 1
                if len(out) < count:
                    out.append(-y if negative else y)
        rate = max(0.05, min(1.0, ok / m))
    return out


def _uniform_list(rng: RandomSource, m: int, count: int) -> list:
    """``_uniform_below_scalar_m`` as a list (count ≥ 1)."""
    if m == 1:
        return [0] * count
    shift = 64 - (m - 1).bit_length()
    out = [w >> shift for w in rng.uint64(count).tolist()]
    bad = [i for i, r in enumerate(out) if r >= m]
    while bad:
        redo = [w >> shift for w in rng.uint64(len(bad)).tolist()]
        for i, r in zip(bad, redo):
            out[i] = r
        bad = [i for i, r in zip(bad, redo) if r >= m]
    return out


def _bernoulli_exp_le1_list(rng: RandomSource, num: list, den: int) -> list:
    """``_bernoulli_exp_le1`` for one common denominator, as a list."""
    out = [False] * len(num)
    active = list(range(len(num)))
    k = 1
    while active:
        if den * k > _INT64_MAX:
            for i in active:
                out[i] = _bernoulli_exp_le1_scalar(rng, num[i], den, k)
            break
        odd = k % 2 == 1
        still = []
        for i, r in zip(active, _uniform_list(rng, den * k, len(active))):
            if r < num[i]:
                still.append(i)
            else:
                out[i] = odd
        active = still
        k += 1
    return out


def _geometric_exp1_list(rng: RandomSource, n: int) -> list:
    """``_geometric_exp1`` as a list (trials in pairs per element, as there)."""
    v = [0] * n
    active = list(range(n))
    while active:
        trials = _bernoulli_exp_le1_list(rng, [1] * (2 * len(active)), 1)
        still = []
        for j, i in enumerate(active):
            if not trials[2 * j]:
                continue
            if trials[2 * j + 1]:
                v[i] += 2
                still.append(i)
            else:
                v[i] += 1
        active = still
    return v


def _discrete_laplace_scalar(rng: RandomSource, n: int, d: int) -> int:
    """CKS Algorithm 2 with Python ints (the fast path for one sample)."""
    while True:
        u = _uniform_below_int(rng, n)
        if not _bernoulli_exp_le1_scalar(rng, u, n):
            continue
        v = 0
        while _bernoulli_exp_le1_scalar(rng, 1, 1):
            v += 1
        y = (u + n * v) // d
        negative = rng.randbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def _uniform_below_int(rng: RandomSource, m: int) -> int:
    k = (m - 1).bit_length()
    if k <= 64:
        # rng.randbits(k) inlined (the per-tick SVT path): the same one-word call and value.
        if k == 0:
            return 0
        shift = 64 - k
        while True:
            r = rng.word() >> shift
            if r < m:
                return r
    while True:
        r = rng.randbits(k)
        if r < m:
            return r


def _bernoulli_exp_scalar(rng: RandomSource, num: int, den: int) -> bool:
    """Exact Bernoulli(exp(-num/den)) with Python ints of any size."""
    whole, frac = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_le1_scalar(rng, 1, 1):
            return False
    return _bernoulli_exp_le1_scalar(rng, frac, den)


def _bernoulli_exp_le1_scalar(rng: RandomSource, num: int, den: int, k: int = 1) -> bool:
    """Bernoulli(exp(-num/den)), num ≤ den, by CKS Algorithm 1 (from round k, Python ints)."""
    while _uniform_below_int(rng, den * k) < num:
        k += 1
    return k % 2 == 1


def discrete_gaussian(rng: RandomSource, sigma2: Rational, size=None):
    """Exact discrete Gaussian: P[Y = y] ∝ exp(-y²/(2σ²)) over the integers (CKS Algorithm 3).

    Adding it to an integer statistic of L2 sensitivity Δ gives Δ²/(2σ²)-zCDP (CKS Theorem 14).
    ``sigma2`` is the variance parameter σ², rounded up to the rational grid.
    """
    s2 = as_rational_up(sigma2, 'sigma2')
    p, q = s2.numerator, s2.denominator               # sigma^2 = p / q
    t = math.isqrt(p // q) + 1                         # floor(sigma) + 1
    count = 1 if size is None else int(np.prod(size))
    out = np.zeros(count, dtype=np.int64)
    todo = np.arange(count)
    while todo.size:
        ys = discrete_laplace(rng, t, todo.size)
        keep = np.zeros(todo.size, dtype=bool)
        for i, y in enumerate(ys.tolist()):
            # C ~ Bernoulli(exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)))
            #   = Bernoulli(exp(-(|y| t q - p)^2 / (2 p q t^2))).
            keep[i] = _bernoulli_exp_scalar(rng, (abs(y) * t * q - p) ** 2, 2 * p * q * t * t)
        out[todo[keep]] = ys[keep]
        todo = todo[~keep]
    if size is None:
        return int(out[0])
    return out.reshape(size)
