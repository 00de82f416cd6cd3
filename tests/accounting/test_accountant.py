"""Accounting: budgets, costs, conversions, composition and the construction-time check."""

import contextlib
import math

import pytest

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import basel_weight
from beam_dp.accounting import compose_parallel
from beam_dp.accounting import compose_sequential
from beam_dp.accounting import epsilon_from_rho
from beam_dp.accounting import epsilon_from_rho_simple
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.accounting import series_weight
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError

ok = contextlib.nullcontext


@pytest.mark.parametrize('kwargs, expectation', [
    ({'epsilon': 1.0}, ok()),
    ({'epsilon': 1.0, 'delta': 1e-6}, ok()),
    ({'rho': 0.5}, ok()),
    ({'epsilon': 0}, pytest.raises(InvalidParamsError, match='epsilon must be positive, got 0')),
    ({'epsilon': -1}, pytest.raises(InvalidParamsError, match='epsilon must be positive')),
    ({'epsilon': float('inf')}, pytest.raises(InvalidParamsError, match='epsilon must be finite')),
    ({'epsilon': float('nan')}, pytest.raises(InvalidParamsError, match='epsilon must not be NaN')),
    ({'epsilon': 1.0, 'delta': 1.0}, pytest.raises(InvalidParamsError, match=r'delta must be in \[0, 1\)')),
    ({'epsilon': 1.0, 'delta': -0.1}, pytest.raises(InvalidParamsError, match='delta must be in')),
    ({}, pytest.raises(InvalidParamsError, match='exactly one of epsilon or rho')),
    ({'epsilon': 1.0, 'rho': 1.0}, pytest.raises(InvalidParamsError, match='exactly one')),
    ({'rho': 0.5, 'delta': 1e-6}, pytest.raises(InvalidParamsError, match='delta must be 0')),
    ({'epsilon': '1'}, pytest.raises(InvalidParamsError, match='must be a real number')),
])
def test_budget_validation(kwargs, expectation):
    with expectation:
        PrivacyBudget(**kwargs)


def test_budget_is_frozen_and_splits():
    b = PrivacyBudget(epsilon=1.0, delta=1e-6)
    with pytest.raises(Exception):
        b.epsilon = 2.0
    x, y = b.split(0.25, 0.75)
    assert x.epsilon == 0.25 and y.delta == pytest.approx(0.75e-6)
    (z,) = PrivacyBudget(rho=1.0).split(0.5)
    assert z.rho == 0.5
    with pytest.raises(InvalidParamsError, match='sum to at most 1'):
        b.split(0.6, 0.6)


def test_cost_validation_and_arithmetic():
    with pytest.raises(InvalidParamsError, match='either'):
        PrivacyCost(epsilon=1.0, rho=0.1)
    assert (PrivacyCost(epsilon=0.5) + PrivacyCost(epsilon=0.25)).epsilon == 0.75
    assert (PrivacyCost(rho=0.1) + PrivacyCost(epsilon=1.0)).rho == pytest.approx(0.6)
    assert PrivacyCost(epsilon=2.0).to_rho() == 2.0
    with pytest.raises(InvalidParamsError, match='no zCDP equivalent'):
        PrivacyCost(epsilon=1.0, delta=1e-5).to_rho()


@pytest.mark.parametrize('rho', [1e-4, 0.01, 0.1, 1.0, 10.0])
@pytest.mark.parametrize('delta', [1e-12, 1e-6, 1e-3, 0.1])
def test_zcdp_conversion_tight_is_never_worse_and_inverts(rho, delta):
    tight = epsilon_from_rho(rho, delta)
    assert 0 <= tight <= epsilon_from_rho_simple(rho, delta) + 1e-12
    if tight == 0:   # (0, δ)-DP already: nothing to invert.
        return
    assert rho_for_epsilon_delta(tight, delta) == pytest.approx(rho, rel=1e-6)


def test_zcdp_conversion_is_monotone():
    eps = [epsilon_from_rho(r, 1e-6) for r in (0.01, 0.02, 0.05, 0.1, 0.5)]
    assert eps == sorted(eps)
    assert epsilon_from_rho(0.1, 1e-9) > epsilon_from_rho(0.1, 1e-3)


def test_zcdp_conversion_known_value():
    # CKS 2020 Cor. 13 at ρ = 0.5, δ = 1e-6: about 5.22 (BS16 Prop. 1.3 gives 5.76).
    assert epsilon_from_rho(0.5, 1e-6) == pytest.approx(5.2215, abs=1e-3)
    assert epsilon_from_rho_simple(0.5, 1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)))


def test_basel_series_sums_to_one_and_never_overspends():
    partial = sum(basel_weight(j) for j in range(1, 100001))
    assert 0.99999 < partial < 1.0
    assert sum(series_weight(j, 1.5) for j in range(1, 200001)) < 1.0
    assert series_weight(1, 3.0) == pytest.approx(1 / 1.2020569, rel=1e-6)
    with pytest.raises(ValueError):
        basel_weight(0)


