"""Exact integer arithmetic for totals that may pass int64: int64 while a bound proves the result
exact, Python ints (numpy object arrays) beyond.

Sums are counted in grid units (2^grid_bits per unit of value), so a total of 8.6e9 value units
with grid_bits=30 already passes 2^63, where numpy's int64 arithmetic wraps silently. Every total
that a counter or a driver accumulates goes through these helpers; below the bound they cost one
max/min per array, above it they are exact and slower (reached only by such totals).
"""

from typing import Iterable, Sequence, Tuple

import numpy as np

__all__ = [
    'INT64_MAX',
    'exact_add',
    'exact_ints',
    'exact_sum',
    'scatter_add',
]

INT64_MAX = int(np.iinfo(np.int64).max)


def max_abs(x: np.ndarray) -> int:
    """max |x| as a Python int (0 for an empty array)."""
    return max(int(x.max()), -int(x.min())) if x.size else 0


def exact_ints(value, size: int) -> np.ndarray:
    """``value`` as ``size`` integers: int64, or Python ints (object) beyond the int64 range."""
    try:
        return np.asarray(value, dtype=np.int64).reshape(size)
    except OverflowError:
        return np.asarray([int(x) for x in np.ravel(np.asarray(value, dtype=object))],
                          dtype=object).reshape(size)


def exact_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b for integer arrays without wrap-around (floats add as float64)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == 'f' or b.dtype.kind == 'f':
        return a.astype(np.float64) + b.astype(np.float64)
    if a.dtype != object and b.dtype != object and max_abs(a) + max_abs(b) <= INT64_MAX:
        return a + b
    return a.astype(object) + b.astype(object)


def exact_sum(rows: Sequence[np.ndarray]) -> np.ndarray:
    """The exact sum of integer rows (axis 0)."""
    total = rows[0]
    for row in rows[1:]:
        total = exact_add(total, row)
    return total


def scatter_add(size: int, pairs: Iterable[Tuple[Sequence[int], Sequence[int]]]) -> np.ndarray:
    """A length-``size`` vector with ``values`` added at ``positions`` for every pair, exactly:
    ``np.add.at`` on int64 when Σ|values| ≤ 2^63 - 1 bounds every entry, else Python ints."""
    pairs = [(np.asarray(p, dtype=np.int64).reshape(-1), exact_ints(v, np.size(v)))
             for p, v in pairs]
    if (all(v.dtype != object for _, v in pairs)
            and sum(max_abs(v) * v.size for _, v in pairs) <= INT64_MAX):
        vector = np.zeros(size, dtype=np.int64)
        for positions, values in pairs:
            np.add.at(vector, positions, values)
        return vector
    vector = np.zeros(size, dtype=object)
    for positions, values in pairs:
        for i, x in zip(positions.tolist(), values.tolist()):
            vector[i] += int(x)
    return vector
