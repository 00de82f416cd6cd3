"""BLTCounter: contract, exactness, closed forms against brute force, privacy arithmetic,
validation. (Statistical checks: tests/statistical/test_counters_statistical.py.)"""

import fractions
import math
import pickle

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import blt
from beam_dp.mechanisms import blt_optimize
from beam_dp.mechanisms import blt_tables
from beam_dp.mechanisms.blt import BLTCounter
from tests.mechanisms.contract import CounterContract


class TestBLTContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(horizon=64, rho=0.5, dimension=3)
        kwargs.update(overrides)
        return BLTCounter(**kwargs)

    def invalid_params(self):
        return super().invalid_params() + [({'slack_fraction': 0.0}, 'slack_fraction'),
                                           ({'theta': (0.5,)}, 'theta and weights')]

    def make_noise_free(self):
        return self.make(rho=1e16, slack_fraction=1e-12)

    def inputs(self):
        return [np.array([t % 3, 1, 5 * (t % 2)]) for t in range(64)]


class TestBLTUnboundedContract(TestBLTContract):

    def make(self, **overrides):
        overrides.setdefault('horizon', None)
        return super().make(**overrides)


def test_closed_form_losses_match_brute_force():
    for e in (4, 7, 10):
        theta, w = blt_tables.FINITE[e]
        n = 2 ** e
        c = blt_optimize.blt_coefficients(theta, w, n)
        b = np.cumsum(blt_optimize.inverse_coefficients(theta, w, n))
        assert blt_optimize.sensitivity_squared(theta, w, n) == pytest.approx(np.sum(c * c),
                                                                               rel=1e-10)
        assert blt_optimize.loss(theta, w, n) == pytest.approx(np.sum(c * c) * np.sum(b * b),
                                                               rel=1e-9)
        mean = np.sum(c * c) * np.mean(np.cumsum(b * b))
        assert blt_optimize.loss(theta, w, n, 'mean') == pytest.approx(mean, rel=1e-9)
        np.testing.assert_allclose(blt_optimize.inverse_coefficients_fast(theta, w, n),
                                   blt_optimize.inverse_coefficients(theta, w, n), atol=1e-12)


def test_c_inverse_is_the_inverse_of_c():
    theta, w = blt_tables.FINITE[6]
    n = 64
    c = blt_optimize.blt_coefficients(theta, w, n)
    chat = blt_optimize.inverse_coefficients(theta, w, n)
    toeplitz = lambda a: np.array([[a[i - j] if i >= j else 0 for j in range(n)]
                                   for i in range(n)])
    np.testing.assert_allclose(toeplitz(c) @ toeplitz(chat), np.eye(n), atol=1e-10)


def test_limiting_sensitivity_bounds_every_horizon():
    theta, w = blt_tables.UNBOUNDED[12]
    limit = blt_optimize.sensitivity_squared(theta, w, None)
    finite = [blt_optimize.sensitivity_squared(theta, w, 2 ** e) for e in range(1, 40, 3)]
    assert all(f <= limit for f in finite)
    assert finite[-1] == pytest.approx(limit, rel=1e-9)


@pytest.mark.parametrize('exponent', [16, 20])
def test_targets_max_std_within_2_percent_of_the_square_root_factorization(exponent):
    horizon = 2 ** exponent
    reference = blt_optimize.sqrt_factorization_squared_norm(horizon)   # σ=1 at ρ=0.5, Δ=1
    finite = BLTCounter(rho=0.5, horizon=horizon)
    unbounded = BLTCounter(rho=0.5, design_horizon=horizon)
    assert finite.noise_stddev <= 1.02 * reference
    assert unbounded.noise_stddev <= 1.05 * reference


def test_release_variance_matches_the_matrix_formula():
    m = BLTCounter(rho=0.3, horizon=50, l1_sensitivity=2.0, l2_sensitivity=1.5)
    theta, w = m.exact_params
    n = 50
    b = np.cumsum(blt_optimize.inverse_coefficients(theta, w, n))
    for t in (1, 2, 3, 17, 50):
        expected = sum(b[t - s] ** 2 * m.step_noise_variance(s) for s in range(1, t + 1))
        assert m.release_variance(t) == pytest.approx(expected, rel=1e-10)
    # σ² = Δ²/(2ρ) rounded up; V_s = σ² once the grid σ_s² is large.
    assert float(m.sigma2) == pytest.approx(m.sensitivity ** 2 / 0.6, rel=1e-6)
    assert float(m.sigma2) >= m.sensitivity ** 2 / 0.6
    assert m.step_noise_variance(7) == pytest.approx(float(m.sigma2), rel=1e-12)


def test_sensitivity_includes_the_rounding_slack():
    m = BLTCounter(rho=1.0, horizon=1000, l1_sensitivity=4.0, l2_sensitivity=2.0, dimension=10)
    slack = 2 * math.sqrt(4) * math.sqrt(float(blt._slack_sum(1000))) / 2 ** m.grid_bits
    assert m.sensitivity == pytest.approx(2.0 * m.column_norm + slack, rel=1e-12)
    assert 0 < slack <= 1e-4 * 2.0 * m.column_norm
    # Unbounded: the slack sum runs to MAX_STEPS and converges.
    assert float(blt._slack_sum(blt.MAX_STEPS)) < float(blt._slack_sum(2 ** 20)) + 0.2
    assert float(blt._slack_sum(2 ** 10)) < float(blt._slack_sum(2 ** 20))


