"""DP audit of ``ContinualDistinctCountPerKey(count='active', output=('window', W))`` on
neighbouring streams (one unit more).

The unit is bounded and emitted by the real rule: ``UnitUsage`` with ``keep_keys``,
``keep_steps`` and ``keep_last`` (as 'BoundContributions' with ``ActiveWindow(W)`` runs it, the
released steps advancing) and ``coverage_deltas`` for every kept active step. The worst case
for the membership stream is a unit active on S steps of each of K keys spaced more than W
apart (each step a run of its own: 2S non-zero ±1 per key), sending repeats and more keys than
K on each of its steps. Both streams are driven through the transform's driver with the same
seed, so the releases differ exactly by the unit's stream; the audit computes the privacy loss
of the transcript from the releases alone:

* prefix counter (``mechanism='per_step'``: per-step noise summed): the increments of the
  release difference are the unit's ±1 stream; Σ|Δ|/b must be exactly ε (2·K·S / b);
* prefix counter under BLT (ρ): the Gaussian loss of the factorization is ≤ ρ (measured
  0.054 of 0.5: the calibration bounds |u|, and a run's +1 and −1 largely cancel under C);
* fresh noise per window value (``'auto'`` here): the release differences are the unit's
  window memberships; Σ|Δ|/b must be exactly ε (K·S·W / b).

Miscalibrations fail the same audits: the prefix counter at L1 = K·S (the per-step
calibration, what the design note warns against) spends 2ε; fresh noise per window value at
L1 = K·S spends W·ε.
"""

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.distinct_window import coverage_deltas
from beam_dp.drivers.distinct_window import membership_stream
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.continual import ContinualCountPerKey
from beam_dp.transforms.distinct import ContinualDistinctCountPerKey
from tests.drivers.test_keyed_user_level import BACKGROUND
from tests.drivers.test_keyed_user_level import HORIZON
from tests.drivers.test_keyed_user_level import KEYS
from tests.drivers.test_keyed_user_level import _blt_loss
from tests.drivers.test_keyed_user_level import _releases

K, S, W = 2, 3, 3
SPACED = (0, 4, 8, 12)            # active steps more than W apart: every step a run


def _driver(budget, mechanism='auto', w=W):
    unit = UserLevel(unit_fn=len, max_keys_per_unit=K, max_contributions_per_step=4,
                     max_steps_per_unit=S)
    return ContinualDistinctCountPerKey(
        public_keys=list(KEYS), start=0, step=60, end=60 * HORIZON, num_shards=1,
        budget=budget, privacy_unit=unit, output=('window', w), count='active',
        mechanism=mechanism).driver


def _unit_cells(active_steps=SPACED, w=W):
    """{(key position, step): ±1} the worst-case unit's kept records emit (the real rule)."""
    bound = _driver(PrivacyBudget(epsilon=1.0)).privacy_unit.bounding
    record, cells = (), {}
    for step in range(HORIZON):
        usage = UnitUsage.decode(bound, record, step - 1, keep_keys=True, keep_steps=True,
                                 keep_last=True)
        if step in active_steps:
            for key in ('c', 'a', 'b', 'a', 'c', 'b', 'c', 'a'):     # repeats, > K keys
                if usage.counted(key, step):
                    continue
                reason, _ = usage.offer(key, step)
                if reason is None:
                    for at, d in coverage_deltas(usage.active_steps(key), step, w):
                        cell = (KEYS.index(key), at)
                        cells[cell] = cells.get(cell, 0) + d
        record = usage.record()
    return {cell: d for cell, d in cells.items() if d and cell[1] < HORIZON}


def _delta(driver, cells):
    with_unit = dict(BACKGROUND)
    for cell, n in cells.items():
        with_unit[cell] = with_unit.get(cell, 0) + n
    return _releases(driver, with_unit) - _releases(driver, BACKGROUND)


def _pair(driver, cells):
    with_unit = dict(BACKGROUND)
    for cell, n in cells.items():
        with_unit[cell] = with_unit.get(cell, 0) + n
    return _releases(driver, BACKGROUND), _releases(driver, with_unit)


def test_the_worst_case_unit_has_two_s_steps_of_plus_minus_one_per_key():
    cells = _unit_cells()
    assert len({k for k, _ in cells}) == K
    for key in {k for k, _ in cells}:
        stream = sorted((s, d) for (k, s), d in cells.items() if k == key)
        assert stream == membership_stream(SPACED[:S], W)          # S runs: 2S steps
        assert len(stream) == 2 * S
    # a unit active on every step moves its keys' streams far less (one run each)
    dense = _unit_cells(active_steps=range(HORIZON))
    assert len(dense) == 2 * K


def test_prefix_laplace_loss_is_exactly_epsilon_for_the_worst_case_unit():
    driver = _driver(PrivacyBudget(epsilon=1.0), mechanism='per_step')
    assert 'membership_prefix/per_step' in driver.mechanism_name
    increments = np.diff(_delta(driver, _unit_cells()), axis=0, prepend=0.0)
    scale = driver.counter(len(KEYS)).step_noise.param
    assert float(np.sum(np.abs(increments))) == pytest.approx(2 * K * S)
    loss = float(np.sum(np.abs(increments))) / scale
    assert loss == pytest.approx(1.0, rel=1e-9)


def test_prefix_blt_loss_is_within_rho():
    driver = _driver(PrivacyBudget(rho=0.5), mechanism='blt')
    assert 'membership_prefix/blt/' in driver.mechanism_name
    loss = _blt_loss(driver, driver.privacy_unit, pair=_pair(driver, _unit_cells()))
    # measured 0.054: the multi-participation bound takes |u| (a non-negative stream of 2S
    # steps per key), the ±1 runs largely cancel under C: safe, and ~10x loose here
    assert 0.01 <= loss <= 0.5


def test_fresh_per_window_laplace_loss_is_exactly_epsilon_for_the_worst_case_unit():
    driver = _driver(PrivacyBudget(epsilon=1.0))
    assert 'fresh_per_window' in driver.mechanism_name
    delta = _delta(driver, _unit_cells())           # the unit's window memberships, 0/1
    assert set(np.unique(delta)) == {0.0, 1.0} and np.sum(delta) == K * S * W
    loss = float(np.sum(np.abs(delta))) / driver.counter(len(KEYS)).node_noise.param
    assert loss == pytest.approx(1.0, rel=1e-9)


def test_calibrations_to_k_s_fail_the_audit():
    cells = _unit_cells()
    # the prefix counter at the per-step active calibration L1 = K·S: 2ε spent
    mis = ContinualCountPerKey(
        public_keys=list(KEYS), start=0, step=60, end=60 * HORIZON, num_shards=1,
        budget=PrivacyBudget(epsilon=1.0), mechanism='per_step',
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=K,
                               max_steps_per_unit=S)).driver
    assert mis.sensitivity()[0] == K * S
    increments = np.diff(_delta(mis, cells), axis=0, prepend=0.0)
    loss = float(np.sum(np.abs(increments))) / mis.counter(len(KEYS)).step_noise.param
    assert loss == pytest.approx(2.0)
    # fresh noise per window value at L1 = K·S (each membership counted once): W·ε spent
    good = _driver(PrivacyBudget(epsilon=1.0))
    scale = good.counter(len(KEYS)).node_noise.param
    delta = _delta(good, cells)
    loss_mis = float(np.sum(np.abs(delta))) / (scale * (K * S) / (K * S * W))
    assert loss_mis == pytest.approx(W * 1.0)
