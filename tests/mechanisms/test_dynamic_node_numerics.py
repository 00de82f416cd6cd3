"""The public γ bound of C8 (``laplace_sum_bound``) is computed without floating-point overflow.

It used to overflow in ``exp(s)`` when every scale is small (b_max < ~1/720), which turned the
Chernoff branch into NaN (0·inf) and printed ``RuntimeWarning: overflow encountered in exp``.
These tests turn warnings into errors, compare with the direct formula where that one is finite,
and check the bound against the exact distribution of the sum.
"""

import math
import warnings

import numpy as np
import pytest

from beam_dp.mechanisms.dynamic_node import laplace_sum_bound
from beam_dp.noise.samplers import as_rational_up


def _direct(scales, beta):
    """The textbook formula (exp(s) then multiply), valid only where nothing overflows."""
    b = np.asarray(sorted(float(as_rational_up(x)) for x in scales))   # as the mechanism
    k = len(b)
    union = float(np.sum(b) * math.log(2 * k / beta))
    s = np.linspace(0.02, 0.98, 49)[:, None] / b.max()
    a = np.exp(-1.0 / b)[None, :]
    log_mgf = np.sum(2 * np.log1p(-a) - np.log1p(-a * np.exp(s)) - np.log1p(-a * np.exp(-s)),
                     axis=1)
    return min(union, float(((log_mgf - math.log(beta / 2)) / s[:, 0]).min()))


def _tail(scales, gamma):
    """P[|Σ Y_i| > γ] for independent Y_i ~ DLap(b_i), by exact convolution of the pmfs."""
    total = np.array([1.0])
    for b in scales:
        a = math.exp(-1.0 / b)
        m = max(1, int(60 * b) + 1)
        support = np.arange(-m, m + 1)
        pmf = (1 - a) / (1 + a) * a ** np.abs(support)
        total = np.convolve(total, pmf)
    half = (len(total) - 1) // 2
    values = np.arange(-half, half + 1)
    return float(total[np.abs(values) > gamma].sum())


@pytest.mark.parametrize('scales', [[1e-3] * 10, [1e-4], [2e-3, 1e-3, 5e-4], [1e-3, 5.0]])
def test_small_scales_do_not_overflow(scales):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        gamma = laplace_sum_bound(scales, 0.05)
    union = sum(scales) * math.log(2 * len(scales) / 0.05)
    assert math.isfinite(gamma) and 0 <= gamma <= union * 1.01   # scales rounded up to 2^-20


def test_all_tiny_scales_use_the_chernoff_branch():
    # Ten scales of 1e-3: the union bound is 10·1e-3·ln(400) ≈ 0.06; the (now finite) Chernoff
    # bound is ~0.003. Before the fix the NaN branch silently fell back to the union bound.
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        gamma = laplace_sum_bound([1e-3] * 10, 0.05)
    assert gamma < 0.01 < 10 * 1e-3 * math.log(400)


@pytest.mark.parametrize('scales', [[1.0, 2.0], [0.5] * 6, [0.3, 4.0, 4.0], [8.0]])
def test_same_value_as_the_direct_formula_where_it_is_finite(scales):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert laplace_sum_bound(scales, 0.1) == pytest.approx(_direct(scales, 0.1), rel=1e-12)


@pytest.mark.parametrize('scales, beta', [([1e-3] * 4, 0.05), ([0.4, 0.6], 0.1),
                                          ([1.0, 2.0, 3.0], 0.05), ([0.05, 2.0], 0.2)])
def test_bound_holds_against_the_exact_distribution(scales, beta):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        gamma = laplace_sum_bound(scales, beta)
        assert _tail(scales, gamma) <= beta
