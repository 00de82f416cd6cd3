"""Goodness-of-fit helpers for the statistical tier (discrete distributions)."""

import math
from typing import Callable

import numpy as np
from scipy import stats


def chi2_pvalue(samples: np.ndarray, pmf: Callable[[int], float], min_expected: float = 5.0) -> float:
    """χ² goodness of fit of integer samples against ``pmf``, tails pooled so that every cell
    expects at least ``min_expected`` observations."""
    samples = np.asarray(samples, dtype=np.int64)
    n = samples.size
    lo, hi = int(samples.min()), int(samples.max())
    centre = 0
    # Grow a central range of cells while each has enough expected mass.
    cells = []
    k = centre
    while n * pmf(k) >= min_expected:
        cells.append(k)
        k += 1
    k = centre - 1
    while n * pmf(k) >= min_expected:
        cells.insert(0, k)
        k -= 1
    if not cells:
        raise ValueError('chi2_pvalue: no cell has enough expected mass.')
    left, right = cells[0], cells[-1]
    observed = [np.sum(samples < left)] + [np.sum(samples == c) for c in cells] + [np.sum(samples > right)]
    inner = [pmf(c) for c in cells]
    tail_mass = max(0.0, 1.0 - sum(inner))
    # Split the pooled tail mass by symmetry of the distributions tested (all symmetric about 0).
    expected = [n * tail_mass / 2] + [n * p for p in inner] + [n * tail_mass / 2]
    observed = np.asarray(observed, dtype=float)
    expected = np.asarray(expected, dtype=float)
    keep = expected > 0
    observed, expected = observed[keep], expected[keep]
    expected *= observed.sum() / expected.sum()
    del lo, hi
    return float(stats.chisquare(observed, expected).pvalue)


def variance_pvalue(samples: np.ndarray, true_variance: float) -> float:
    """Two-sided test that the sample variance matches ``true_variance`` (normal approximation
    of the variance estimator, using the sample fourth moment)."""
    x = np.asarray(samples, dtype=float)
    n = x.size
    centred = x - x.mean()
    var = centred.var(ddof=1)
    m4 = np.mean(centred ** 4)
    se = math.sqrt(max(m4 - var ** 2, 1e-300) / n)
    z = (var - true_variance) / se
    return float(2 * stats.norm.sf(abs(z)))
