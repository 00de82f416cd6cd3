"""Statistical tier for the tree counters: empirical noise variance against the closed forms
(with power), C2 calibration (spec 001 §18.5), and an empirical privacy test on neighbouring
inputs (one unit's contribution moves the release distribution by at most e^ε)."""

import collections
import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms import BinaryTreeCounter
from beam_dp.mechanisms import InfiniteTreeCounter
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

RUNS = 4000   # independent runs, vectorised as the dimension of one counter


def _releases(mechanism, steps, seed, value=1):
    state, rng = mechanism.init_state(), noise.seeded(seed)
    releases = []
    for _ in range(steps):
        release, state = mechanism.step(state, np.full(mechanism.dimension, value, np.int64), rng)
        releases.append(np.asarray(release, dtype=float))
    return np.array(releases)


@pytest.mark.parametrize('estimator', ['textbook', 'variance_reduced'])
@pytest.mark.parametrize('budget', [{'epsilon': 1.0}, {'rho': 0.5}])
def test_binary_tree_variance_matches_closed_form_with_power(estimator, budget):
    m = BinaryTreeCounter(horizon=32, dimension=RUNS, estimator=estimator, **budget)
    releases = _releases(m, 32, seed=1)
    for t in (7, 16, 27, 32):
        errors = releases[t - 1] - t
        var = m.release_variance(t)
        assert abs(errors.mean()) < 5 * math.sqrt(var / RUNS)
        assert variance_pvalue(errors, var) > P_THRESHOLD
        # Power: a noise scale off by 30% is rejected (variance × (1 ± 0.3)²).
        for factor in ((1 - FUDGE_FACTOR) ** 2, (1 + FUDGE_FACTOR) ** 2):
            assert variance_pvalue(errors, var * factor) < P_THRESHOLD


@pytest.mark.parametrize('estimator', ['textbook', 'variance_reduced'])
def test_infinite_counter_variance_matches_closed_form_with_power(estimator):
    m = InfiniteTreeCounter(epsilon=1.0, dimension=RUNS, estimator=estimator)
    releases = _releases(m, 100, seed=2)
    for s in (1, 3, 37, 63, 100):
        errors = releases[s - 1] - s
        var = m.release_variance(s)
        assert variance_pvalue(errors, var) > P_THRESHOLD
        for factor in ((1 - FUDGE_FACTOR) ** 2, (1 + FUDGE_FACTOR) ** 2):
            assert variance_pvalue(errors, var * factor) < P_THRESHOLD


def test_c2_calibration_spec_18_5():
    """3000 runs: |mean| < 3·std/√3000 and std within 5% of the closed form at s ∈ {100, 1000}."""
    m = InfiniteTreeCounter(epsilon=1.0, dimension=3000, estimator='textbook')
    state, rng = m.init_state(), noise.seeded(3)
    ones = np.ones(3000, dtype=np.int64)
    for s in range(1, 1001):
        release, state = m.step(state, ones, rng)
        if s in (100, 1000):
            errors = release - s
            std = math.sqrt(m.release_variance(s))
            assert abs(errors.mean()) < 3 * std / math.sqrt(3000)
            assert errors.std() == pytest.approx(std, rel=0.05)


def _privacy_ratio(epsilon_declared, epsilon_used, samples=300_000, seed=4):
    """Max over well-populated cells of P[release | D] / P[release | D'] (and the inverse), for
    D' = D plus one event at step 1, on a horizon-2 tree (releases r1, r2)."""
    m = BinaryTreeCounter(horizon=2, epsilon=epsilon_used, dimension=samples, estimator='textbook')
    del epsilon_declared

    def releases(first):
        state, rng = m.init_state(), noise.seeded(seed + first)
        r1, state = m.step(state, np.full(samples, first, np.int64), rng)
        r2, state = m.step(state, np.zeros(samples, np.int64), rng)
        return collections.Counter(zip(r1.tolist(), r2.tolist()))

    a, b = releases(0), releases(1)
    worst = 0.0
    for cell in set(a) & set(b):
        if a[cell] >= 2000 and b[cell] >= 2000:
            ratio = a[cell] / b[cell]
            # One-sided 4σ lower confidence bound of the log-ratio.
            slack = 4 * math.sqrt(1 / a[cell] + 1 / b[cell])
            worst = max(worst, abs(math.log(ratio)) - slack)
    return worst


def test_one_event_moves_the_release_distribution_by_at_most_epsilon():
    assert _privacy_ratio(1.0, 1.0) <= 1.0
    # Power: a tree that spends 2ε while declaring ε is caught by the same test.
    assert _privacy_ratio(1.0, 2.0) > 1.0
