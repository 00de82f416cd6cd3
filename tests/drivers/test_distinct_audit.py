"""DP audit of ``ContinualDistinctCountPerKey`` on neighbouring streams (one unit more/less).

The unit is bounded by the real rule ('BoundPerUnit' with ``distinct_units``: ``UnitUsage``
with ``keep_keys``, first record per (unit, key), ≤ K keys): a worst-case unit that sends many
records to K public keys over many steps (repeats) and to more keys than K. Both streams are
driven through the transform's ``KeyedReleaseDriver`` with the same seed, so the releases differ
only by what the unit's kept records add; from the releases alone the audit recovers that
difference and computes the exact privacy loss of the transcript (Laplace: Σ|Δ|/b ≤ ε; BLT:
the Gaussian loss ≤ ρ, ``tests.drivers.test_keyed_user_level._blt_loss``). A driver calibrated
to one record (what a count of the unit's first records would get at K = 1) fails the same
audit, so it can fail.
"""

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.continual import ContinualCountPerKey
from beam_dp.transforms.distinct import ContinualDistinctCountPerKey
from tests.drivers.test_keyed_user_level import BACKGROUND
from tests.drivers.test_keyed_user_level import HORIZON
from tests.drivers.test_keyed_user_level import KEYS
from tests.drivers.test_keyed_user_level import _blt_loss
from tests.drivers.test_keyed_user_level import _releases

K = 3


def _driver(budget, mechanism='auto', transform=ContinualDistinctCountPerKey, unit=None):
    unit = unit or UserLevel(unit_fn=len, max_keys_per_unit=K, max_contributions_per_step=4,
                             max_steps_per_unit=8)
    return transform(public_keys=list(KEYS), start=0, step=60, end=60 * HORIZON, num_shards=1,
                     budget=budget, privacy_unit=unit, mechanism=mechanism).driver


def _unit_cells(driver):
    """{(key position, step): kept records} of the worst-case unit under the distinct rule."""
    bound = driver.privacy_unit
    usage = UnitUsage.decode(bound, (), keep_keys=True)
    cells = {}
    for step in range(HORIZON):
        for key in ('c', 'a', 'b', 'a', 'c', 'b', 'c'):        # repeats on every step
            if usage.holds(key):
                continue
            reason, _ = usage.offer(key, step)
            if reason is None:
                position = KEYS.index(key)
                cells[(position, step)] = cells.get((position, step), 0) + 1
    return cells


def _pair(driver, cells):
    with_unit = dict(BACKGROUND)
    for cell, n in cells.items():
        with_unit[cell] = with_unit.get(cell, 0) + n
    return _releases(driver, BACKGROUND), _releases(driver, with_unit)


def test_the_unit_moves_each_of_k_keys_once():
    cells = _unit_cells(_driver(PrivacyBudget(epsilon=1.0)))
    assert sorted(cells.values()) == [1] * K and len({k for k, _ in cells}) == K


def test_laplace_loss_is_exactly_epsilon_for_the_worst_case_unit():
    driver = _driver(PrivacyBudget(epsilon=1.0), mechanism='per_step')
    without, with_unit = _pair(driver, _unit_cells(driver))
    increments = np.diff(with_unit - without, axis=0, prepend=0.0)
    scale = driver.counter(len(KEYS)).step_noise.param
    loss = float(np.sum(np.abs(increments))) / scale
    assert 1.0 * (1 - 1e-6) <= loss <= 1.0 * (1 + 1e-9)


def test_blt_loss_is_within_rho():
    driver = _driver(PrivacyBudget(rho=0.5), mechanism='blt')
    assert driver.mechanism_name.startswith('blt/')
    loss = _blt_loss(driver, driver.privacy_unit, pair=_pair(driver, _unit_cells(driver)))
    assert 0.5 * 0.3 <= loss <= 0.5


def test_a_one_record_calibration_fails_the_audit():
    good = _driver(PrivacyBudget(epsilon=1.0), mechanism='per_step')
    cells = _unit_cells(good)
    mis = _driver(PrivacyBudget(epsilon=1.0), mechanism='per_step',
                  transform=ContinualCountPerKey,
                  unit=UserLevel(unit_fn=len, max_keys_per_unit=1, max_contributions_per_step=1,
                                 max_steps_per_unit=1))
    without, with_unit = _pair(mis, cells)
    increments = np.diff(with_unit - without, axis=0, prepend=0.0)
    loss = float(np.sum(np.abs(increments))) / mis.counter(len(KEYS)).step_noise.param
    assert loss == pytest.approx(3.0)           # 3ε spent: caught
