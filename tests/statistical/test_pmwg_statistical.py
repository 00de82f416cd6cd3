"""Statistical tier for spec 000 (criteria 9, 11, 19, 20): the noise of ATG/NATG/NSG/PMWG and of
the Laplace query-vector box has the declared scale (and a 30% error is detected), duplicated
noise is detected, and accuracy holds with frequency ≥ 1 − β at the spec's settings."""

import math

import numpy as np
import pytest
from scipy import stats

from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
from beam_dp.mechanisms.growing_svt import ETA_SCALE
from beam_dp.mechanisms.growing_svt import NU_SCALE
from beam_dp.mechanisms.growing_svt import NUMERIC_SCALE
from beam_dp.mechanisms.growing_svt import PowerNoise
from beam_dp.mechanisms.growing_svt import SVTRound
from beam_dp.mechanisms.growing_svt import _start_round
from beam_dp.mechanisms.growing_svt import svt_query
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.noise import seeded
from beam_dp.noise.real_laplace import grid_laplace
from beam_dp.queries import LinearQuery
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical import SAMPLE_SIZE
from tests.statistical import sizes
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

#: Spec 000 §"Noise calibration": ≥ 10⁵ samples (the ``spec_size`` variants).
SPEC_SAMPLES = 100_000


def _assert_laplace_with_power(samples, scale):
    """True scale passes KS; scale·(1 ± FUDGE_FACTOR) is rejected; mean |x| within 3%
    (≥ 5000 samples: the standard error of mean |x| is 1/√n ≈ 1.4%)."""
    samples = np.asarray(samples, dtype=np.float64)
    assert stats.kstest(samples, 'laplace', args=(0, scale)).pvalue > P_THRESHOLD
    for wrong in (scale * (1 - FUDGE_FACTOR), scale * (1 + FUDGE_FACTOR)):
        assert stats.kstest(samples, 'laplace', args=(0, wrong)).pvalue < P_THRESHOLD
    assert np.mean(np.abs(samples)) == pytest.approx(scale, rel=0.03 if samples.size < 10_000 else 0.02)


