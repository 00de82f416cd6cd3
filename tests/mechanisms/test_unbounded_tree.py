"""UnboundedTreeCounter (negative-digit k-ary tree over unboundedly many levels, epoch-dependent
node budget): contract, the prefix identity, each node's noise drawn once from its own address
(replay-identical under a noise key), the schedule's privacy constraint (exact), an exact DP
audit on neighbouring streams with power, closed forms, the variance targets against the
known-horizon balanced tree and the infinite tree, state size, validation. (Statistical checks:
tests/statistical/test_unbounded_tree_statistical.py.)"""

import dataclasses
import fractions
import pickle

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.analysis import counter_variances
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import InfiniteTreeCounter
from beam_dp.mechanisms import UnboundedTreeCounter
from beam_dp.mechanisms import unbounded_tree
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.balanced_tree import levels_for
from beam_dp.mechanisms.balanced_tree import segments
from beam_dp.mechanisms.unbounded_tree import SCHEDULES
from beam_dp.mechanisms.unbounded_tree import Schedule
from beam_dp.mechanisms.unbounded_tree import check_schedule
from beam_dp.noise import secret_key
from beam_dp.noise.samplers import as_rational_up
from tests.mechanisms.contract import CounterContract
from tests.mechanisms.test_kary_tree import _releases

K = 13


class TestUnboundedTreeContract(CounterContract):

    def make(self, **overrides):
        return UnboundedTreeCounter(**{**dict(epsilon=1.0, dimension=3, k=K), **overrides})

    def make_noise_free(self):
        return self.make(epsilon=1e7)

    def inputs(self):
        return [np.array([t % 3, 1, 5 * (t % 2)]) for t in range(120)]   # three epochs (k = 13)

    def invalid_params(self):
        return super().invalid_params() + [({'k': 4}, 'k'), ({'k': 9}, 'k'),
                                           ({'rho': 0.5}, 'rho')]


def _signed_row(k, t, width):
    row = np.zeros(width + 1, dtype=np.int64)
    for h, (first, count, sign) in enumerate(segments(t, k, levels_for(t, k))):
        span = k ** h
        for j in range(first, first + count):
            row[j * span + 1:min(width, (j + 1) * span) + 1] += sign
    return row[1:]


def test_signed_nodes_sum_to_the_prefix_indicator():
    for t in list(range(1, 1200)) + [2196, 2197, 2198, 14000, 14281, 14282, 200000]:
        width = 2 * t + K          # nodes subtracted after t end before t + (k^h + 1)/2 ≤ 2t
        expected = np.zeros(width, dtype=np.int64)
        expected[:t] = 1
        np.testing.assert_array_equal(_signed_row(K, t, width), expected)


def test_every_node_is_used_by_one_contiguous_run_with_one_sign():
    uses = {}
    for t in range(1, 13 ** 3 + 50):
        for h, (first, count, sign) in enumerate(segments(t, K, levels_for(t, K))):
            for j in range(first, first + count):
                uses.setdefault((h, j), []).append((t, sign))
    for node, used in uses.items():
        ts = [t for t, _ in used]
        assert ts == list(range(ts[0], ts[-1] + 1)), node
        assert len({s for _, s in used}) == 1, node


def _reference_releases(m, values, rng):
    """From scratch: node n(h, j) draws its noise from rng.derive('node', h, j) with its own
    scale; release = exact prefix + Σ sign·η over segments(t)."""
    eta, out = {}, []
    prefix = np.zeros(m.dimension, dtype=np.int64)
    for t, value in enumerate(values, 1):
        prefix = prefix + np.asarray(value, dtype=np.int64)
        release = prefix.copy()
        for h, (first, count, sign) in enumerate(segments(t, m.k, levels_for(t, m.k))):
            for j in range(first, first + count):
                if (h, j) not in eta:
                    eta[(h, j)] = m.node_noise_for(h, j).sample(rng.derive('node', h, j),
                                                            m.dimension)
                release = release + sign * eta[(h, j)]
        out.append(release)
    return np.array(out)


@pytest.mark.parametrize('kwargs', [dict(epsilon=1.0, dimension=2),
                                    dict(epsilon=0.3, l1_sensitivity=4.0, dimension=1)])
def test_online_release_is_the_exact_prefix_plus_each_nodes_one_noise(kwargs):
    m = UnboundedTreeCounter(**kwargs)
    gen = np.random.default_rng(1)
    values = [gen.integers(0, 4, size=m.dimension) for _ in range(2300)]
    releases, state = _releases(m, values, seed=9)
    assert releases.dtype == np.int64 and state.t == 2300
    np.testing.assert_array_equal(releases, _reference_releases(m, values, noise.seeded(9)))


