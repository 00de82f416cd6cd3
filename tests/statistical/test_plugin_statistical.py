"""Statistical tier of Qiu & Yi's plug-in (spec 001 §2): the insertion-only wrapper with the
Laplace-histogram plug-in has exactly the variance of its prefix chain's level noises (with
power: the same test rejects a 30% mis-scaled prediction), and an empirical DP audit of the
wrapper's first release on neighbouring batch streams."""

import math

import numpy as np
import pytest

from beam_dp.accounting import basel_weight
from beam_dp.mechanisms import fenwick
from beam_dp.mechanisms.plugin import LaplaceHistogram
from beam_dp.mechanisms.plugin import PluginInsertionCounter
from beam_dp.noise import discrete_laplace_variance
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

EPS = 1.0
PLUG = LaplaceHistogram(2, (LinearQuery.point(2, 0),))
RUNS = 4000


def _answers(steps, seed0, first=(3, 0)):
    counter = PluginInsertionCounter(PLUG, EPS)
    out = np.empty((RUNS, steps))
    for i in range(RUNS):
        state, rng = counter.init_state(), seeded(seed0 + i)
        for s in range(1, steps + 1):
            a, state = counter.step(state, first if s == 1 else (1, 0), rng)
            out[i, s - 1] = a[0]
    return out


def _predicted(s):
    return sum(discrete_laplace_variance(1 / (EPS * basel_weight(fenwick.node_level(a))))
               for a in fenwick.prefix_chain(s))


def test_error_variance_is_the_prefix_chain_of_level_noises_with_power():
    steps = 7                                    # chain(7) = {7, 6, 4}: three levels
    out = _answers(steps, 0)
    truth = 3 + np.arange(steps)
    for s in (1, 4, 7):
        err = out[:, s - 1] - truth[s - 1]
        assert abs(err.mean()) < 4 * math.sqrt(_predicted(s) / RUNS)
        assert variance_pvalue(err, _predicted(s)) > 1e-3
        # Power: a prediction 30% off is rejected by the same test at this sample size.
        assert variance_pvalue(err, 1.3 * _predicted(s)) < 1e-3
        assert variance_pvalue(err, _predicted(s) / 1.3) < 1e-3


def test_dp_audit_of_the_first_release_on_neighbouring_streams():
    """Streams that differ by one record at step 1: the step-1 release (node 1, level 1,
    ε₁ = 6ε/π²) has log-probability ratios within ε₁ (and reaching it: not over-noised)."""
    a = _answers(1, 0, (3, 0))[:, 0]
    b = _answers(1, 10 ** 6, (4, 0))[:, 0]
    eps1 = EPS * basel_weight(1)
    ratios = []
    for y in range(-2, 10):
        pa, pb = np.mean(a == y), np.mean(b == y)
        if min(pa, pb) * RUNS >= 300:
            ratios.append(abs(math.log(pa / pb)))
    assert ratios and max(ratios) <= eps1 + 0.2
    assert max(ratios) >= eps1 - 0.2
