"""DP audit of the user-level calibration at the driver level, on neighbouring streams.

Both streams are driven through ``KeyedReleaseDriver`` with the same seed, so the noise is
identical and the releases differ only by the unit's contribution. From the releases alone (and
public parameters) the audit recovers what the noise was added to and computes the exact privacy
loss of the transcript: for BLT the Gaussian loss Σ_t Σ_bins Δu²/(2σ_t²) (≤ ρ), for per-step
noise the Laplace loss Σ|Δ|/b (≤ ε). The unit is the worst case for its bounds (K keys, m per
step on S consecutive steps from the start, C in total). A deliberately mis-calibrated driver
(S = 1 declared while the unit uses S steps) fails the same audit, so it can fail.
"""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import blt_optimize
from beam_dp.mechanisms.blt import grid_offset
from beam_dp.privacy_unit import UserLevel

KEYS = ('a', 'b', 'c')
HORIZON = 16
SEED = 5


def _unit(**kwargs):
    bounds = dict(max_keys_per_unit=2, max_contributions_per_step=2, max_steps_per_unit=3)
    bounds.update(kwargs)
    return UserLevel(unit_fn=len, **bounds)


def _driver(unit, budget, mechanism='auto'):
    return KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=unit,
                              clock=StepClock(0, 60_000_000, last_step=HORIZON - 1),
                              layout=KeyLayout.of(list(KEYS), 1), mechanism=mechanism)


def _worst_case(unit):
    """One unit's counts {(key position, step): n}: m per step on S consecutive steps from
    step 0, key after key, until C (or K·m·S) is used up."""
    left = unit.max_total_contributions or math.inf
    out = {}
    for key in range(unit.max_keys_per_unit):
        for step in range(unit.max_steps_per_unit):
            n = min(unit.max_contributions_per_step, left)
            if n > 0:
                out[(key, step)] = n
                left -= n
    return out


BACKGROUND = {(0, 0): 3, (1, 2): 1, (2, 5): 4, (0, 9): 2}


def _releases(driver, counts):
    state = driver.init_shard(0)
    base = noise.seeded(SEED)
    rows = []
    for step in range(HORIZON):
        cells = [(k, n) for (k, s), n in counts.items() if s == step]
        contributions = [(np.array([k for k, _ in cells], dtype=np.int64),
                          np.array([n for _, n in cells], dtype=np.int64))] if cells else []
        released, state = driver.release_step(0, state, contributions, base.derive(step))
        rows.append(released[:, 0])
    return np.array(rows)                                  # (steps, keys)


def _neighbours(driver, unit):
    with_unit = dict(BACKGROUND)
    for cell, n in _worst_case(unit).items():
        with_unit[cell] = with_unit.get(cell, 0) + n
    return _releases(driver, BACKGROUND), _releases(driver, with_unit)


def _blt_loss(driver, unit, pair=None):
    """ρ actually spent on the unit: the grid values Δu_t = 2^k_t·(C·Δx̂)_t, recovered from the
    releases (x̂ the released increments), against the public σ_t². ``pair``: the two
    neighbouring releases (default: ``_neighbours``)."""
    without, with_unit = pair or _neighbours(driver, unit)
    counter = driver.counter(len(KEYS))
    theta, w = counter.exact_params
    c = blt_optimize.blt_coefficients(theta, w, HORIZON)
    increments = np.diff(with_unit - without, axis=0, prepend=0.0)
    loss = 0.0
    for t in range(HORIZON):
        cx = sum(c[m] * increments[t - m] for m in range(t + 1))
        k = counter.grid_bits + grid_offset(t + 1)
        du = np.round(np.ldexp(cx, k))
        assert np.allclose(du, np.ldexp(cx, k), atol=1e-3)   # exact integers, up to float
        loss += float(np.sum(du * du)) / (2 * float(counter.grid_sigma2(t + 1)))
    return loss


@pytest.mark.parametrize('total', [None, 8, 5])
def test_blt_user_level_loss_is_within_rho_and_uses_most_of_it(total):
    unit = _unit(max_total_contributions=total)
    driver = _driver(unit, PrivacyBudget(rho=0.5), mechanism='blt')
    assert driver.mechanism_name == 'blt/4_buffers+multi_participation/discrete_gaussian'
    loss = _blt_loss(driver, unit)
    assert loss <= 0.5
    assert loss >= 0.5 * 0.6                # the bound is not loose for the worst-case unit


def test_blt_multi_participation_calibration_beats_the_triangle_bound():
    unit = _unit()
    driver = _driver(unit, PrivacyBudget(rho=0.5), mechanism='blt')
    counter = driver.counter(1)
    l1, l2 = driver.sensitivity()
    assert (l1, l2) == (12, pytest.approx(math.sqrt(2) * 6))
    assert counter.effective_l2 < l2                 # r_S < S
    assert driver.noise_stddev(HORIZON - 1) < math.sqrt(
        counter.__class__(rho=0.5, horizon=HORIZON, l1_sensitivity=l1,
                          l2_sensitivity=l2).release_variance(HORIZON))


def test_the_audit_catches_a_calibration_that_ignores_participations():
    """A calibration to 4 per key (more than √S·m ≈ 3.5, what orthogonal steps would need, but
    less than r_S·m ≈ 5.2 at T = 16) while the unit puts m = 2 on S = 3 steps overspends."""
    unit = _unit()
    declared = _unit(max_steps_per_unit=1, max_contributions_per_step=4)
    mis = _driver(declared, PrivacyBudget(rho=0.5), mechanism='blt')
    assert _blt_loss(mis, unit) > 0.5 * 1.2


@pytest.mark.parametrize('total,expected_l1', [(None, 12), (5, 5)])
def test_pure_user_level_loss_with_a_total_bound_is_exactly_epsilon(total, expected_l1):
    unit = _unit(max_total_contributions=total)
    driver = _driver(unit, PrivacyBudget(epsilon=1.0), mechanism='per_step')
    assert driver.sensitivity()[0] == expected_l1
    without, with_unit = _neighbours(driver, unit)
    increments = np.diff(with_unit - without, axis=0, prepend=0.0)
    scale = driver.counter(len(KEYS)).step_noise.param
    loss = float(np.sum(np.abs(increments))) / scale
    assert loss <= 1.0 * (1 + 1e-9)
    assert loss >= 1.0 * (1 - 1e-6)        # the worst-case unit spends all of ε


def test_total_bound_is_validated_and_described():
    with pytest.raises(InvalidParamsError, match='max_total_contributions'):
        _unit(max_total_contributions=0)
    assert 'C=5 in total' in _unit(max_total_contributions=5).describe()
    assert _unit(max_total_contributions=100).sensitivity() == _unit().sensitivity()
