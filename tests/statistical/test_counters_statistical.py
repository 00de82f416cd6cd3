"""Statistical tier for the new counters (BLT, k-ary tree, per-step noise summed):

* the empirical noise variance of the releases matches each closed form, with power (a 30%
  scale error is rejected, and a deliberately mis-scaled counter fails the same test);
* a DP audit on neighbouring streams: for BLT, the exact zCDP of the integer vector it
  privatises, computed from the actual encoder on adversarial neighbouring streams (event- and
  user-level, several bins); for the Laplace counters, an empirical test that one event moves
  the release distribution by at most e^ε (4σ confidence), which catches a counter spending 2ε.
"""

import collections
import dataclasses
import fractions
import functools
import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

RUNS = 4000   # independent runs, vectorised as the dimension of one counter


def _errors(mechanism, steps, seed):
    """errors[t-1] = release_t - exact prefix (RUNS runs as bins), value 1 per step and bin."""
    state, rng = mechanism.init_state(), noise.seeded(seed)
    out = []
    for t in range(1, steps + 1):
        release, state = mechanism.step(state, np.ones(mechanism.dimension, np.int64), rng)
        out.append(np.asarray(release, dtype=float) - t)
    return np.array(out)


def _check(errors, mechanism, ts):
    for t in ts:
        var = mechanism.release_variance(t)
        assert abs(errors[t - 1].mean()) < 5 * math.sqrt(var / errors.shape[1])
        assert variance_pvalue(errors[t - 1], var) > P_THRESHOLD, t
        for factor in ((1 - FUDGE_FACTOR) ** 2, (1 + FUDGE_FACTOR) ** 2):
            assert variance_pvalue(errors[t - 1], var * factor) < P_THRESHOLD, (t, factor)


@pytest.mark.parametrize('mechanism, ts', [
    (KaryTreeCounter(horizon=40, epsilon=1.0, k=3, dimension=RUNS), (1, 8, 9, 26, 40)),
    (KaryTreeCounter(horizon=40, epsilon=1.0, k=5, estimator='textbook', dimension=RUNS),
     (4, 5, 24, 40)),
    (KaryTreeCounter(horizon=40, rho=0.5, k=4, dimension=RUNS), (3, 16, 33)),
    (PerStepCounter(epsilon=1.0, dimension=RUNS), (1, 10, 30)),
    (PerStepCounter(rho=0.5, l1_sensitivity=2.0, dimension=RUNS), (1, 30)),
    (BLTCounter(rho=0.5, horizon=40, dimension=RUNS), (1, 2, 7, 20, 40)),
    (BLTCounter(rho=2.0, horizon=None, design_horizon=64, l1_sensitivity=3.0,
                dimension=RUNS), (1, 5, 33, 40)),
], ids=['kary_vr', 'kary_textbook', 'kary_gauss', 'per_step_laplace', 'per_step_gauss',
        'blt', 'blt_unbounded'])
def test_release_variance_matches_closed_form_with_power(mechanism, ts):
    _check(_errors(mechanism, max(ts), seed=hash(type(mechanism).__name__) % 1000), mechanism,
           ts)


@dataclasses.dataclass(frozen=True)
class _MisScaledBLT(BLTCounter):
    """Draws noise 30% larger in std than it declares (a scale bug the test must catch)."""

    def grid_sigma2(self, t: int) -> fractions.Fraction:
        return super().grid_sigma2(t) * fractions.Fraction(27, 16)    # std × 1.299


@dataclasses.dataclass(frozen=True)
class _MisScaledKary(KaryTreeCounter):

    @property
    def node_noise(self):
        base = KaryTreeCounter.node_noise.fget(self)
        return dataclasses.replace(base, param=base.param * 0.7)


@pytest.mark.parametrize('bad, honest', [
    (_MisScaledBLT(rho=0.5, horizon=20, dimension=RUNS),
     BLTCounter(rho=0.5, horizon=20, dimension=RUNS)),
    (_MisScaledKary(horizon=20, epsilon=1.0, k=3, estimator='textbook', dimension=RUNS),
     KaryTreeCounter(horizon=20, epsilon=1.0, k=3, estimator='textbook', dimension=RUNS)),
])
def test_a_mis_scaled_counter_fails_the_same_test(bad, honest):
    errors = _errors(bad, 20, seed=7)
    for t in (3, 20):
        assert variance_pvalue(errors[t - 1], honest.release_variance(t)) < P_THRESHOLD


# -- DP audit: BLT, exact zCDP of the privatised integer vector ----------------------------------

def _grid_values(m: BLTCounter, stream):
    """u_t(x) per step: the exact integer vectors the noise is added to, from the real encoder
    (``BLTCounter.encode`` is what ``step`` runs before drawing the noise)."""
    encoder = m.init_state().encoder
    out = []
    for t, value in enumerate(stream, 1):
        u, encoder = m.encode(encoder, value, t)
        out.append([int(a) for a in u])
    return out


