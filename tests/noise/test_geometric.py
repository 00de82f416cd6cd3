"""Exact discrete-Laplace tail Bernoulli and geometric skip-ahead sampler."""

import math

import numpy as np
import pytest
from scipy import stats

from beam_dp.noise import discrete_laplace
from beam_dp.noise import seeded
from beam_dp.noise.geometric import bernoulli_dlap_tail
from beam_dp.noise.geometric import bernoulli_from_enclosure
from beam_dp.noise.geometric import dlap_tail
from beam_dp.noise.geometric import geometric_dlap_tail
from beam_dp.noise.geometric import log_dlap_tail


@pytest.mark.parametrize('scale', [0.5, 4.0, 8.0])
def test_tail_closed_form_matches_pmf_sum(scale):
    a = math.exp(-1 / scale)
    pmf = lambda y: (1 - a) / (1 + a) * a ** abs(y)
    for k in range(-6, 8):
        direct = sum(pmf(y) for y in range(k, k + 4000))
        assert dlap_tail(scale, k) == pytest.approx(direct, rel=1e-9)


def test_log_tail_does_not_underflow():
    assert log_dlap_tail(4.0, 10 ** 6) == pytest.approx(-10 ** 6 / 4 - math.log1p(math.exp(-0.25)))


def _geometric_pvalue(samples, q, cells):
    # Cells of equal width w over [0, cells·w) plus the tail, expected counts closed-form.
    w = max(1, int(0.3 / q))
    samples = np.minimum(np.asarray(samples) // w, cells)
    observed = np.bincount(samples, minlength=cells + 1)
    edges = [(1 - q) ** (m * w) for m in range(cells + 1)]
    expected = np.array([edges[m] - edges[m + 1] for m in range(cells)] + [edges[cells]])
    return stats.chisquare(observed, expected * len(samples)).pvalue


@pytest.mark.statistical
@pytest.mark.parametrize('k, power', [(-2, False), (1, False), (4, True), (7, True)])
def test_geometric_matches_closed_form_with_power(k, power):
    # Power (scale off by ±30% is rejected) only where q(k) depends on the scale strongly.
    rng = seeded(11)
    samples = [geometric_dlap_tail(rng, 4.0, k) for _ in range(2500)]
    q = dlap_tail(4.0, k)
    cells = max(6, int(3 / q))
    assert _geometric_pvalue(samples, q, cells) > 1e-4
    if power:
        for factor in (0.7, 1.3):
            assert _geometric_pvalue(samples, dlap_tail(4.0 * factor, k), cells) < 1e-4


@pytest.mark.statistical
def test_bernoulli_tail_frequency_agrees_with_discrete_laplace():
    rng = seeded(5)
    n = 6000
    for k in (-1, 2):
        hits = sum(bernoulli_dlap_tail(rng, 3.0, k) for _ in range(n))
        y = discrete_laplace(rng, 3.0, n)
        p = dlap_tail(3.0, k)
        se = math.sqrt(p * (1 - p) / n)
        assert abs(hits / n - p) < 5 * se
        assert abs(np.mean(y >= k) - p) < 5 * se


def test_limit_caps_and_handles_astronomical_gaps():
    rng = seeded(1)
    assert geometric_dlap_tail(rng, 4.0, 10 ** 5, limit=2 ** 64) == 2 ** 64
    assert geometric_dlap_tail(rng, 4.0, -50, limit=10) == 0          # q ≈ 1
    assert geometric_dlap_tail(rng, 4.0, 3, limit=0) == 0
    big = geometric_dlap_tail(rng, 4.0, 200, limit=2 ** 200)
    assert 0 <= big <= 2 ** 200 and isinstance(big, int)


def test_geometric_reproducible_under_seed():
    a = [geometric_dlap_tail(seeded(3).derive(i), 2.0, 4) for i in range(20)]
    b = [geometric_dlap_tail(seeded(3).derive(i), 2.0, 4) for i in range(20)]
    assert a == b


def test_bernoulli_from_enclosure_exact_rational():
    from fractions import Fraction
    rng = seeded(2)
    n = 5000
    hits = sum(bernoulli_from_enclosure(rng, lambda prec: (Fraction(1, 3), Fraction(1, 3)))
               for _ in range(n))
    assert abs(hits / n - 1 / 3) < 5 * math.sqrt(2 / 9 / n)
