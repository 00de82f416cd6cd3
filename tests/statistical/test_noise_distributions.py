"""Statistical tier: the samplers follow their exact distributions, with power.

Each test passes at the true scale and fails when the reference scale is off by ±30%.
"""

import numpy as np
import pytest

from beam_dp import noise
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical import SAMPLE_SIZE
from tests.statistical.stats import chi2_pvalue
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical


@pytest.mark.parametrize('scale', [0.7, 3.0, 20.0])
def test_discrete_laplace_goodness_of_fit_with_power(scale):
    x = noise.discrete_laplace(noise.seeded(100 + int(scale * 10)), scale, SAMPLE_SIZE)
    assert chi2_pvalue(x, lambda y: noise.discrete_laplace_pmf(y, scale)) > P_THRESHOLD
    for wrong in (scale * (1 - FUDGE_FACTOR), scale * (1 + FUDGE_FACTOR)):
        assert chi2_pvalue(x, lambda y, w=wrong: noise.discrete_laplace_pmf(y, w)) < P_THRESHOLD
        assert variance_pvalue(x, noise.discrete_laplace_variance(wrong)) < P_THRESHOLD
    assert variance_pvalue(x, noise.discrete_laplace_variance(scale)) > P_THRESHOLD


@pytest.mark.parametrize('sigma2', [0.8, 9.0, 150.0])
def test_discrete_gaussian_goodness_of_fit_with_power(sigma2):
    x = noise.discrete_gaussian(noise.seeded(200 + int(sigma2)), sigma2, SAMPLE_SIZE)
    assert chi2_pvalue(x, lambda y: noise.discrete_gaussian_pmf(y, sigma2)) > P_THRESHOLD
    # ±30% on the scale σ is (1 ± 0.3)² on σ².
    for wrong in (sigma2 * (1 - FUDGE_FACTOR) ** 2, sigma2 * (1 + FUDGE_FACTOR) ** 2):
        assert chi2_pvalue(x, lambda y, w=wrong: noise.discrete_gaussian_pmf(y, w)) < P_THRESHOLD
        assert variance_pvalue(x, noise.discrete_gaussian_variance(wrong)) < P_THRESHOLD
    assert variance_pvalue(x, noise.discrete_gaussian_variance(sigma2)) > P_THRESHOLD


def test_secure_source_goodness_of_fit():
    x = noise.discrete_laplace(noise.secure_rng(), 4.0, SAMPLE_SIZE)
    assert chi2_pvalue(x, lambda y: noise.discrete_laplace_pmf(y, 4.0)) > P_THRESHOLD


def test_correlated_noise_is_detected():
    """Independent derived streams are uncorrelated; reusing a stream is caught."""
    base = noise.seeded(5)
    a = noise.discrete_laplace(base.derive('node', 1), 5.0, SAMPLE_SIZE)
    b = noise.discrete_laplace(base.derive('node', 2), 5.0, SAMPLE_SIZE)
    dup = noise.discrete_laplace(base.derive('node', 1), 5.0, SAMPLE_SIZE)
    threshold = 5 / np.sqrt(SAMPLE_SIZE)
    assert abs(np.corrcoef(a, b)[0, 1]) < threshold
    assert np.corrcoef(a, dup)[0, 1] > 0.99
    # Adjacent draws within one stream are independent too.
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < threshold


@pytest.mark.parametrize('scale', [0.7, 20.0])
def test_keyed_source_goodness_of_fit_with_power(scale, monkeypatch):
    """The secret-keyed PRF source drives the exact samplers to the same law (and the test
    still detects a ±30% scale error)."""
    monkeypatch.setenv('BDP_STAT_NOISE_KEY', 'f00dfeed' * 8)
    rng = noise.KeyedRandom('env:BDP_STAT_NOISE_KEY').derive('statistical', scale)
    x = noise.discrete_laplace(rng, scale, SAMPLE_SIZE)
    assert chi2_pvalue(x, lambda y: noise.discrete_laplace_pmf(y, scale)) > P_THRESHOLD
    assert variance_pvalue(x, noise.discrete_laplace_variance(scale)) > P_THRESHOLD
    for wrong in (scale * (1 - FUDGE_FACTOR), scale * (1 + FUDGE_FACTOR)):
        assert chi2_pvalue(x, lambda y, w=wrong: noise.discrete_laplace_pmf(y, w)) < P_THRESHOLD
        assert variance_pvalue(x, noise.discrete_laplace_variance(wrong)) < P_THRESHOLD
    g = noise.discrete_gaussian(rng.derive('gaussian'), 9.0, SAMPLE_SIZE)
    assert chi2_pvalue(g, lambda y: noise.discrete_gaussian_pmf(y, 9.0)) > P_THRESHOLD
    assert chi2_pvalue(g, lambda y: noise.discrete_gaussian_pmf(y, 9.0 * 1.69)) < P_THRESHOLD
