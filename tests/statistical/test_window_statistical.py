"""Statistical tier for WindowCounter (per-step and sliding-window values): the empirical noise
variance of the releases matches the exact closed form with power (a 30% scale error either way
is rejected, and a deliberately mis-scaled counter fails the same test), at early steps (short
windows) and in the steady state; and one event moves the release distribution by at most e^ε
(empirical audit, 4σ slack), which catches a counter spending 2ε. The exact audit is in
tests/mechanisms/test_window.py."""

import dataclasses
import functools

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms.window import WindowCounter
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue
from tests.statistical.test_counters_statistical import RUNS
from tests.statistical.test_counters_statistical import _check
from tests.statistical.test_counters_statistical import _privacy_loss

pytestmark = pytest.mark.statistical


def _window_errors(mechanism, steps, seed):
    """errors[t-1] = release_t − exact window sum (RUNS runs as bins), value 1 per step."""
    state, rng = mechanism.init_state(), noise.seeded(seed)
    out = []
    for t in range(1, steps + 1):
        release, state = mechanism.step(state, np.ones(mechanism.dimension, np.int64), rng)
        out.append(np.asarray(release, dtype=float) - min(t, mechanism.window))
    return np.array(out)


@pytest.mark.parametrize('mechanism, ts', [
    (WindowCounter(window=1, epsilon=1.0, dimension=RUNS), (1, 17, 40)),
    (WindowCounter(window=7, epsilon=0.5, l1_sensitivity=2.0, dimension=RUNS), (3, 7, 40)),
    (WindowCounter(window=30, rho=0.5, dimension=RUNS), (5, 30, 77, 100)),
    (WindowCounter(window=12, epsilon=1.0, arity=3, levels=3, dimension=RUNS), (2, 12, 41, 50)),
], ids=['per_step_laplace', 'window7_laplace', 'window30_gauss_tree', 'window12_laplace_tree'])
def test_release_variance_matches_closed_form_with_power(mechanism, ts):
    _check(_window_errors(mechanism, max(ts), seed=23), mechanism, ts)


@dataclasses.dataclass(frozen=True)
class _MisScaled(WindowCounter):
    """Draws every node with 30% less scale than it declares."""

    @functools.cached_property
    def node_noise(self):
        honest = WindowCounter.node_noise.fget(self)
        return dataclasses.replace(honest, param=honest.param * 0.7)


def test_a_mis_scaled_counter_fails_the_same_test():
    kw = dict(window=12, epsilon=1.0, arity=3, levels=3, dimension=RUNS)
    honest = WindowCounter(**kw)
    errors = _window_errors(_MisScaled(**kw), 30, seed=7)
    for t in (2, 12, 30):
        assert variance_pvalue(errors[t - 1], honest.release_variance(t)) < P_THRESHOLD


def test_one_event_moves_the_releases_by_at_most_epsilon():
    """W = 2, k = 2, two levels: r1 = leaf1, r2 = node[1,2] — an event at step 1 is in both
    nodes (ε/2 each): the full ε over (r1, r2)."""
    honest = lambda n: WindowCounter(window=2, epsilon=1.0, arity=2, levels=2, dimension=n)
    assert _privacy_loss(honest, 2, first_step=1, cells=(0, 1)) <= 1.0
    overspent = lambda n: WindowCounter(window=2, epsilon=2.0, arity=2, levels=2, dimension=n)
    assert _privacy_loss(overspent, 2, first_step=1, cells=(0, 1)) > 1.0
