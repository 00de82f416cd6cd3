"""The optional Gaussian noise of Boost (C5/C6, ``noise='gaussian'``): calibration against its
closed form, the discrete Gaussian release on its grid (cost ≤ ρ, the rigorous tail bound and
its peakedness lemma), parameter refusals, and the ρ-zCDP filter accounting per path (ρ charged,
refusal when exhausted, atomic across blocks, the SV's 3ε as (3ε)²/2)."""

import math
import statistics

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import SWAP_ONE
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import LearningRate
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import calibration as cal
from beam_dp.mechanisms.boost import gaussian as g
from beam_dp.mechanisms.boost import pmw_bypass as pb
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.filters import ZCDPFilters
from beam_dp.mechanisms.boost.histogram import uniform_node
from beam_dp.mechanisms.boost.grid_sv import GRID_SLACK
from beam_dp.noise.pmf import discrete_gaussian_pmf

from tests.mechanisms.boost.conftest import N
from tests.mechanisms.boost.conftest import QUERIES
from tests.mechanisms.boost.conftest import sealed

ALPHA, BETA = 0.05, 1e-3
ALPHA_CAL = ALPHA * (1 - GRID_SLACK)


def _mech(name='tree_pmw_bypass', **kw):
    base = dict(alpha=ALPHA, beta=BETA, noise='gaussian', rho_budget=1.0)
    base.update(kw)
    return preset(name, N, **base)


# --- calibration ------------------------------------------------------------------------------

def test_z_constants():
    assert cal.gaussian_z(1e-3) == pytest.approx(3.290527, abs=1e-6)
    assert cal.gaussian_z(0.05) == pytest.approx(1.959964, abs=1e-6)
    assert math.erfc(cal.gaussian_z(5e-4) / math.sqrt(2)) == pytest.approx(5e-4, rel=1e-9)


@pytest.mark.parametrize('k,n,beta', [(1, 1_008_532, 1e-3), (3, 30_000, 5e-4),
                                      (12, 10 ** 6, 5e-4), (5, 2000, 0.05)])
def test_calibrate_gaussian_closed_form(k, n, beta):
    rho = cal.calibrate_gaussian(ALPHA, beta, n, k)
    z = statistics.NormalDist().inv_cdf(1 - beta / 2)
    assert rho == pytest.approx(k * z * z / (2 * (n * ALPHA) ** 2), rel=1e-12)
    # The aggregate of k nodes (weights n_i/n, node std 1/(n_i √(2ρ))) has std exactly α/z,
    # whatever the split of n into nodes.
    sizes = np.random.default_rng(k).multinomial(n - k, np.ones(k) / k) + 1
    std = math.sqrt(sum((m / n) ** 2 * g.node_std(rho, m) ** 2 for m in sizes))
    assert std == pytest.approx(ALPHA / z, rel=1e-9)


def test_covid_block_gaussian_vs_laplace_constants():
    n = 1_008_532
    rho = cal.calibrate_gaussian(ALPHA, BETA, n)
    assert rho * (n * ALPHA) ** 2 == pytest.approx(3.2905267 ** 2 / 2, rel=1e-6)   # 5.4138
    eps_lap = cal.calibrate_laplace(ALPHA, BETA, n)
    assert cal.pure_to_zcdp(eps_lap) / rho == pytest.approx(math.log(1000) ** 2 / 3.2905267 ** 2,
                                                            rel=1e-6)         # 4.41x


def test_pure_to_zcdp_is_the_accountants():
    for eps in (0.0, 1e-4, 0.3, 2.0):
        assert cal.pure_to_zcdp(eps) == PrivacyCost(epsilon=eps).to_rho() == eps * eps / 2


# --- the release on its grid ------------------------------------------------------------------

@pytest.mark.parametrize('n', [3, 100, 2000, 1_008_532, 50_426_600])
def test_grid_cost_at_most_rho_and_fine(n):
    rho = cal.calibrate_gaussian(ALPHA_CAL, BETA, n)
    bits, s2 = g.grid_sigma2(rho, n)
    units = math.ceil(math.ldexp(1.0 / n, bits)) + 2
    assert math.ldexp(1.0 / n, bits) >= 2 ** g.HEADROOM_BITS
    cost = units ** 2 / (2 * float(s2))
    assert rho * (1 - 1e-9) <= cost <= rho
    # The std parameter in fraction units is within 3·2^-16 of the nominal one.
    nominal = g.node_std(rho, n)
    assert math.sqrt(float(s2)) * 2.0 ** -bits == pytest.approx(nominal, rel=3 * 2 ** -16)


