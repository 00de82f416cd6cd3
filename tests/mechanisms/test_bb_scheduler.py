"""BBScheduler / BBImprover (spec 000 §2-3, §6.1-6.5, §9 criteria 1-6, 17): schedules, budgets,
ledgers, staleness, black-box protocol, validation."""

import dataclasses
import math
import pickle
from contextlib import nullcontext as does_not_raise

import numpy as np
import pytest

from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import bbimprover_epsilon
from beam_dp.mechanisms.bb_scheduler import bbscheduler_alpha
from beam_dp.mechanisms.bb_scheduler import bbscheduler_epsilon
from beam_dp.mechanisms.bb_scheduler import bbscheduler_gamma
from beam_dp.mechanisms.bb_scheduler import bbscheduler_ln_inv_beta
from beam_dp.mechanisms.bb_scheduler import bbscheduler_schedule
from beam_dp.mechanisms.bb_scheduler import cdp_epsilon
from beam_dp.mechanisms.black_boxes import CallableBlackBox
from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
from beam_dp.mechanisms.black_boxes import StaticPMWBox
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery

N = 16
QUERIES = tuple(LinearQuery.range(N, a, a + 4) for a in range(10))


def _exact_box(p=1.0, g=1.0):
    """A deterministic (NOT private) box for semantics tests: exact answers at the snapshot."""
    return CallableBlackBox(run_fn=lambda counts, t, *rest: np.asarray(counts) / t,
                            answer_fn=lambda hist, q: q.evaluate(hist), p=p, g=g)


def test_schedule_starts():
    """Spec criterion 1 and §6.1 (1.1²·1000 must give 1210, not 1211)."""
    assert bbscheduler_schedule(1000, 0.1, 11) == (1000, 1100, 1210, 1331, 1465, 1611, 1772,
                                                   1949, 2144, 2358, 2594)


def test_no_stall_when_gamma_n_below_one():
    """Spec criterion 1 / P3: γn < 1: release times strictly increase, each run uses the largest
    epoch index reached, skipped epochs are never spent."""
    sched = BBScheduler(_exact_box(), epsilon=1.0, beta=0.05, n=1000, domain_size=N)
    object.__setattr__(sched, '_gamma', 0.0004)
    rng = seeded(1)
    state = sched.init_state()
    times, epochs = [], []
    for t in range(1, 1021):
        releases, state = sched.add_data_with_releases(state, [t % N], rng)
        for r in releases:
            times.append(r.t)
            epochs.append(r.epoch)
            assert sched.start(r.epoch) <= t < sched.start(r.epoch + 1)
    assert times == sorted(set(times)) and len(times) >= 15
    assert epochs == sorted(set(epochs)) and epochs[0] == 0
    spent = math.fsum(bbscheduler_epsilon(i, sched.calibrated_epsilon, 0.0004) for i in epochs)
    assert state.spent == pytest.approx(spent, rel=1e-12)


def test_epsilon_schedule_worked_numbers():
    """Spec criterion 2 / §6.1."""
    table = {0: 0.0082645, 1: 0.0150263, 2: 0.0204904, 3: 0.0248369, 4: 0.0282237, 9: 0.0350494,
             10: 0.0350494}
    for i, value in table.items():
        assert bbscheduler_epsilon(i, 1.0, 0.1) == pytest.approx(value, abs=1e-6)
    gamma = 0.1
    for k in (1, 10, 100, 1000):
        spent = math.fsum(bbscheduler_epsilon(i, 1.0, gamma) for i in range(k))
        assert spent == pytest.approx(1 - (1 + k * gamma / (1 + gamma)) / (1 + gamma) ** k, abs=1e-12)


@pytest.mark.parametrize('gamma', [0.01, 0.1, 0.5, 0.9])
def test_ledger_partial_sums_never_exceed_budget(gamma):
    """Spec criterion 2 / §7.6: with the ε(1 − 1e-9) calibration, K ≤ 10⁵."""
    eps_cal = 1.0 * (1 - 1e-9)
    i = np.arange(100_000, dtype=np.float64)
    terms = eps_cal * np.exp(2 * math.log(gamma) + np.log(i + 1) - (i + 2) * math.log1p(gamma))
    assert terms[:50] == pytest.approx([bbscheduler_epsilon(int(k), eps_cal, gamma) for k in range(50)])
    assert np.cumsum(terms).max() <= 1.0


