"""BalancedTreeCounter (negative-digit k-ary tree): contract, the prefix identity L_t·B = 1_[1,t],
exactness of the online computation (release = exact prefix + signed node noise, each node's
noise drawn once), an exact DP audit on neighbouring streams, closed forms, the ε targets,
state size, validation. (Statistical checks: tests/statistical/test_balanced_tree_statistical.py.)
"""

import dataclasses
import functools
import pickle

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms import BinaryTreeCounter
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.balanced_tree import balanced_best_k
from beam_dp.mechanisms.balanced_tree import balanced_digits
from beam_dp.mechanisms.balanced_tree import mean_abs_digits
from beam_dp.mechanisms.balanced_tree import segments
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.kary_tree import _mean_variance
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.noise.samplers import as_rational_up
from tests.mechanisms.contract import CounterContract
from tests.mechanisms.test_kary_tree import TestKaryTreeContract
from tests.mechanisms.test_kary_tree import _releases


class TestBalancedTreeContract(TestKaryTreeContract):
    """The k-ary tree's contract inputs, on the negative-digit tree."""
    KWARGS = dict(horizon=64, epsilon=1.0, dimension=3, k=5)

    def make(self, **overrides):
        return BalancedTreeCounter(**{**self.KWARGS, **overrides})

    def invalid_params(self):
        return CounterContract.invalid_params(self) + [
            ({'k': 4}, 'k'), ({'k': 1}, 'k'), ({'k': 131}, 'k'), ({'split': 'x'}, 'split')]


class TestBalancedTreeGaussianUniformContract(TestBalancedTreeContract):
    KWARGS = dict(horizon=64, rho=0.5, dimension=3, k=3, split='uniform')

    def make_noise_free(self):
        return self.make(rho=1e14)


def _nodes_matrix(m, t):
    """Σ sign·1_node over steps 1..k^L (the row L_t·B)."""
    width = m.k ** m.levels
    row = np.zeros(width + 1, dtype=np.int64)
    for h, (first, count, sign) in enumerate(segments(t, m.k, m.levels)):
        span = m.k ** h
        for j in range(first, first + count):
            row[j * span + 1:(j + 1) * span + 1] += sign
    return row[1:]


@pytest.mark.parametrize('k, horizon', [(3, 40), (5, 62), (7, 171), (21, 500), (33, 16)])
def test_signed_nodes_sum_to_the_prefix_indicator(k, horizon):
    m = BalancedTreeCounter(horizon=horizon, epsilon=1.0, k=k)
    assert (k ** m.levels - 1) // 2 >= horizon > (k ** (m.levels - 1) - 1) // 2
    for t in range(1, horizon + 1):
        digits = balanced_digits(t, k, m.levels)
        assert sum(d * k ** h for h, d in enumerate(digits)) == t
        assert max(abs(d) for d in digits) <= (k - 1) // 2
        expected = np.zeros(k ** m.levels, dtype=np.int64)
        expected[:t] = 1
        np.testing.assert_array_equal(_nodes_matrix(m, t), expected)


def _uses(m):
    """{(level, node): [(t, sign), ...]} over t = 1..T."""
    out = {}
    for t in range(1, m.horizon + 1):
        for h, (first, count, sign) in enumerate(segments(t, m.k, m.levels)):
            for j in range(first, first + count):
                out.setdefault((h, j), []).append((t, sign))
    return out


@pytest.mark.parametrize('k, horizon', [(3, 121), (5, 300), (9, 400), (21, 2000)])
def test_every_node_is_used_by_one_contiguous_run_with_one_sign(k, horizon):
    """What lets the state drop a node's noise for good when its run ends."""
    for uses in _uses(BalancedTreeCounter(horizon=horizon, epsilon=1.0, k=k)).values():
        ts = [t for t, _ in uses]
        assert ts == list(range(ts[0], ts[-1] + 1))
        assert len({s for _, s in uses}) == 1


def _reference_releases(m, values, seed):
    """From scratch: one noise per node, drawn in order of first use (levels bottom-up, nodes
    ascending, as ``step`` draws), release = exact prefix + Σ sign·η over segments(t)."""
    rng, eta, out = noise.seeded(seed), {}, []
    prefix = np.zeros(m.dimension, dtype=np.int64)
    for t, value in enumerate(values, 1):
        prefix = prefix + np.asarray(value, dtype=np.int64)
        release = prefix.copy()
        for h, (first, count, sign) in enumerate(segments(t, m.k, m.levels)):
            for j in range(first, first + count):
                if (h, j) not in eta:
                    eta[(h, j)] = m.level_noise[h].sample(rng, m.dimension)
                release = release + sign * eta[(h, j)]
        out.append(release)
    return np.array(out)


@pytest.mark.parametrize('kwargs', [dict(horizon=200, epsilon=1.0, k=5, dimension=2),
                                    dict(horizon=121, rho=0.3, k=3, dimension=1),
                                    dict(horizon=366, epsilon=0.5, dimension=1)])
def test_online_release_is_the_exact_prefix_plus_each_nodes_one_noise(kwargs):
    """The releases equal L·(Bx + η) with one η per node: the incremental state neither redraws
    a node nor drops one that a later release still uses."""
    m = BalancedTreeCounter(**kwargs)
    gen = np.random.default_rng(1)
    values = [gen.integers(0, 4, size=m.dimension) for _ in range(m.horizon)]
    releases, state = _releases(m, values, seed=9)
    assert releases.dtype == np.int64 and state.t == m.horizon
    np.testing.assert_array_equal(releases, _reference_releases(m, values, seed=9))


# -- exact DP audit: the node sums L·(Bx + η) post-processes --------------------------------------

