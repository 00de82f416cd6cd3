"""Which counter an (ε, δ > 0) budget runs: the pure counters at ε against the Gaussian ones at
the largest ρ whose zCDP converts to (ε, δ) (CKS 2020), the lower expected RMSE winning; the
cost a Gaussian counter declares is checked as (ε, δ) through the same conversion."""

import dataclasses

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import epsilon_from_rho
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.analysis import expected_error
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.counter_choice import check_cost_fits
from beam_dp.drivers.counter_choice import choose_counter
from beam_dp.drivers.counter_choice import mechanism_name
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.privacy_unit import EventLevel

APPROX = PrivacyBudget(epsilon=1.0, delta=1e-6)
LONG = 2 ** 16
RHO = rho_for_epsilon_delta(1.0, 1e-6)


def _choose(budget, horizon, mechanism='auto'):
    return choose_counter(mechanism, None, budget, horizon, None, 1.0, 1.0, 1)


def test_the_conversion_is_tight_and_within_the_budget():
    assert epsilon_from_rho(RHO, 1e-6) <= 1.0
    assert epsilon_from_rho(RHO * 1.001, 1e-6) > 1.0           # the largest such ρ
    assert 0.02 < RHO < 0.03                                   # CKS beats ρ + 2√(ρ ln 1/δ) (0.0175)


def test_long_horizon_approximate_dp_picks_blt_at_the_converted_rho():
    chosen = _choose(APPROX, LONG)
    assert isinstance(chosen, BLTCounter) and chosen.rho == pytest.approx(RHO, rel=1e-12)
    assert mechanism_name(chosen) == 'blt/4_buffers/discrete_gaussian'
    report = expected_error(APPROX, LONG)
    pure = min(e.rmse for e in report.estimates if e.notion == 'pure')
    assert report.chosen.name == 'blt' and report.chosen.rmse < 0.85 * pure   # 20.2 vs 24.6
    # Its noise is the BLT's at that ρ: σ² = Δ²/(2ρ) (rounded up on the sampler's grid).
    assert float(chosen.sigma2) == pytest.approx(chosen.sensitivity ** 2 / (2 * RHO), rel=1e-9)
    assert chosen.release_variance(LONG) == pytest.approx(
        BLTCounter(rho=RHO, horizon=LONG).release_variance(LONG), rel=1e-12)


def test_short_horizon_approximate_dp_keeps_the_pure_counter():
    chosen = _choose(APPROX, 8)
    assert isinstance(chosen, PerStepCounter) and chosen.epsilon == 1.0
    assert chosen.privacy_cost() == PrivacyCost(epsilon=1.0)


def _empirical_ratio(counter, promised, steps=3, bins=20000, seed=5):
    """Empirical variance of the zero-input release after each step (``bins`` independent bins)
    over the promised closed form."""
    wide = dataclasses.replace(counter, dimension=bins)
    state, rng = wide.init_state(), noise.seeded(seed)
    ratios = []
    for t in range(1, steps + 1):
        out, state = wide.step(state, np.zeros(bins, dtype=np.int64), rng.derive(t))
        ratios.append(float(np.var(np.asarray(out, dtype=float))) / promised.release_variance(t))
    return ratios


@pytest.mark.statistical
def test_release_noise_is_what_the_conversion_promises():
    chosen = _choose(APPROX, LONG)
    promised = BLTCounter(rho=RHO, horizon=LONG)
    # 20000 bins: the variance ratio has sd ≈ 1%; 5% bands pass at the true scale...
    assert all(abs(r - 1) < 0.05 for r in _empirical_ratio(chosen, promised))
    # ...and reject a noise scale 30% off in variance (the same check on a mis-scaled counter).
    off = BLTCounter(rho=RHO * 1.3, horizon=LONG)
    assert all(abs(r - 1) > 0.15 for r in _empirical_ratio(off, promised))


