"""Statistical tier for ``ContinualDistinctCountPerKey`` and key selection with a known end:

* the final-step error of the distinct count (release − exact distinct units, many seeds) has
  the variance ``noise_stddev``² says, with power: the same samples reject a 30% smaller or
  larger sd;
* the per-step error of the active-units count (``count='active'``, ``output='per_step'``,
  L1 = K·S) has the variance ``noise_stddev``² says, with power (30% off rejected);
* the active units of a window (``output=('window', 3)``): the error of fresh noise per
  window value (every step) and of the prefix counter over the membership stream (the last
  step) has the variance ``noise_stddev``² says, with power (30% off rejected);
* private key selection with a known end (``PrivateKeys(final_share=0.9)``): the empirical
  release frequency of a key with n units matches ``analysis.key_release_probability`` at the n the
  calculator gives for p = 0.5 (``units_needed``), with power: the frequencies predicted at
  0.7·n and 1.3·n are rejected by the same runs.
"""

import numpy as np
import pytest
from scipy import stats

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.distinct_window import membership_stream
from beam_dp.analysis import key_release_probability as release_probability
from beam_dp.analysis import units_needed
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.distinct import ContinualDistinctCountPerKey
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

STEPS = 12
RUNS = 1500


def _distinct(budget, **kwargs):
    return ContinualDistinctCountPerKey(
        public_keys=['a', 'b'], start=0, step=60, end=60 * STEPS, num_shards=1, budget=budget,
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=2, max_steps_per_unit=1),
        **kwargs)


@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)])
def test_final_step_error_variance_matches_noise_stddev_with_power(budget):
    driver = _distinct(budget).driver
    new_units = {0: 5, 3: 2, 7: 9}                 # key 'a': new distinct units per step
    truth = sum(new_units.values())
    errors = []
    for seed in range(RUNS):
        state, rng = driver.init_shard(0), noise.seeded(seed)
        for step in range(STEPS):
            n = new_units.get(step, 0)
            contributions = [(np.array([0], np.int64), np.array([n], np.int64))] if n else []
            released, state = driver.release_step(0, state, contributions, rng.derive(step))
        errors.append(float(released[0, 0]) - truth)
    sd = driver.noise_stddev(STEPS - 1)
    assert variance_pvalue(np.array(errors), sd ** 2) > P_THRESHOLD
    for off in (0.7, 1.3):
        assert variance_pvalue(np.array(errors), (off * sd) ** 2) < P_THRESHOLD


@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)])
def test_active_per_step_error_variance_matches_noise_stddev_with_power(budget):
    driver = ContinualDistinctCountPerKey(
        public_keys=['a', 'b'], start=0, step=60, end=60 * STEPS, num_shards=1, budget=budget,
        output='per_step', count='active',
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=2, max_steps_per_unit=3)).driver
    active = {0: 5, 1: 5, 3: 2, 7: 9, 8: 4}        # key 'a': distinct active units per step
    errors = []
    for seed in range(RUNS // 3):
        state, rng = driver.init_shard(0), noise.seeded(seed)
        for step in range(STEPS):
            n = active.get(step, 0)
            contributions = [(np.array([0], np.int64), np.array([n], np.int64))] if n else []
            released, state = driver.release_step(0, state, contributions, rng.derive(step))
            errors.append(float(released[0, 0]) - n)
    sd = driver.noise_stddev(STEPS - 1)
    assert all(driver.noise_stddev(s) == sd for s in range(STEPS))     # fresh noise per step
    # calibrated to L1 = K·S = 6 (Laplace sd ≈ √2·6/ε) or L2² = 6 (Gaussian σ² = 6/(2ρ))
    assert sd == pytest.approx(2 ** 0.5 * 6 if budget.epsilon else 6 ** 0.5, rel=0.01)
    assert variance_pvalue(np.array(errors), sd ** 2) > P_THRESHOLD
    for off in (0.7, 1.3):
        assert variance_pvalue(np.array(errors), (off * sd) ** 2) < P_THRESHOLD


def _released(shard, n, seed):
    state, rng = shard.init_state(), noise.seeded(seed).derive('K')
    for step in range(STEPS):
        out, state = shard.release_step(state, {'k': ((n,), n)} if step == 2 else {}, rng)
        if out:
            return True
    return False


def test_key_release_frequency_matches_the_calculator_with_power():
    eps, delta, k = 1.0, 1e-6, 3
    n = units_needed(0.5, eps, delta, k, steps=STEPS)
    t = ContinualDistinctCountPerKey(
        keys=PrivateKeys(PrivacyBudget(epsilon=eps, delta=delta), num_shards=1), start=0,
        step=60, end=60 * STEPS, budget=PrivacyBudget(epsilon=1.0),
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=k, max_steps_per_unit=1))
    shard = t.driver.private_shard
    runs = 600
    hits = sum(_released(shard, n, seed) for seed in range(runs))
    p_true = release_probability(n, eps, delta, k, steps=STEPS)
    assert stats.binomtest(hits, runs, p_true).pvalue > P_THRESHOLD
    for off in (0.7, 1.3):
        p_off = release_probability(round(off * n), eps, delta, k, steps=STEPS)
        assert stats.binomtest(hits, runs, p_off).pvalue < P_THRESHOLD


