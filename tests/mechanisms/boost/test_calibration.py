"""Spec 002 §10 criteria 1-4 (calibration) and the optional RDP/Gaussian costs (C5/C6)."""

import math

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.boost import calibration as cal

N = 1_008_532


def test_pmw_loose_is_exact():                                           # criterion 1
    assert cal.calibrate_pmw_loose(0.05, 1e-3, N) == 4 * math.log(1000) / (0.05 * N)


def test_pmw_tight_constants_and_lemma_a2():                               # criterion 2
    for beta, lo, hi in ((1e-3, 15.60, 15.62), (5e-4, 17.13, 17.16)):
        eps = cal.calibrate_pmw_tight(0.05, beta, N)
        x = 0.05 * N * eps
        assert lo <= x <= hi
        assert cal.pmw_tail(x) <= beta
        assert cal.pmw_tail(x * (1 - 1e-6)) > beta          # the least such x
    ratio = cal.calibrate_pmw_loose(0.05, 1e-3, N) / cal.calibrate_pmw_tight(0.05, 1e-3, N)
    assert 1.76 < ratio < 1.78


def test_laplace_one_node():                                               # criterion 3
    eps = cal.calibrate_laplace(0.05, 1e-3, N)
    assert 0.05 * N * eps == pytest.approx(math.log(1000), rel=1e-12)
    assert 0.05 * N * eps == pytest.approx(6.9078, abs=1e-4)


@pytest.mark.parametrize('k,x', [(2, 9.336), (5, 12.889), (8, 15.541), (1, 7.6009),
                                 (12, 18.449)])
def test_k_laplace_table(k, x):                                            # criterion 4
    assert cal.k_laplace_x(k, 5e-4) == pytest.approx(x, abs=1e-3)
    assert cal.calibrate_laplace(0.05, 5e-4, N, k) * 0.05 * N == pytest.approx(
        cal.k_laplace_x(k, 5e-4), rel=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize('k', [1, 2, 3, 5])
def test_k_laplace_tail_matches_monte_carlo(k):                            # criterion 4 (MC)
    rng = np.random.default_rng(k)
    sums = rng.laplace(size=(1_000_000, k)).sum(axis=1)
    x = cal.k_laplace_x(k, 0.01)       # a tail large enough for a ±5 % MC check
    assert np.mean(np.abs(sums) > x) == pytest.approx(cal.k_laplace_tail(k, x), rel=0.05)


def test_k_laplace_tail_k1_closed_form():
    for x in (0.5, 3.0, 7.0):
        assert cal.k_laplace_tail(1, x) == pytest.approx(math.exp(-x), rel=1e-12)


@pytest.mark.parametrize('kwargs', [dict(alpha=0, beta=1e-3, n=10), dict(alpha=0.05, beta=1, n=10),
                                    dict(alpha=0.05, beta=1e-3, n=0)])
def test_bad_params_raise(kwargs):
    with pytest.raises(InvalidParamsError):
        cal.calibrate_laplace(**kwargs)
