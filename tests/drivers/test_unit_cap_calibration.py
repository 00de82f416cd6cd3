"""The calibration of ``UserLevel(max_units=N)``: a neighbouring change moves the kept records
of up to two units (the added unit and the one it displaces, ``UserLevel``'s docstring), so
every calibration doubles: L1 and L2 sensitivities, the multi-participation pattern's per-step
and total bounds (BLT), and the keys the private key selection is calibrated to (2K); with
``max_units=None`` nothing changes. Then the audit of ``test_keyed_user_level`` on the
two-unit change (u added on some keys and steps, v displaced from others): its privacy loss is
within the budget at the doubled calibration and over it at the one-unit calibration."""

import itertools

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.privacy_unit import UserLevel
from tests.drivers.test_keyed_user_level import BACKGROUND
from tests.drivers.test_keyed_user_level import HORIZON
from tests.drivers.test_keyed_user_level import KEYS
from tests.drivers.test_keyed_user_level import _blt_loss
from tests.drivers.test_keyed_user_level import _driver
from tests.drivers.test_keyed_user_level import _releases
from tests.drivers.test_keyed_user_level import _unit
from tests.drivers.test_keyed_user_level import _worst_case

EPS = PrivacyBudget(epsilon=1.0)
RHO = PrivacyBudget(rho=0.5)


@pytest.mark.parametrize('k, m, s, c, b', list(itertools.product(
    [1, 3], [1, 2], [1, 4], [None, 3, 100], [1, 7, 1024])))
def test_sensitivities_participation_and_keys_double_with_the_cap(k, m, s, c, b):
    bounds = dict(max_keys_per_unit=k, max_contributions_per_step=m, max_steps_per_unit=s,
                  max_total_contributions=c)
    one, capped = UserLevel(len, **bounds), UserLevel(len, max_units=1000, **bounds)
    assert UserLevel(len, max_units=None, **bounds) == one
    assert one.neighbour_units == 1 and capped.neighbour_units == 2
    l1, l2 = one.sensitivity(b)
    assert capped.sensitivity(b) == (2 * l1, 2 * l2)
    assert capped.total_bound(b) == 2 * one.total_bound(b)
    assert (one.max_keys, capped.max_keys) == (k, 2 * k)
    p1, p2 = one.participation(b), capped.participation(b)
    assert (p2.max_groups, p2.max_steps) == (p1.max_groups, p1.max_steps) == (k, s)
    assert (p2.step_bound, p2.total_bound) == (2 * p1.step_bound, 2 * p1.total_bound)
    theta, w = np.array([0.9, 0.5]), np.array([0.2, 0.1])      # a BLT's (θ, w)
    for horizon in (None, 1, 16):
        assert p2.l2_factor(theta, w, horizon) == 2 * p1.l2_factor(theta, w, horizon)


def _capped(**kwargs):
    return _unit(max_units=640, **kwargs)


def _keyed(unit, budget, mechanism, metric, private=False):
    place = (dict(private_keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6)))
             if private else dict(layout=KeyLayout.of(list(KEYS), 1)))
    extra = {'sum': dict(lower=-1.0, upper=2.0, grid_bits=4),
             'histogram': dict(bins=('x', 'y'))}.get(metric, {})
    return KeyedReleaseDriver(metric=metric, budget=budget, privacy_unit=unit, mechanism=mechanism,
                              clock=StepClock(0, 60_000_000, last_step=HORIZON - 1), **place,
                              **extra)


def _node_noise(counter):
    """The noise parameters a counter draws from (Laplace scale, Gaussian σ²), or None (BLT)."""
    if hasattr(counter, 'step_noise'):
        return [counter.step_noise]
    if hasattr(counter, 'level_noise'):
        return list(counter.level_noise)
    if hasattr(counter, 'block_noise'):
        return [counter.block_noise()] + [counter.tree_noise(b) for b in range(1, 5)]
    if hasattr(counter, 'node_noise'):
        return [counter.node_noise]
    return None


@pytest.mark.parametrize('metric', ['count', 'sum', 'histogram'])
@pytest.mark.parametrize('budget, mechanism', [
    (EPS, 'per_step'), (EPS, 'kary_tree'), (EPS, 'balanced_tree'), (EPS, 'binary_tree'),
    (EPS, 'infinite_tree'), (RHO, 'blt'), (RHO, 'auto'),
    (PrivacyBudget(epsilon=1.0, delta=1e-6), 'auto')])
