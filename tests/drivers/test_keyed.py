"""KeyedReleaseDriver / KeyLayout: the pure half of the keyed continual transforms, including an
end-to-end privacy-ledger test of user-level calibration (bounded unit ⇒ loss ≤ ε)."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.errors import InvalidParamsError
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidRecordError
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import UserLevel


def spec(clock=StepClock(0, 60_000_000), **overrides):
    kwargs = dict(metric='count', budget=PrivacyBudget(epsilon=1.0), privacy_unit=EventLevel(),
                  layout=KeyLayout.of(['a', 'b', 'c', 'd', 'e'], 2), clock=clock)
    kwargs.update(overrides)
    return KeyedReleaseDriver(**kwargs)


def test_layout_round_robin_and_lookup():
    layout = KeyLayout.of(['e', 'a', 'c', 'b', 'd'], 2)
    assert layout.keys == ('a', 'b', 'c', 'd', 'e')
    assert layout.shard_keys(0) == ('a', 'c', 'e') and layout.shard_keys(1) == ('b', 'd')
    assert layout.locate('d') == (1, 1) and layout.locate('zz') is None
    assert KeyLayout.of([f'k{i}' for i in range(1500)]).num_shards == 3


def test_horizon_caps_the_clock():
    assert spec(horizon_steps=10, clock=StepClock(0, 60, last_step=3)).clock.last_step == 3
    assert spec(horizon_steps=10).clock.last_step == 9
    assert spec().clock.last_step is None


def test_extract_locates_quantises_and_rejects_with_a_reason():
    s = spec(metric='sum', lower=-1.0, upper=2.0, grid_bits=3,
             clock=StepClock(100, 60, last_step=4))
    # 'd' is key 3: shard 1, position 1 → key index 1·2 + 1 = 3; flat position 1.
    assert s.extract('d', 100 + 61, 0.3, float) == (3, 1, 1, 1, 2)
    for key, micros, value, reason in [('zz', 100, 1.0, "key 'zz' is not in the public key set"),
                                       ('a', 99, 1.0, 'event time is before the release start'),
                                       ('a', 400, 1.0, 'after the last released step 4'),
                                       ('a', 100, 'x', 'value is not a number')]:
        with pytest.raises(InvalidRecordError, match=reason):
            s.extract(key, micros, value, float)
    h = spec(metric='histogram', bins=('x', 'y'))
    assert h.extract('c', 0, 'y', str) == (2, 0, 0, 3, 1)       # flat = position 1 × 2 + bin 1
    with pytest.raises(InvalidRecordError, match='is not in the public bin set'):
        h.extract('c', 0, 'z', str)


def test_sum_quantisation_clamps_and_snaps():
    s = spec(metric='sum', lower=-1.0, upper=2.0, grid_bits=3)
    assert s.value_bound_units == 16
    assert s.to_units(0.3) == 2            # 0.3 * 8 = 2.4 → 2
    assert s.to_units(100) == 16 and s.to_units(-5) == -8
    with pytest.raises(ValueError):
        s.to_units(float('nan'))
    np.testing.assert_allclose(s.from_units(np.array([8, -4])), [1.0, -0.5])


def test_release_step_is_exact_without_noise():
    s = spec(budget=PrivacyBudget(epsilon=1e7), metric='histogram', bins=('x', 'y'))
    state = s.init_shard(0)                 # keys a, c, e; flat position = key * 2 + bin
    rng = noise.seeded(0)
    released, state = s.release_step(0, state, [(np.array([0, 3, 3]), np.array([1, 2, 1]))], rng)
    np.testing.assert_allclose(released, [[1, 0], [0, 3], [0, 0]], atol=1e-6)
    released, state = s.release_step(0, state, [], rng)
    np.testing.assert_allclose(released, [[1, 0], [0, 3], [0, 0]], atol=1e-6)
    assert state.next_step == 2


def test_public_shard_keeps_pending_contributions_until_their_step_and_refuses_late_ones():
    s = spec(budget=PrivacyBudget(epsilon=1e7))
    state = s.init_shard(1)                 # keys b, d
    state = s.add_pending(state, (1, np.array([1]), np.array([4])))
    state = s.add_pending(state, (0, np.array([0]), np.array([2])))
    rows, state = s.release_public_step(1, state, noise.seeded(0))
    assert [(k, round(v[0], 6)) for k, v, _ in rows] == [('b', 2.0), ('d', 0.0)]
    assert rows[0][2] == pytest.approx(s.noise_stddev(0))
    assert state.pending_count == 1
    assert s.add_pending(state, (0, np.array([0]), np.array([1]))) is None      # late
    assert list(s.late_contributions(1, np.array([1]), np.array([3]))) == [('d', 3)]
    rows, state = s.release_public_step(1, state, noise.seeded(1))
    assert [(k, round(v[0], 6)) for k, v, _ in rows] == [('b', 2.0), ('d', 4.0)]
    assert state.pending_count == 0 and state.next_step == 2


def test_pending_sums_give_each_steps_partials_across_compactions_and_drop_released_steps():
    from beam_dp.drivers.keyed import PendingSums
    gen = np.random.default_rng(3)
    pending, items, floor = PendingSums(), [], 0
    for i in range(3000):
        step = int(gen.integers(floor, floor + 40))
        item = (step, gen.integers(0, 50, size=3), gen.integers(-5, 6, size=3))
        items.append(item)
        pending = pending.add(item, floor)
        if i % 100 == 99:
            floor += 5
    assert len(pending.steps) > 0 and len(pending.tail) < 100   # compacted along the way
    assert pending.steps.min() >= floor - 5                         # released steps dropped
    for step in range(floor, floor + 40):
        got = np.zeros(50, dtype=np.int64)
        for p, v in pending.due(step):
            np.add.at(got, p, v)
        want = np.zeros(50, dtype=np.int64)
        for s_, p, v in items:
            if s_ == step:
                np.add.at(want, p, v)
        np.testing.assert_array_equal(got, want)
    assert pending.count_from(floor) == sum(
        (3 if i >= 0 else 0) for s_, _, _ in items if s_ >= floor) - sum(
        2 for s_, _, _ in pending.tail if s_ >= floor)


def test_costs_and_release_metadata():
    s = spec(budget=PrivacyBudget(epsilon=0.5))
    assert s.privacy_costs('T') == [('T', s.release_cost())]
    meta = s.release_metadata()
    assert meta['epsilon'] == 0.5 and meta['delta'] == 0.0 and meta['metric'] == 'count'
    assert s.describe()['num_shards'] == 2 and s.describe()['step_seconds'] == 60.0


def test_noise_stddev_is_public_and_matches_the_counter():
    s = spec()
    assert s.noise_stddev(0) == pytest.approx(np.sqrt(s.counter(1).release_variance(1)))
    g = spec(metric='sum', upper=4.0, grid_bits=2, budget=PrivacyBudget(rho=0.5))
    assert g.mechanism_name == 'blt/4_buffers/discrete_gaussian'      # ρ, unbounded: BLT
    assert spec(metric='sum', upper=4.0, grid_bits=2, budget=PrivacyBudget(rho=0.5),
                estimator='variance_reduced').mechanism_name == \
        'infinite_tree/variance_reduced/discrete_gaussian'              # the old tree, explicit
    assert g.noise_stddev(5) == pytest.approx(np.sqrt(g.counter(1).release_variance(6)) / 4)


def _closed_nodes(s, shard, contributions_per_step, seed, steps):
    """All noisy tree nodes (level, index) → vector, for the binary tree of a shard."""
    state, nodes = s.init_shard(shard), {}
    base = noise.seeded(seed)
    for step in range(steps):
        _, state = s.release_step(shard, state, contributions_per_step.get(step, []),
                                  base.derive(step))
        t = step + 1
        for h in range(s.counter(1).levels):
            if t % (1 << h) == 0:
                nodes[(h, t >> h)] = state.counter_state.noisy[h].copy()
    return nodes


def test_user_level_ledger_loss_never_exceeds_epsilon_and_is_tight():
    """Same seed on neighbouring inputs ⇒ identical noise, so node differences are the exact
    sensitivities; the Laplace privacy loss of the full node transcript is Σ|Δ|/b ≤ ε."""
    unit = UserLevel(unit_fn=len, max_keys_per_unit=2, max_contributions_per_step=2,
                     max_steps_per_unit=3)
    s = spec(privacy_unit=unit, horizon_steps=8, layout=KeyLayout.of(['a', 'b', 'c'], 1),
             estimator='variance_reduced')                  # the binary tree's nodes
    scale = s.counter(3).node_noise.param
    base_contrib = {0: [(np.array([0, 1]), np.array([3, 1]))], 4: [(np.array([2]), np.array([5]))]}
    base_nodes = _closed_nodes(s, 0, base_contrib, 7, 8)
    worst = 0.0
    rng = np.random.default_rng(0)   # test-only: picks neighbours, never noise
    for _ in range(40):
        keys = rng.choice(3, size=2, replace=False)
        extra = {k: list(v) for k, v in base_contrib.items()}
        for key in keys:
            for step in rng.choice(8, size=3, replace=False):
                extra.setdefault(int(step), []).append((np.array([key]), np.array([2])))
        nodes = _closed_nodes(s, 0, extra, 7, 8)
        loss = sum(np.abs(nodes[n] - base_nodes[n]).sum() for n in nodes) / scale
        assert loss <= 1.0 + 1e-9
        worst = max(worst, loss)
    assert worst > 0.99          # the calibration is tight: a full unit spends all of ε


@pytest.mark.parametrize('overrides, match', [
    ({'metric': 'avg'}, "metric must be one of"),
    ({'clock': 60}, 'clock must be a StepClock'),
    ({'horizon_steps': 0}, 'horizon_steps must be a positive integer'),
    ({'grid_bits': 31}, 'grid_bits must be at most 30'),
    ({'metric': 'histogram'}, 'bins must be a non-empty list'),
    ({'budget': None}, 'budget must be a PrivacyBudget'),
])
def test_spec_validation(overrides, match):
    with pytest.raises(InvalidParamsError, match=match):
        spec(**overrides)


def test_layout_validation():
    with pytest.raises(InvalidParamsError, match='num_shards must not exceed'):
        KeyLayout(('a',), 2)
