"""Qiu & Yi's static plug-in (spec 001 §2.1): the static mechanisms, the insertion-only
wrapper on the dyadic decomposition, C9 with a plug-in, and an exact DP audit of the static
Laplace-histogram release and the wrapper's privacy split on neighbouring inputs."""

import math

import numpy as np
import pytest

from beam_dp.accounting import basel_weight
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import fenwick
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import Update
from beam_dp.mechanisms.plugin import LaplaceHistogram
from beam_dp.mechanisms.plugin import PluginInsertionCounter
from beam_dp.mechanisms.plugin import StaticLinearMechanism
from beam_dp.mechanisms.plugin import StaticPMW
from beam_dp.mechanisms.plugin import exact_answers
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery

N = 8
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))


class _Exact:
    """Noise-free plug-in (structure only): records every release's input and ε."""
    domain_size = N
    queries = QUERIES
    name = 'exact'

    def __init__(self):
        self.calls = []

    def release(self, counts, epsilon, rng):
        self.calls.append((np.asarray(counts).copy(), epsilon))
        return exact_answers(QUERIES, counts)


def test_static_mechanisms_implement_the_contract():
    assert isinstance(LaplaceHistogram(N, QUERIES), StaticLinearMechanism)
    assert isinstance(StaticPMW(N, QUERIES), StaticLinearMechanism)
    with pytest.raises(InvalidParamsError, match='alpha'):
        StaticPMW(N, QUERIES, alpha=2)
    with pytest.raises(InvalidParamsError, match='LinearQuery'):
        LaplaceHistogram(N, [])
    with pytest.raises(InvalidParamsError):
        LaplaceHistogram(N, (LinearQuery.point(N + 1, 0),))


def test_insertion_counter_sums_the_prefix_chain_and_splits_epsilon_by_level():
    plug = _Exact()
    counter = PluginInsertionCounter(plug, 1.0)
    state, rng = counter.init_state(), seeded(1)
    total = np.zeros(N, dtype=np.int64)
    gen = np.random.default_rng(0)
    for s in range(1, 70):
        batch = gen.integers(0, 3, N)
        total += batch
        answer, state = counter.step(state, batch, rng)
        np.testing.assert_allclose(answer, exact_answers(QUERIES, total))
        counts, eps = plug.calls[-1]
        # Step s releases node s: the batches of (s - lowbit(s), s] at its level's ε.
        assert eps == pytest.approx(basel_weight(fenwick.node_level(s)))
        assert set(state.released) == set(fenwick.prefix_chain(s))
    # Every step's data lies in one node per level: Σ over levels is ≤ ε.
    assert sum(basel_weight(level) for level in range(1, 60)) < 1.0


def test_static_pmw_is_accurate_at_large_size():
    gen = np.random.default_rng(5)
    counts = gen.multinomial(10 ** 6, [.3, .05, .05, .1, .2, .1, .1, .1])
    pmw = StaticPMW(N, QUERIES, alpha=0.2, passes=3)
    out = np.asarray(pmw.release(counts, 1.0, seeded(3)))
    err = np.abs(out - exact_answers(QUERIES, counts)).max() / counts.sum()
    assert err < 0.2


def test_fully_dynamic_with_a_plugin_is_exact_without_noise_and_answers_every_query():
    plug = _Exact()
    mech = FullyDynamicCounter(epsilon=1.0, c_theta=1.0, dimension=N, plugin=plug)
    assert mech.answer_dimension == len(QUERIES)
    state, rng = mech.init_state(), seeded(2)
    live = {}
    gen = np.random.default_rng(1)
    checked = 0
    for tick in range(1, 200):
        ups = []
        for j in range(int(gen.integers(0, 4))):
            rid = f'{tick}-{j}'
            item = int(gen.integers(0, N))
            ups.append(Update(rid, 1, item))
            live[rid] = item
        for rid in list(live)[: int(gen.integers(0, 3))]:
            if not rid.startswith(f'{tick}-'):
                ups.append(Update(rid, -1, live.pop(rid)))
        release, state = mech.advance(state, tick, ups, rng)
        assert len(release.answer) == len(QUERIES)
        if release.closes and release.closes[-1].close_tick == tick:
            hist = np.bincount(list(live.values()), minlength=N)
            # The plug-in is exact; the restart thresholds use the real Laplace count, whose γ
            # at ε = 1 is far above these sizes, so no node restarts or halts: Lemma 9's
            # decomposition gives the exact answers.
            np.testing.assert_allclose(release.answer, exact_answers(QUERIES, hist))
            checked += 1
    assert checked > 5


@pytest.mark.parametrize('epsilon', [0.5, 1.0])
def test_laplace_histogram_release_audit_on_neighbouring_histograms(epsilon):
    """Exact DP audit: P[bin = y | c] / P[bin = y | c+1] ≤ e^ε for the released bin (the
    discrete Laplace pmf, checked empirically at 20,000 draws per side)."""
    plug = LaplaceHistogram(2, (LinearQuery.point(2, 0),))
    runs = 20000
    a = np.array([plug.release([5, 0], epsilon, seeded(i))[0] for i in range(runs)])
    b = np.array([plug.release([6, 0], epsilon, seeded(10 ** 6 + i))[0] for i in range(runs)])
    worst = 0.0
    for y in range(0, 12):
        pa, pb = np.mean(a == y), np.mean(b == y)
        if min(pa, pb) * runs >= 400:
            worst = max(worst, abs(math.log(pa / pb)))
    # Sampling error of a log ratio at ≥ 400 hits is ≤ ~0.15 at 3σ.
    assert worst <= epsilon + 0.15
    assert worst >= epsilon - 0.15       # the noise is not over-scaled either
