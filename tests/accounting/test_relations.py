"""One neighbouring relation per accountant (issue 10): add/remove and swap-one costs never
compose; the one explicit conversion is add/remove ⇒ swap-one by group privacy."""

import math

import pytest

from beam_dp.accounting import ADD_REMOVE
from beam_dp.accounting import SWAP_ONE
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import compose_parallel
from beam_dp.accounting import compose_sequential
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import BinaryTreeCounter
from beam_dp.mechanisms import PMWG


def test_costs_carry_a_relation():
    assert PrivacyCost(epsilon=1).relation == ADD_REMOVE
    assert 'swap_one' in str(PrivacyCost(epsilon=1, relation=SWAP_ONE))
    with pytest.raises(InvalidParamsError, match="relation must be one of"):
        PrivacyCost(epsilon=1, relation='bounded')
    swap = PrivacyCost(epsilon=1, relation=SWAP_ONE)
    assert (swap + swap).relation == SWAP_ONE and (swap + PrivacyCost()).relation == SWAP_ONE
    assert swap.scale(3).relation == SWAP_ONE
    with pytest.raises(InvalidParamsError, match='different neighbouring relations'):
        _ = swap + PrivacyCost(epsilon=1)
    with pytest.raises(InvalidParamsError, match='as_swap_one'):
        compose_parallel([swap, PrivacyCost(epsilon=1)])
    with pytest.raises(InvalidParamsError, match='add_remove and swap_one'):
        compose_sequential([swap, PrivacyCost(rho=0.1)], 1e-6)


def test_the_documented_conversion():
    assert PrivacyCost(epsilon=0.5).as_swap_one() == PrivacyCost(epsilon=1.0, relation=SWAP_ONE)
    assert PrivacyCost(rho=0.1).as_swap_one() == PrivacyCost(rho=0.4, relation=SWAP_ONE)
    approx = PrivacyCost(epsilon=0.5, delta=1e-7).as_swap_one()
    assert approx.epsilon == 1.0 and approx.delta == pytest.approx((1 + math.exp(0.5)) * 1e-7)
    swap = PrivacyCost(epsilon=1, relation=SWAP_ONE)
    assert swap.as_swap_one() is swap


def test_mechanisms_declare_their_relation():
    assert PMWG(epsilon=1.0, alpha=0.1, n=1000, domain_size=64).privacy_cost().relation == SWAP_ONE
    assert BinaryTreeCounter(horizon=8, epsilon=1.0).privacy_cost().relation == ADD_REMOVE


def test_one_accountant_refuses_mixed_relations():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=10, delta=1e-6))
    accountant.spend('zero', PrivacyCost())                # a free step fixes no relation
    assert accountant.relation is None
    accountant.spend('ContinualCountPerKey', BinaryTreeCounter(horizon=8, epsilon=1).privacy_cost())
    pmwg = PMWG(epsilon=1.0, alpha=0.1, n=1000, domain_size=64).privacy_cost()
    with pytest.raises(InvalidParamsError, match='PMWGQueries declares a swap_one cost .* '
                       'composes add_remove costs .*ContinualCountPerKey'):
        accountant.spend('PMWGQueries', pmwg)
    with pytest.raises(InvalidParamsError, match='as_swap_one'):
        accountant.fits(pmwg)
    with pytest.raises(InvalidParamsError):
        accountant.check([('a', PrivacyCost(epsilon=1)), ('b', pmwg)])
    assert [e.label for e in accountant.ledger] == ['zero', 'ContinualCountPerKey']

    swap = BudgetAccountant(PrivacyBudget(epsilon=10), relation=SWAP_ONE)
    with pytest.raises(InvalidParamsError, match='set by its constructor'):
        swap.spend('counts', PrivacyCost(epsilon=1))
    swap.spend('counts as swap-one', PrivacyCost(epsilon=1).as_swap_one())
    swap.spend('PMWGQueries', PrivacyCost(epsilon=1, relation=SWAP_ONE))
    assert swap.spent().epsilon == pytest.approx(3.0)
    with pytest.raises(InvalidParamsError, match='relation must be one of'):
        BudgetAccountant(PrivacyBudget(epsilon=1), relation='add-remove')