@pytest.mark.parametrize('private', [False, True])
def test_noise_scale_is_exactly_twice_with_the_cap(metric, budget, mechanism, private):
    """The same counter with twice the sensitivities, so twice the noise scale (Laplace
    scale ×2, Gaussian σ ×2); the same budget; without the cap nothing changes."""
    plain = _keyed(_unit(), budget, mechanism, metric, private)
    capped = _keyed(_capped(), budget, mechanism, metric, private)
    assert _keyed(_unit(max_units=None), budget, mechanism, metric, private).sensitivity() == \
        plain.sensitivity()
    assert capped.mechanism_name == plain.mechanism_name
    l1, l2 = plain.sensitivity()
    assert capped.sensitivity() == (2 * l1, 2 * l2)
    one, two = plain.counter(1), capped.counter(1)
    assert (one.l1_sensitivity, two.l1_sensitivity) == (l1, 2 * l1)
    if one.l2_sensitivity is not None:                   # a pure counter may not take L2
        assert (one.l2_sensitivity, two.l2_sensitivity) == (l2, 2 * l2)
    nodes = _node_noise(one)
    if nodes is None:                       # BLT: discrete Gaussian, sd exactly ×2
        assert two.effective_l2 == 2 * one.effective_l2
        for steps in (1, 2, 7, HORIZON):
            assert capped.counter_noise_stddev(steps) == pytest.approx(
                2 * plain.counter_noise_stddev(steps), rel=1e-12)
    else:
        for a, b in zip(nodes, _node_noise(two)):
            assert a.kind == b.kind
            assert b.param == (2 * a.param if a.kind == 'laplace' else 4 * a.param)
    if private:       # private keys: the selection is calibrated to 2K keys per change
        assert plain.private_shard.selection.max_partitions == 2
        assert capped.private_shard.selection.max_partitions == 4
    assert plain.privacy_costs('T') == capped.privacy_costs('T')   # the budget is unchanged


def _two_unit_neighbours(driver, unit):
    """Releases without u (v admitted) and with u (v displaced): u is the worst case on keys
    0, 1 from step 0, v the worst case on keys 2, 0 from step 8 (disjoint cells)."""
    v = {((key + 2) % len(KEYS), step + 8): n for (key, step), n in _worst_case(unit).items()}
    with_v, with_u = dict(BACKGROUND), dict(BACKGROUND)
    for counts, extra in ((with_v, v), (with_u, _worst_case(unit))):
        for cell, n in extra.items():
            counts[cell] = counts.get(cell, 0) + n
    return _releases(driver, with_v), _releases(driver, with_u)


@pytest.mark.parametrize('total', [None, 5])
def test_pure_loss_of_a_displacing_unit_is_exactly_epsilon_with_the_cap(total):
    """Laplace loss Σ|Δ|/b of the two-unit change: ε exactly at the capped calibration, 2ε at
    the one-unit calibration (which the audit therefore catches)."""
    unit = _capped(max_total_contributions=total)
    losses = []
    for calibrated in (unit, _unit(max_total_contributions=total)):
        driver = _driver(calibrated, EPS, mechanism='per_step')
        without, with_u = _two_unit_neighbours(driver, unit)
        increments = np.diff(with_u - without, axis=0, prepend=0.0)
        losses.append(float(np.sum(np.abs(increments))) / driver.counter(1).step_noise.param)
    assert losses[0] == pytest.approx(1.0, rel=1e-6) and losses[0] <= 1.0 * (1 + 1e-9)
    assert losses[1] == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize('total', [None, 8])
def test_blt_loss_of_a_displacing_unit_is_within_rho_with_the_cap_only(total):
    unit = _capped(max_total_contributions=total)
    capped = _driver(unit, RHO, mechanism='blt')
    assert capped.mechanism_name == 'blt/4_buffers+multi_participation/discrete_gaussian'
    assert _blt_loss(capped, unit, _two_unit_neighbours(capped, unit)) <= 0.5
    one = _driver(_unit(max_total_contributions=total), RHO, mechanism='blt')
    assert _blt_loss(one, unit, _two_unit_neighbours(one, unit)) > 0.5 * 1.1


def test_describe_names_the_cap():
    assert 'N=640 units, calibrated to 2 units per change' in _capped().describe()
    assert _unit(max_units=None).describe() == _unit().describe()


@pytest.mark.parametrize('total', [None, 8])
@pytest.mark.parametrize('mechanism', ['per_cell', 'banded'])
def test_participation_counters_loss_of_a_displacing_unit_is_within_rho_with_the_cap(
        mechanism, total):
    """Review h2: the per-cell and banded calibrations double exactly with the cap (their
    bounds are positively homogeneous in m·B and C·B), and that covers the two-unit change."""
    from tests.drivers.test_participation_audit import _banded_loss
    from tests.drivers.test_participation_audit import _per_cell_loss
    loss = _per_cell_loss if mechanism == 'per_cell' else _banded_loss
    unit = _capped(max_total_contributions=total)
    capped = _driver(unit, RHO, mechanism=mechanism)
    assert capped.mechanism_name.startswith(mechanism)
    assert loss(capped, _two_unit_neighbours(capped, unit)) <= 0.5 * (1 + 1e-9)
    one = _driver(_unit(max_total_contributions=total), RHO, mechanism=mechanism)
    assert loss(one, _two_unit_neighbours(one, unit)) > 0.5 * 1.1