def _realised_rho(m: BLTCounter, x, x_prime) -> float:
    """Σ_t Σ_bins D²/(2σ_t²), D = u(x) - u(x'): the zCDP the pair actually costs (CKS Thm 14)."""
    u, u_prime = _grid_values(m, x), _grid_values(m, x_prime)
    total = fractions.Fraction(0)
    for t, (a, b) in enumerate(zip(u, u_prime), 1):
        d2 = sum((ai - bi) ** 2 for ai, bi in zip(a, b))
        total += fractions.Fraction(d2) / (2 * m.grid_sigma2(t))
    return float(total)


def _neighbour_pairs(m: BLTCounter, horizon, seed):
    """Adversarial neighbours: random large streams; one unit adds l1 events spread over steps
    and bins (l2 of per-bin totals within the bound)."""
    gen = np.random.default_rng(seed)
    pairs = []
    for _ in range(4):
        base = gen.integers(0, 10 ** 9, size=(horizon, m.dimension))
        for spread in ('one_step', 'many_steps'):
            changed = base.copy()
            budget = int(m.l1_sensitivity)
            while budget:
                t = gen.integers(horizon) if spread == 'many_steps' else 0
                b = gen.integers(m.dimension)
                changed[t, b] += 1
                budget -= 1
            l2 = np.linalg.norm(np.abs(changed - base).sum(axis=0))
            if l2 <= (m.l2_sensitivity or m.l1_sensitivity) + 1e-12:
                pairs.append((base, changed))
    return pairs


@pytest.mark.parametrize('kwargs', [
    dict(rho=0.5, horizon=24),
    dict(rho=0.05, horizon=None, design_horizon=16, dimension=3, l1_sensitivity=2.0),
])
def test_blt_exact_zcdp_audit_on_neighbouring_streams(kwargs):
    m = BLTCounter(**kwargs)
    worst = max(_realised_rho(m, x, y) for x, y in _neighbour_pairs(m, 24, seed=1))
    assert 0.5 * m.rho < worst <= m.rho


@dataclasses.dataclass(frozen=True)
class _UnderCalibratedBLT(BLTCounter):
    """Calibrates to the column norm at T/4 instead of T: the audit must catch it."""

    @functools.cached_property
    def column_norm(self) -> float:
        from beam_dp.mechanisms import blt_optimize
        theta, w = self.exact_params
        return math.sqrt(blt_optimize.sensitivity_squared(theta, w, max(1, self.horizon // 4)))


def test_blt_audit_has_power():
    m = _UnderCalibratedBLT(rho=0.5, horizon=24)
    worst = max(_realised_rho(m, x, y) for x, y in _neighbour_pairs(m, 24, seed=1))
    assert worst > m.rho


# -- DP audit: Laplace counters, empirical ---------------------------------------------------------

def _privacy_loss(make, steps, first_step, samples=300_000, seed=11, cells=(0, 2)):
    """Max over well-populated cells of |log P[release|D]/P[release|D']| minus a one-sided 4σ
    slack; D' = D plus one event at ``first_step`` (releases at ``cells``)."""
    m = make(samples)

    def histogram(extra):
        state, rng, out = m.init_state(), noise.seeded(seed + extra), []
        for t in range(1, steps + 1):
            value = np.full(samples, extra if t == first_step else 0, np.int64)
            release, state = m.step(state, value, rng)
            out.append(np.round(np.asarray(release, dtype=float), 9))
        return collections.Counter(zip(*(out[c].tolist() for c in cells)))

    a, b = histogram(0), histogram(1)
    worst = 0.0
    for cell in set(a) & set(b):
        if a[cell] >= 2000 and b[cell] >= 2000:
            slack = 4 * math.sqrt(1 / a[cell] + 1 / b[cell])
            worst = max(worst, abs(math.log(a[cell] / b[cell])) - slack)
    return worst


@pytest.mark.parametrize('estimator', ['textbook', 'variance_reduced'])
def test_kary_tree_one_event_moves_the_releases_by_at_most_epsilon(estimator):
    """Horizon 3, k = 3: releases (r1, r3) are a bijection of (leaf 1, root); an event at step 1
    moves both, the full ε."""
    honest = lambda n: KaryTreeCounter(horizon=3, epsilon=1.0, k=3, estimator=estimator,
                                       dimension=n)
    assert _privacy_loss(honest, 3, first_step=1) <= 1.0
    overspent = lambda n: KaryTreeCounter(horizon=3, epsilon=2.0, k=3, estimator=estimator,
                                          dimension=n)
    assert _privacy_loss(overspent, 3, first_step=1) > 1.0


def test_per_step_one_event_moves_the_releases_by_at_most_epsilon():
    honest = lambda n: PerStepCounter(epsilon=1.0, dimension=n)
    assert _privacy_loss(honest, 2, first_step=1, cells=(0, 1)) <= 1.0
    overspent = lambda n: PerStepCounter(epsilon=2.0, dimension=n)
    assert _privacy_loss(overspent, 2, first_step=1, cells=(0, 1)) > 1.0
