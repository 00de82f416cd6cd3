"""KaryTreeCounter and PerStepCounter: contract, exactness, closed forms, the ε targets,
validation."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import BinaryTreeCounter
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.kary_tree import _digit_sum
from beam_dp.mechanisms.kary_tree import _mean_variance
from beam_dp.mechanisms.kary_tree import best_k
from beam_dp.mechanisms.per_step import PerStepCounter
from tests.mechanisms.contract import CounterContract


class TestKaryTreeContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(horizon=64, epsilon=1.0, dimension=3, k=5)
        kwargs.update(overrides)
        return KaryTreeCounter(**kwargs)

    def make_noise_free(self):
        return self.make(epsilon=1e7)

    def inputs(self):
        return [np.array([t % 3, 1, 5 * (t % 2)]) for t in range(64)]


    def invalid_params(self):
        return super().invalid_params() + [({'k': 1}, 'k'), ({'estimator': 'x'}, 'estimator')]


class TestKaryTreeTextbookGaussianContract(TestKaryTreeContract):

    def make(self, **overrides):
        kwargs = dict(horizon=64, rho=0.5, dimension=3, k=5, estimator='textbook')
        kwargs.update(overrides)
        return KaryTreeCounter(**kwargs)

    def make_noise_free(self):
        return self.make(rho=1e14)


class TestPerStepContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(epsilon=1.0, dimension=3)
        kwargs.update(overrides)
        return PerStepCounter(**kwargs)

    def make_noise_free(self):
        return self.make(epsilon=1e7)

    def inputs(self):
        return [np.array([t % 3, 1, 5 * (t % 2)]) for t in range(64)]


def _releases(m, values, seed=0):
    state, rng, out = m.init_state(), noise.seeded(seed), []
    for value in values:
        release, state = m.step(state, value, rng)
        out.append(release)
    return np.array(out), state


def test_k2_variance_reduced_equals_honaker_binary_tree_for_power_of_two_horizons():
    for horizon in (16, 1024):
        k2 = KaryTreeCounter(horizon=horizon, epsilon=1.0, k=2)
        binary = BinaryTreeCounter(horizon=horizon, epsilon=1.0)
        assert k2.levels == binary.levels
        for t in (1, 5, horizon // 2 + 3, horizon):
            assert k2.release_variance(t) == pytest.approx(binary.release_variance(t), rel=1e-12)


def test_textbook_release_is_the_integer_sum_of_the_digit_nodes():
    m = KaryTreeCounter(horizon=200, epsilon=1.0, k=3, estimator='textbook')
    values = [1] * 23                                  # 23 = 2·9 + 1·3 + 2
    releases, state = _releases(m, values, seed=4)
    assert releases.dtype == np.int64
    assert m.digits(23)[:3] == [2, 1, 2]
    # Noise only: subtract the exact prefix; three levels with 2 + 1 + 2 nodes.
    assert m.release_variance(23) == pytest.approx(5 * m.node_noise.variance())
    assert state.closed.shape == (m.levels, 1)


def test_variance_reduced_estimate_is_inverse_variance_weighted():
    m = KaryTreeCounter(horizon=100, epsilon=1.0, k=4)
    s2 = m.node_noise.variance()
    v0, v1 = m.level_variances[:2]
    assert v0 == pytest.approx(s2)
    assert 1 / v1 == pytest.approx(1 / s2 + 1 / (4 * v0))


def test_vectorised_variances_and_mean_digit_sums_are_exact():
    m = KaryTreeCounter(horizon=777, epsilon=0.5, k=6)
    brute = np.array([m.release_variance(t) for t in range(1, 778)])
    np.testing.assert_allclose(m.variances(), brute, rtol=1e-12)
    assert _mean_variance(m) == pytest.approx(brute.mean(), rel=1e-12)
    for horizon, span, k in ((1, 1, 2), (100, 3, 5), (4095, 64, 4), (12345, 17, 17)):
        assert _digit_sum(horizon, span, k) == sum((t // span) % k for t in range(horizon + 1))


def test_pure_gain_over_the_honaker_tree_at_2_16_is_2_78x():
    horizon = 2 ** 16
    honaker = BinaryTreeCounter(horizon=horizon, epsilon=1.0)
    t = np.arange(1, horizon + 1)
    honaker_mean = np.mean([honaker.release_variance(int(x)) for x in t[::61]])
    best = KaryTreeCounter(horizon=horizon, epsilon=1.0)
    ratio = honaker_mean / _mean_variance(best)
    # Measured 2.78x (k = 17): the online variance-reduced k-ary tree does not reach the 3x
    # target; this pins what it does reach.
    assert 2.7 < ratio < 3.0


@pytest.mark.parametrize('horizon', [1, 2, 3, 7, 31, 32, 100, 366, 5000, 2 ** 20])
def test_best_k_tree_is_never_above_per_step_noise(horizon):
    per_step = PerStepCounter(epsilon=1.0).variances(horizon).mean()
    tree = _mean_variance(KaryTreeCounter(horizon=horizon, epsilon=1.0))
    assert tree <= per_step * (1 + 1e-12)


def test_best_k_for_short_horizons_is_a_single_level():
    assert KaryTreeCounter(horizon=10, epsilon=1.0).levels == 1
    assert best_k(2 ** 16) == 17


def test_per_step_release_is_integer_and_variance_is_linear():
    m = PerStepCounter(epsilon=2.0, l1_sensitivity=3.0, dimension=2)
    assert m.step_noise.param == pytest.approx(1.5)
    assert m.release_variance(10) == pytest.approx(10 * m.step_noise.variance())
    releases, state = _releases(m, [[1, 2]] * 5)
    assert releases.dtype == np.int64 and state.t == 5
    g = PerStepCounter(rho=0.5, l1_sensitivity=4.0, l2_sensitivity=2.0)
    assert g.step_noise.kind == 'gaussian' and g.step_noise.param == pytest.approx(4.0)


@pytest.mark.parametrize('m', [KaryTreeCounter(horizon=3, epsilon=1.0, k=2),
                               BLTCounter(rho=1.0, horizon=3),
                               BalancedTreeCounter(horizon=3, epsilon=1.0, k=3)])
def test_new_counters_refuse_to_release_past_the_horizon(m):
    _, state = _releases(m, [1, 1, 1])
    with pytest.raises(UnsupportedMechanismError, match='horizon 3 reached'):
        m.step(state, 1, noise.seeded(0))


@pytest.mark.parametrize('kwargs, name', [
    (dict(horizon=10, epsilon=1.0, k=1), 'k'),
    (dict(horizon=10, epsilon=1.0, k=65), 'k'),
    (dict(horizon=0, epsilon=1.0), 'horizon'),
    (dict(horizon=10), 'epsilon'),
    (dict(horizon=10, epsilon=1.0, estimator='x'), 'estimator'),
    (dict(horizon=10, epsilon=1.0, dimension=0), 'dimension'),
])
def test_kary_invalid_params_name_the_argument(kwargs, name):
    with pytest.raises(InvalidParamsError, match=name):
        KaryTreeCounter(**kwargs)


def test_per_step_invalid_params():
    with pytest.raises(InvalidParamsError, match='epsilon'):
        PerStepCounter()
    with pytest.raises(InvalidParamsError, match='dimension'):
        PerStepCounter(epsilon=1.0, dimension=0)