@pytest.mark.parametrize('sigma', [3.0, 4.5, 10.0, 40.0])
def test_peakedness_lemma(sigma):
    """V = X + U (X ~ N_Z(0, σ²), U ~ U(-½, ½)) is more peaked than N(0, (σ + 1)²): the step
    of ``tail_bound``'s proof, checked exactly on a fine grid of t."""
    support = np.arange(-int(20 * sigma), int(20 * sigma) + 1)
    pmf = np.array([discrete_gaussian_pmf(int(x), sigma ** 2) for x in support])
    wide = statistics.NormalDist(0, sigma + 1)
    for t in np.linspace(0, 8 * sigma, 2001):
        # Pr[|V| ≤ t] = Σ_x p(x)·|[x − ½, x + ½] ∩ [−t, t]|.
        overlap = np.clip(np.minimum(support + 0.5, t) - np.maximum(support - 0.5, -t), 0, 1)
        assert float(pmf @ overlap) >= (2 * wide.cdf(t) - 1) - 1e-12, t
    # ... and not by much: N(0, σ²) itself is *not* always less peaked (the +1 is needed).
    narrow = statistics.NormalDist(0, sigma * (1 - 0.2 / sigma))
    t = 0.5 * sigma
    overlap = np.clip(np.minimum(support + 0.5, t) - np.maximum(support - 0.5, -t), 0, 1)
    assert float(pmf @ overlap) < 2 * narrow.cdf(t) - 1


@pytest.mark.parametrize('sizes', [[10_000], [1000, 1000, 1000], [5000, 200, 77, 3000],
                                   [60] * 12, [2_000_000, 1_000_000]])
@pytest.mark.parametrize('beta', [1e-3, 0.05])
def test_calibrated_plans_meet_the_rigorous_tail_bound(sizes, beta):
    rho = cal.calibrate_gaussian(ALPHA_CAL, beta, sum(sizes), len(sizes))
    bound = g.tail_bound(ALPHA, [(n, rho) for n in sizes])
    assert bound <= beta
    assert bound > 0.9 * beta                                # and it is tight
    # A std 30 % too large breaks it.
    assert g.tail_bound(ALPHA, [(n, rho / 1.3 ** 2) for n in sizes]) > 2 * beta


def test_release_is_addressed_and_on_the_grid():
    rho, n = 1e-3, 5000
    a = g.gaussian_release(0.3, rho, n, noise.seeded(4).derive('x'))
    assert a == g.gaussian_release(0.3, rho, n, noise.seeded(4).derive('x'))
    assert a != g.gaussian_release(0.3, rho, n, noise.seeded(4).derive('y'))
    bits, _ = g.grid_sigma2(rho, n)
    assert math.ldexp(a[0], bits) == int(math.ldexp(a[0], bits))
    assert a[1] == g.node_std(rho, n)


# --- parameters -------------------------------------------------------------------------------

@pytest.mark.parametrize('kw,word', [
    (dict(rho_budget=None), 'rho_budget'), (dict(rho_budget=0.0), 'rho_budget'),
    (dict(sv_failure='r2'), 'sv_failure'), (dict(bypass_calibration='pmw'), 'bypass_calibration'),
    (dict(noise='uniform'), 'noise'), (dict(noise='laplace'), 'rho_budget')])
def test_bad_gaussian_parameters_raise(kw, word):
    with pytest.raises(InvalidParamsError, match=word):
        _mech(**kw)


def test_vanilla_pmw_is_laplace_only():
    with pytest.raises(InvalidParamsError, match='sv_failure'):
        _mech('vanilla_pmw')


def test_privacy_cost_and_filters_are_zcdp():
    mech = _mech(rho_budget=0.25)
    assert mech.privacy_cost() == PrivacyCost(rho=0.25, relation=SWAP_ONE)
    filters = mech.init_state().filters
    assert isinstance(filters, ZCDPFilters) and filters.capacity == 0.25
    charged = filters.charge({0: 0.01})
    assert charged.epsilon_spent(0, 1e-6) == pytest.approx(
        PrivacyCost(rho=0.01).to_epsilon(1e-6), rel=1e-12)


# --- accounting per path ----------------------------------------------------------------------

def _ask(mech, state, q, first, last, seed=0, qid='q'):
    return mech.answer(state, BoostRequest(q, first, last, qid), noise.seeded(seed).derive(qid))


