"""Statistical tier for the contribution histograms behind ``ChooseContributionBounds``:

* the released bucket noise has the closed-form variance (discrete Laplace at ε, discrete
  Gaussian at ρ), with power: the same test rejects a histogram whose noise scale is 30% off in
  either direction;
* the quantile read off the noisy CDF lands in a given bucket as often as the closed form of the
  noise predicts (exact enumeration), and a histogram whose scale is 30% off is rejected.
"""

import math

import numpy as np
import pytest
from scipy import stats as sps

from beam_dp import noise
from beam_dp.mechanisms.contribution_histogram import ContributionHistogram
from beam_dp.mechanisms.contribution_histogram import geometric_edges
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical import SAMPLE_SIZE
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

EDGES = geometric_edges(1 << 12)          # 25 buckets


def _noise_samples(h, seed):
    counts = np.full(len(EDGES), 50, dtype=np.int64)
    out = []
    s = 0
    while len(out) < SAMPLE_SIZE:
        released = np.array(h.release(counts, noise.seeded(seed * 100_000 + s)).counts)
        out.extend((released - counts).tolist())
        s += 1
    return np.array(out[:SAMPLE_SIZE])


@pytest.mark.parametrize('kw', [dict(epsilon=0.5), dict(epsilon=2.0), dict(rho=0.05),
                                dict(rho=1.0)])
def test_bucket_noise_variance_with_power(kw):
    h = ContributionHistogram(EDGES, **kw)
    true_var = h.noise_variance()
    assert variance_pvalue(_noise_samples(h, 1), true_var) > P_THRESHOLD
    for factor in (1 - FUDGE_FACTOR, 1 + FUDGE_FACTOR):
        # the noise scale (Laplace b, Gaussian σ) off by 30%
        mis = ({'epsilon': kw['epsilon'] / factor} if 'epsilon' in kw
               else {'rho': kw['rho'] / factor ** 2})
        wrong = ContributionHistogram(EDGES, **mis)
        assert variance_pvalue(_noise_samples(wrong, 2), true_var) < P_THRESHOLD, factor


def _hit_rate_pvalue(h, counts, true_bucket_value, q, trials, expected):
    hits = 0
    for s in range(trials):
        released = h.release(counts, noise.seeded(777_000 + s))
        hits += released.quantile(q) == true_bucket_value
    return float(sps.binomtest(hits, trials, expected).pvalue)


def _closed_form_hit(eps, c0, c1, q):
    """P[the q-quantile is read in bucket 0] for two buckets with counts c0, c1 under
    discrete Laplace(1/ε) noise, negative counts read as 0: exact enumeration (truncated
    where the pmf is below 1e-30), independent of the sampler under test."""
    a = math.exp(-eps)
    support = np.arange(-400, 401)
    pmf = (1 - a) / (1 + a) * a ** np.abs(support)
    k0 = np.maximum(c0 + support, 0)[:, None]
    k1 = np.maximum(c1 + support, 0)[None, :]
    total = k0 + k1
    hit = (k0 >= q * total - 1e-12) & (total > 0)
    return float((pmf[:, None] * pmf[None, :] * hit).sum())


def test_quantile_hit_rate_matches_closed_form_with_power():
    """20 and 60 units in two buckets: the 0.3-quantile is read in the first bucket only when
    the noise moves the CDF past 0.3, with a probability the closed form gives; a histogram
    whose noise scale is 30% off is rejected by the same binomial test."""
    edges, counts, eps, q, trials = (1, 2), np.array([20, 60]), 0.25, 0.3, 3000
    expected = _closed_form_hit(eps, 20, 60, q)

    def pvalue(h):
        object.__setattr__(h, 'threshold', 1)       # the read-out under test: counts ≥ 0
        hits = sum(h.release(counts, noise.seeded(777_000 + s)).quantile(q) == 1
                   for s in range(trials))
        return float(sps.binomtest(hits, trials, expected).pvalue)

    assert pvalue(ContributionHistogram(edges, epsilon=eps)) > P_THRESHOLD
    for factor in (1 - FUDGE_FACTOR, 1 + FUDGE_FACTOR):
        assert pvalue(ContributionHistogram(edges, epsilon=eps / factor)) < P_THRESHOLD, factor
