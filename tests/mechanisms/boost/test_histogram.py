"""Spec 002 §10 criteria 5-9 (histogram invariants, heuristic) and 28 (warm start)."""

import math

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.boost.heuristic import COVID_LEARNING_RATE
from beam_dp.mechanisms.boost.heuristic import LearningRate
from beam_dp.mechanisms.boost.heuristic import Readiness
from beam_dp.mechanisms.boost.histogram import merge_children
from beam_dp.mechanisms.boost.histogram import query_support
from beam_dp.mechanisms.boost.histogram import uniform_node
from beam_dp.mechanisms.boost.histogram import warm_copy
from beam_dp.queries import LinearQuery

N = 16
Q = LinearQuery.from_vector([1.0] * 4 + [0.0] * 8 + [0.5] * 4)


def _trained(steps=5, seed=0):
    rng = np.random.default_rng(seed)
    node = uniform_node(N, Readiness(c0=3, s0=2))
    for _ in range(steps):
        q = LinearQuery.from_vector(rng.integers(0, 2, N))
        node = node.update(q, float(rng.choice([-0.3, 0.3])))
    return node


def test_update_keeps_normalisation():                                     # criterion 5
    node = _trained(50)
    assert abs(node.h.sum() - 1.0) < 1e-12


def test_update_direction_and_zero_step():                                 # criterion 6
    node = _trained()
    before = node.estimate(Q)
    assert node.update(Q, 0.1).estimate(Q) > before
    assert node.update(Q, -0.1).estimate(Q) < before
    assert node.update(Q, 0.0) is node


def test_bins_outside_support_keep_their_ratios():                         # criterion 7
    node = _trained()
    out = np.flatnonzero(Q.dense() == 0)
    new = node.update(Q, 0.7)
    ratio_before = node.h[out] / node.h[out[0]]
    np.testing.assert_allclose(new.h[out] / new.h[out[0]], ratio_before, rtol=1e-12)


def test_update_is_boosts_multiplicative_rule():
    node = _trained()
    s = 0.4
    g = node.h * np.exp(s * Q.dense())
    np.testing.assert_allclose(node.update(Q, s).h, g / g.sum(), rtol=1e-12)


def test_update_counts_only_purposeful_touches():
    node = uniform_node(N, Readiness())
    new = node.update(Q, 0.2)
    np.testing.assert_array_equal(new.count, Q.dense())
    assert new.updates == 1 and not new.count.flags.writeable


def test_fresh_histogram_is_never_ready():                                 # criterion 8
    for c0 in (1, 5, 100):
        r = Readiness(c0=c0, s0=1)
        node = uniform_node(N, r)
        assert not r.is_ready(node.count, node.thr, query_support(Q))
    r0 = Readiness(c0=0)
    assert r0.is_ready(np.zeros(N), r0.initial_threshold(N), query_support(Q))


def test_penalize_makes_a_support_bin_unready():                           # criterion 9
    r = Readiness(c0=2, s0=3)
    count = np.full(N, 10.0)
    count[2] = 4.0
    support = query_support(Q)
    thr = r.initial_threshold(N)
    assert r.is_ready(count, thr, support)
    new = r.penalize(count, thr, support)
    assert np.any(count[support] < new[support])
    assert new[2] == 4.0 + 3 and new[0] == 4.0 + 3          # thr = min count + S0 on supp(q)
    assert new[5] == 2.0                                     # outside the support: unchanged
    high = thr.copy()
    high[0] = 50.0
    assert r.penalize(count, high, support)[0] == 7.0       # the code rule sets, never maxes


def test_readiness_quantile_cap_and_always():
    support = query_support(Q)
    count = np.full(N, 10.0)
    count[support[0]] = 0
    assert not Readiness(c0=5).is_ready(count, Readiness(c0=5).initial_threshold(N), support)
    relaxed = Readiness(c0=5, quantile=0.25)
    assert relaxed.is_ready(count, relaxed.initial_threshold(N), support)
    capped = Readiness(c0=100, cap=5)
    assert capped.initial_threshold(N)[0] == 5
    assert Readiness(always=True).is_ready(np.zeros(N), np.full(N, 9.0), support)
    assert not Readiness(c0=math.inf).is_ready(count, np.full(N, math.inf), support)


def test_learning_rate_schedule():
    support = np.arange(4)
    assert COVID_LEARNING_RATE.rate(np.zeros(N), support) == 0.25
    assert COVID_LEARNING_RATE.rate(np.full(N, 60.0), support) == 0.0625
    assert COVID_LEARNING_RATE.rate(np.full(N, 100.0), support) == 0.025
    with pytest.raises(InvalidParamsError):
        LearningRate(((5, 0.1),))
    with pytest.raises(InvalidParamsError):
        Readiness(c0=-1)


def test_warm_start_leaf_copies_previous_leaf():                           # criterion 28
    prev = _trained(7)
    leaf = warm_copy(prev)
    np.testing.assert_array_equal(leaf.log_h, prev.log_h)
    np.testing.assert_array_equal(leaf.count, prev.count)
    np.testing.assert_array_equal(leaf.thr, prev.thr)


def test_warm_start_internal_is_n_weighted_mean():                         # criterion 28
    left, right = _trained(4, seed=1), _trained(9, seed=2)
    node = merge_children(left, 300, right, 100)
    np.testing.assert_allclose(node.h, 0.75 * left.h + 0.25 * right.h, rtol=1e-12)
    np.testing.assert_allclose(node.count, 0.75 * left.count + 0.25 * right.count)
    equal = merge_children(left, 5, right, 5)
    np.testing.assert_allclose(equal.h, (left.h + right.h) / 2, rtol=1e-12)


def test_warm_start_gamma_bounds_lambda():
    prev = uniform_node(N, Readiness()).update(Q, 30.0)
    leaf = warm_copy(prev, gamma=0.01)
    assert leaf.h.min() >= 0.01 / N * (1 - 1e-12)