def test_grid_refines_with_t_and_slack_sum_is_exact():
    assert [blt.grid_offset(t) for t in (1, 2, 3, 4, 5, 8, 9, 2 ** 20)] == [0, 1, 2, 2, 2, 2, 3, 13]
    brute = sum(fractions.Fraction(1, 4 ** blt.grid_offset(s)) for s in range(1, 300))
    assert blt._slack_sum(299) == brute


def test_encoder_is_exact_fixed_point_of_c_x():
    """The integer grid value u_t equals round(2^k (Cx)_t) up to one unit (exact rationals)."""
    m = BLTCounter(rho=1e16, horizon=40, slack_fraction=1e-12)
    theta, w = m.exact_params
    p, q = m._dyadic_params
    rng = noise.seeded(3)
    xs = [int(v) for v in np.random.default_rng(0).integers(-5, 1000, 40)]
    state = m.init_state()
    exact_theta = [fractions.Fraction(pi, 2 ** blt.PARAM_BITS) for pi in p]
    exact_w = [fractions.Fraction(qi, 2 ** blt.PARAM_BITS) for qi in q]
    buffers = [fractions.Fraction(0)] * len(p)
    for t, x in enumerate(xs, 1):
        cx = x + sum(wi * si for wi, si in zip(exact_w, buffers))
        buffers = [th * si + x for th, si in zip(exact_theta, buffers)]
        enc = state.encoder
        _, state = m.step(state, x, rng)
        approx = [fractions.Fraction(int(e), 2 ** blt.FIXED_BITS) for e in state.encoder[:, 0]]
        for a, b_ in zip(approx, buffers):
            assert abs(a - b_) < fractions.Fraction(1, 2 ** (blt.FIXED_BITS - 40))
        del enc, cx


def test_noise_free_release_is_the_prefix_sum_to_grid_precision():
    m = BLTCounter(rho=1e16, horizon=None, dimension=2, slack_fraction=1e-12)
    state, rng = m.init_state(), noise.seeded(0)
    total = np.zeros(2)
    for t in range(300):
        value = np.array([t * 1000003, 7])
        total += value
        release, state = m.step(state, value, rng)
        np.testing.assert_allclose(release, total, rtol=1e-12, atol=1e-6)


def test_state_is_small():
    m = BLTCounter(rho=0.5, horizon=2 ** 20)
    state, rng = m.init_state(), noise.seeded(0)
    for _ in range(200):
        _, state = m.step(state, 10 ** 6, rng)
    assert state.nbytes() < 300
    assert len(pickle.dumps(state)) < 1024
    assert m.buffers == 4


def test_tables_cover_common_horizons_and_are_valid():
    for table in (blt_tables.FINITE, blt_tables.UNBOUNDED):
        assert sorted(table) == list(range(4, 21))
        for theta, w in table.values():
            assert len(theta) == len(w) == 4
            assert all(0 < x < 1 for x in theta) and all(x > 0 for x in w)


def test_non_power_of_two_horizon_uses_the_next_table_entry():
    m = BLTCounter(rho=0.5, horizon=366)
    assert m._float_params() == blt_tables.FINITE[9]
    reference = blt_optimize.sqrt_factorization_squared_norm(366)
    assert m.noise_stddev <= 1.03 * reference


@pytest.mark.parametrize('kwargs, name', [
    (dict(rho=0.0), 'rho'),
    (dict(rho=1.0, horizon=0), 'horizon'),
    (dict(rho=1.0, horizon=10, design_horizon=100), 'design_horizon'),
    (dict(rho=1.0, design_horizon=-1), 'design_horizon'),
    (dict(rho=1.0, dimension=0), 'dimension'),
    (dict(rho=1.0, l1_sensitivity=1.0, l2_sensitivity=2.0), 'l2_sensitivity'),
    (dict(rho=1.0, theta=(0.5,)), 'theta and weights'),
    (dict(rho=1.0, theta=(1.0,), weights=(0.1,)), 'theta'),
    (dict(rho=1.0, theta=(0.5, 0.4), weights=(0.1,)), 'same length'),
    (dict(rho=1.0, theta=(0.5,), weights=(-0.1,)), 'weights'),
    (dict(rho=1.0, slack_fraction=0.0), 'slack_fraction'),
])
def test_invalid_params_name_the_argument(kwargs, name):
    with pytest.raises(InvalidParamsError, match=name):
        BLTCounter(**kwargs)


def test_explicit_parameters_are_used():
    m = BLTCounter(rho=1.0, horizon=100, theta=(0.9, 0.5), weights=(0.2, 0.1))
    theta, w = m.exact_params
    np.testing.assert_allclose(theta, [0.9, 0.5], atol=1e-15)
    assert m.column_norm ** 2 == pytest.approx(
        blt_optimize.sensitivity_squared([0.9, 0.5], [0.2, 0.1], 100), rel=1e-8)