def test_accountant_sequential_and_refusal_before_data():
    acc = BudgetAccountant(PrivacyBudget(epsilon=1.0))
    acc.spend('a', PrivacyCost(epsilon=0.6))
    assert acc.fits(PrivacyCost(epsilon=0.4))
    with pytest.raises(BudgetExceededError, match=r"^'b' asks for ε=0.5 but the accountant has "
                       r"ε=0.4 left of ε=1 \(spent: 'a' ε=0.6\)\."):
        acc.spend('b', PrivacyCost(epsilon=0.5))
    assert [e.label for e in acc.ledger] == ['a']   # A refused spend is not recorded.
    acc.spend('c', PrivacyCost(epsilon=0.4))
    assert acc.spent().epsilon == pytest.approx(1.0)


def test_refusal_reads_naturally_and_names_the_owner():
    acc = BudgetAccountant(PrivacyBudget(epsilon=0.5))
    with pytest.raises(BudgetExceededError, match=r"^ContinualCountPerKey 'X' asks for ε=1 but the "
                       r"accountant has ε=0.5 left of ε=0.5 \(spent: nothing yet\)\."):
        acc.check([('X', PrivacyCost(epsilon=1.0))], owner='ContinualCountPerKey')
    # and says where a YAML / pipeline-option budget is set (a new user's question)
    with pytest.raises(BudgetExceededError, match=r"a larger one \(a pipeline budget: the "
                       r"beam_dp_epsilon / beam_dp_delta / beam_dp_rho pipeline option"):
        acc.check([('X', PrivacyCost(epsilon=1.0))], owner='ContinualCountPerKey')
    acc = BudgetAccountant(PrivacyBudget(rho=0.5))
    acc.spend('A', PrivacyCost(rho=0.3))
    with pytest.raises(BudgetExceededError, match=r"^'B' asks for ρ=0.5 but the accountant has "
                       r"ρ=0.2 left of ρ=0.5 \(spent: 'A' ρ=0.3\)"):
        acc.spend_all([('B', PrivacyCost(rho=0.5))])
    with pytest.raises(BudgetExceededError, match=r"'C' asks for ε=0.1, δ=1e-07, but a zCDP "
                       r"budget \(ρ=0.5\) cannot pay for delta > 0"):
        acc.spend('C', PrivacyCost(epsilon=0.1, delta=1e-7))


def test_accountant_zcdp_budget():
    acc = BudgetAccountant(PrivacyBudget(rho=0.5))
    acc.spend('pure', PrivacyCost(epsilon=0.6))      # 0.18 as zCDP
    acc.spend('gauss', PrivacyCost(rho=0.3))
    assert acc.spent().rho == pytest.approx(0.48)
    with pytest.raises(BudgetExceededError, match='delta > 0'):
        acc.spend('approx', PrivacyCost(epsilon=0.01, delta=1e-9))
    with pytest.raises(BudgetExceededError):
        acc.spend('more', PrivacyCost(rho=0.05))


def test_accountant_mixed_zcdp_in_approx_budget():
    acc = BudgetAccountant(PrivacyBudget(epsilon=1.0, delta=1e-6))
    rho = rho_for_epsilon_delta(1.0, 1e-6)
    acc.spend('g', PrivacyCost(rho=rho * 0.99))
    with pytest.raises(BudgetExceededError):
        acc.spend('h', PrivacyCost(rho=rho * 0.02))
    pure_only = BudgetAccountant(PrivacyBudget(epsilon=1.0))
    with pytest.raises(BudgetExceededError):
        pure_only.spend('g', PrivacyCost(rho=1e-6))   # zCDP needs δ > 0.


def test_parallel_composition_is_max():
    costs = [PrivacyCost(epsilon=0.3), PrivacyCost(epsilon=0.5, delta=1e-7)]
    assert compose_parallel(costs) == PrivacyCost(epsilon=0.5, delta=1e-7)
    acc = BudgetAccountant(PrivacyBudget(epsilon=1.0, delta=1e-6))
    acc.spend_parallel('per-window', [PrivacyCost(epsilon=1.0)] * 50)
    assert acc.spent().epsilon == pytest.approx(1.0)


def test_sequential_composition_picks_the_better_route():
    eps, delta = compose_sequential([PrivacyCost(epsilon=0.1)] * 100, delta=1e-6)
    assert eps < 10.0 and delta == 1e-6       # advanced (zCDP) route beats 100 × 0.1.
    eps, delta = compose_sequential([PrivacyCost(epsilon=0.5)] * 2, delta=1e-6)
    assert eps == pytest.approx(1.0) and delta == 0.0