@sizes(SAMPLE_SIZE // 2, SPEC_SAMPLES)
def test_threshold_noise_is_laplace_2(size):
    """η (drawn once per round) has scale ETA_SCALE = 2(1 + 2^-7), the paper's Lap(2)."""
    rng = seeded(100)
    xi_delta = 0.01
    etas = []
    for _ in range(size):
        rnd = _start_round(SVTRound(), 1000, xi_delta, rng)
        etas.append(math.ldexp(rnd.eta_units, -rnd.eta_bits))
    _assert_laplace_with_power(etas, ETA_SCALE)


@sizes(SAMPLE_SIZE, SPEC_SAMPLES)
def test_query_noise_scale_4_over_xi(size):
    """ν ~ Lap(4/ξ_t) on the sensitivity-1/t grid (the call svt_query makes)."""
    rng = seeded(101)
    noise, t = PowerNoise(30.0), 2500
    released, _ = grid_laplace(rng, np.full(size, 0.3), NU_SCALE / noise.xi(t), 1 / t)
    _assert_laplace_with_power((released - 0.3) * noise.xi(t) / NU_SCALE, 1.0)


@sizes(SAMPLE_SIZE // 4, SPEC_SAMPLES)
def test_numeric_answer_noise_scale_8_over_xi(size):
    """NATG's halting answer is f(x_t) + Lap(8/ξ_t) (threshold far below: every query halts)."""
    rng = seeded(102)
    noise, t, value = PowerNoise(30.0), 2500, 0.4
    errors = []
    for _ in range(size):
        above, numeric, _ = svt_query(SVTRound(), value, t, noise.xi(t), noise.xi_delta(t),
                                      -1e6, True, rng)
        assert above
        errors.append((numeric - value) * noise.xi(t) / NUMERIC_SCALE)
    _assert_laplace_with_power(errors, 1.0)


def _laplace_box_errors(epsilon, t, runs, rng):
    queries = tuple(LinearQuery.range(16, a, a + 4) for a in range(10))
    box = LaplaceQueryVector(queries)
    counts = np.arange(16, dtype=np.int64) * (t // 120)
    counts[0] += t - counts.sum()
    exact = np.array([q.evaluate(counts) / t for q in queries])
    out = np.array([np.array(box.run(counts, t, epsilon, 0.0, 0.0, rng).values) - exact
                    for _ in range(runs)])
    return out, box.noise_scale(epsilon, t)


@pytest.mark.parametrize('epsilon, t', [(0.0082645, 1000), (0.5, 10**6)])
@sizes(SAMPLE_SIZE // 20, SPEC_SAMPLES // 10, 'runs')     # 10 coordinates per run
def test_laplace_box_noise_per_epoch(epsilon, t, runs):
    """Spec criterion 11: (y − Fx)·ε_i t/k is standard Laplace in every epoch."""
    rng = seeded(103)
    errors, scale = _laplace_box_errors(epsilon, t, runs, rng)
    _assert_laplace_with_power(errors.ravel() / scale, 1.0)


def test_duplicated_noise_is_detected():
    """Coordinates are independent: the variance of a sum of two coordinates is 2·2b²; if the
    noise were duplicated across coordinates it would be 4·2b², which the test rejects."""
    rng = seeded(104)
    errors, scale = _laplace_box_errors(0.1, 10_000, SAMPLE_SIZE // 20, rng)
    pair = (errors[:, 0] + errors[:, 1]) / scale
    assert variance_pvalue(pair, 2 * 2.0) > P_THRESHOLD
    duplicated = 2 * errors[:, 0] / scale
    assert variance_pvalue(duplicated, 2 * 2.0) < P_THRESHOLD


def test_pmwg_accuracy_logic_check():
    """Spec criterion 20: ε = 100, N = 8, n = 10⁵ → 2·10⁵, α = 0.3, 600 queries with drift:
    every answer within α in each of 5 seeds, no halt, mean error ≤ 0.1."""
    mech = PMWG(epsilon=100, alpha=0.3, n=10**5, domain_size=8)
    for seed in range(5):
        rng = seeded(200 + seed)
        gen = np.random.default_rng(seed)
        state = mech.add_data(mech.init_state(), gen.integers(0, 4, 10**5), rng)
        errors = []
        for k in range(600):
            if k % 6 == 5:
                state = mech.add_data(state, gen.integers(4, 8, 1000), rng)
            q = LinearQuery.from_vector(gen.random(8))
            ans, state = mech.answer(state, q, rng)
            assert ans.status in ('easy', 'hard')
            errors.append(abs(ans.value - q.evaluate(state.counts) / state.t))
        assert state.t == 2 * 10**5 and not state.public.halted
        assert max(errors) <= mech.alpha and np.mean(errors) <= 0.1
        assert state.public.hard >= 1
        assert ans.epsilon_spent <= mech.epsilon


def test_bbscheduler_laplace_accuracy():
    """Spec criterion 19: k = 10, N = 16, n = 10⁵ → 10⁶, ε = 1, β = 0.05, adversarial drift:
    in ≥ 95% of 40 seeds every answer is within the guaranteed 0.212."""
    queries = tuple(LinearQuery.range(16, a, a + 4) for a in range(10))
    sched = BBScheduler(LaplaceQueryVector(queries), epsilon=1.0, beta=0.05, n=10**5,
                        domain_size=16)
    bound = sched.guaranteed_error()
    assert bound == pytest.approx(0.212, abs=1e-3)
    good, worst = 0, []
    for seed in range(40):
        rng = seeded(300 + seed)
        gen = np.random.default_rng(seed)
        state = sched.add_data(sched.init_state(), gen.integers(0, 8, 10**5), rng)
        max_err = 0.0
        while state.t < 10**6:
            state = sched.add_data(state, gen.integers(8, 16, 30_000), rng)
            for q in queries:
                ans, state = sched.answer(state, q, rng)
                max_err = max(max_err, abs(ans.value - q.evaluate(state.counts) / state.t))
        assert sched.epsilon_spent(state) <= 1.0
        worst.append(max_err)
        good += max_err <= bound
    assert good >= 0.95 * 40
    assert np.median(worst) < 0.1
