"""Exact DP audit of the one-shot final release (``final_share``) through the keyed driver at
user level: for neighbouring streams that differ by one unit's records, bounded as ``UserLevel``
bounds them (≤ K keys, ≤ m records per key and step, ≤ S steps per key, ≤ C in all, values
anywhere in the bounds), the change of the released totals costs the one-shot's noise at most
its declared share — pure ε: Σ|Δ total| / b; ρ-zCDP: Σ Δ total² / 2σ² — and the worst unit
reaches it (the calibration is not loose); a one-shot calibrated to half the sensitivity is
caught. The continual counter's own audits are the counters' (tests/mechanisms,
test_participation_audit.py); the combination is post-processing."""

import dataclasses

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.noise import as_rational_up
from beam_dp.privacy_unit import UserLevel

T = 50
KEYS = [f'k{i}' for i in range(6)]


def _driver(metric, budget, C=None):
    unit = UserLevel(unit_fn=len, max_keys_per_unit=2, max_contributions_per_step=3,
                     max_steps_per_unit=4, max_total_contributions=C)
    kw = dict(lower=-2.0, upper=3.0, grid_bits=2) if metric in ('sum', 'mean',
                                                                 'variance') else {}
    return KeyedReleaseDriver(metric=metric, budget=budget, privacy_unit=unit,
                              clock=StepClock(0, 1, last_step=T - 1),
                              layout=KeyLayout(KEYS, 1), final_share=0.6, **kw)


def _unit_total_change(drv, gen, extreme):
    """The change of every (key, coordinate) total by one unit's bounded records."""
    unit = drv.privacy_unit
    dim = drv.bins_per_key
    change = np.zeros(len(KEYS) * dim, dtype=np.int64)
    left = unit.max_total_contributions or 10 ** 9
    for key in gen.choice(len(KEYS), unit.max_keys_per_unit, replace=False):
        for _ in range(unit.max_steps_per_unit * unit.max_contributions_per_step):
            if left == 0:
                break
            left -= 1
            value = (drv.upper if gen.random() < 0.9 else drv.lower) if extreme else (
                gen.uniform(drv.lower, drv.upper))
            _, _, _, slot, units = drv.extract(KEYS[key], 0, value, lambda r: r)
            for j, u in enumerate(units if isinstance(units, tuple) else (units,)):
                change[slot + j] += u
    return change


def _loss(one_shot, change):
    noise = one_shot.step_noise
    param = float(as_rational_up(noise.param))
    if noise.kind == 'laplace':
        return np.abs(change).sum() / param
    return (change.astype(float) ** 2).sum() / (2 * param)


def _declared(one_shot):
    cost = one_shot.privacy_cost()
    return cost.rho if cost.is_zcdp else cost.epsilon


@pytest.mark.parametrize('metric', ['count', 'sum', 'mean', 'variance'])
@pytest.mark.parametrize('budget, C', [
    (PrivacyBudget(epsilon=1.0), None),
    (PrivacyBudget(epsilon=1.0), 7),
    (PrivacyBudget(rho=0.5), None),
    (PrivacyBudget(rho=0.5), 7),
], ids=['eps', 'eps_C', 'rho', 'rho_C'])
def test_one_unit_costs_the_one_shot_at_most_its_share(metric, budget, C):
    drv = _driver(metric, budget, C)
    one_shot = drv.final_counter.final
    declared = _declared(one_shot)
    gen = np.random.default_rng(3)
    losses = [_loss(one_shot, _unit_total_change(drv, gen, extreme=i % 2 == 0))
              for i in range(300)]
    assert max(losses) <= declared * (1 + 1e-9)
    if metric in ('count', 'sum'):     # the adversarial unit reaches the bound (tight)
        assert max(losses) >= 0.5 * declared


def test_a_one_shot_calibrated_to_half_the_sensitivity_is_caught():
    drv = _driver('count', PrivacyBudget(epsilon=1.0))
    final = drv.final_counter
    wrong = dataclasses.replace(final.final, l1_sensitivity=final.final.l1_sensitivity / 2,
                                l2_sensitivity=None)
    gen = np.random.default_rng(4)
    losses = [_loss(wrong, _unit_total_change(drv, gen, extreme=True)) for _ in range(50)]
    assert max(losses) > _declared(wrong) * 1.5