def test_noise_is_replay_identical_under_a_noise_key(monkeypatch):
    """Under a secret noise key the releases depend only on (key, step address, node): a replay
    from a restored state, in another process order, draws the same noise."""
    monkeypatch.setenv('BDP_TEST_UNBOUNDED_KEY', 'ab' * 32)
    secret_key.clear_key_cache()
    try:
        m = UnboundedTreeCounter(epsilon=1.0, dimension=2)
        base = noise.KeyedRandom('env:BDP_TEST_UNBOUNDED_KEY')

        def run(state, lo, hi):
            out = []
            for t in range(lo, hi):
                release, state = m.step(state, np.array([1, t % 2]), base.derive('lbl', 'k', t))
                out.append(release)
            return out, state

        full, _ = run(m.init_state(), 0, 400)
        half, mid = run(m.init_state(), 0, 170)
        rest, _ = run(pickle.loads(pickle.dumps(mid)), 170, 400)
        np.testing.assert_array_equal(np.array(full), np.array(half + rest))
        other = noise.KeyedRandom('env:BDP_TEST_UNBOUNDED_KEY').derive('other')
        assert m.step(m.init_state(), [0, 0], other)[0].tolist() != full[0].tolist() or \
            m.step(m.init_state(), [0, 0], other.derive(1))[0].tolist() != full[0].tolist()
    finally:
        secret_key.clear_key_cache()


# -- privacy: the schedule's constraint and an exact audit ----------------------------------------

def _step_shares(schedule, steps):
    """S(u) = Σ_h w(node of u at level h), exactly as ``step`` scales them, for u = 1..steps,
    levels up to 16 explicit and the formula tail beyond (closed form A_16)."""
    m = UnboundedTreeCounter(epsilon=1.0, k=schedule.k)
    u = np.arange(1, steps + 1)
    total = np.full(steps, float(schedule.shared_tail(16)))
    for h in range(16):
        j = (u - 1) // schedule.k ** h
        weights = {int(x): m.node_weight(h, int(x)) for x in np.unique(j)}
        total += np.vectorize(weights.get)(j)
    return total


def test_schedule_spends_at_most_epsilon_per_step_and_nearly_all_of_it():
    schedule = SCHEDULES[K]
    for e in range(1, 60):
        assert schedule.step_share(e) <= 1
    shares = _step_shares(schedule, 13 ** 5)
    assert shares.max() <= 1 + 1e-12
    assert shares.max() > 0.97                      # the budget is used, not wasted


