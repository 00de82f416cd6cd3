"""ERMG (spec 000 §3.6, Theorem 12): the ERM box's minimiser and its sensitivity bound, its
declared (p, p', p'', g), the BBImprover schedule it runs on (one lazy run per size, β_t =
β/(2t²), ledger ≤ ε), and an exact and an empirical DP audit of one output-perturbation run on
neighbouring databases (swap one record), with a mis-scaled box caught by the same audit."""

import itertools
import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import bbimprover_epsilon
from beam_dp.mechanisms.ermg import ERMBox
from beam_dp.mechanisms.ermg import ERMModel
from beam_dp.mechanisms.ermg import ermg
from beam_dp.mechanisms.ermg import regularised_risk
from beam_dp.queries import LinearQuery

POINTS = [[0.6, 0.8], [0.6, -0.8], [-0.6, 0.8], [-0.6, -0.8], [1.0, 0.0], [0.0, -1.0]]
LABELS = [1, 1, 0, 0, 1, 0]
BOX = ERMBox(POINTS, LABELS, 0.1)


def _gradient(box, theta, counts, t):
    p = 1 / (1 + np.exp(-(box.points @ theta)))
    return box.points.T @ (np.asarray(counts) / t * (p - box.labels)) + box.reg * theta


def test_the_minimiser_is_the_minimiser():
    counts, t = np.array([30, 10, 5, 20, 3, 7]), 75
    theta = BOX.minimiser(counts, t)
    assert np.linalg.norm(_gradient(BOX, theta, counts, t)) <= 1e-12
    for direction in np.eye(2):
        for h in (1e-3, -1e-3):
            assert (regularised_risk(theta + h * direction, BOX.points, BOX.labels, counts, t,
                                     BOX.reg)
                    > regularised_risk(theta, BOX.points, BOX.labels, counts, t, BOX.reg))
    assert np.linalg.norm(theta) <= 1 / BOX.reg


def test_swapping_one_record_moves_the_minimiser_at_most_2_over_t_lambda():
    gen = np.random.default_rng(4)
    worst = 0.0
    for _ in range(30):
        counts = gen.multinomial(40, np.ones(6) / 6)
        theta = BOX.minimiser(counts, 40)
        for i, j in itertools.permutations(range(6), 2):
            if counts[i]:
                other = counts.copy()
                other[i] -= 1
                other[j] += 1
                worst = max(worst, np.linalg.norm(BOX.minimiser(other, 40) - theta)
                            / BOX.sensitivity(40))
    assert 0.05 < worst <= 1.0


def test_bad_tables_are_refused():
    with pytest.raises(InvalidParamsError, match='L2 norm ≤ 1'):
        ERMBox([[2.0, 0.0]], [1], 0.1)
    with pytest.raises(InvalidParamsError, match='labels'):
        ERMBox([[0.5, 0.0]], [2], 0.1)
    with pytest.raises(InvalidParamsError, match='reg'):
        ERMBox([[0.5, 0.0]], [1], 0.0)
    with pytest.raises(InvalidParamsError, match='epsilon must be in'):
        ermg(points=POINTS, labels=LABELS, reg=0.1, epsilon=1.5, delta=1e-6, beta=0.05, n=10)


def test_declared_constants_and_the_bbimprover_schedule():
    assert (BOX.p, BOX.g) == (2.0, (0.25 + 0.1) / 2 * (4 * 3 / 0.1) ** 2)
    mech = ermg(points=POINTS, labels=LABELS, reg=0.1, epsilon=0.9, delta=1e-6, beta=0.05,
                n=20)
    assert isinstance(mech, BBImprover) and mech.lazy and (mech.p1, mech.p2) == (2.0, 0.0)
    state, rng = mech.init_state(), noise.seeded(1)
    query = LinearQuery.point(6, 0)
    answer, state = mech.answer(state, query, rng)
    assert answer.status == 'not_started'
    runs = []
    state = mech.add_data(state, np.arange(17) % 6, rng)
    for t in range(20, 60, 3):
        state = mech.add_data(state, np.array([t % 6] * 3), rng)
        for _ in range(2):                       # two queries at one size: one run
            answer, state = mech.answer(state, query, rng)
        runs.append(state.release)
        assert 0 <= answer.value <= 1
    assert [r.t for r in runs] == sorted({r.t for r in runs})
    assert state.runs == len(runs)
    for r in runs:
        assert r.epsilon == pytest.approx(bbimprover_epsilon(r.t, 0.9, 1e-6, 0.1), rel=1e-8)
        assert r.ln_inv_beta == pytest.approx(math.log(2 * r.t ** 2 / 0.05))     # β_t
    assert mech.epsilon_spent(state) <= 0.9
    assert isinstance(state.output, ERMModel) and state.output.t == state.t


