"""KeyedReleaseSpec / KeyLayout: the pure half of the keyed continual transforms, including an
end-to-end privacy-ledger test of user-level calibration (bounded unit ⇒ loss ≤ ε)."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.keyed_release import KeyLayout
from beam_dp.mechanisms.keyed_release import KeyedReleaseSpec
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import UserLevel


def spec(**overrides):
    kwargs = dict(metric='count', budget=PrivacyBudget(epsilon=1.0), privacy_unit=EventLevel(),
                  layout=KeyLayout.of(['a', 'b', 'c', 'd', 'e'], 2), start_micros=0,
                  step_micros=60_000_000)
    kwargs.update(overrides)
    return KeyedReleaseSpec(**kwargs)


def test_layout_round_robin_and_lookup():
    layout = KeyLayout.of(['e', 'a', 'c', 'b', 'd'], 2)
    assert layout.keys == ('a', 'b', 'c', 'd', 'e')
    assert layout.shard_keys(0) == ('a', 'c', 'e') and layout.shard_keys(1) == ('b', 'd')
    assert layout.locate('d') == (1, 1) and layout.locate('zz') is None
    assert KeyLayout.of([f'k{i}' for i in range(1500)]).num_shards == 3


def test_schedule_is_public_arithmetic():
    s = spec(allowed_lateness_micros=5, start_micros=100)
    assert s.step_of(99) == -1 and s.step_of(100) == 0 and s.step_of(100 + 60_000_000) == 1
    assert s.step_bounds(2) == (100 + 120_000_000, 100 + 180_000_000)
    assert s.release_time_micros(0) == 100 + 60_000_000 + 5
    assert spec(horizon_steps=10, end_step=4).last_step == 3
    assert spec().last_step is None


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


def test_noise_stddev_is_public_and_matches_the_counter():
    s = spec()
    assert s.noise_stddev(0) == pytest.approx(np.sqrt(s.counter(1).release_variance(1)))
    g = spec(metric='sum', upper=4.0, grid_bits=2, budget=PrivacyBudget(rho=0.5))
    assert g.mechanism_name == 'infinite_tree/variance_reduced/discrete_gaussian'
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
    s = spec(privacy_unit=unit, horizon_steps=8, layout=KeyLayout.of(['a', 'b', 'c'], 1))
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
    ({'step_micros': 0}, 'step_micros must be a positive integer'),
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