def _driver(budget, steps=LONG):
    return KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=EventLevel(),
                              layout=KeyLayout.of(['a', 'b'], 1),
                              clock=StepClock(0, 60, last_step=steps - 1))


def test_accountant_checks_the_gaussian_cost_as_epsilon_delta():
    driver = _driver(APPROX)
    cost = driver.release_cost()
    assert cost.is_zcdp and cost.rho == pytest.approx(RHO, rel=1e-12)
    acc = BudgetAccountant(APPROX)
    acc.spend('counts', cost)
    spent = acc.spent()
    assert spent.epsilon <= 1.0 and spent.epsilon == pytest.approx(1.0, abs=1e-6)
    assert spent.delta == 1e-6
    # Anything already spent, or a smaller δ, leaves no room for the converted cost.
    busy = BudgetAccountant(APPROX)
    busy.spend('other', PrivacyCost(epsilon=0.01))
    with pytest.raises(BudgetExceededError, match='asks for'):
        busy.spend('counts', cost)
    with pytest.raises(BudgetExceededError):
        BudgetAccountant(PrivacyBudget(epsilon=1.0, delta=1e-7)).check([('counts', cost)])
    with pytest.raises(BudgetExceededError):
        BudgetAccountant(PrivacyBudget(epsilon=1.0)).check([('counts', cost)])


def test_cost_check_refuses_a_rho_beyond_the_conversion():
    check_cost_fits(PrivacyCost(rho=RHO), APPROX)
    with pytest.raises(InvalidParamsError, match='more than'):
        check_cost_fits(PrivacyCost(rho=RHO * 1.01), APPROX)
    with pytest.raises(InvalidParamsError, match='more than'):
        check_cost_fits(PrivacyCost(rho=RHO), PrivacyBudget(epsilon=1.0))
    with pytest.raises(InvalidParamsError, match='more than'):
        check_cost_fits(PrivacyCost(epsilon=1.1), APPROX)
    check_cost_fits(PrivacyCost(epsilon=1.0), PrivacyBudget(rho=0.5))


def test_explicit_blt_under_approximate_dp_and_refused_under_pure():
    forced = _choose(APPROX, 64, mechanism='blt')
    assert isinstance(forced, BLTCounter) and forced.rho == pytest.approx(RHO, rel=1e-12)
    with pytest.raises(InvalidParamsError, match='zCDP budget'):
        _choose(PrivacyBudget(epsilon=1.0), 64, mechanism='blt')
    # A pure counter forced under (ε, δ > 0) would not spend δ, while every release said δ and
    # the accountant recorded δ = 0 (issue 28): refused, naming what to write.
    for mechanism in ('kary_tree', 'binary_tree', 'balanced_tree', 'per_step', 'infinite_tree'):
        with pytest.raises(InvalidParamsError, match=r'pure epsilon-DP and would not spend '
                                                     r'delta=1e-06.*PrivacyBudget\(epsilon=1\)'):
            _choose(APPROX, 64, mechanism=mechanism)
    with pytest.raises(InvalidParamsError, match='would not spend delta'):
        choose_counter('auto', 'textbook', APPROX, 64, 64, 1.0, 1.0, 1)
    tree = _choose(PrivacyBudget(epsilon=1.0), 64, mechanism='kary_tree')
    assert tree.epsilon == 1.0 and tree.rho is None


def test_every_release_reports_what_the_accountant_records():
    """'auto' under (ε, δ) may pick a pure counter (better at these bounds): the releases then
    say δ = 0, the cost the accountant records, not the budget's δ."""
    from beam_dp import ContinualCountPerKey
    acc = BudgetAccountant(APPROX)
    t = ContinualCountPerKey(public_keys=['a'], start=0, step=60, end=60 * 8, budget=APPROX,
                             accountant=acc, label='Short')
    t.spend_budget()
    meta, [entry] = t.driver.release_metadata(), acc.ledger
    if entry.cost.is_zcdp:
        assert (meta['delta'], meta['rho']) == (APPROX.delta, pytest.approx(entry.cost.rho))
    else:
        assert (meta['epsilon'], meta['delta']) == (entry.cost.epsilon, entry.cost.delta)
        assert meta['delta'] == 0.0