def _realised_epsilon(m, x, x_prime) -> float:
    """Σ_h Σ_j |n(h,j)·(x − x')| / b_h: the exact pure-DP loss of the node mechanism on this
    pair (discrete Laplace of scale b: a shift by Δ moves the log-probability by |Δ|/b; b as
    the sampler rounds it)."""
    signed = (np.asarray(x) - np.asarray(x_prime)).astype(np.int64)       # (T, d)
    total = 0.0
    for h, noise_h in enumerate(m.level_noise):
        span = m.k ** h
        scale = float(as_rational_up(noise_h.param))
        nodes = -(-m.horizon // span)
        padded = np.zeros((nodes * span, m.dimension), dtype=np.int64)
        padded[:m.horizon] = signed
        sums = padded.reshape(nodes, span, m.dimension).sum(axis=1)
        total += np.abs(sums).sum() / scale
    return total


def _neighbours(m, seed, pairs=6):
    """One unit adds or removes l1 events: on one step, or spread over steps and bins."""
    gen = np.random.default_rng(seed)
    out = []
    for i in range(pairs):
        base = gen.integers(0, 50, size=(m.horizon, m.dimension))
        changed = base.copy()
        for _ in range(int(m.l1_sensitivity)):
            t = 0 if i % 2 else gen.integers(m.horizon)
            changed[t, gen.integers(m.dimension)] += 1 if i % 3 else -1
        out.append((base, changed))
    return out


@pytest.mark.parametrize('kwargs', [dict(horizon=200, epsilon=1.0, k=5),
                                    dict(horizon=366, epsilon=0.7, l1_sensitivity=3.0,
                                         dimension=2),
                                    dict(horizon=1000, epsilon=2.0, split='uniform')])
def test_exact_dp_audit_on_neighbouring_streams(kwargs):
    m = BalancedTreeCounter(**kwargs)
    worst = max(_realised_epsilon(m, x, y) for x, y in _neighbours(m, seed=3))
    assert 0.97 * m.epsilon < worst <= m.epsilon * (1 + 1e-12)


@dataclasses.dataclass(frozen=True)
class _OneLevelShort(BalancedTreeCounter):
    """Splits the budget as if the tree had one level fewer: the audit must catch it."""

    @functools.cached_property
    def level_weights(self):
        return (1.0 / (self.levels - 1),) * self.levels


def test_the_audit_has_power():
    m = _OneLevelShort(horizon=200, epsilon=1.0, k=5)
    worst = max(_realised_epsilon(m, x, y) for x, y in _neighbours(m, seed=3))
    assert worst > 1.2 * m.epsilon


# -- closed forms and targets -------------------------------------------------------------------

@pytest.mark.parametrize('kwargs', [dict(horizon=777, epsilon=0.5, k=7),
                                    dict(horizon=500, rho=0.2, k=11, split='uniform')])
def test_closed_forms_agree(kwargs):
    m = BalancedTreeCounter(**kwargs)
    brute = np.array([m.release_variance(t) for t in range(1, m.horizon + 1)])
    np.testing.assert_allclose(m.variances(), brute, rtol=1e-12)
    assert m.mean_variance() == pytest.approx(brute.mean(), rel=1e-12)
    exact_means = [np.mean([abs(balanced_digits(t, m.k, m.levels)[h])
                            for t in range(1, m.horizon + 1)]) for h in range(m.levels)]
    assert mean_abs_digits(m.horizon, m.k) == pytest.approx(exact_means, rel=1e-12)
    three = BalancedTreeCounter(horizon=23, epsilon=1.0, k=3, split='uniform')
    assert balanced_digits(23, 3, three.levels) == [-1, -1, 0, 1]    # 23 = 27 − 3 − 1
    assert three.release_variance(23) == pytest.approx(3 * three.level_variances[0])


def test_pure_gain_over_the_honaker_tree_at_2_16_is_above_3x():
    horizon = 2 ** 16
    honaker = BinaryTreeCounter(horizon=horizon, epsilon=1.0)
    honaker_mean = np.mean([honaker.release_variance(t) for t in range(1, horizon + 1, 7)])
    best = BalancedTreeCounter(horizon=horizon, epsilon=1.0)
    assert best.k == 21 and best.levels == 4
    ratio = honaker_mean / best.mean_variance()
    assert 4.1 < ratio < 4.3                                     # measured 4.20x
    kary = _mean_variance(KaryTreeCounter(horizon=horizon, epsilon=1.0))
    assert kary / best.mean_variance() > 1.45                    # vs the k-ary VR tree


@pytest.mark.parametrize('horizon', [1, 2, 3, 7, 31, 32, 65, 100, 366, 5000, 2 ** 20])
def test_best_k_is_never_above_per_step_noise(horizon):
    per_step = PerStepCounter(epsilon=1.0).variances(horizon).mean()
    assert BalancedTreeCounter(horizon=horizon, epsilon=1.0).mean_variance() <= per_step * (
        1 + 1e-12)


def test_short_horizons_are_one_level_per_step_noise():
    m = BalancedTreeCounter(horizon=10, epsilon=1.0)
    assert m.levels == 1 and m.k == balanced_best_k(10) >= 21
    assert m.variances() == pytest.approx(PerStepCounter(epsilon=1.0).variances(10))


def test_state_is_under_1_kib_per_key_at_2_20():
    m = BalancedTreeCounter(horizon=2 ** 20, epsilon=1.0)
    _, state = _releases(m, [1] * 50)
    # Worst case: every level in a full subtracted run, (k - 1)/2 node noises each.
    worst = dataclasses.replace(state, noise=np.zeros((m.levels * (m.k - 1) // 2, 1), np.int64))
    assert state.nbytes() < worst.nbytes() <= 512
    assert len(pickle.dumps(worst)) <= 1024
