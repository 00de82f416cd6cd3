"""BinaryTreeCounter (C1): contract, exactness, closed-form variances, validation."""

import contextlib

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import BinaryTreeCounter
from tests.mechanisms.contract import CounterContract


class TestBinaryTreeContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(horizon=64, epsilon=1.0, dimension=3)
        kwargs.update(overrides)
        return BinaryTreeCounter(**kwargs)

    def make_noise_free(self):
        return self.make(epsilon=1e7)

    def inputs(self):
        return [np.array([t % 3, 1, 5 * (t % 2)]) for t in range(64)]


class TestBinaryTreeTextbookContract(TestBinaryTreeContract):

    def make(self, **overrides):
        overrides.setdefault('estimator', 'textbook')
        return super().make(**overrides)


class TestBinaryTreeGaussianContract(TestBinaryTreeContract):

    def make(self, **overrides):
        kwargs = dict(horizon=64, rho=0.5, dimension=3)
        kwargs.update({k: v for k, v in overrides.items() if k != 'epsilon'})
        if 'epsilon' in overrides:
            kwargs['rho'] = overrides['epsilon'] ** 2
        return BinaryTreeCounter(**kwargs)


def test_levels_and_node_noise():
    assert BinaryTreeCounter(horizon=1, epsilon=1.0).levels == 1
    assert BinaryTreeCounter(horizon=1024, epsilon=1.0).levels == 11
    assert BinaryTreeCounter(horizon=1025, epsilon=1.0).levels == 12
    m = BinaryTreeCounter(horizon=1024, epsilon=2.0, l1_sensitivity=3.0)
    assert m.node_noise.kind == 'laplace' and m.node_noise.param == pytest.approx(11 * 3 / 2)
    g = BinaryTreeCounter(horizon=1024, rho=0.5, l1_sensitivity=4.0, l2_sensitivity=2.0)
    assert g.node_noise.kind == 'gaussian' and g.node_noise.param == pytest.approx(11 * 4 / 1.0)


def test_refuses_to_release_past_the_horizon():
    m = BinaryTreeCounter(horizon=2, epsilon=1.0)
    state, rng = m.init_state(), noise.seeded(0)
    for _ in range(2):
        _, state = m.step(state, 1, rng)
    with pytest.raises(UnsupportedMechanismError, match='horizon 2 reached'):
        m.step(state, 1, rng)


def test_textbook_release_is_integer_sum_of_set_bit_nodes():
    m = BinaryTreeCounter(horizon=16, epsilon=1.0, estimator='textbook')
    state, rng = m.init_state(), noise.seeded(5)
    for _ in range(11):                                  # t = 11 = 0b1011
        release, state = m.step(state, 2, rng)
    assert release.dtype == np.int64
    assert release[0] == state.noisy[0, 0] + state.noisy[1, 0] + state.noisy[3, 0]


def test_noise_is_drawn_once_per_node():
    """The released noisy nodes are held in state: replaying a later step with a different
    generator cannot change an already-closed node."""
    m = BinaryTreeCounter(horizon=8, epsilon=1.0, estimator='textbook')
    state, rng = m.init_state(), noise.seeded(1)
    for _ in range(4):
        _, state = m.step(state, 1, rng)
    root = state.noisy[2].copy()
    _, after = m.step(state, 1, noise.seeded(999))
    np.testing.assert_array_equal(after.noisy[2], root)


@pytest.mark.parametrize('horizon', [2 ** 10, 2 ** 16])
def test_variance_reduction_at_least_one_and_a_half(horizon):
    textbook = BinaryTreeCounter(horizon=horizon, epsilon=1.0, estimator='textbook')
    ours = BinaryTreeCounter(horizon=horizon, epsilon=1.0)
    ts = range(1, horizon + 1, max(1, horizon // 4096))
    ratio = np.mean([textbook.release_variance(t) for t in ts]) / np.mean(
        [ours.release_variance(t) for t in ts])
    assert ratio >= 1.5


def test_state_is_at_most_one_kib_per_key_at_2_to_20():
    for estimator in ('textbook', 'variance_reduced'):
        state = BinaryTreeCounter(horizon=2 ** 20, epsilon=1.0, dimension=100,
                                  estimator=estimator).init_state()
        assert state.nbytes() / 100 <= 1024


ok = contextlib.nullcontext


@pytest.mark.parametrize('kwargs, expectation', [
    (dict(horizon=8, epsilon=1.0), ok()),
    (dict(horizon=0, epsilon=1.0), pytest.raises(InvalidParamsError, match='horizon must be a positive integer, got 0')),
    (dict(horizon=8), pytest.raises(InvalidParamsError, match='exactly one of epsilon')),
    (dict(horizon=8, epsilon=1.0, rho=1.0), pytest.raises(InvalidParamsError, match='exactly one of epsilon')),
    (dict(horizon=8, epsilon=-1.0), pytest.raises(InvalidParamsError, match='epsilon must be positive')),
    (dict(horizon=8, epsilon=1.0, l1_sensitivity=0), pytest.raises(InvalidParamsError, match='l1_sensitivity must be positive')),
    (dict(horizon=8, rho=1.0, l1_sensitivity=1, l2_sensitivity=2), pytest.raises(InvalidParamsError, match='l2_sensitivity must not exceed')),
    (dict(horizon=8, epsilon=1.0, dimension=0), pytest.raises(InvalidParamsError, match='dimension must be a positive integer')),
    (dict(horizon=8, epsilon=1.0, estimator='honaker'), pytest.raises(InvalidParamsError, match="estimator must be one of 'textbook', 'variance_reduced'")),
    (dict(horizon=2.5, epsilon=1.0), pytest.raises(InvalidParamsError, match='horizon must be an integer')),
])
def test_validation(kwargs, expectation):
    with expectation:
        BinaryTreeCounter(**kwargs)