def test_failure_probabilities():
    """Spec criterion 3."""
    beta = 0.05
    assert math.fsum(math.exp(-bbscheduler_ln_inv_beta(i, beta)) for i in range(500)) == pytest.approx(beta, abs=1e-12)
    value = bbscheduler_ln_inv_beta(10**4, beta)
    assert math.isfinite(value) and value == 10001 * math.log(1.05 / 0.05)


@pytest.mark.parametrize('delta', [0.0, 1e-6])
@pytest.mark.parametrize('p, g', [(1.0, 33.03), (1 / 3, 8.0), (0.5, 2.0)])
def test_alpha_is_epoch_independent(delta, p, g):
    """Spec criterion 4 (with the corrected γ, errata E2/E3)."""
    eps, beta, n = 0.9, 0.05, 10**6
    gamma = bbscheduler_gamma(eps, delta, beta, n, p, g)
    expected = gamma * (1 + gamma) ** ((2 if delta == 0 else 1.5) * p)
    for i in (0, 1, 7, 50, 300):
        eps_i = bbscheduler_epsilon(i, eps, gamma, delta)
        assert bbscheduler_alpha(i, eps_i, gamma, n, beta, p, g) == pytest.approx(expected, rel=1e-9)


def test_laplace_box_worked_numbers():
    """Spec §6.4: γ and the guaranteed error for k = 10."""
    box = LaplaceQueryVector(QUERIES)
    assert box.g == pytest.approx(33.03, abs=5e-3)
    for n, gamma, err in [(10**4, 0.2158, 0.497), (10**5, 0.1002, 0.212), (10**6, 0.0465, 0.095)]:
        sched = BBScheduler(box, epsilon=1.0, beta=0.05, n=n, domain_size=N)
        assert sched.gamma == pytest.approx(gamma, abs=1e-4)
        assert sched.guaranteed_error() == pytest.approx(err, abs=1e-3)


@pytest.mark.parametrize('eps', [0.1, 0.5, 0.99])
@pytest.mark.parametrize('delta', [1e-3, 1e-6, 1e-9])
@pytest.mark.parametrize('gamma', [0.01, 0.1, 0.5, 0.9])
def test_approximate_dp_schedule(eps, delta, gamma):
    """Spec criterion 5: Σ ε_i² closed form and the CDP total ≤ ε."""
    i = np.arange(20_000, dtype=np.float64)
    log_e = (1.5 * math.log(gamma) + np.log(i + 1) - (i + 1.5) * math.log1p(gamma)
             - math.log(3 * math.sqrt(math.log(1 / delta))))
    squares = math.fsum((eps * np.exp(log_e)) ** 2)
    closed = eps ** 2 / (9 * math.log(1 / delta)) * (1 + gamma) * (gamma ** 2 + 2 * gamma + 2) / (gamma + 2) ** 3
    assert squares == pytest.approx(closed, rel=1e-12)
    assert cdp_epsilon(squares, delta) <= eps


def test_approximate_dp_worked_numbers():
    """Spec §6.2."""
    terms = [bbscheduler_epsilon(i, 0.9, 0.1, 1e-6) for i in range(5000)]
    assert math.fsum(t * t for t in terms) == pytest.approx(1.7100e-3, abs=1e-7)
    assert cdp_epsilon(math.fsum(t * t for t in terms), 1e-6) == pytest.approx(0.2182, abs=1e-4)
    assert math.fsum(terms) == pytest.approx(0.2677, abs=1e-4)