def _realised_epsilon(m, x, x_prime, levels=16):
    """Σ_n |n·(x − x')| / b_n over every node (levels beyond ``levels``: closed form, their
    nodes n(h, 0) hold the whole stream): the exact pure-DP loss of the node mechanism."""
    delta = (np.asarray(x) - np.asarray(x_prime)).astype(np.int64)        # (T, d)
    steps = delta.shape[0]
    total = 0.0
    cumulative = np.vstack([np.zeros((1, m.dimension), np.int64), np.cumsum(delta, axis=0)])
    for h in range(levels):
        span = m.k ** h
        ends = np.minimum(np.arange(0, steps + span, span), steps)[:-(-steps // span) + 1]
        sums = np.abs(np.diff(cumulative[ends], axis=0)).sum(axis=1)
        for j in np.flatnonzero(sums):
            total += sums[j] / float(as_rational_up(m.node_noise_for(h, int(j)).param))
    tail = float(m.schedule.shared_tail(levels)) * m.epsilon / m.l1_sensitivity
    return total + tail * np.abs(delta.sum(axis=0)).sum()


def _neighbours(steps, dimension, l1, seed, pairs=8):
    gen = np.random.default_rng(seed)
    out = []
    worst_steps = [1099, 1100, 1200, 2000, 14281, 14300]     # epoch-4 steps (k = 13)
    for i in range(pairs):
        base = gen.integers(0, 50, size=(steps, dimension))
        changed = base.copy()
        for _ in range(int(l1)):
            t = worst_steps[i % len(worst_steps)] - 1 if i % 2 else gen.integers(steps)
            changed[min(t, steps - 1), gen.integers(dimension)] += 1 if i % 3 else -1
        out.append((base, changed))
    return out


@pytest.mark.parametrize('kwargs', [dict(epsilon=1.0),
                                    dict(epsilon=0.7, l1_sensitivity=3.0, dimension=2)])
def test_exact_dp_audit_on_neighbouring_streams(kwargs):
    m = UnboundedTreeCounter(**kwargs)
    worst = max(_realised_epsilon(m, x, y)
                for x, y in _neighbours(20000, m.dimension, m.l1_sensitivity, seed=3))
    assert 0.9 * m.epsilon < worst <= m.epsilon * (1 + 1e-9)


def test_the_audit_has_power():
    """A schedule giving every node 10% more than the constraint allows is refused by
    ``check_schedule``; run anyway, the audit measures the overspend."""
    honest = SCHEDULES[K]
    greedy = dataclasses.replace(honest, shared=tuple(a * 1.1 for a in honest.shared),
                                 table=tuple(tuple(w * 1.1 for w in row) for row in honest.table))
    with pytest.raises(ValueError, match='spends'):
        check_schedule(greedy)

    class Greedy(UnboundedTreeCounter):
        @property
        def schedule(self):
            return greedy

        def node_weight(self, h, j):
            return unbounded_tree._node_weight(greedy, h, j)

    m = Greedy(epsilon=1.0)
    worst = max(_realised_epsilon(m, x, y) for x, y in _neighbours(20000, 1, 1, seed=3))
    assert worst > 1.05


def test_schedule_checks_refuse_malformed_tables():
    s = SCHEDULES[K]
    with pytest.raises(ValueError, match='tail'):
        check_schedule(dataclasses.replace(s, tail=0.3))
    with pytest.raises(ValueError, match='row'):
        check_schedule(dataclasses.replace(s, table=s.table[:2] + ((0.1,),)))
    assert s.shared_tail(0) == sum(fractions.Fraction(a) for a in s.shared) + fractions.Fraction(
        s.tail)


# -- closed forms and targets ---------------------------------------------------------------------

def test_closed_forms_agree():
    m = UnboundedTreeCounter(epsilon=0.5, l1_sensitivity=2.0)
    steps = 3000
    brute = np.array([m.release_variance(t) for t in range(1, steps + 1)])
    np.testing.assert_allclose(m.variances(steps), brute, rtol=1e-12)
    np.testing.assert_allclose(counter_variances(m, steps), brute, rtol=1e-12)
    assert m.mean_variance(steps) == pytest.approx(brute.mean(), rel=1e-12)
    assert m.release_variance(1) == pytest.approx(m.node_variance(0, 0))
    # 14 = 13 + 1: n(1, 0) (the first 13 steps, a_1) and the leaf n(0, 13) (epoch 2).
    assert m.release_variance(14) == pytest.approx(m.node_variance(1, 0) + m.node_variance(0, 13))


@pytest.mark.parametrize('log2_t, vs_balanced, vs_infinite', [
    (4, 3.52, None), (10, 3.52, 3.1), (13, 3.52, 3.1), (16, 3.52, 3.1)])
def test_variance_targets(log2_t, vs_balanced, vs_infinite):
    t = 2 ** log2_t
    ours = UnboundedTreeCounter(epsilon=1.0).mean_variance(t)
    balanced = BalancedTreeCounter(horizon=t, epsilon=1.0).mean_variance()
    assert ours <= vs_balanced * balanced
    if vs_infinite:
        infinite = float(np.mean(counter_variances(InfiniteTreeCounter(epsilon=1.0), t)))
        assert infinite >= vs_infinite * ours


def test_state_is_under_1_kib_per_key_at_2_24():
    m = UnboundedTreeCounter(epsilon=1.0)
    _, state = _releases(m, [1] * 2300)
    levels = levels_for(2 ** 24, m.k)
    worst = dataclasses.replace(
        state, runs=np.zeros((levels, 3), np.int64),
        noise=np.zeros((levels * (m.k - 1) // 2, 1), np.int64))
    assert state.nbytes() < worst.nbytes() <= 1024
    assert len(pickle.dumps(worst)) <= 1024


def test_steps_past_the_validated_range_are_refused():
    m = UnboundedTreeCounter(epsilon=1.0)
    state = dataclasses.replace(m.init_state(), t=unbounded_tree.MAX_STEPS)
    with pytest.raises(Exception, match='steps reached'):
        m.step(state, [1], noise.seeded(0))


def test_invalid_params_name_the_argument():
    with pytest.raises(InvalidParamsError, match='rho'):
        UnboundedTreeCounter(rho=0.5)
    with pytest.raises(InvalidParamsError, match='k'):
        UnboundedTreeCounter(epsilon=1.0, k=7)
    with pytest.raises(InvalidParamsError, match='grid_bits'):
        UnboundedTreeCounter(epsilon=1.0, l1_sensitivity=2.0 ** 34)


def test_dp_ftrl_runs_on_it_without_a_horizon():
    """DP-FTRL takes any pure counter without a horizon: the unbounded tree qualifies."""
    from beam_dp.mechanisms.erm import DPFTRL
    from beam_dp.mechanisms.erm import BinaryLogistic
    from beam_dp.mechanisms.erm import ftrl
    counter = UnboundedTreeCounter(epsilon=2.0, dimension=3,
                                   l1_sensitivity=ftrl.step_l1_sensitivity(BinaryLogistic(), 3, 8))
    mech = DPFTRL(BinaryLogistic(), 4, 3, 2.0, counter=counter)
    state, gen = mech.init_state(), np.random.default_rng(2)
    for b in range(20):
        x = gen.normal(size=(4, 3))
        y = gen.integers(0, 2, size=4)
        events, state = mech.step(state, (x, y), noise.seeded(b))
    assert state.t == 20 and state.counter.t == 20
