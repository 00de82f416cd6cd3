"""§12 criteria 3–5: honest per-example Lipschitz constants, the PSGD neighbour bound
2L/(μn), the γ > μ trap, padding/add-remove, and the reproduce_paper label."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import BinaryLogistic
from beam_dp.mechanisms.erm import HuberSVM
from beam_dp.mechanisms.erm import ReleasedModel
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import clip_features
from beam_dp.mechanisms.erm import pberm_release
from beam_dp.mechanisms.erm.psgd import permutation

LOSSES = [BinaryLogistic(clip_norm=0.8), HuberSVM(clip_norm=1.5, huber_width=0.3),
          SoftmaxCrossEntropy(clip_norm=1.2, num_classes=4)]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 31), scale=st.floats(0.01, 100.0), which=st.integers(0, 2))
def test_per_example_gradient_norm_at_most_lipschitz(seed, scale, which):
    loss = LOSSES[which]
    rng = np.random.default_rng(seed)
    d = 6
    x = clip_features(rng.normal(size=(20, d)) * scale, loss.clip_norm)
    y = rng.integers(0, loss.num_classes, 20)
    w = rng.normal(size=loss.n_params(d)) * scale
    norms = np.linalg.norm(loss.per_example_grads(w, x, y), axis=1)
    assert np.all(norms <= loss.lipschitz * (1 + 1e-9))
    assert np.allclose(loss.grad_sum(w, x, y), loss.per_example_grads(w, x, y).sum(axis=0))



@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 31), scale=st.floats(0.01, 100.0), which=st.integers(0, 2),
       d=st.integers(1, 12))
def test_per_example_gradient_l1_norm_at_most_lipschitz_l1(seed, scale, which, d):
    loss = LOSSES[which]
    rng = np.random.default_rng(seed)
    x = clip_features(rng.normal(size=(20, d)) * scale, loss.clip_norm)
    y = rng.integers(0, loss.num_classes, 20)
    w = rng.normal(size=loss.n_params(d)) * scale
    l1 = np.abs(loss.per_example_grads(w, x, y)).sum(axis=1)
    assert np.all(l1 <= loss.lipschitz_l1(d) * (1 + 1e-9))
    assert loss.lipschitz_l1(d) <= np.sqrt(loss.n_params(d)) * loss.lipschitz * (1 + 1e-12)


@pytest.mark.parametrize('loss', LOSSES)
def test_lipschitz_l1_is_attained(loss):
    """A row of equal-magnitude entries on the norm ball, a label the model gets badly wrong:
    ‖∇ℓ‖₁ reaches the bound (so it cannot be lowered)."""
    d = 9
    x = np.full((1, d), loss.clip_norm / np.sqrt(d))
    if loss.num_classes == 2:
        w, y = np.full(d, 50.0), np.array([0])           # margin −150·C/√d·… → |φ'| = 1
    else:
        w = np.zeros((loss.num_classes, d))
        w[1] = 200.0                                     # p_0 → 0
        w, y = w.reshape(-1), np.array([0])
    l1 = np.abs(loss.per_example_grads(w, x, y)).sum()
    assert l1 == pytest.approx(loss.lipschitz_l1(d), rel=1e-6)
    assert SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10).lipschitz_l1(65) == \
        pytest.approx(2 * np.sqrt(65))

@pytest.mark.parametrize('loss', LOSSES)
def test_gradients_match_finite_differences(loss):
    rng = np.random.default_rng(1)
    x = clip_features(rng.normal(size=(5, 4)), loss.clip_norm)
    y = rng.integers(0, loss.num_classes, 5)
    w = rng.normal(size=loss.n_params(4))
    g = loss.grad_sum(w, x, y)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = 1e-6
        fd = (loss.losses(w + e, x, y).sum() - loss.losses(w - e, x, y).sum()) / 2e-6
        assert fd == pytest.approx(g[i], abs=1e-5)


def test_constants_table():
    assert BinaryLogistic(clip_norm=2.0).lipschitz == 2.0
    assert BinaryLogistic(clip_norm=2.0).smoothness == 1.0
    assert SoftmaxCrossEntropy(clip_norm=2.0).lipschitz == pytest.approx(2 * np.sqrt(2))
    assert SoftmaxCrossEntropy(clip_norm=2.0).smoothness == 2.0
    assert HuberSVM(clip_norm=1.0, huber_width=0.25).smoothness == 2.0


def _pair(rng, n, d):
    x = clip_features(rng.normal(size=(n, d)) * 2, 1.0)
    y = rng.integers(0, 2, n)
    x2, y2 = x.copy(), y.copy()
    return x, y, x2, y2


def test_psgd_neighbours_within_two_l_over_mu_n():
    loss = BinaryLogistic(clip_norm=1.0)
    rng = np.random.default_rng(5)
    n, d, worst = 24, 4, 0.0
    for pair in range(300):
        passes, batch = [(1, 1), (3, 1), (1, 4), (3, 4)][pair % 4]
        mu = float(rng.choice([0.05, 0.5]))
        psgd = PSGD(loss, mu=mu, passes=passes, batch_size=batch)
        x, y, x2, y2 = _pair(rng, n, d)
        seed_rng = noise.seeded(pair)
        first = permutation(seed_rng.derive('perm', 0), n)[0]
        i = int(first if pair % 2 else rng.integers(n))
        x2[i] = clip_features(rng.normal(size=(1, d)) * 3, 1.0)[0]
        y2[i] = 1 - y[i]
        center = rng.normal(size=d)
        w = psgd.train(x, y, n, center, seed_rng)
        w2 = psgd.train(x2, y2, n, center, seed_rng)
        ratio = np.linalg.norm(w - w2) / psgd.sensitivity(n)
        worst = max(worst, ratio)
    assert worst <= 1 + 1e-9
    assert worst > 0.2            # the test can see a difference at all


def test_padding_slot_is_a_substitution_neighbour():
    """Add/remove with padding: removing a record = substituting a zero-gradient slot."""
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
    psgd = PSGD(loss, mu=0.3, passes=2, batch_size=2)
    rng = np.random.default_rng(9)
    for trial in range(40):
        x = clip_features(rng.normal(size=(10, 3)), 1.0)
        y = rng.integers(0, 3, 10)
        r = noise.seeded(trial)
        w = psgd.train(x, y, 16, None, r)
        w2 = psgd.train(x[:-1], y[:-1], 16, None, r)      # the last record removed
        assert np.linalg.norm(w - w2) <= psgd.sensitivity(16) * (1 + 1e-9)


def test_gamma_above_mu_raises_and_breaks_the_bound_when_forced():
    loss = BinaryLogistic(clip_norm=1.0)
    with pytest.raises(InvalidParamsError, match='gamma'):
        PSGD(loss, mu=0.1, gamma=0.5)
    mu, n = 0.1, 64
    forced = PSGD(loss, mu=mu, gamma=5 * mu, batch_size=1, reproduce_paper=True, iterations=n)
    rng = np.random.default_rng(2)
    worst = 0.0
    for trial in range(30):
        x, y, x2, y2 = _pair(rng, n, 3)
        r = noise.seeded(trial)
        i = permutation(r.derive('perm', 0), n)[0]          # the differing record first
        x2[i] = -x[i]                                       # same label, opposite x
        gap = np.linalg.norm(forced.train(x, y, n, None, r) - forced.train(x2, y2, n, None, r))
        worst = max(worst, gap / (2 * loss.lipschitz / (mu * n)))
    assert worst > 1.0            # the honest bound 2L/(μn) fails: the trap is real


def test_reproduce_paper_is_labelled_not_dp():
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
    paper = PSGD.paper(loss)
    assert paper.reproduce_paper and paper.step_gamma == 10.0 and paper.batch_size == 256
    x = clip_features(np.random.default_rng(0).normal(size=(30, 4)), 1.0)
    y = np.arange(30) % 3
    model = paper.release(x, y, 30, 1.0, noise.seeded(0), 'm')
    assert model.not_dp
    assert not PSGD(loss, mu=1.0).release(x, y, 30, 1.0, noise.seeded(0), 'm').not_dp


def test_pberm_refuses_pre_noise_centres():
    loss = BinaryLogistic()
    psgd = PSGD(loss, mu=1.0, passes=1)
    x = clip_features(np.ones((4, 2)), 1.0)
    y = np.array([0, 1, 0, 1])
    with pytest.raises(InvalidParamsError, match='ReleasedModel'):
        pberm_release(psgd, np.zeros(2), x, y, 4, 1.0, noise.seeded(0), 'r')
    base = psgd.release(x, y, 4, 1.0, noise.seeded(0), 'base')
    assert isinstance(base, ReleasedModel) and not base.weights.flags.writeable
    upd = pberm_release(psgd, base, x, y, 4, 1.0, noise.seeded(1), 'upd')
    assert upd.center_id == 'base'


def test_permutation_and_k_subsets_are_uniform():
    from collections import Counter
    from scipy import stats
    perms = Counter(tuple(permutation(noise.seeded(1).derive(i), 3)) for i in range(6000))
    assert len(perms) == 6 and stats.chisquare(list(perms.values())).pvalue > 1e-3
    subsets = Counter(tuple(sorted(permutation(noise.seeded(2).derive(i), 5, 2)))
                      for i in range(5000))
    assert len(subsets) == 10 and stats.chisquare(list(subsets.values())).pvalue > 1e-3
    assert sorted(permutation(noise.seeded(3), 50).tolist()) == list(range(50))
