"""ContributionHistogram: buckets, thresholds, read-outs, and a DP audit on neighbouring inputs.

The audit: two inputs that differ by one privacy unit are released with the same seed, so the
noise is identical and the releases differ exactly by the unit's count (one bucket, by 1); the
privacy loss of the transcript is then computed exactly from the public noise parameters
(discrete Laplace: |Δ|/b per bucket; discrete Gaussian: the log-ratio of the two pmfs) and is
at most the declared ε (ρ: the Rényi loss at order α is at most αρ). An empirical audit
estimates P[event] on both neighbours over many seeds and checks the ratio stays within e^ε
(with a confidence margin); the same estimate flags a mechanism calibrated to half the scale,
so the audit can fail.
"""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.contribution_histogram import ContributionHistogram
from beam_dp.mechanisms.contribution_histogram import NoisyHistogram
from beam_dp.mechanisms.contribution_histogram import geometric_edges
from tests.mechanisms import contract


def test_geometric_edges():
    assert geometric_edges(20, 1) == (1, 2, 4, 8, 16)
    assert geometric_edges(16, 2) == (1, 2, 4, 5, 8, 11, 16)
    assert geometric_edges(1) == (1,)
    with pytest.raises(InvalidParamsError, match='max_value'):
        geometric_edges(0)


def test_buckets_and_exact_counts():
    h = ContributionHistogram((1, 2, 4, 8), epsilon=1.0)
    assert h.bucket_of([1, 2, 3, 4, 7, 8, 1000]).tolist() == [0, 1, 1, 2, 2, 3, 3]
    assert h.exact_counts([1, 3, 3, 9]).tolist() == [1, 2, 0, 1]
    with pytest.raises(InvalidParamsError, match='at least 1'):
        h.bucket_of([0])


@pytest.mark.parametrize('kwargs, match', [
    (dict(edges=(2, 3), epsilon=1.0), 'edges'),
    (dict(edges=(1, 1), epsilon=1.0), 'edges'),
    (dict(edges=(1, 2)), 'exactly one'),
    (dict(edges=(1, 2), epsilon=1.0, rho=1.0), 'exactly one'),
    (dict(edges=(1, 2), epsilon=-1.0), 'epsilon'),
    (dict(edges=(1, 2), rho=0.5, false_bucket_rate=0.0), 'false_bucket_rate'),
])
def test_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        ContributionHistogram(**kwargs)


def test_release_adds_noise_to_every_bucket_and_is_reproducible():
    h = ContributionHistogram(geometric_edges(1 << 10), epsilon=0.5)
    counts = np.zeros(len(h.edges), dtype=np.int64)
    a = h.release(counts, noise.seeded(3))
    b = h.release(counts, noise.seeded(3))
    assert a == b and len(a.counts) == len(h.edges) and any(a.counts)
    assert a.threshold == h.threshold
    assert h.privacy_cost().epsilon == 0.5
    assert ContributionHistogram((1, 2), rho=0.2).privacy_cost().rho == 0.2


