"""Empirical DP audit of C9 with the static-PMW plug-in (Qiu & Yi, spec 001 §2; issue 28).

* End to end: ``FullyDynamicCounter(plugin=StaticPMW(...))`` on neighbouring update streams (one
  more insert event), 3,000 runs per side, the released answer of the all-elements query at the
  first tick. Over the half-line events at 49 pooled quantiles with ≥ 300 runs on both sides,
  the realised privacy loss is ≤ ε + 0.1 (sampling error) and visibly above 0 (the release
  at tick 1 is mostly whether the partition closes a segment: its sparse-vector noise).
* The plug-in C9 runs per node, on neighbouring histograms (one more record), same statistic:
  loss ≤ ε + 0.1 and at least half of the share it spends on its size estimate n̂
  (¼ of its ε); with power: a plug-in that spends 16× the ε it is charged shows a loss above ε.
"""

import math

import numpy as np
import pytest

from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import Update
from beam_dp.mechanisms.plugin import StaticPMW
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery

pytestmark = pytest.mark.statistical

N = 4
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))
EPS = 1.0
RUNS = 3000


class _Overspending(StaticPMW):
    """A broken plug-in: spends 16× the ε it is charged."""

    def release(self, counts, epsilon, rng):
        return super().release(counts, 16 * epsilon, rng)


def _total(plugin, extra, seed):
    mech = FullyDynamicCounter(epsilon=EPS, c_theta=1.0, dimension=N, plugin=plugin)
    updates = [Update('r0', 1, 1), Update('r1', 1, 2)] + ([Update('x', 1, 0)] if extra else [])
    release, _ = mech.advance(mech.init_state(), 1, updates, seeded(seed))
    return release.answer[-1]


def _loss(a, b, min_hits=300):
    worst = 0.0
    for c in np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0.02, 0.98, 49))):
        for side in (np.greater, np.less_equal):
            na, nb = int(side(a, c).sum()), int(side(b, c).sum())
            if min(na, nb) == 0 and max(na, nb) >= 2 * min_hits:
                return math.inf
            if min(na, nb) >= min_hits:
                worst = max(worst, abs(math.log(na / nb)))
    return worst


def _audit(plugin):
    a = np.array([_total(plugin, False, s) for s in range(RUNS)])
    b = np.array([_total(plugin, True, 10 ** 6 + s) for s in range(RUNS)])
    return _loss(a, b)


def test_c9_with_the_pmw_plugin_on_neighbouring_streams():
    loss = _audit(StaticPMW(N, QUERIES, alpha=0.5))
    assert 0.05 * EPS <= loss <= EPS + 0.1


def _plugin_audit(plugin):
    counts = np.array([3, 5, 2, 0])
    a = np.array([plugin.release(counts, EPS, seeded(s))[-1] for s in range(RUNS)])
    b = np.array([plugin.release(counts + np.array([1, 0, 0, 0]), EPS, seeded(10 ** 6 + s))[-1]
                  for s in range(RUNS)])
    return _loss(a, b)


def test_the_plugin_on_neighbouring_histograms_and_an_overspending_one():
    loss = _plugin_audit(StaticPMW(N, QUERIES, alpha=0.5))
    assert 0.5 * 0.25 * EPS <= loss <= EPS + 0.1
    assert _plugin_audit(_Overspending(N, QUERIES, alpha=0.5)) > EPS
