"""The Gaussian answers of Boost (``noise='gaussian'``) are within α with frequency ≥ 1 − β,
and the check has power (spec 002 §10 criterion 24 for the optional Gaussian path).

On fixed data (n = 10⁴, α = β = 0.05), 4,000 fresh Gaussian answers per path (one node R3; the
tree's all-noise plan over k = 3 nodes; the mixed plan's Gaussian half at β/2). The calibration
is exact (the aggregate is N(0, (α_cal/z)²) up to the grid), so the rate of |error| > α must be
within 4 binomial sd of its predicted value p₀ = Pr[|N(0, 1)| > z·α/α_cal] (≤ β): both too
many misses (a σ 30 % too large: the accuracy claim fails) and too few (a σ 30 % too small:
the sampler is not the calibrated one) are caught, shown on deliberately mis-scaled samplers.
"""

import math
import statistics

import numpy as np
import pytest

from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import calibration as cal
from beam_dp.mechanisms.boost import pmw_bypass as pb
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.histogram import uniform_node
from beam_dp.mechanisms.boost.grid_sv import GRID_SLACK

from tests.mechanisms.boost.conftest import sealed
from tests.mechanisms.boost.test_accuracy_statistical import ALPHA
from tests.mechanisms.boost.test_accuracy_statistical import ANSWERS
from tests.mechanisms.boost.test_accuracy_statistical import BETA
from tests.mechanisms.boost.test_accuracy_statistical import FROZEN
from tests.mechanisms.boost.test_accuracy_statistical import N
from tests.mechanisms.boost.test_accuracy_statistical import N_ROWS
from tests.mechanisms.boost.test_accuracy_statistical import P
from tests.mechanisms.boost.test_accuracy_statistical import _errors

pytestmark = pytest.mark.statistical


def _predicted(beta: float) -> float:
    """Pr[|N(0, (α_cal/z)²)| > α], z = Φ⁻¹(1 − β/2): the exact miss rate of the calibration."""
    z = cal.gaussian_z(beta) / (1 - GRID_SLACK)
    return 2 * (1 - statistics.NormalDist().cdf(z))


def _matches(errs, p0) -> bool:
    rate = float(np.mean(errs > ALPHA))
    return abs(rate - p0) <= 4 * math.sqrt(p0 * (1 - p0) / errs.size)


def _mech(name, **kw):
    base = dict(alpha=ALPHA, beta=BETA, noise='gaussian', rho_budget=math.inf,
                exact_cache=False, learning_rate=FROZEN)
    base.update(kw)
    return preset(name, N, **base)


def _mis_scaled(monkeypatch, factor):
    real = pb.gaussian_release

    def release(value, rho, n, rng):                       # std × factor
        return real(value, rho / factor ** 2, n, rng)
    monkeypatch.setattr(pb, 'gaussian_release', release)


def test_r3_gaussian_answers_within_alpha():
    mech = _mech('laplace')
    errs = _errors(mech, sealed(mech, 1, N_ROWS, p=P), 0, 0, 'R3', ANSWERS, 1)
    assert _matches(errs, _predicted(BETA)) and np.mean(errs > ALPHA) <= BETA + 3 * math.sqrt(
        BETA * (1 - BETA) / ANSWERS)


@pytest.mark.parametrize('factor', [0.7, 1.3])
def test_r3_check_catches_a_mis_scaled_sampler(monkeypatch, factor):
    _mis_scaled(monkeypatch, factor)
    mech = _mech('laplace')
    errs = _errors(mech, sealed(mech, 1, N_ROWS, p=P), 0, 0, 'R3', ANSWERS, 2)
    assert not _matches(errs, _predicted(BETA))


def test_tree_gaussian_plan_over_three_nodes():
    mech = _mech('tree_exact_cache')
    state = sealed(mech, 7, N_ROWS // 4, p=P)              # [0, 6] → (0,3), (4,5), (6,6)
    errs = _errors(mech, state, 0, 6, 'R3', ANSWERS, 3)
    assert _matches(errs, _predicted(BETA))


def test_mixed_plan_gaussian_half():
    mech = _mech('tree_pmw_bypass', readiness=Readiness(c0=1.0, s0=0.0))
    state = sealed(mech, 4, N_ROWS, p=P)
    trained = pb.dataclasses.replace(uniform_node(N, Readiness(c0=0.0)), log_h=np.log(P))
    state = pb.dataclasses.replace(state, nodes={
        (0, 0, 1): trained, (0, 2, 2): uniform_node(N, Readiness(c0=math.inf))})
    errs = _errors(mech, state, 0, 2, 'MIXED', ANSWERS, 4)
    # The whole answer: the SV half (≤ β/2, Lemma A.2, loose) + the Gaussian half (β/2).
    assert np.mean(errs > ALPHA) <= BETA + 3 * math.sqrt(BETA * (1 - BETA) / ANSWERS)
