"""§12 criteria 15–18: utility, medians over 5 seeds (statistical; thresholds from the
spec's [OURS] runs and benchmarks/erm with margin)."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.drivers.erm import ERMStreamDriver
from tests.drivers.erm_one_pass import reference
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import ContinualReleaseSchedule
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import IndependentBlocks
from beam_dp.mechanisms.erm import SlidingWindowChain
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import clip_features

pytestmark = pytest.mark.statistical
SEEDS = range(5)
INF = float('inf')


def _design(x):
    return clip_features(np.hstack([x, np.ones((len(x), 1))]), 1.0)


def _digits(seed):
    sklearn = pytest.importorskip('sklearn.datasets')
    x, y = sklearn.load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    return _design(x[order] / 16.0), y[order]


def test_digits_cumulative_model_accuracy_by_epsilon():
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)
    psgd = PSGD(loss, mu=2e-3, passes=10, batch_size=1)      # λ = 1e-3 in the paper's convention
    acc = {}
    for eps in (1.0, 10.0, 100.0, INF):
        runs = []
        for seed in SEEDS:
            x, y = _digits(seed)
            model = psgd.release(x[:1347], y[:1347], 1347, eps, noise.seeded(seed), 'cum')
            runs.append(loss.accuracy(model.weights, x[1347:], y[1347:]))
        acc[eps] = float(np.median(runs))
    assert acc[INF] >= 0.88 and acc[100.0] >= 0.85
    assert acc[1.0] <= acc[10.0] + 0.02 <= acc[100.0] + 0.04 <= acc[INF] + 0.06


def _mixture(rng, means, n):
    y = rng.integers(0, len(means), n)
    x = means[y] + rng.standard_normal((n, means.shape[1]))
    return x / (np.sqrt(means.shape[1]) + 3.0), y


def _gauss_stream(seed, blocks, b0, drift_block=None, dim=20):
    means = np.random.default_rng(12345).standard_normal((4, dim))
    means *= 3.0 / np.linalg.norm(means, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    x, y = _mixture(rng, means, blocks * b0)
    tests = [_mixture(rng, means, 2000)]
    if drift_block is not None:
        moved = np.roll(means, 1, axis=0)
        x[drift_block * b0:], y[drift_block * b0:] = _mixture(rng, moved,
                                                              (blocks - drift_block) * b0)
        tests.append(_mixture(rng, moved, 2000))
    return x, y, tests


def _published(schedule, x, y, b0, seed, mu=0.2):
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=4)
    mech = ERMRelease(schedule, PSGD(loss, mu=mu, passes=3, batch_size=16), b0, x.shape[1] + 1)
    inputs = [('record', i // b0, x[i], int(y[i])) for i in range(len(y))]
    res = reference(ERMStreamDriver(mech, x.shape[1]), 'g', inputs, noise.seeded(seed))
    return loss, [(e.t - 1, e.model.weights) for e in res.events if e.job.publish]


def _mean_accuracy(loss, models, tests, drift_block=None, start=0):
    accs = []
    for block, w in models:
        if block >= start:
            tx, ty = tests[0 if drift_block is None or block < drift_block else 1]
            accs.append(loss.accuracy(w, _design(tx), ty))
    return float(np.mean(accs))


@pytest.mark.slow
@pytest.mark.parametrize('eps', [10.0, INF])
def test_continual_release_at_least_independent_blocks(eps):
    gaps = []
    for seed in SEEDS:
        x, y, tests = _gauss_stream(seed, 16, 256)
        loss, cont = _published(ContinualReleaseSchedule(4, eps), x, y, 256, seed)
        cont = [(b, w) for b, w in cont if b >= 3]
        _, ind = _published(IndependentBlocks(eps), x, y, 256, seed)
        ind = [(b, w) for b, w in ind if b >= 3]               # the same release times
        gaps.append(_mean_accuracy(loss, cont, tests) - _mean_accuracy(loss, ind, tests))
    assert np.median(gaps) >= -0.01


@pytest.mark.slow
def test_sliding_window_beats_cumulative_after_a_drift():
    drift, window, b0 = 20, 7, 128
    gaps = []
    for seed in SEEDS:
        x, y, tests = _gauss_stream(seed, 44, b0, drift_block=drift)
        loss, cum = _published(ContinualReleaseSchedule(4, INF), x, y, b0, seed)
        _, sw = _published(SlidingWindowChain(3, INF), x, y, b0, seed)
        start = drift + 2 * window
        gaps.append(_mean_accuracy(loss, sw, tests, drift, start)
                    - _mean_accuracy(loss, cum, tests, drift, start))
    assert np.median(gaps) >= 0.05


def test_reproduce_paper_configuration_runs_and_is_labelled():
    """§9 MNIST configuration on the digits stand-in, scaled to its size (b0 = 64, B = 8·b0;
    λ = 1, γ = 10, batch 256, 500 iterations, Yedida L)."""
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)
    x, y = _digits(0)
    mech = ERMRelease(ContinualReleaseSchedule(8, 0.1), PSGD.paper(loss, paper_lambda=1.0),
                      64, 65)
    inputs = [('record', i // 64, x[i, :64], int(y[i])) for i in range(1344)]
    res = reference(ERMStreamDriver(mech, 64), 'paper', inputs, noise.seeded(0))
    assert res.events and all(e.model.not_dp for e in res.events)
    kinds = {e.job.kind for e in res.events}
    assert kinds == {'base', 'large', 'small'}
    assert all(np.isfinite(e.model.weights).all() for e in res.events)


@pytest.mark.slow
def test_digits_streaming_release_with_update_mu_beats_independent_blocks():
    """benchmarks/erm digits configuration at ε = 100 (x/8 − 1, b0 = 64, B = 8·b0, ¾ of ε to
    the bases, μ = 0.01, update μ = 1): median final release 0.79 measured (independent
    blocks 0.31). Thresholds with margin; ε = 100 ≥ 0.85 is not reached by a Watson et al.
    release (benchmarks/erm/README.md: the noise-budget table); DP-FTRL on the library's
    selected counter reaches it there (0.894)."""
    sklearn = pytest.importorskip('sklearn.datasets')
    x_all, y_all = sklearn.load_digits(return_X_y=True)
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)
    psgd = PSGD(loss, mu=0.01, passes=10, batch_size=4)
    update = PSGD(loss, mu=1.0, passes=10, batch_size=4)
    finals = {'continual': [], 'independent': []}
    for seed in SEEDS:
        order = np.random.default_rng(seed).permutation(len(y_all))
        x, y = x_all[order] / 8.0 - 1.0, y_all[order]
        inputs = [('record', i // 64, x[i], int(y[i])) for i in range(1344)]
        for name, schedule in (('continual', ContinualReleaseSchedule(8, 100.0, 0.75)),
                               ('independent', IndependentBlocks(100.0))):
            mech = ERMRelease(schedule, psgd, 64, 65,
                              update_psgd=update if name == 'continual' else None)
            res = reference(ERMStreamDriver(mech, 64), 'd', inputs, noise.seeded(seed))
            assert max(e.ledger_worst for e in res.events) <= 100.0 * (1 + 1e-9)
            final = [e.model.weights for e in res.events if e.job.publish][-1]
            finals[name].append(loss.accuracy(final, _design(x[1344:]), y[1344:]))
    assert np.median(finals['continual']) >= 0.70, finals
    assert np.median(finals['continual']) >= np.median(finals['independent']) + 0.25, finals
