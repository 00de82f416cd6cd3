"""BoostQueries with ``noise='gaussian'``: Beam parity with the pure driver (criterion 29 on the
Gaussian path), replay identity, the ledger in ε at δ within the budget, the accountant
recording ρ_G and the refused combinations (bit-identical re-runs with a noise key:
``test_boost_transform.test_noise_key_gives_bit_identical_reruns``)."""

import pytest

from beam_dp import BudgetAccountant
from beam_dp import PrivacyBudget
from beam_dp.accounting import SWAP_ONE
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.errors import InvalidParamsError

from tests.transforms.test_boost_transform import QUERIES
from tests.transforms.test_boost_transform import _reference
from tests.transforms.test_boost_transform import _rows
from tests.transforms.test_boost_transform import _run_batch
from tests.transforms.test_boost_transform import _transform

BUDGET = PrivacyBudget(epsilon=2.0, delta=1e-6)


def _gaussian(**kw):
    return _transform(noise='gaussian', budget=kw.pop('budget', BUDGET), **kw)


def _of(records, kind):
    return sorted(r for r in records if type(r).__name__ == kind)


def test_batch_parity_with_the_pure_driver_on_the_gaussian_path():
    transform = _gaussian()
    got = _run_batch(transform, _rows(), QUERIES)
    ref = _reference(transform, _rows(), QUERIES)
    assert sorted(got['answers']) == _of(ref, 'BoostAnswerRecord')
    assert sorted(got['ledger']) == _of(ref, 'BoostLedgerRow')
    assert {r.purpose for r in got['ledger']} == {'gaussian'}
    q1 = [a for a in got['answers'] if a.query_id == 'q1']
    assert len(q1) == 2 and q1[0].value == q1[1].value and {a.replay for a in q1} == {False, True}
    assert all(r.consumed <= r.capacity * (1 + 1e-9) and r.capacity <= 2.0 * (1 + 1e-9)
               for r in got['ledger'])


def test_rho_budget_and_the_accountant():
    accountant = BudgetAccountant(BUDGET)
    transform = _gaussian(accountant=accountant)
    rho = rho_for_epsilon_delta(2.0, 1e-6)
    assert transform.privacy_costs()[0][1] == PrivacyCost(rho=rho, relation=SWAP_ONE)
    _run_batch(transform, _rows(per_block=50), QUERIES[:2])
    assert [e.cost for e in accountant.ledger] == [PrivacyCost(rho=rho, relation=SWAP_ONE)]
    t = _gaussian(budget=PrivacyBudget(rho=0.3))
    assert t.driver('covid').mechanism.rho_budget == 0.3
    assert t.driver('covid').ledger_delta == 0.0


@pytest.mark.parametrize('kw,word', [
    (dict(noise='gaussian', budget=PrivacyBudget(epsilon=2.0)), 'budget'),
    (dict(noise='laplace', budget=PrivacyBudget(rho=1.0)), 'budget'),
    (dict(noise='uniform'), 'noise'),
    (dict(noise='gaussian', budget=BUDGET, preset='vanilla_pmw'), 'sv_failure')])
def test_refused_combinations(kw, word):
    with pytest.raises(InvalidParamsError, match=f'{word}'):
        _transform(**kw)