@pytest.mark.parametrize('kw', [dict(epsilon=0.3), dict(rho=0.05)])
def test_threshold_keeps_empty_buckets_out_with_the_declared_rate(kw):
    h = ContributionHistogram(geometric_edges(1 << 12), **kw)
    empty = np.zeros(len(h.edges), dtype=np.int64)
    trials = 400
    leaks = sum(any(c >= h.threshold for c in h.release(empty, noise.seeded(s)).counts)
                for s in range(trials))
    assert leaks / trials <= 0.1 + 3 * math.sqrt(0.1 * 0.9 / trials)
    # and the threshold is not loose: at half of it, empty buckets pass often
    half = max(1, h.threshold // 2)
    leaks_half = sum(any(c >= half for c in h.release(empty, noise.seeded(s)).counts)
                     for s in range(100))
    assert leaks_half >= 30


def test_read_outs_on_exact_counts():
    hist = NoisyHistogram((1, 2, 4, 8), (10, 0, 10, 0))
    assert hist.units == 20
    assert hist.representatives.tolist() == [1.0, 2.5, 5.5, 8.0]
    assert hist.upper_values() == (1, 3, 7, 8)
    assert hist.quantile(0.5) == 1 and hist.quantile(0.51) == 7 and hist.quantile(1.0) == 7
    assert hist.mass == pytest.approx(10 * 1 + 10 * 5.5)
    assert hist.excess(3) == pytest.approx(10 * 2.5)
    assert hist.kept_fraction(2) == pytest.approx((10 + 10 * 2 / 5.5) / 20)
    # counts under the threshold and negative counts read as 0
    thr = NoisyHistogram((1, 2, 4, 8), (10, -3, 2, 5), threshold=5)
    assert thr.estimated_counts.tolist() == [10, 0, 0, 5]
    empty = NoisyHistogram((1, 2), (0, -1))
    assert empty.units == 0 and empty.quantile(0.9) == 1 and empty.kept_fraction(1) == 1.0


# -- the audit --------------------------------------------------------------------------------------

def _neighbours(h, value, seed):
    base = np.resize(np.array([5, 3, 0, 7, 1, 0, 0, 2], dtype=np.int64), len(h.edges))
    with_unit = base + h.exact_counts([value])
    return (np.array(h.release(base, noise.seeded(seed)).counts),
            np.array(h.release(with_unit, noise.seeded(seed)).counts))


@pytest.mark.parametrize('epsilon', [0.1, 1.0])
@pytest.mark.parametrize('value', [1, 5, 200])
def test_audit_laplace_transcript_loss_is_epsilon(epsilon, value):
    h = ContributionHistogram(geometric_edges(100), epsilon=epsilon)
    without, with_unit = _neighbours(h, value, seed=value)
    delta = with_unit - without
    assert np.abs(delta).sum() == 1                      # one unit, one bucket
    b = float(noise.as_rational_up(h.noise_param))
    loss = float(np.abs(delta).sum()) / b
    assert loss <= epsilon * (1 + 1e-9) and loss >= 0.999 * epsilon


@pytest.mark.parametrize('rho', [0.02, 0.5])
def test_audit_gaussian_renyi_loss_is_rho(rho):
    h = ContributionHistogram(geometric_edges(100), rho=rho)
    without, with_unit = _neighbours(h, 7, seed=11)
    delta = with_unit - without
    sigma2 = float(noise.as_rational_up(h.noise_param))
    # Rényi divergence of order α between the two discrete Gaussians: α·Δ²/(2σ²) (CKS Thm 14)
    assert float(delta @ delta) / (2 * sigma2) <= rho * (1 + 1e-9)


def _event_rate(h, counts, trials, bucket, level):
    hits = 0
    for s in range(trials):
        released = h.release(counts, noise.seeded(10_000 + s)).counts
        hits += released[bucket] >= level
    return hits / trials


@pytest.mark.parametrize('scale_factor, expect_ok', [(1.0, True), (0.4, False)])
def test_empirical_audit_on_neighbours(scale_factor, expect_ok):
    """P[count ≥ 1] on neighbours n = 0 and n = 1; a mechanism at 0.4× the scale is caught."""
    epsilon = 1.0
    declared = ContributionHistogram((1, 2), epsilon=epsilon)
    h = ContributionHistogram((1, 2), epsilon=epsilon / scale_factor)
    trials = 4000
    p0 = _event_rate(h, np.array([0, 0]), trials, 0, 1)
    p1 = _event_rate(h, np.array([1, 0]), trials, 0, 1)
    # a lower confidence bound of p1/p0 (≈ 3.5 σ margin on each)
    se0, se1 = math.sqrt(p0 * (1 - p0) / trials), math.sqrt(p1 * (1 - p1) / trials)
    lower_ratio = (p1 - 3.5 * se1) / (p0 + 3.5 * se0)
    within = lower_ratio <= math.exp(declared.epsilon)
    assert within == expect_ok, (p0, p1, lower_ratio)


class TestContributionHistogramContract(contract.MechanismContract):
    """A one-shot (stateless) release: the script releases the histogram of fixed per-unit
    values; the contract checks parameters, reproducibility, pickling and the declared cost."""

    VALUES = (1, 1, 2, 3, 5, 8, 13, 40, 40, 41)

    def make(self, **overrides):
        return ContributionHistogram(**{**dict(edges=geometric_edges(64), epsilon=1.0),
                                        **overrides})

    def initial_state(self, mech, rng):
        del mech, rng
        return None

    def invalid_params(self):
        return super().invalid_params() + [({'edges': (2, 3)}, 'edges'),
                                           ({'false_bucket_rate': 0.0}, 'false_bucket_rate')]

    def script(self):
        def release(mech, state, rng):
            hist = mech.release(mech.exact_counts(self.VALUES), rng.derive('hist'))
            return tuple(np.asarray(hist.estimated_counts).tolist()), state
        return [release, release, release]
