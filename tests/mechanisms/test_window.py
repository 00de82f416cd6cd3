"""WindowCounter (per-step and sliding-window values): the contract, exactness (release = the
exact window sum + Σ sign·node noise), the digit recursion against a breadth-first search (the
shortest signed path), the closed-form variance, the bound that does not grow with the horizon,
never worse than differencing two prefix releases (per-step counter: proven, equality for
h = 0; textbook binary tree: release by release, exact node counts), and an exact DP audit on
neighbouring streams (node-sum privacy loss) with power."""

import collections
import dataclasses
import functools
import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.mechanisms.window import WindowCounter
from beam_dp.mechanisms.window import choose_tree
from beam_dp.mechanisms.window import decomposition
from beam_dp.mechanisms.window import node_count
from beam_dp.mechanisms.window import window_decomposition
from beam_dp.mechanisms.window import worst_nodes
from beam_dp.noise import as_rational_up
from tests.mechanisms.contract import ContinualMechanismContract
from tests.mechanisms.contract import CounterContract


class TestWindowContract(ContinualMechanismContract):

    def make(self, **overrides):
        return WindowCounter(**{**dict(window=5, epsilon=1.0, dimension=2), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'window': 0}, 'window'),
                                           ({'window': (1 << 12) + 1}, 'window'),
                                           ({'arity': 1, 'levels': 2}, 'arity'),
                                           ({'arity': 2}, 'arity'),
                                           ({'arity': 2, 'levels': 9}, 'levels')]

    def inputs(self):
        return [(t % 3, 2 * (t % 2)) for t in range(14)]


class TestWideWindowIsAPrefixCounter(CounterContract):
    """A window longer than the stream is the prefix sum: the counter contract's exact check."""

    def make(self, **overrides):
        return WindowCounter(**{**dict(window=64, rho=0.5, arity=2, levels=4, dimension=2),
                                **overrides})

    def make_noise_free(self):
        return self.make(rho=1e15)

    def inputs(self):
        return [(t % 3, 2 * (t % 2)) for t in range(20)]


# -- the decomposition -----------------------------------------------------------------------------

def _bfs(window, k, h, b):
    """Shortest signed path length from b+1 to max(0, b+1−W), positions in [max(0, a − k^h),
    b+1], moves ±k^ℓ from multiples of k^ℓ (the definition the recursion implements)."""
    end = b + 1
    start = max(0, end - window)
    lo = max(0, start - k ** h)
    dist = {end: 0}
    queue = collections.deque([end])
    while queue:
        p = queue.popleft()
        if p == start:
            return dist[p]
        for level in range(h + 1):
            size = k ** level
            if p % size:
                continue
            for q in (p - size, p + size):
                if lo <= q <= end and q not in dist:
                    dist[q] = dist[p] + 1
                    queue.append(q)
    raise AssertionError('unreachable')


def _indicator(nodes, k, length):
    out = np.zeros(length, dtype=np.int64)
    for sign, level, j in nodes:
        size = k ** level
        assert j >= 0
        out[j * size:(j + 1) * size] += sign
    return out


@pytest.mark.parametrize('k', [2, 3, 5])
@pytest.mark.parametrize('window', [1, 2, 3, 7, 9, 16, 30])
def test_signed_nodes_sum_to_the_window_and_are_shortest(k, window):
    h_max = max(0, math.ceil(math.log(window, k)))
    for h in range(h_max + 1):
        for b in range(window + 3 * k ** h + 5):
            nodes = window_decomposition(window, k, h, b)
            assert len(set(nodes)) == len(nodes)                   # distinct: independent noise
            assert all((j + 1) * k ** lv <= b + 1 for _, lv, j in nodes)   # completed nodes
            expected = np.zeros(b + 1, dtype=np.int64)
            expected[max(0, b + 1 - window):] = 1
            np.testing.assert_array_equal(_indicator(nodes, k, b + 1), expected)
            assert len(nodes) == _bfs(window, k, h, b) == node_count(window, k, h, b), (
                window, k, h, b)


def test_the_periodic_cache_is_the_direct_recursion():
    for window, k, h in ((7, 2, 2), (30, 3, 3), (12, 5, 1)):
        for b in range(0, 400, 7):
            assert window_decomposition(window, k, h, b) == decomposition(window, k, h, b)