_WINDOW_UNITS = ((0, 5), (1, 2), (7,), (3, 4, 10), (0,))   # key 'a': each unit's active steps


def _window_driver(budget, mechanism='auto'):
    return ContinualDistinctCountPerKey(
        public_keys=['a', 'b'], start=0, step=60, end=60 * STEPS, num_shards=1, budget=budget,
        output=('window', 3), count='active', mechanism=mechanism,
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=2, max_steps_per_unit=3)).driver


@pytest.mark.parametrize('budget, mechanism, kind', [
    (PrivacyBudget(epsilon=1.0), 'auto', 'fresh_per_window'),
    (PrivacyBudget(rho=0.5), 'auto', 'fresh_per_window'),
    (PrivacyBudget(epsilon=1.0), 'balanced_tree', 'membership_prefix'),
    (PrivacyBudget(rho=0.5), 'blt', 'membership_prefix'),
])
def test_active_window_error_variance_matches_noise_stddev_with_power(budget, mechanism, kind):
    """``count='active'``, ``output=('window', 3)``: the driver fed the units' ±1 membership
    streams releases the exact window values plus noise of sd ``noise_stddev``: fresh noise
    per window value (the errors of every step, independent, pooled) or the prefix counter
    (the last step's error, one per run); 30% off rejected by the same samples."""
    driver = _window_driver(budget, mechanism)
    assert kind in driver.mechanism_name
    x = np.zeros(STEPS, np.int64)
    for steps in _WINDOW_UNITS:
        for at, d in membership_stream(steps, 3):
            if at < STEPS:
                x[at] += d
    exact = np.cumsum(x)
    assert list(exact) == [sum(any(s - 3 < t <= s for t in steps) for steps in _WINDOW_UNITS)
                           for s in range(STEPS)]
    fresh = kind == 'fresh_per_window'
    errors = []
    for seed in range(RUNS // 3 if fresh else RUNS):
        state, rng = driver.init_shard(0), noise.seeded(seed)
        for step in range(STEPS):
            contributions = ([(np.array([0], np.int64), np.array([x[step]], np.int64))]
                             if x[step] else [])
            released, state = driver.release_step(0, state, contributions, rng.derive(step))
            if fresh or step == STEPS - 1:
                errors.append(float(released[0, 0]) - exact[step])
    sd = driver.noise_stddev(STEPS - 1)
    if fresh:
        assert all(driver.noise_stddev(s) == sd for s in range(STEPS))
    assert variance_pvalue(np.array(errors), sd ** 2) > P_THRESHOLD
    for off in (0.7, 1.3):
        assert variance_pvalue(np.array(errors), (off * sd) ** 2) < P_THRESHOLD
