"""Spec 000 criterion 6 (last part): BBImprover's per-time failure probability is
β_t = β/(2t²) — the box at time t is run with ln(1/β_t) = ln(2t²/β), its α_t uses ln(1/β_t)
(erratum E5), and Σ_t β_t ≤ π²β/12 ≤ β, so all α_t hold simultaneously w.p. ≥ 1 − β."""

import math

import numpy as np
import pytest

from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import bbimprover_alpha
from beam_dp.mechanisms.bb_scheduler import bbimprover_epsilon
from beam_dp.mechanisms.black_boxes import CallableBlackBox
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery

N = 4


def _recording_box(calls):
    def run(counts, t, epsilon, alpha, ln_inv_beta, rng):
        calls.append((t, epsilon, alpha, ln_inv_beta))
        return np.asarray(counts) / t
    return CallableBlackBox(run, lambda epoch, q: q.evaluate(epoch), p=0.5, g=2.0)


@pytest.mark.parametrize('beta', [0.05, 0.2])
def test_the_box_runs_at_beta_t_equal_beta_over_2t_squared(beta):
    calls = []
    imp = BBImprover(_recording_box(calls), epsilon=0.9, delta=1e-6, beta=beta, n=50,
                     domain_size=N)
    rng = seeded(3)
    state = imp.add_data(imp.init_state(), np.arange(50) % N, rng)
    q = LinearQuery.point(N, 1)
    for k in range(30):
        _, state = imp.answer(state, q, rng)
        state = imp.add_data(state, [k % N] * (k + 1), rng)
    assert len(calls) == 30
    for t, eps_t, alpha_t, ln_inv_beta_t in calls:
        beta_t = beta / (2 * t * t)
        assert ln_inv_beta_t == pytest.approx(math.log(1 / beta_t), rel=1e-12)
        # α_t = g (1/(ε_t t))^p (ln t)^{p''} (ln(1/β_t))^{p'} with the box's p' = p = ½.
        expected = 2.0 * (1 / (eps_t * t)) ** 0.5 * math.log(1 / beta_t) ** 0.5
        assert alpha_t == pytest.approx(expected, rel=1e-12)
        assert eps_t == pytest.approx(bbimprover_epsilon(t, 0.9 * (1 - 1e-9), 1e-6, 0.1),
                                      rel=1e-12)


def test_alpha_uses_log_inverse_beta_t_and_the_betas_sum_below_beta():
    beta = 0.05
    for t in (2, 10, 10**3, 10**6):
        a = bbimprover_alpha(t, 0.01, beta, p=1.0, p1=1.0, p2=0.0, g=1.0)
        assert a == pytest.approx(math.log(2 * t * t / beta) / (0.01 * t), rel=1e-12)
        # A β_t that dropped the t² (β/2) would give a strictly smaller α_t: the test sees it.
        assert a > math.log(2 / beta) / (0.01 * t)
    total = math.fsum(beta / (2 * t * t) for t in range(1, 10**6))
    assert total <= math.pi ** 2 * beta / 12 <= beta
    assert total == pytest.approx(math.pi ** 2 * beta / 12, rel=1e-5)
