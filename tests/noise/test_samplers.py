"""Unit tests of the random sources and exact samplers (fast, seeded)."""

import fractions
import math
import pickle

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.noise import samplers


def test_seeded_is_reproducible_and_derive_is_a_pure_function_of_labels():
    a = noise.seeded(7).derive('shard', 3, 'step', 5).uint64(4)
    b = noise.seeded(7).derive('shard', 3, 'step', 5).uint64(4)
    c = noise.seeded(7).derive('shard', 3, 'step', 6).uint64(4)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()


def test_seeded_pickles_mid_stream():
    rng = noise.seeded(3)
    rng.uint64(5)
    clone = pickle.loads(pickle.dumps(rng))
    assert clone.uint64(3).tolist() == rng.uint64(3).tolist()


def test_secure_source_is_secure_and_fresh():
    rng = noise.secure_rng()
    assert rng.is_secure and not noise.seeded(1).is_secure
    assert rng.derive('x') is rng
    assert rng.uint64(4).tolist() != rng.uint64(4).tolist()
    assert pickle.loads(pickle.dumps(rng)) == rng
    assert noise.seeded(None) == rng


def test_seeded_rejects_non_int_seed():
    with pytest.raises(TypeError, match='seed must be an int'):
        noise.seeded('1')


def test_randbits_range():
    rng = noise.seeded(0)
    values = [rng.randbits(70) for _ in range(200)]
    assert all(0 <= x < 2 ** 70 for x in values)
    assert max(values) > 2 ** 66


@pytest.mark.parametrize('m', [1, 2, 3, 7, 1000, 2 ** 40 + 3])
def test_uniform_below_range_and_mean(m):
    x = noise.uniform_below(noise.seeded(m), m, 20000)
    assert x.min() >= 0 and x.max() < m
    if m > 1:
        assert abs(x.mean() - (m - 1) / 2) < 6 * math.sqrt((m * m - 1) / 12 / 20000)


def test_uniform_below_with_per_element_bounds():
    m = np.array([1, 2, 5, 2 ** 33] * 5000)
    x = noise.uniform_below(noise.seeded(1), m)
    assert np.all(x < m) and np.all(x >= 0)
    assert set(x[2::4].tolist()) == {0, 1, 2, 3, 4}


def test_uniform_below_rejects_zero():
    with pytest.raises(ValueError, match='at least 1'):
        noise.uniform_below(noise.seeded(0), 0, 3)


@pytest.mark.parametrize('num, den', [(0, 1), (1, 1), (1, 3), (5, 2), (7, 3)])
def test_bernoulli_exp_frequency(num, den):
    n = 40000
    hits = noise.bernoulli_exp(noise.seeded(num * 10 + den), np.full(n, num), np.full(n, den))
    p = math.exp(-num / den)
    assert abs(hits.mean() - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_as_rational_up_rounds_up_only():
    assert samplers.as_rational_up(2) == 2
    assert samplers.as_rational_up(fractions.Fraction(1, 3)) == fractions.Fraction(1, 3)
    x = samplers.as_rational_up(0.1)
    assert x >= fractions.Fraction(0.1)
    assert x.denominator <= 2 ** samplers.SCALE_GRID_BITS
    assert x - fractions.Fraction(0.1) < fractions.Fraction(1, 2 ** samplers.SCALE_GRID_BITS)


@pytest.mark.parametrize('bad, match', [(0, 'positive'), (-1.0, 'positive'),
                                        (float('inf'), 'finite'), (float('nan'), 'finite'),
                                        (2.0 ** 41, 'at most')])
def test_as_rational_up_rejects(bad, match):
    with pytest.raises(ValueError, match=match):
        samplers.as_rational_up(bad)


def test_discrete_laplace_scalar_and_vector_are_integers_and_symmetric():
    rng = noise.seeded(11)
    assert isinstance(noise.discrete_laplace(rng, 2.5), int)
    x = noise.discrete_laplace(rng, 2.5, (100, 30))
    assert x.shape == (100, 30) and x.dtype == np.int64
    assert abs(x.mean()) < 6 * math.sqrt(noise.discrete_laplace_variance(2.5) / x.size)


def test_discrete_gaussian_scalar_and_vector():
    rng = noise.seeded(12)
    assert isinstance(noise.discrete_gaussian(rng, 3.0), int)
    x = noise.discrete_gaussian(rng, 3.0, 5000)
    assert x.dtype == np.int64
    assert abs(x.mean()) < 6 * math.sqrt(3.0 / x.size)


@pytest.mark.parametrize('scale', [0.3, 1.0, 1.5])
def test_discrete_laplace_pmf_exact_on_small_support(scale):
    """Small scales: every value of the support is checked against the exact pmf."""
    n = 60000
    x = noise.discrete_laplace(noise.seeded(int(scale * 10)), scale, n)
    for y in range(-3, 4):
        p = noise.discrete_laplace_pmf(y, scale)
        assert abs(np.mean(x == y) - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-4


@pytest.mark.parametrize('sigma2', [0.25, 1.0, 2.0])
def test_discrete_gaussian_pmf_exact_on_small_support(sigma2):
    n = 30000
    x = noise.discrete_gaussian(noise.seeded(int(sigma2 * 100)), sigma2, n)
    for y in range(-3, 4):
        p = noise.discrete_gaussian_pmf(y, sigma2)
        assert abs(np.mean(x == y) - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-4


def test_pmfs_sum_to_one_and_variances():
    assert abs(sum(noise.discrete_laplace_pmf(y, 2.0) for y in range(-200, 201)) - 1) < 1e-12
    assert abs(sum(noise.discrete_gaussian_pmf(y, 2.0) for y in range(-50, 51)) - 1) < 1e-12
    var = sum(y * y * noise.discrete_laplace_pmf(y, 2.0) for y in range(-400, 401))
    assert abs(var - noise.discrete_laplace_variance(2.0)) < 1e-9
    assert noise.discrete_gaussian_variance(4.0) <= 4.0 + 1e-9
    assert noise.discrete_gaussian_variance(0.25) < 0.22


def test_discrete_laplace_is_exact_for_huge_numerators():
    """A rational scale near 2**40 with denominator 2**20 has numerator ~2**60: the int64
    intermediates (n·v, den·k) used to wrap and cut the tail off (no |Y| ≥ 8·scale at all)."""
    scale = fractions.Fraction(2 ** 60 - 1, 2 ** 20)
    x = noise.discrete_laplace(noise.seeded(11), scale, 100_000)
    tail = int((np.abs(x) >= 8 * float(scale)).sum())
    assert 10 <= tail <= 70                           # expected 100000·e^-8 ≈ 34
    assert abs(x.var() / (2 * float(scale) ** 2) - 1) < 0.05


def test_check_noise_scale_names_the_parameter():
    from beam_dp.errors import InvalidParamsError
    samplers.check_noise_scale('Owner', 2.0 ** 40, 'lower l1_sensitivity')
    with pytest.raises(InvalidParamsError, match=r'Owner: the discrete Laplace scale 1\.1e\+12 '
                                                 r'.*2\*\*40.*lower l1_sensitivity'):
        samplers.check_noise_scale('Owner', 1.1e12, 'lower l1_sensitivity')
    with pytest.raises(InvalidParamsError, match='Gaussian variance sigma2 .*raise rho'):
        samplers.check_noise_scale('Owner', 2.0 ** 41, 'raise rho', kind='gaussian')
    with pytest.raises(InvalidParamsError, match='positive and finite'):
        samplers.check_noise_scale('Owner', float('inf'), 'x')
