"""Exact DP audit of the per-step and window outputs through the keyed driver at user level
(issue 25.4): for neighbouring streams that differ by one unit's records, bounded as
``UserLevel`` bounds them (≤ K keys, ≤ m records per key and step, ≤ S steps per key, ≤ C in
all, any values in the sum's bounds), the node mechanism the driver runs (``driver.counter``)
has a realised privacy loss ≤ its budget — pure ε (Σ |node sum change| / scale) and ρ-zCDP
(Σ change² / 2σ²) — and the worst adversarial unit reaches most of it; a driver calibrated to a
bound one step too small is caught."""

import dataclasses

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.noise import as_rational_up
from beam_dp.privacy_unit import UserLevel

STEPS = 120
KEYS = [f'k{i}' for i in range(5)]


def _driver(output, budget, metric='count', C=None, S=6, K=2, m=2):
    unit = UserLevel(unit_fn=len, max_keys_per_unit=K, max_contributions_per_step=m,
                     max_steps_per_unit=S, max_total_contributions=C)
    kw = dict(lower=-1.0, upper=2.0, grid_bits=0) if metric == 'sum' else {}
    return KeyedReleaseDriver(metric=metric, budget=budget, privacy_unit=unit,
                              clock=StepClock(0, 1), layout=KeyLayout(KEYS, 1), output=output,
                              **kw)


def _unit_change(driver, gen, concentrated):
    """(STEPS, keys) integer change of one unit within the driver's bounds (grid units)."""
    unit = driver.privacy_unit
    bound = driver.value_bound_units
    change = np.zeros((STEPS, len(KEYS)), dtype=np.int64)
    keys = gen.choice(len(KEYS), unit.max_keys_per_unit, replace=False)
    left = unit.max_total_contributions or 10 ** 9
    for key in keys:
        if concentrated:             # S consecutive steps: the most nodes in common
            start = int(gen.integers(STEPS - unit.max_steps_per_unit))
            steps = range(start, start + unit.max_steps_per_unit)
        else:
            steps = gen.choice(STEPS, unit.max_steps_per_unit, replace=False)
        for s in steps:
            n = min(unit.max_contributions_per_step, left)
            left -= n
            change[s, key] += n * bound * (1 if gen.random() < 0.8 else -1)
    return change


def _loss(counter, change):
    """Realised loss of the node mechanism: ε for Laplace, ρ for Gaussian."""
    total = 0.0
    param = float(as_rational_up(counter.node_noise.param))
    for level in range(counter.levels):
        span = counter.arity ** level
        nodes = change.shape[0] // span
        sums = change[:nodes * span].reshape(nodes, span, -1).sum(axis=1)
        if counter.node_noise.kind == 'laplace':
            total += np.abs(sums).sum() / param
        else:
            total += (sums.astype(float) ** 2).sum() / (2 * param)
    return total


@pytest.mark.parametrize('output', ['per_step', ('window', 7), ('window', 30)])
@pytest.mark.parametrize('budget, C, metric', [
    (PrivacyBudget(epsilon=1.0), None, 'count'),
    (PrivacyBudget(epsilon=0.5), 9, 'sum'),
    (PrivacyBudget(rho=0.5), None, 'count'),
    (PrivacyBudget(rho=0.2), 9, 'sum'),
])
def test_exact_audit_of_one_unit_at_user_level(output, budget, C, metric):
    driver = _driver(output, budget, metric, C=C)
    counter = driver.counter(len(KEYS))
    gen = np.random.default_rng(5)
    losses = [_loss(counter, _unit_change(driver, gen, concentrated=i % 2 == 0))
              for i in range(40)]
    cap = budget.epsilon if not budget.is_zcdp else budget.rho
    assert max(losses) <= cap * (1 + 1e-9)
    assert max(losses) > 0.3 * cap


@dataclasses.dataclass(frozen=True)
class _Undercalibrated:
    """A unit that ignores S by one step: the audit must exceed the budget for some unit."""


def test_the_audit_has_power():
    honest = _driver(('window', 7), PrivacyBudget(epsilon=1.0), S=6)
    cheat = _driver(('window', 7), PrivacyBudget(epsilon=1.0), S=12)   # sends 12 steps
    counter = honest.counter(len(KEYS))                                # calibrated for 6
    gen = np.random.default_rng(5)
    worst = max(_loss(counter, _unit_change(cheat, gen, concentrated=False))
                for _ in range(20))
    assert worst > 1.0
