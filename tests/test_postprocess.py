"""beam_dp.postprocess: non-negative, non-decreasing prefix counts from released values."""

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from beam_dp import InvalidParamsError
from beam_dp import Release
from beam_dp import noise
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.postprocess import isotonic_counts
from beam_dp.postprocess import monotone_releases
from beam_dp.postprocess import running_max_counts


def _feasible(x):
    return np.all(x >= 0) and np.all(np.diff(x, axis=-1) >= -1e-12)


def test_running_max_is_online_non_negative_and_non_decreasing():
    y = np.array([-3.0, 2.0, 1.0, 5.0, 4.0, -1.0, 7.0])
    x = running_max_counts(y)
    assert x.tolist() == [0.0, 2.0, 2.0, 5.0, 5.0, 5.0, 7.0]
    for t in range(1, len(y) + 1):                       # never rewrites the past
        assert running_max_counts(y[:t]).tolist() == x[:t].tolist()


@pytest.mark.parametrize('seed', range(5))
def test_isotonic_is_the_exact_projection(seed):
    rng = np.random.default_rng(seed)
    y = np.cumsum(rng.poisson(1.0, 40)) + rng.normal(0, 6, 40)
    x = isotonic_counts(y)
    expected = np.maximum(isotonic_regression(y).x, 0.0)     # scipy's PAVA, clipped at 0
    np.testing.assert_allclose(x, expected, atol=1e-9)
    assert _feasible(x)
    # A projection: feasible inputs are unchanged, and projecting twice changes nothing.
    np.testing.assert_allclose(isotonic_counts(x), x, atol=1e-12)
    # Optimality: no feasible perturbation direction lowers the squared error.
    for z in (running_max_counts(y), np.maximum(np.sort(y), 0)):
        assert np.sum((x - y) ** 2) <= np.sum((z - y) ** 2) + 1e-9


def test_rows_are_fitted_independently():
    y = np.array([[3.0, 1.0, 2.0], [-1.0, -2.0, 5.0]])
    np.testing.assert_allclose(isotonic_counts(y), [[2.0, 2.0, 2.0], [0.0, 0.0, 5.0]])
    np.testing.assert_allclose(running_max_counts(y), [[3.0, 3.0, 3.0], [0.0, 0.0, 5.0]])


@pytest.mark.parametrize('bad', [[1.0, float('nan')], [np.inf], 3.0])
def test_non_finite_values_are_refused(bad):
    with pytest.raises(InvalidParamsError, match='finite numbers'):
        isotonic_counts(bad)
    with pytest.raises(InvalidParamsError, match='finite numbers'):
        running_max_counts(bad)


def _released(counter, per_step, rng):
    state, out = counter.init_state(), []
    for value in per_step:
        estimate, state = counter.step(state, [int(value)], rng)
        out.append(float(estimate[0]))
    return np.array(out)


def test_post_processing_on_real_tree_releases():
    """On the infinite tree counter's own releases (ε = 1, 48 steps, 40 keys each quiet and
    busy): isotonic regression never moves a series away from the truth (a projection onto a
    convex set that contains the truth), and halves the RMSE of quiet keys; the running max is
    worse than the raw releases on quiet keys (it keeps the largest noise seen)."""
    counter = InfiniteTreeCounter(epsilon=1.0)
    data = np.random.default_rng(7)
    rmse = {'raw': {}, 'isotonic': {}, 'running_max': {}}
    for kind, rate in (('quiet', 0.05), ('busy', 20.0)):
        truth, raw = [], []
        for key in range(40):
            per_step = data.poisson(rate, 48)
            truth.append(np.cumsum(per_step))
            raw.append(_released(counter, per_step, noise.seeded(1000 * int(rate) + key)))
        truth, raw = np.array(truth), np.array(raw)
        iso = isotonic_counts(raw)
        per_series = lambda x: np.sqrt(np.sum((x - truth) ** 2, axis=1))   # noqa: E731
        assert np.all(per_series(iso) <= per_series(raw) + 1e-9)
        for name, fitted in (('raw', raw), ('isotonic', iso),
                             ('running_max', running_max_counts(raw))):
            rmse[name][kind] = float(np.sqrt(np.mean((fitted - truth) ** 2)))
    assert rmse['isotonic']['quiet'] < 0.6 * rmse['raw']['quiet'], rmse
    assert rmse['isotonic']['busy'] < rmse['raw']['busy'], rmse
    assert rmse['running_max']['quiet'] > rmse['raw']['quiet'], rmse


def test_monotone_releases_replaces_values_per_key():
    def release(key, step, value):
        return Release(key, step, step, step + 1, value, [], 'count', 'm', 1.0, 0.0, 0.0,
                       'event-level', 2.0)
    releases = [release('b', 1, -1.0), release('a', 1, 1.0), release('a', 0, 3.0),
                release('b', 0, -4.0)]
    out = monotone_releases(releases)
    assert [(r.key, r.step, r.value) for r in out] == [('a', 0, 2.0), ('a', 1, 2.0),
                                                       ('b', 0, 0.0), ('b', 1, 0.0)]
    assert all(r.noise_stddev == 2.0 for r in out)
    assert [r.value for r in monotone_releases(releases, 'running_max')] == [3.0, 3.0, 0.0, 0.0]
    with pytest.raises(InvalidParamsError, match="method must be 'isotonic' or 'running_max'"):
        monotone_releases(releases, 'clip')
    with pytest.raises(InvalidParamsError, match='histogram'):
        monotone_releases([release('a', 0, 1.0)._replace(values=[1.0])])