def test_bbimprover_schedule_and_ledger():
    """Spec criterion 6 / §6.5."""
    for t, value in [(10**3, 4.045e-4), (2 * 10**3, 2.669e-4), (10**4, 1.016e-4),
                     (10**5, 2.552e-5), (10**6, 6.411e-6)]:
        assert bbimprover_epsilon(t, 0.9, 1e-6, 0.1) == pytest.approx(value, rel=1e-3)
    squares = 0.0
    for start in range(1000, 10**7 + 1, 10**6):
        t = np.arange(start, min(start + 10**6, 10**7 + 1), dtype=np.float64)
        eps_t = math.sqrt(0.1) * 0.9 * (1 - 1e-9) / (3 * math.sqrt(math.log(1e6)) * t ** 0.6)
        squares += math.fsum(eps_t ** 2)
        assert cdp_epsilon(squares, 1e-6) <= 0.9
    # Spec §6.5 quotes the infinite sum: add the tail Σ_{t>10⁷} K t^{-1.2} ≈ K·10^{-1.4}/0.2.
    k = (math.sqrt(0.1) * 0.9 / (3 * math.sqrt(math.log(1e6)))) ** 2
    total = squares + k * (10**7) ** -0.2 / 0.2
    assert total == pytest.approx(8.18e-4, rel=2e-3)
    assert cdp_epsilon(total, 1e-6) == pytest.approx(0.151, abs=1e-3)
    assert total <= 0.9 ** 2 / (9 * math.log(1e6))          # the paper's bound


def test_staleness_exact_with_noise_free_box():
    """Spec criterion 17: old entries f = 0, new f = 1; error within an epoch is exactly
    1 − t_i/τ and never exceeds γ/(1+γ) (α_i = 0 for this exact box)."""
    sched = BBScheduler(_exact_box(), epsilon=1.0, beta=0.05, n=10**4, domain_size=2)
    rng = seeded(2)
    q = LinearQuery.point(2, 1)
    state = sched.add_data(sched.init_state(), [0] * 10**4, rng)
    worst = 0.0
    for _ in range(200):
        state = sched.add_data(state, [1] * 50, rng)
        ans, state = sched.answer(state, q, rng)
        t_i = state.release.t
        err = abs(ans.value - q.evaluate(state.counts) / state.t)
        # Old entries (before n) have f = 0, new ones f = 1: err = n/t_i − n/τ ≤ 1 − t_i/τ,
        # with equality in epoch 0 (every entry before t_0 = n is old).
        assert err == pytest.approx(10**4 / t_i - 10**4 / state.t, abs=1e-12)
        assert err <= 1 - t_i / state.t + 1e-12
        if state.epoch == 0:
            assert err == pytest.approx(1 - t_i / state.t, abs=1e-12)
        worst = max(worst, err)
    assert worst <= sched.gamma / (1 + sched.gamma)
    assert worst >= 0.5 * sched.gamma / (1 + sched.gamma)


def test_lazy_mode_runs_once_per_epoch_on_current_data():
    sched = BBScheduler(_exact_box(), epsilon=1.0, beta=0.05, n=1000, domain_size=N, lazy=True)
    rng = seeded(3)
    state = sched.add_data(sched.init_state(), np.arange(1050) % N, rng)
    assert state.runs == 0
    ans, state = sched.answer(state, QUERIES[0], rng)
    assert state.runs == 1 and state.release.t == 1050 and state.epoch == 0
    assert ans.value == pytest.approx(QUERIES[0].evaluate(state.counts) / 1050)
    for _ in range(5):
        _, state = sched.answer(state, QUERIES[1], rng)
    assert state.runs == 1


def test_laplace_box_answers_fixed_set_only_and_ledger():
    box = LaplaceQueryVector(QUERIES)
    sched = BBScheduler(box, epsilon=1.0, beta=0.05, n=10**5, domain_size=N)
    rng = seeded(4)
    state = sched.init_state()
    ans, state = sched.answer(state, QUERIES[0], rng)
    assert ans.status == 'not_started'
    gen = np.random.default_rng(0)
    while state.t < 4 * 10**5:
        state = sched.add_data(state, gen.integers(0, N, 25_000), rng)
        assert sched.epsilon_spent(state) <= 1.0
    ans, state = sched.answer(state, QUERIES[3].with_id('anything'), rng)
    assert ans.status == 'answered' and abs(ans.value - QUERIES[3].evaluate(state.counts) / state.t) < 0.2
    ans, _ = sched.answer(state, LinearQuery.point(N, 0), rng)
    assert ans.status == 'unknown_query' and ans.value is None