def _worst_pair(box, t, gen, tries=40):
    """The neighbouring pair (swap one record) with the largest ‖Δθ̂‖ among random ones."""
    best = (0.0, None, None)
    n = box.domain_size
    for _ in range(tries):
        counts = gen.multinomial(t, np.ones(n) / n)
        theta = box.minimiser(counts, t)
        for i, j in itertools.permutations(range(n), 2):
            if counts[i]:
                other = counts.copy()
                other[i] -= 1
                other[j] += 1
                d = float(np.linalg.norm(box.minimiser(other, t) - theta))
                if d > best[0]:
                    best = (d, counts, other)
    return best


@pytest.mark.parametrize('eps', [0.1, 1.0])
def test_exact_audit_of_one_run_on_neighbouring_databases(eps):
    """The L2-Laplace density ratio at any output is ≤ exp(‖Δθ̂‖/b) (triangle inequality,
    attained along Δθ̂): the worst pair's loss ‖Δθ̂‖/b ≤ ε, and with the mis-scaled b/10 the
    same pair exceeds ε."""
    t = 30
    dist, _, _ = _worst_pair(BOX, t, np.random.default_rng(0))
    loss = dist / BOX.noise_scale(eps, t)
    assert 0.1 * eps < loss <= eps
    assert dist / (BOX.noise_scale(eps, t) / 10) > eps          # b/10 would not be ε-DP


class _Sharp(ERMBox):
    """A mis-scaled box: a quarter of the calibrated noise (the audit's power)."""

    def noise_scale(self, epsilon, t):
        return super().noise_scale(epsilon, t) / 4


def _empirical_loss(box, a, b, t, eps, runs):
    """The largest |log P_a(E)/P_b(E)| over the events E = {θ > c} and {θ ≤ c}, c at 19
    quantiles of the pooled draws, among events with ≥ 1000 draws on both sides (an event
    with ≥ 2000 draws on one side and none on the other: infinite)."""
    draws = []
    for counts, seed in ((a, 1), (b, 2)):
        rng = noise.seeded(seed)
        draws.append(np.array([box.run(counts, t, eps, None, None, rng.derive(i)).theta[0]
                               for i in range(runs)]))
    worst = 0.0
    for c in np.quantile(np.concatenate(draws), np.linspace(0.05, 0.95, 19)):
        for side in (np.greater, np.less_equal):
            na, nb = side(draws[0], c).sum(), side(draws[1], c).sum()
            if min(na, nb) == 0 and max(na, nb) >= 2000:
                return math.inf
            if min(na, nb) >= 1000:
                worst = max(worst, abs(math.log(na / nb)))
    return worst


def test_empirical_audit_in_one_dimension():
    """Releases drawn by the box itself (d = 1: Laplace noise), binned: the realised log ratio
    of each well-sampled half-line event is ≤ the exact loss + sampling error (0.1); the mis-scaled box
    (b/4) exceeds ε on the same pair."""
    # The same feature with both labels: swapping one label flips its gradient, so ‖Δθ̂‖
    # reaches about half of the bound 2/(tΛ) (Λ = 5: the logistic curvature ≤ 1/4 is small).
    table = ([[1.0], [1.0], [-1.0], [-1.0]], [1, 0, 1, 0], 5.0)
    box, sharp = ERMBox(*table), _Sharp(*table)
    t, eps = 12, 1.0
    dist, a, b = _worst_pair(box, t, np.random.default_rng(3))
    exact = dist / box.noise_scale(eps, t)
    assert 0.4 < exact <= eps
    got = _empirical_loss(box, a, b, t, eps, runs=20_000)
    assert 0.5 * exact < got <= exact + 0.1
    assert _empirical_loss(sharp, a, b, t, eps, runs=20_000) > eps
