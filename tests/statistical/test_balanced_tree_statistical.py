"""Statistical tier for the negative-digit k-ary tree (BalancedTreeCounter): the empirical noise
variance of the releases matches the closed form with power (a 30% scale error is rejected, and
a deliberately mis-scaled counter fails the same test), and one event moves the release
distribution by at most e^ε (empirical audit, 4σ slack), which catches a counter spending 2ε.
The exact audit (node-sum privacy loss on neighbouring streams) is in
tests/mechanisms/test_balanced_tree.py."""

import dataclasses
import functools

import pytest

from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue
from tests.statistical.test_counters_statistical import RUNS
from tests.statistical.test_counters_statistical import _check
from tests.statistical.test_counters_statistical import _errors
from tests.statistical.test_counters_statistical import _privacy_loss

pytestmark = pytest.mark.statistical


@pytest.mark.parametrize('mechanism, ts', [
    (BalancedTreeCounter(horizon=40, epsilon=1.0, k=3, dimension=RUNS), (1, 2, 5, 13, 40)),
    (BalancedTreeCounter(horizon=40, epsilon=0.5, k=5, split='uniform', l1_sensitivity=2.0,
                         dimension=RUNS), (3, 12, 38)),
    (BalancedTreeCounter(horizon=40, rho=0.5, k=7, dimension=RUNS), (4, 17, 40)),
], ids=['laplace_k3', 'laplace_uniform_k5', 'gauss_k7'])
def test_release_variance_matches_closed_form_with_power(mechanism, ts):
    _check(_errors(mechanism, max(ts), seed=31), mechanism, ts)


@dataclasses.dataclass(frozen=True)
class _MisScaled(BalancedTreeCounter):
    """Draws every node with 30% less scale than it declares."""

    @functools.cached_property
    def level_noise(self):
        return tuple(dataclasses.replace(n, param=n.param * 0.7)
                     for n in BalancedTreeCounter.level_noise.func(self))


def test_a_mis_scaled_counter_fails_the_same_test():
    honest = BalancedTreeCounter(horizon=20, epsilon=1.0, k=3, dimension=RUNS)
    errors = _errors(_MisScaled(horizon=20, epsilon=1.0, k=3, dimension=RUNS), 20, seed=7)
    for t in (2, 13, 20):
        assert variance_pvalue(errors[t - 1], honest.release_variance(t)) < P_THRESHOLD


def test_one_event_moves_the_releases_by_at_most_epsilon():
    """Horizon 3, k = 3 (two levels): r1 = x1 + η(0,0), r3 = x1 + x2 + x3 + η(1,0) are a
    bijection of the two nodes an event at step 1 falls in: the full ε; r2 = x1 + x2 + η(1,0) −
    η(0,2) subtracts a future node."""
    honest = lambda n: BalancedTreeCounter(horizon=3, epsilon=1.0, k=3, dimension=n)
    assert _privacy_loss(honest, 3, first_step=1) <= 1.0
    overspent = lambda n: BalancedTreeCounter(horizon=3, epsilon=2.0, k=3, dimension=n)
    assert _privacy_loss(overspent, 3, first_step=1) > 1.0
