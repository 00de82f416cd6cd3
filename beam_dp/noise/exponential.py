"""The exact exponential mechanism over a finite candidate set (McSherry & Talwar 2007).

``exponential_mechanism(rng, losses, num, den)`` returns index r with probability
exactly ∝ exp(−(num/den)·losses[r]) for non-negative integer losses and a rational coefficient
num/den. No floating point touches the law: a proposal is a uniform candidate
(``uniform_below``), accepted with probability exp(−(num/den)·(losses[r] − min losses)) by the
exact Bernoulli(exp(−x)) of Canonne, Kamath and Steinke (``bernoulli_exp``; Python integers when
the numerator would not fit in int64). Rejection sampling from the uniform proposal gives the
target law exactly; the expected number of proposals is |candidates|·w*/Σw ≤ |candidates|.

Callers calibrate: for a utility u of sensitivity Δ and budget ε the coefficient is ε/(2Δ)
times the loss unit, rounded DOWN (``rational_down``), which keeps the mechanism ε-DP.

Timing: the number of proposals depends on the losses (the data), as for any rejection sampler
of a data-dependent law; beam_dp never releases it (no metric or log counts proposals).
"""

import math
from fractions import Fraction
from typing import Optional, Sequence, Tuple

import numpy as np

from beam_dp.noise.rng import RandomSource
from beam_dp.noise.samplers import bernoulli_exp
from beam_dp.noise.samplers import uniform_below

__all__ = [
    'exponential_mechanism',
    'rational_down',
]

_INT64_SAFE = 1 << 62
#: Proposals drawn per vectorised round (a round may accept several: the first is kept).
_BATCH = 256


def rational_down(x: float, bits: int = 30) -> Tuple[int, int]:
    """(num, den) with num/den ≤ x, den a power of two and num < 2**bits (x ≥ 0 finite).

    Rounding the exponential mechanism's coefficient down makes it at most as concentrated as
    asked: privacy-safe."""
    if not (x >= 0 and math.isfinite(x)):
        raise ValueError(f'rational_down: x must be finite and >= 0, got {x!r}.')
    if x == 0:
        return 0, 1
    exact = Fraction(x)
    shift = bits - 1 - math.floor(math.log2(x))
    if shift >= 0:
        num = math.floor(exact * (1 << shift))
        den = 1 << shift
    else:
        num = math.floor(exact / (1 << -shift))
        return num << -shift, 1
    while num >= (1 << bits):          # log2 rounding at a power of two
        num >>= 1
        den >>= 1 if den > 1 else 0
    return num, den


def _uniform_big(rng: RandomSource, m: int) -> int:
    """Uniform Python int in [0, m) by masked rejection."""
    bits = (m - 1).bit_length()
    while True:
        r = rng.randbits(bits)
        if r < m:
            return r


def _bernoulli_exp_big(rng: RandomSource, num: int, den: int) -> bool:
    """Exact Bernoulli(exp(−num/den)) in Python integers (CKS Algorithm 1)."""
    whole, frac = divmod(num, den)
    for _ in range(whole):               # exp(−1)^whole; stops at the first failure
        if not _bernoulli_exp_le1_big(rng, 1, 1):
            return False
    return _bernoulli_exp_le1_big(rng, frac, den)


def _bernoulli_exp_le1_big(rng: RandomSource, num: int, den: int) -> bool:
    k = 1
    while True:
        if _uniform_big(rng, den * k) >= num:     # A ~ Bernoulli(x/k) failed
            return k % 2 == 1
        k += 1


def exponential_mechanism(rng: RandomSource, losses: Sequence[int], num: int, den: int,
                          size: Optional[int] = None):
    """An index r drawn with probability ∝ exp(−(num/den)·losses[r]), exactly.

    Args:
      rng: the random source. losses: non-negative integers (a numpy int array or Python ints).
      num, den: the coefficient num/den ≥ 0 (integers, den ≥ 1).
      size: None (one int) or the number of i.i.d. draws (an int64 array; every accepted
        proposal is an independent draw from the target law).
    """
    arr = np.asarray(losses)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError('exponential_mechanism: losses must be a non-empty 1-D sequence.')
    num, den = int(num), int(den)
    if num < 0 or den < 1:
        raise ValueError('exponential_mechanism: need num >= 0 and den >= 1.')
    if size is not None:
        return _many(rng, arr, num, den, int(size))
    count = arr.size
    if num == 0 or count == 1:
        return int(uniform_below(rng, count, 1)[0])
    if arr.dtype == object:
        rel_list = [int(x) for x in arr]
        low = min(rel_list)
        rel = np.array([x - low for x in rel_list], dtype=object)
        top = max(rel_list) - low
    else:
        rel = arr.astype(np.int64) - int(arr.min())
        top = int(rel.max())
    if top * num < _INT64_SAFE and rel.dtype != object and den < _INT64_SAFE:
        rel64 = rel.astype(np.int64)
        while True:
            r = uniform_below(rng, count, _BATCH)
            ok = bernoulli_exp(rng, rel64[r] * num, den)
            hits = np.nonzero(ok)[0]
            if hits.size:
                return int(r[hits[0]])
    while True:
        r = int(uniform_below(rng, count, 1)[0])
        if _bernoulli_exp_big(rng, int(rel[r]) * num, den):
            return r


def _many(rng: RandomSource, arr: np.ndarray, num: int, den: int, size: int) -> np.ndarray:
    count = arr.size
    if num == 0 or count == 1:
        return uniform_below(rng, count, size)
    rel = np.array([int(x) for x in arr], dtype=object)
    rel = rel - min(rel)
    if int(max(rel)) * num >= _INT64_SAFE or den >= _INT64_SAFE:
        return np.array([exponential_mechanism(rng, arr, num, den) for _ in range(size)],
                        dtype=np.int64)
    rel64 = rel.astype(np.int64)
    out = []
    need = size
    while need > 0:
        r = uniform_below(rng, count, max(_BATCH, 4 * need))
        kept = r[bernoulli_exp(rng, rel64[r] * num, den)][:need]
        out.append(kept)
        need -= kept.size
    return np.concatenate(out)
