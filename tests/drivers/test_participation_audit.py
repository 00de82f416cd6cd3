"""DP audits of the counters fitted to the participation (issue 23 item 2) on neighbouring
streams at user level: a unit added/removed (the worst case of ``_worst_case``: m per step on S
consecutive steps, key after key, up to C) on top of a background, released by the keyed
driver with ``mechanism='per_cell'`` and ``'banded'`` under the same seed. The noise is the same
on both streams, so the difference of the released increments is the unit's exact change, and
the zCDP the pair costs is Σ Δ²/(2σ²) over the privatised integer vector (CKS 2020, Thm 14):
per-cell, the cells themselves; banded, u = 2^B·C·x. It must be at most ρ, and most of ρ (the
bound is not loose); a calibration to the wrong m overspends and the audit sees it."""

import math

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.mechanisms import banded
from tests.drivers.test_keyed_user_level import BACKGROUND
from tests.drivers.test_keyed_user_level import HORIZON
from tests.drivers.test_keyed_user_level import _driver
from tests.drivers.test_keyed_user_level import _releases
from tests.drivers.test_keyed_user_level import _unit
from tests.drivers.test_keyed_user_level import _worst_case

RHO = PrivacyBudget(rho=0.5)


def _pair(driver, unit, shift=0):
    with_unit = dict(BACKGROUND)
    for (key, step), n in _worst_case(unit).items():
        cell = (key, step + shift)
        with_unit[cell] = with_unit.get(cell, 0) + n
    return _releases(driver, BACKGROUND), _releases(driver, with_unit)


def _increments(pair):
    without, with_unit = pair
    return np.diff(with_unit - without, axis=0, prepend=0.0)          # (steps, keys)


def _per_cell_loss(driver, pair):
    counter = driver.counter(1)
    sigma2 = float(counter.step_noise.param)
    dx = np.round(_increments(pair))
    assert np.allclose(dx, _increments(pair), atol=1e-6)
    return float(np.sum(dx * dx)) / (2 * sigma2)


def _banded_loss(driver, pair):
    counter = driver.counter(1)
    dx = np.round(_increments(pair))
    assert np.allclose(dx, _increments(pair), atol=1e-4)
    c = counter.exact_coefficients
    du = np.array([sum(c[k] * dx[t - k] for k in range(min(len(c), t + 1)))
                   for t in range(HORIZON)])
    du = np.ldexp(du, banded.COEF_BITS)
    return float(np.sum(du * du)) / (2 * float(counter.sigma2_grid))


@pytest.mark.parametrize('total', [None, 8, 5])
@pytest.mark.parametrize('mechanism,loss', [('per_cell', _per_cell_loss),
                                            ('banded', _banded_loss)])
def test_unit_added_costs_at_most_rho_and_most_of_it(mechanism, loss, total):
    unit = _unit(max_total_contributions=total)
    driver = _driver(unit, RHO, mechanism=mechanism)
    assert driver.mechanism_name.startswith(mechanism)
    worst = max(loss(driver, _pair(driver, unit, shift)) for shift in (0, 5))
    assert worst <= 0.5 * (1 + 1e-9)
    floor = 0.99 if mechanism == 'per_cell' else 0.6
    assert worst >= 0.5 * floor


@pytest.mark.parametrize('mechanism,loss', [('per_cell', _per_cell_loss),
                                            ('banded', _banded_loss)])
def test_the_audit_catches_a_calibration_to_the_wrong_m(mechanism, loss):
    unit = _unit()                                   # m = 2 on S = 3 steps of K = 2 keys
    mis = _driver(_unit(max_contributions_per_step=1), RHO, mechanism=mechanism)
    assert loss(mis, _pair(mis, unit)) > 0.5 * 1.3


def test_auto_runs_a_participation_counter_and_reports_its_exact_noise():
    unit = _unit(max_steps_per_unit=HORIZON, max_contributions_per_step=1)
    driver = _driver(unit, RHO)
    assert driver.mechanism_name == 'per_cell/summed/discrete_gaussian'
    counter = driver.counter(1)
    assert driver.noise_stddev(HORIZON - 1) == pytest.approx(
        math.sqrt(HORIZON * counter.step_noise.variance()), rel=1e-12)