def test_static_pmw_box_through_scheduler():
    box = StaticPMWBox(domain_size=8, g=2.0)
    sched = BBScheduler(box, epsilon=1.0, beta=0.05, n=10**6, domain_size=8)
    rng = seeded(5)
    state = sched.add_data(sched.init_state(), np.arange(10**6) % 4, rng)
    ans, state = sched.answer(state, LinearQuery.range(8, 0, 4), rng)
    assert ans.status == 'answered' and state.release.epoch == 0


def test_black_box_must_be_pure():
    class Approx(CallableBlackBox):
        def cost(self, epsilon):
            return PrivacyCost(epsilon=epsilon, delta=1e-6)
    box = Approx(run_fn=lambda *a: None, answer_fn=lambda e, q: 0.0, p=1.0, g=1.0)
    sched = BBScheduler(box, epsilon=1.0, beta=0.05, n=100, domain_size=N)
    with pytest.raises(UnsupportedMechanismError, match='must be pure'):
        sched.add_data(sched.init_state(), [0] * 100, seeded(6))


def test_state_immutability_and_pickling():
    sched = BBScheduler(LaplaceQueryVector(QUERIES), epsilon=1.0, beta=0.05, n=10**5,
                        domain_size=N)
    rng = seeded(7)
    state = sched.add_data(sched.init_state(), np.arange(10**5) % N, rng)
    before = pickle.dumps(state)
    sched.answer(state, QUERIES[0], rng)
    sched.add_data(state, np.arange(20_000) % N, rng)
    assert pickle.dumps(state) == before
    with pytest.raises(InvalidRecordError, match=r'records must be in \[0, 16\)'):
        sched.add_data(state, [99], rng)


@pytest.mark.parametrize('kwargs, expectation', [
    ({}, does_not_raise()),
    ({'n': 100}, pytest.raises(InvalidParamsError, match=r'gamma must be in \(0, 1\) \(spec P13\)')),
    ({'beta': 0}, pytest.raises(InvalidParamsError, match=r'beta must be in \(0, 1\), got 0')),
    ({'epsilon': -1}, pytest.raises(InvalidParamsError, match='epsilon must be positive, got -1')),
    ({'mechanism': object()}, pytest.raises(InvalidParamsError, match='must implement StaticMechanism')),
])
def test_scheduler_validation(kwargs, expectation):
    base = dict(mechanism=LaplaceQueryVector(QUERIES), epsilon=1.0, beta=0.05, n=10**5,
                domain_size=N)
    with expectation:
        BBScheduler(**{**base, **kwargs})


@pytest.mark.parametrize('kwargs, expectation', [
    ({}, does_not_raise()),
    ({'epsilon': 1.0}, pytest.raises(InvalidParamsError, match=r'epsilon must be in \(0, 1\), got 1')),
    ({'delta': 0.5}, pytest.raises(InvalidParamsError, match=r'delta must be in \(0, 1/e\], got 0.5')),
    ({'delta': 0.0}, pytest.raises(InvalidParamsError, match='delta must be positive')),
    ({'c': 600}, pytest.raises(InvalidParamsError, match='c must be at most n/2, got 600')),
])
def test_improver_validation(kwargs, expectation):
    base = dict(mechanism=LaplaceQueryVector(QUERIES), epsilon=0.9, delta=1e-6, beta=0.05,
                n=1000, domain_size=N)
    with expectation:
        BBImprover(**{**base, **kwargs})


def test_improver_runs_once_per_size_and_ledger():
    imp = BBImprover(_exact_box(), epsilon=0.9, delta=1e-6, beta=0.05, n=1000, domain_size=N)
    rng = seeded(8)
    state = imp.add_data(imp.init_state(), np.arange(1000) % N, rng)
    for k in range(20):
        for _ in range(3):
            ans, state = imp.answer(state, QUERIES[k % 10], rng)
            assert ans.status == 'answered' and ans.epsilon_spent <= 0.9
        assert state.runs == k + 1 and state.release.t == state.t
        assert state.release.epsilon == pytest.approx(bbimprover_epsilon(state.t, 0.9, 1e-6, 0.1), rel=1e-8)
        state = imp.add_data(state, [k % N], rng)
    eager = dataclasses.replace(imp, lazy=False)
    releases, _ = eager.add_data_with_releases(state, [1, 2, 3], rng)
    assert [r.t for r in releases] == [state.t + 3]