def test_r3_charges_calibrated_rho_once_per_block_then_exact_hit_is_free():
    mech = _mech('laplace', exact_cache=True)
    state = sealed(mech, 1)
    ans, state = _ask(mech, state, QUERIES[0], 0, 0)
    rho = cal.calibrate_gaussian(ALPHA_CAL, BETA, state.sizes[0])
    assert (ans.path, ans.charges) == ('R3', ((0, 'gaussian', rho),))
    assert state.filters.spent(0) == rho
    again, state2 = _ask(mech, state, QUERIES[0], 0, 0, seed=9, qid='r')
    assert (again.path, again.value, again.charges) == ('EXACT', ans.value, ())
    assert state2.filters.consumed == state.filters.consumed


def test_tree_gaussian_part_over_k_nodes():
    mech = _mech('tree_exact_cache')
    state = sealed(mech, 7)
    ans, state = _ask(mech, state, QUERIES[9], 0, 6)          # cover (0,3), (4,5), (6,6)
    rho = cal.calibrate_gaussian(ALPHA_CAL, BETA, sum(state.sizes), 3)
    assert ans.path == 'R3'
    assert sorted(ans.charges) == [(b, 'gaussian', rho) for b in range(7)]
    assert ans.epsilon == rho


def _ready_tree(mech, blocks=4):
    state = sealed(mech, blocks)
    ready = uniform_node(N, Readiness(c0=0.0))
    never = uniform_node(N, Readiness(c0=math.inf))
    return pb.dataclasses.replace(state, nodes={(0, 0, 1): ready, (0, 2, 2): never})


def test_sv_init_is_charged_as_its_zcdp_equivalent_and_mixed_part_at_half_beta():
    mech = _mech(readiness=Readiness(c0=1.0, s0=0.0), learning_rate=LearningRate(((0, 1e-9),)))
    state = _ready_tree(mech)
    seen = {}
    for i in range(40):
        ans, state = _ask(mech, state, QUERIES[i % 8], 0, 2, seed=i, qid=f'q{i}')
        seen.setdefault(ans.path, set()).update(ans.charges)
    eps_sv = cal.calibrate_pmw(ALPHA_CAL, BETA / 2, sum(state.sizes[:2]))
    fee = cal.pure_to_zcdp(3 * eps_sv)
    assert fee == pytest.approx((3 * eps_sv) ** 2 / 2, rel=1e-15)
    rho_half = cal.calibrate_gaussian(ALPHA_CAL, BETA / 2, state.sizes[2], 1)
    assert {(0, 'sv_init', fee), (1, 'sv_init', fee), (2, 'gaussian', rho_half)} <= seen['MIXED']
    # A failed SV test is replanned: all-Gaussian over the cover at the full β (k = 2 nodes).
    rho_full = cal.calibrate_gaussian(ALPHA_CAL, BETA, sum(state.sizes[:3]), 2)
    assert {(b, 'gaussian', rho_full) for b in range(3)} <= seen['R2']
    assert {p for _, p, _ in set().union(*seen.values())} == {'sv_init', 'gaussian'}


def test_refusal_when_exhausted_and_atomic_across_blocks():
    mech = _mech('tree_exact_cache')
    state = sealed(mech, 2)
    rho = cal.calibrate_gaussian(ALPHA_CAL, BETA, state.sizes[1])      # one block: ~4x (0, 1)
    mech = pb.dataclasses.replace(mech, rho_budget=1.2 * rho)
    state = pb.dataclasses.replace(state, filters=ZCDPFilters(1.2 * rho))
    ans, state = _ask(mech, state, QUERIES[1], 1, 1)
    assert ans.status == 'ok' and state.filters.spent(1) == rho
    before = dict(state.filters.consumed)
    ans, after = _ask(mech, state, QUERIES[2], 0, 1, qid='both')
    assert (ans.status, ans.reason) == ('refused', 'budget_exhausted')
    assert after.filters.consumed == before and 0 not in after.filters.consumed   # none charged
    ans, after = _ask(mech, state, QUERIES[2], 0, 0, qid='zero')
    assert ans.status == 'ok'                       # block 0 alone still has its budget


def test_ledger_sum_is_the_filter_and_never_exceeds_capacity():
    mech = _mech(readiness=Readiness(c0=2, s0=1), rho_budget=0.02)
    state = sealed(mech, 4, n=3000)
    total = {}
    for i in range(200):
        first = i % 4
        ans, state = _ask(mech, state, QUERIES[i % len(QUERIES)], first, 3, seed=i, qid=f'{i}')
        for b, _, rho in ans.charges:
            total[b] = total.get(b, 0.0) + rho
    for b in range(4):
        assert total[b] == pytest.approx(state.filters.spent(b), rel=1e-12)
        assert state.filters.spent(b) <= 0.02 * (1 + 1e-12)
