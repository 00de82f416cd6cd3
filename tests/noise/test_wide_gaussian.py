"""discrete_gaussian_any: the exact discrete Gaussian above the 2^40 cap of the vectorised
sampler (used by the BLT counter's refining grid)."""

import fractions

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.noise.samplers import discrete_gaussian
from beam_dp.noise.wide_gaussian import discrete_gaussian_any
from beam_dp.noise.wide_gaussian import discrete_gaussian_variance_any
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical import SAMPLE_SIZE
from tests.statistical.stats import chi2_pvalue
from tests.statistical.stats import variance_pvalue


def test_below_the_cap_it_is_the_vectorised_sampler():
    a = discrete_gaussian_any(noise.seeded(3), fractions.Fraction(9, 4), 50)
    b = discrete_gaussian(noise.seeded(3), fractions.Fraction(9, 4), 50)
    np.testing.assert_array_equal(a, b)


def test_refuses_a_sigma2_it_would_have_to_round():
    with pytest.raises(ValueError, match='denominator'):
        discrete_gaussian_any(noise.seeded(0), fractions.Fraction(1, 2 ** 21 + 1), 1)
    with pytest.raises(ValueError, match='positive'):
        discrete_gaussian_any(noise.seeded(0), 0, 1)


def test_variance_closed_form():
    assert discrete_gaussian_variance_any(2 ** 50) == 2.0 ** 50
    assert discrete_gaussian_variance_any(0.5) == pytest.approx(noise.discrete_gaussian_variance(
        0.5))


@pytest.mark.statistical
def test_above_the_cap_variance_and_shape_with_power():
    sigma2 = fractions.Fraction(3 * 2 ** 42 + 1, 2 ** 3)        # 1.5·2^40 + 1/8 > 2^40
    samples = discrete_gaussian_any(noise.seeded(11), sigma2, SAMPLE_SIZE).astype(float)
    var = float(sigma2)
    assert abs(samples.mean()) < 5 * np.sqrt(var / SAMPLE_SIZE)
    assert variance_pvalue(samples, var) > P_THRESHOLD
    for factor in ((1 - FUDGE_FACTOR) ** 2, (1 + FUDGE_FACTOR) ** 2):
        assert variance_pvalue(samples, var * factor) < P_THRESHOLD
    # Shape: binned to units of σ/4 the law is the Gaussian's (the lattice is far finer).
    scale = np.sqrt(var) / 4
    from scipy import stats
    binned = np.floor(samples / scale).astype(np.int64)
    pmf = lambda k: stats.norm.cdf((k + 1) / 4) - stats.norm.cdf(k / 4)
    assert chi2_pvalue(binned, lambda k: pmf(k) if k >= 0 else pmf(-k - 1)) > P_THRESHOLD
