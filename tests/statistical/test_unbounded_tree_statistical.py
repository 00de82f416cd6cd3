"""Statistical tier for the unbounded negative-digit tree (UnboundedTreeCounter): the empirical
noise variance of the releases matches the closed form with power (a 30% scale error is
rejected, and a deliberately mis-scaled counter fails the same test), and one event moves the
release distribution by at most the ε share of the node it falls in (empirical audit, 4σ slack),
which catches a counter spending twice that. The exact audit (node-sum privacy loss on
neighbouring streams, the whole budget) is in tests/mechanisms/test_unbounded_tree.py."""

import pytest

from beam_dp.mechanisms import UnboundedTreeCounter
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue
from tests.statistical.test_counters_statistical import RUNS
from tests.statistical.test_counters_statistical import _check
from tests.statistical.test_counters_statistical import _errors
from tests.statistical.test_counters_statistical import _privacy_loss

pytestmark = pytest.mark.statistical


@pytest.mark.parametrize('mechanism, ts', [
    (UnboundedTreeCounter(epsilon=1.0, dimension=RUNS), (1, 4, 7, 14, 50, 84, 85, 100)),
    (UnboundedTreeCounter(epsilon=0.5, l1_sensitivity=2.0, dimension=RUNS), (3, 20, 90)),
], ids=['eps1', 'eps05_l1_2'])
def test_release_variance_matches_closed_form_with_power(mechanism, ts):
    _check(_errors(mechanism, max(ts), seed=23), mechanism, ts)


class _MisScaled(UnboundedTreeCounter):
    """Draws every node with 30% less scale than it declares."""

    def node_noise_for(self, h, j):
        base = UnboundedTreeCounter.node_noise_for(self, h, j)
        return type(base)(base.kind, base.param * 0.7)


def test_a_mis_scaled_counter_fails_the_same_test():
    honest = UnboundedTreeCounter(epsilon=1.0, dimension=RUNS)
    errors = _errors(_MisScaled(epsilon=1.0, dimension=RUNS), 90, seed=7)
    for t in (2, 14, 90):
        assert variance_pvalue(errors[t - 1], honest.release_variance(t)) < P_THRESHOLD


def test_one_event_moves_the_releases_by_at_most_its_nodes_share():
    """Steps 1..3 (k = 13): r1 = x1 + η(0,0), r3 = x1 + x2 + x3 + η(0,0) + η(0,1) + η(0,2). An
    event at step 1 falls in the leaf n(0, 0) (share a_0 of ε) and in the first nodes of higher
    levels, which no release before step 7 uses: the pair (r1, r3) moves by a_0·ε exactly."""
    a0 = UnboundedTreeCounter(epsilon=1.0).node_weight(0, 0)
    honest = lambda n: UnboundedTreeCounter(epsilon=1.0, dimension=n)
    assert _privacy_loss(honest, 3, first_step=1) <= a0
    overspent = lambda n: UnboundedTreeCounter(epsilon=2.0, dimension=n)
    assert _privacy_loss(overspent, 3, first_step=1) > a0
