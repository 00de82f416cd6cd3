"""The Boost driver on the Gaussian path: budgets (ρ or (ε, δ)) to the mechanism's fields, the
ledger in ρ or in ε at δ (the accountant's conversion; rows still sum to ``consumed`` and never
exceed the capacity), replay identity at no charge, and bit-identical re-runs with a noise key."""

import numpy as np
import pytest

from beam_dp import PrivacyBudget
from beam_dp import noise
from beam_dp.accounting import epsilon_from_rho
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.boost import budget_fields
from beam_dp.errors import InvalidParamsError
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostLedgerRow
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset

SHAPE = (2, 4)
LEN = 100


def _driver(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), name='tree_pmw_bypass'):
    fields = budget_fields('test', budget, 'gaussian')
    delta = fields.pop('ledger_delta', 0.0)
    mech = preset(name, 8, readiness=Readiness(c0=2, s0=1), **fields)
    return BoostDriver('covid', SHAPE, mech, start_micros=1000, block_micros=LEN,
                       ledger_delta=delta)


def _loaded(driver, blocks=4, rows=3000):
    state = driver.init_state()
    rng = np.random.default_rng(0)
    for b in range(blocks):
        counts = rng.multinomial(rows, [0.05, 0.2, 0.15, 0.1, 0.1, 0.1, 0.2, 0.1])
        state, rejected = driver.add_block_counts(state, b, counts)
        assert rejected == []
    state, _ = driver.seal_until(state, 1000 + blocks * LEN, noise.seeded(0))
    return state


def _q(qid, first, last, subsets=([1], [])):
    return BoostQueryRecord(qid, 'covid', [list(s) for s in subsets], [], first, last, 0)


def _drive(driver, state, count, rng_of):
    out = []
    for i in range(count):
        state, rows = driver.submit(state, [_q(f'q{i:03d}', i % 4, 3, ([i % 2], [(i // 2) % 4]))],
                                    rng_of(i))
        out += rows
    return state, out


def test_budget_fields():
    assert budget_fields('t', PrivacyBudget(rho=0.5), 'gaussian') == dict(
        noise='gaussian', rho_budget=0.5)
    fields = budget_fields('t', PrivacyBudget(epsilon=2.0, delta=1e-7), 'gaussian')
    assert fields['ledger_delta'] == 1e-7
    assert fields['rho_budget'] == rho_for_epsilon_delta(2.0, 1e-7)
    assert epsilon_from_rho(fields['rho_budget'], 1e-7) == pytest.approx(2.0, rel=1e-9)
    assert budget_fields('t', PrivacyBudget(epsilon=2.0), 'laplace') == dict(epsilon_budget=2.0)
    for budget, kind in ((PrivacyBudget(epsilon=2.0), 'gaussian'),
                         (PrivacyBudget(rho=1.0), 'laplace'),
                         (PrivacyBudget(epsilon=1.0, delta=1e-6), 'laplace'),
                         (PrivacyBudget(epsilon=1.0), 'cauchy'), (1.0, 'gaussian')):
        with pytest.raises(InvalidParamsError, match='t: .*(budget|noise)'):
            budget_fields('t', budget, kind)


def test_ledger_delta_needs_a_gaussian_mechanism():
    mech = preset('tree_pmw_bypass', 8)
    with pytest.raises(InvalidParamsError, match='ledger_delta'):
        BoostDriver('covid', SHAPE, mech, ledger_delta=1e-6)
    with pytest.raises(InvalidParamsError, match='ledger_delta'):
        _driver().__class__('covid', SHAPE, _driver().mechanism, ledger_delta=1.5)


@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0, delta=1e-6),
                                    PrivacyBudget(rho=0.01)])
def test_ledger_in_the_budgets_notion(budget):
    d = _driver(budget)
    state, out = _drive(d, _loaded(d), 80, noise.seeded)
    ledger = [r for r in out if isinstance(r, BoostLedgerRow)]
    answers = [r for r in out if isinstance(r, BoostAnswerRecord)]
    assert {r.purpose for r in ledger} >= {'gaussian'}
    filters = state.mech.filters
    for block in range(4):
        rows = [r for r in ledger if r.block == block]
        rho = filters.spent(block)
        want = rho if budget.is_zcdp else epsilon_from_rho(rho, budget.delta)
        assert rows[-1].consumed == pytest.approx(want, rel=1e-9)
        assert sum(r.epsilon for r in rows) == pytest.approx(want, rel=1e-9)
        assert all(r.consumed <= r.capacity * (1 + 1e-9) for r in rows)
        assert all(r.capacity == pytest.approx(budget.rho or budget.epsilon, rel=1e-9)
                   for r in rows)
    # An answer's epsilon is its largest per-block amount (the rows' increments).
    for a in answers:
        per = {}
        for r in ledger:
            if r.query_id == a.query_id:
                per[r.block] = per.get(r.block, 0.0) + r.epsilon
        assert a.epsilon == pytest.approx(max(per.values(), default=0.0), rel=1e-9, abs=1e-15)


def test_exhausted_blocks_refuse_and_stay_within_the_budget():
    d = _driver(PrivacyBudget(epsilon=0.1, delta=1e-6))
    state, out = _drive(d, _loaded(d), 120, noise.seeded)
    reasons = {r.reason for r in out if type(r).__name__ == 'BoostRefusal'}
    assert reasons == {'budget_exhausted'}
    ledger = [r for r in out if isinstance(r, BoostLedgerRow)]
    assert ledger and max(r.consumed for r in ledger) <= 0.1 * (1 + 1e-9)
    assert all(state.mech.filters.spent(b) <= d.mechanism.rho_budget * (1 + 1e-12)
               for b in range(4))


def test_replay_is_identical_and_free():
    d = _driver()
    state = _loaded(d)
    state, out = d.submit(state, [_q('a', 0, 3), _q('b', 2, 2)], noise.seeded(5))
    consumed = dict(state.mech.filters.consumed)
    answers = {r.query_id: r for r in out if isinstance(r, BoostAnswerRecord)}
    state, replay = d.submit(state, [_q('b', 2, 2), _q('a', 0, 3)], noise.seeded(99))
    assert all(r.replay and r._replace(replay=False) == answers[r.query_id] for r in replay)
    assert state.mech.filters.consumed == consumed


def test_noise_key_reruns_are_bit_identical(monkeypatch):
    monkeypatch.setenv('BDP_BOOST_GAUSS_KEY', 'fedcba9876543210' * 4)
    d = _driver()

    def rng_of(i):
        return noise.KeyedRandom('env:BDP_BOOST_GAUSS_KEY').derive('boost-test')
    runs = [_drive(d, _loaded(d), 40, rng_of)[1] for _ in range(2)]
    assert runs[0] == runs[1]
    values = [r.value for r in runs[0] if isinstance(r, BoostAnswerRecord)]
    assert len(set(values)) >= 6