def test_transform_spends_the_gaussian_cost_on_an_epsilon_delta_accountant():
    """ContinualCountPerKey with an (ε = 1, δ = 1e-6) budget over 2^16 hourly steps: BLT runs,
    the ledger holds its ρ, the accountant's total is (≤ 1, 1e-6); an accountant with anything
    already spent refuses at construction."""
    from beam_dp import ContinualCountPerKey
    kwargs = dict(public_keys=['a', 'b'], start=0, step=3600, end=LONG * 3600, budget=APPROX)
    acc = BudgetAccountant(APPROX)
    t = ContinualCountPerKey(accountant=acc, label='Counts', **kwargs)
    assert t.driver.mechanism_name == 'blt/4_buffers/discrete_gaussian'
    t.spend_budget()
    assert [e.label for e in acc.ledger] == ['Counts']
    assert acc.ledger[0].cost.rho == pytest.approx(RHO, rel=1e-12)
    assert acc.spent().epsilon <= 1.0 and acc.spent().delta == 1e-6
    meta = t.driver.release_metadata()          # what every Release says of its privacy
    assert (meta['epsilon'], meta['delta']) == (1.0, 1e-6)
    assert meta['rho'] == pytest.approx(RHO, rel=1e-12)
    busy = BudgetAccountant(APPROX)
    busy.spend('earlier', PrivacyCost(epsilon=0.05))
    with pytest.raises(BudgetExceededError, match='ContinualCountPerKey'):
        ContinualCountPerKey(accountant=busy, **kwargs)


@pytest.mark.parametrize('private', [False, True])
@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), APPROX, PrivacyBudget(rho=0.5)])
def test_release_metadata_for_every_notion_with_public_and_private_keys(budget, private):
    """Every Release's privacy fields can be built (the DoFns build them at setup: an error
    there would fail the job on every worker) and say what is spent: with an (ε, δ) budget and
    BLT, the budget's (ε, δ) (plus the selection's with private keys) and BLT's ρ."""
    from beam_dp import ContinualCountPerKey
    from beam_dp.drivers.private_keys import PrivateKeys
    selection = PrivacyBudget(epsilon=0.5, delta=1e-7)
    keys = dict(keys=PrivateKeys(budget=selection)) if private else dict(public_keys=['a'])
    t = ContinualCountPerKey(start=0, step=3600, end=LONG * 3600, budget=budget, **keys)
    meta = t.driver.release_metadata()
    sel_eps, sel_delta = (selection.epsilon, selection.delta) if private else (0.0, 0.0)
    if budget.is_zcdp:
        assert meta['rho'] == 0.5 and meta['epsilon'] == sel_eps
    elif budget.delta:
        assert meta['mechanism'].startswith('blt/')
        assert meta['rho'] == pytest.approx(RHO, rel=1e-12)
        assert meta['epsilon'] == pytest.approx(1.0 + sel_eps)
        assert meta['delta'] == pytest.approx(1e-6 + sel_delta)
    else:
        assert meta['rho'] == 0.0 and meta['epsilon'] == pytest.approx(1.0 + sel_eps)
        assert meta['delta'] == pytest.approx(sel_delta)


def test_the_sparse_family_refuses_a_delta_it_would_not_spend():
    """SparseContinualCountPerKey ignored δ silently (issue 28)."""
    from beam_dp import DynamicCountPerKey
    from beam_dp import SparseContinualCountPerKey
    for cls in (SparseContinualCountPerKey, DynamicCountPerKey):
        with pytest.raises(InvalidParamsError, match='pure epsilon budget.*delta would not'):
            cls(public_keys=['a'], start=0, step=60, end=600, budget=APPROX)
        cls(public_keys=['a'], start=0, step=60, end=600, budget=PrivacyBudget(epsilon=1.0))
