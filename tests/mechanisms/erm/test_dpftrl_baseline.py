"""The DP-FTRL baseline of benchmarks/erm (``dpftrl.py``): the counter's L1 sensitivity covers
one record's substitution with the loss's L₁ bound (rounding included), the counter is the one
``select_counter`` picks, and the README's headline (digits, ε = 100, final release ≥ 0.85)."""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.analysis import select_counter
from beam_dp.accounting import PrivacyBudget
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import clip_features
from benchmarks.erm import dpftrl

D_X = 65          # digits: 64 pixels + bias


def _step_units(loss, w, x, y):
    grads = loss.per_example_grads(w, x, y)
    return np.rint(grads * (1 << dpftrl.GRID_BITS)).astype(np.int64).sum(axis=0)


def test_counter_l1_covers_a_substitution_and_is_select_counters_choice():
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)
    dim = loss.n_params(D_X)
    counter = dpftrl._counter('auto', 'laplace', 100.0, dim, loss.lipschitz,
                              loss.lipschitz_l1(D_X), 21)
    l1 = counter.l1_sensitivity
    assert l1 == pytest.approx(2 * (2 * math.sqrt(D_X) * 256 + dim / 2))
    assert counter == select_counter(PrivacyBudget(epsilon=100.0), 21, dim, l1)
    assert counter.privacy_cost().epsilon == 100.0
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(300):
        x = clip_features(rng.choice([-1.0, 1.0], size=(8, D_X)) * rng.uniform(0.5, 3), 1.0)
        y = rng.integers(0, 10, 8)
        w = rng.normal(size=dim) * rng.uniform(0, 50)
        x2, y2 = x.copy(), y.copy()
        x2[3] = clip_features(rng.choice([-1.0, 1.0], size=(1, D_X)), 1.0)[0]
        y2[3] = (y[3] + rng.integers(1, 10)) % 10
        change = np.abs(_step_units(loss, w, x, y) - _step_units(loss, w, x2, y2)).sum()
        worst = max(worst, change / l1)
    assert worst <= 1.0
    assert worst > 0.5          # the bound is not vacuous: equal-magnitude rows come close


def test_cauchy_schwarz_l1_is_the_looser_earlier_constant():
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)
    dim = loss.n_params(D_X)
    old = dpftrl._counter('tree', 'laplace', 1.0, dim, loss.lipschitz,
                          math.sqrt(dim) * loss.lipschitz, 84).l1_sensitivity
    new = dpftrl._counter('tree', 'laplace', 1.0, dim, loss.lipschitz,
                          loss.lipschitz_l1(D_X), 84).l1_sensitivity
    assert old / new == pytest.approx(19110 / 8906, rel=1e-3)


@pytest.mark.slow
def test_digits_dpftrl_on_the_selected_counter_reaches_085_at_eps_100():
    """benchmarks/erm README: ftrl_laplace_auto final release 0.894 (median of 5 seeds) at
    ε = 100, Alg 4 0.786. Threshold: the issue's 0.85."""
    sklearn = pytest.importorskip('sklearn.datasets')
    x_all, y_all = sklearn.load_digits(return_X_y=True)
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)
    finals = []
    for seed in range(5):
        order = np.random.default_rng(seed).permutation(len(y_all))
        x = clip_features(np.hstack([x_all[order] / 8.0 - 1.0, np.ones((len(y_all), 1))]), 1.0)
        y = y_all[order]
        xb = [x[i * 64:(i + 1) * 64] for i in range(21)]
        yb = [y[i * 64:(i + 1) * 64] for i in range(21)]
        models = list(dpftrl.run_dpftrl(loss, xb, yb, 64, 100.0,
                                        noise.seeded(seed).derive('ftrl'), batch=None,
                                        mu=0.002, inv_eta=2.0, counter='auto',
                                        l1_bound='loss'))
        assert len(models) == 21
        finals.append(loss.accuracy(models[-1], x[1344:], y[1344:]))
    assert np.median(finals) >= 0.85, finals