def test_releases_are_the_exact_window_plus_each_used_nodes_noise():
    """Replays the draws: every node's noise drawn once when it completes (levels ascending,
    as ``step`` draws), release = exact window + Σ sign·η over its decomposition."""
    m = WindowCounter(window=11, rho=0.3, arity=3, levels=3, dimension=3)
    values = np.random.default_rng(4).integers(0, 9, size=(80, 3))
    state, rng = m.init_state(), noise.seeded(9)
    ref_rng, etas = noise.seeded(9), {}
    for b in range(80):
        release, state = m.step(state, values[b], rng)
        for level in range(m.levels):
            if (b + 1) % (m.arity ** level) == 0:
                etas[(level, (b + 1) // m.arity ** level - 1)] = m.node_noise.sample(ref_rng, 3)
        expected = values[max(0, b + 1 - m.window):b + 1].sum(axis=0)
        for sign, level, j in window_decomposition(m.window, m.arity, m.h, b):
            expected = expected + sign * etas[(level, j)]
        np.testing.assert_array_equal(release, expected)


# -- closed forms and bounds ----------------------------------------------------------------------

@pytest.mark.parametrize('window', [1, 2, 7, 30, 100])
@pytest.mark.parametrize('budget', [dict(epsilon=1.0), dict(rho=0.5)])
def test_variance_is_nodes_times_node_variance_and_bounded_in_the_horizon(window, budget):
    m = WindowCounter(window=window, **budget)
    node = m.node_noise.variance()
    worst = m.worst_variance()
    for t in list(range(1, 3 * window)) + [10 ** 4, 10 ** 6 + 3, 10 ** 9]:
        assert m.release_variance(t) == pytest.approx(m.nodes_used(t) * node, rel=1e-15)
        assert m.release_variance(t) <= worst * (1 + 1e-12)
    # h = 0: W fresh noises; a tree: at most (k−1) per level on the end side, k per level on
    # the start side, and the gap at the top.
    h = m.levels - 1
    bound = window if h == 0 else (2 * m.arity - 1) * h + window // m.arity ** h + 1
    assert worst <= bound * node * (1 + 1e-12)


@pytest.mark.parametrize('window', [1, 2, 3, 5, 7, 8, 14, 30, 31, 64, 365])
@pytest.mark.parametrize('budget', [dict(epsilon=1.0), dict(rho=0.5), dict(epsilon=0.3,
                                                                          l1_sensitivity=5.0)])
def test_never_worse_than_differencing_the_per_step_counter(window, budget):
    """Differencing PerStepCounter's releases t and t−W leaves the W noisy increments of the
    window: variance W·Var(step noise); the window counter's worst case is at most that (h = 0
    is that very mechanism, and h is chosen to minimise the worst case)."""
    m = WindowCounter(window=window, **budget)
    per_step = PerStepCounter(**budget)
    assert m.worst_variance() <= window * per_step.step_noise.variance() * (1 + 1e-9)
    if window == 1:   # the per-step value: fresh noise at the whole budget
        assert m.levels == 1 and m.worst_variance() == per_step.step_noise.variance()


def _binary_tree_difference_nodes(b, window, levels):
    """Nodes of prefix(b+1) − prefix(a) in the textbook binary tree (prefix t = the dyadic
    nodes of t's binary digits, from the top), shared nodes cancelled."""
    def prefix(t):
        nodes, pos = set(), 0
        for level in range(levels - 1, -1, -1):
            if t - pos >= (1 << level):
                nodes.add((level, pos >> level))
                pos += 1 << level
        return nodes
    a = max(0, b + 1 - window)
    return len(prefix(b + 1) ^ prefix(a))


@pytest.mark.parametrize('budget', [dict(epsilon=1.0), dict(rho=0.5)])
@pytest.mark.parametrize('horizon', [64, 365, 1024])
def test_never_worse_than_differencing_the_textbook_binary_tree(budget, horizon):
    """Worst case and mean over the horizon's releases (release by release is not a
    guarantee: a prefix that is one tree node can beat the window tree at an early step)."""
    levels = math.ceil(math.log2(horizon)) + 1
    tree_node = PerStepCounter(**budget).noise_for_share(1.0 / levels).variance()
    for window in (1, 2, 3, 7, 30, 100):
        if window >= horizon:
            continue
        m = WindowCounter(window=window, **budget)
        ours = np.array([m.release_variance(b + 1) for b in range(horizon)])
        diff = np.array([_binary_tree_difference_nodes(b, window, levels) * tree_node
                         for b in range(horizon)])
        assert ours.max() <= diff.max() * (1 + 1e-9), window
        assert ours.mean() <= diff.mean() * (1 + 1e-9), window
        if window == 1:
            assert (ours <= diff * (1 + 1e-9)).all()      # the per-step value: every release


def test_choice_prefers_fresh_noise_for_short_windows_and_a_tree_for_long_ones():
    assert choose_tree(7, 'laplace') == (1, 0)
    assert choose_tree(7, 'gaussian') == (1, 0)
    k, h = choose_tree(365, 'gaussian')
    assert h >= 1 and worst_nodes(365, k, h) * (h + 1) < 365 / 5


def test_state_keeps_o_of_w_nodes_whatever_the_horizon():
    m = WindowCounter(window=30, rho=0.5)
    state, rng = m.init_state(), noise.seeded(1)
    sizes = []
    for t in range(600):
        _, state = m.step(state, np.ones(1, np.int64), rng)
        sizes.append(sum(len(level) for level in state.nodes))
    assert max(sizes[300:]) == max(sizes[100:300]) <= sum(m.kept(lv) for lv in range(m.levels))


def test_arity_and_levels_together_or_neither():
    with pytest.raises(InvalidParamsError, match='arity and levels'):
        WindowCounter(window=8, epsilon=1.0, levels=2)


# -- exact DP audit: the node sums are the mechanism, the releases post-process them ----------

def _realised_epsilon(m, x, x_prime) -> float:
    """Σ_ℓ Σ_j |node sum change| / b: the exact pure-DP loss of the node mechanism on this pair
    (discrete Laplace of scale b, as the sampler rounds it)."""
    signed = (np.asarray(x) - np.asarray(x_prime)).astype(np.int64)
    steps = signed.shape[0]
    scale = float(as_rational_up(m.node_noise.param))
    total = 0.0
    for level in range(m.levels):
        span = m.arity ** level
        nodes = steps // span                       # only completed nodes are ever drawn
        sums = signed[:nodes * span].reshape(nodes, span, -1).sum(axis=1)
        total += np.abs(sums).sum() / scale
    return total


def _neighbours(m, steps, seed, pairs=8):
    gen = np.random.default_rng(seed)
    out = []
    for i in range(pairs):
        base = gen.integers(0, 40, size=(steps, m.dimension))
        changed = base.copy()
        t0 = int(gen.integers(steps // 2))
        for _ in range(int(m.l1_sensitivity)):
            t = t0 if i % 2 else int(gen.integers(steps))
            changed[t, gen.integers(m.dimension)] += 1 if i % 3 else -1
        out.append((base, changed))
    return out


@pytest.mark.parametrize('kwargs', [dict(window=30, epsilon=1.0, arity=3, levels=3),
                                    dict(window=365, epsilon=0.7, l1_sensitivity=3.0,
                                         dimension=2),
                                    dict(window=7, epsilon=2.0)])
def test_exact_dp_audit_on_neighbouring_streams(kwargs):
    m = WindowCounter(**kwargs)
    worst = max(_realised_epsilon(m, x, y) for x, y in _neighbours(m, 500, seed=3))
    assert 0.97 * m.epsilon < worst <= m.epsilon * (1 + 1e-12)


@dataclasses.dataclass(frozen=True)
class _OneLevelShort(WindowCounter):
    """Splits the budget as if the tree had one level fewer: the audit must catch it."""

    @functools.cached_property
    def node_noise(self):
        return self.noise_for_share(1.0 / (self.levels - 1))


def test_the_audit_has_power():
    m = _OneLevelShort(window=30, epsilon=1.0, arity=3, levels=3)
    worst = max(_realised_epsilon(m, x, y) for x, y in _neighbours(m, 500, seed=3))
    assert worst > 1.2 * m.epsilon
