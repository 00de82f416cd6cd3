"""DP audit of ``ContinualDistinctCountPerKey(count='active', output='per_step')`` on
neighbouring streams (one unit more).

The unit is bounded by the real rule (``UnitUsage`` with ``keep_keys`` and ``keep_steps``, as
'BoundContributions' with ``ACTIVE_UNITS`` runs it, the released steps advancing): a worst-case
unit that sends repeated records to more than K keys on every step. Both streams are driven
through the transform's ``KeyedReleaseDriver`` with the same seed, so the per-step releases
differ exactly by the unit's kept cells; the audit computes the privacy loss of the transcript
from the releases alone: Laplace Σ|Δ|/b must be exactly ε (the worst case is tight), Gaussian
Σ Δ²/(2σ²) exactly ρ. The 'new'-units calibration (L1 = K, one step per key) fails the same
audit: it spends S·ε on this unit.
"""

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.distinct import ContinualDistinctCountPerKey
from tests.drivers.test_keyed_user_level import BACKGROUND
from tests.drivers.test_keyed_user_level import HORIZON
from tests.drivers.test_keyed_user_level import KEYS
from tests.drivers.test_keyed_user_level import _releases

K, S = 2, 5


def _driver(budget, count='active'):
    unit = UserLevel(unit_fn=len, max_keys_per_unit=K, max_contributions_per_step=4,
                     max_steps_per_unit=S)
    return ContinualDistinctCountPerKey(
        public_keys=list(KEYS), start=0, step=60, end=60 * HORIZON, num_shards=1,
        budget=budget, privacy_unit=unit, output='per_step', count=count).driver


def _unit_cells():
    """{(key position, step): kept records} of the worst-case unit under the active rule."""
    bound = _driver(PrivacyBudget(epsilon=1.0)).privacy_unit
    record, cells = (), {}
    for step in range(HORIZON):
        usage = UnitUsage.decode(bound, record, step - 1, keep_keys=True, keep_steps=True)
        for key in ('c', 'a', 'b', 'a', 'c', 'b', 'c', 'a'):     # repeats on every step
            if usage.counted(key, step):
                continue
            reason, _ = usage.offer(key, step)
            if reason is None:
                cell = (KEYS.index(key), step)
                cells[cell] = cells.get(cell, 0) + 1
        record = usage.record()
    return cells


def _delta(driver):
    with_unit = dict(BACKGROUND)
    for cell, n in _unit_cells().items():
        with_unit[cell] = with_unit.get(cell, 0) + n
    return _releases(driver, with_unit) - _releases(driver, BACKGROUND)


def test_the_unit_is_active_on_s_steps_of_k_keys_once_each():
    cells = _unit_cells()
    assert sorted(cells.values()) == [1] * (K * S) and len({k for k, _ in cells}) == K


def test_laplace_loss_is_exactly_epsilon_for_the_worst_case_unit():
    driver = _driver(PrivacyBudget(epsilon=1.0))
    delta = _delta(driver)
    assert np.count_nonzero(delta) == K * S
    scale = driver.counter(len(KEYS)).node_noise.param
    loss = float(np.sum(np.abs(delta))) / scale
    assert loss == pytest.approx(1.0, rel=1e-9)


def test_gaussian_loss_is_exactly_rho_for_the_worst_case_unit():
    driver = _driver(PrivacyBudget(rho=0.5))
    delta = _delta(driver)
    sigma2 = driver.counter(len(KEYS)).node_noise.param
    loss = float(np.sum(delta ** 2)) / (2 * sigma2)
    assert loss == pytest.approx(0.5, rel=1e-9)


def test_the_new_units_calibration_fails_the_audit():
    mis = _driver(PrivacyBudget(epsilon=1.0), count='new')
    delta = _delta(mis)
    loss = float(np.sum(np.abs(delta))) / mis.counter(len(KEYS)).node_noise.param
    assert loss == pytest.approx(S * 1.0)            # S·ε spent: caught
