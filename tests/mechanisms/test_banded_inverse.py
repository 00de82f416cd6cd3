"""BandedInverseCounter (banded inverse square root, BISR): coefficients, the exact encoder
recursion and its rounding, the sensitivity against the brute-force supremum, the closed-form
variance against the matrix form, the DP audit on neighbouring streams, its place in
``mechanism='auto'`` and the driver."""

import itertools
import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.counter_choice import choose_counter
from beam_dp.drivers.counter_choice import mechanism_name
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.io import state_coder
from beam_dp.mechanisms.banded import COEF_BITS
from beam_dp.mechanisms.banded import BandedCounter
from beam_dp.mechanisms.banded import BandedInverseCounter
from beam_dp.mechanisms.banded import inverse_sqrt_coefficients
from beam_dp.mechanisms.banded import sqrt_coefficients
from beam_dp.mechanisms.counter_selection import expected_error
from beam_dp.mechanisms.participation import Participation
from beam_dp.privacy_unit import UserLevel
import beam_dp.transforms.state_types  # noqa: F401  (registers the state types)
from tests.mechanisms import test_banded


def _matrices(counter, t):
    """(R̃, C = R̃⁻¹) as T×T matrices (float)."""
    r = counter.decoder_coefficients
    R = np.zeros((t, t))
    for k, rk in enumerate(r):
        R += np.diag(np.full(t - k, rk), -k)
    return R, np.linalg.inv(R)


def test_the_inverse_square_root_inverts_the_square_root():
    a, r = sqrt_coefficients(64), inverse_sqrt_coefficients(64)
    prod = np.convolve(a, r)[:64]
    assert prod[0] == pytest.approx(1.0) and np.allclose(prod[1:], 0.0, atol=1e-15)
    assert r[0] == 1 and np.all(r[1:] < 0)


def test_the_encoder_is_the_exact_recursion_and_the_rounding_is_half_a_grid_step():
    counter = BandedInverseCounter(rho=1e12, bands=5, horizon=30, dimension=3)
    rng, state = noise.seeded(1), counter.init_state()
    xs = np.random.default_rng(0).integers(0, 7, size=(30, 3))
    vs, releases = [], []
    p = [round(math.ldexp(x, COEF_BITS)) for x in inverse_sqrt_coefficients(5)]
    for x in xs:
        release, state = counter.step(state, x, rng)
        vs.append([int(v) for v in state.inputs[0]])
        releases.append(release)
    for t in range(30):
        for j in range(3):
            rv = vs[t][j] * (1 << COEF_BITS) + sum(p[k] * vs[t - k][j] for k in range(1, 5)
                                                   if t - k >= 0)
            e = rv / 4.0 ** COEF_BITS - xs[t][j]          # (R V)_t / 2^B = x_t + e_t
            assert abs(e) <= 2.0 ** -(COEF_BITS + 1) + 1e-18
    assert np.allclose(releases[-1], xs.sum(axis=0), atol=1e-3)     # the noise is tiny here


@pytest.mark.parametrize('bands', [2, 4, 12])
@pytest.mark.parametrize('steps, total', [(1, 100.0), (2, 100.0), (3, 100.0), (12, 100.0),
                                          (12, 7.0), (5, 4.0)])
def test_the_sensitivity_bounds_the_brute_force_supremum(bands, steps, total):
    t, m = 12, 2.0
    pattern = Participation(max_groups=1, max_steps=steps, step_bound=m, total_bound=total)
    counter = BandedInverseCounter(rho=1.0, bands=bands, horizon=t, l1_sensitivity=m * steps,
                                   participation=pattern)
    _, C = _matrices(counter, t)
    assert np.all(C >= -1e-12)
    best = 0.0
    for s in range(1, steps + 1):
        for cols in itertools.combinations(range(t), s):
            delta = np.zeros(t)
            left = total
            for c in cols:
                delta[c] = min(m, left)
                left -= delta[c]
            best = max(best, float(np.linalg.norm(C @ delta)))
    declared = counter.column_norm * counter.effective_l2
    assert declared >= best * (1 - 1e-9)
    assert counter.sensitivity >= declared
    assert declared <= 2.0 * best          # and not wildly loose


@pytest.mark.parametrize('bands', [1, 3, 8])
def test_the_closed_form_variance_is_the_matrix_one(bands):
    t = 20
    counter = BandedInverseCounter(rho=0.7, bands=bands, horizon=t, l1_sensitivity=2.0)
    R, _ = _matrices(counter, t)
    A = np.tril(np.ones((t, t)))
    rows = (A @ R) ** 2
    expected = counter.step_noise_variance * rows.sum(axis=1)
    assert np.allclose(counter.variances(t), expected, rtol=1e-12)
    assert counter.release_variance(t) == pytest.approx(expected[-1], rel=1e-12)


def test_audit_neighbouring_streams_lose_at_most_rho():
    """Same seed on neighbouring streams: the Gaussian mechanism's outputs y (kept in the
    state, the decoder's input) differ by exactly ΔV; its zCDP loss ‖ΔV‖²/(2σ_B²) is ≤ ρ and
    the worst-case unit (m at each of S steps, K keys) uses most of it."""
    t, rho = 24, 0.5
    pattern = Participation(max_groups=2, max_steps=6, step_bound=3.0, total_bound=30.0)
    counter = BandedInverseCounter(rho=rho, bands=8, horizon=t, l1_sensitivity=30.0,
                                   l2_sensitivity=math.sqrt(2) * 15.0, participation=pattern,
                                   dimension=3)
    base = np.random.default_rng(1).integers(0, 5, size=(t, 3))
    losses = []
    for start in (0, 9, 18):
        unit = np.zeros((t, 3), dtype=np.int64)
        for key in (0, 2):
            for s in range(start, min(t, start + 6)):
                if unit.sum() < 30:
                    unit[s, key] = 3
        ys = []
        for stream in (base, base + unit):
            rng, state, out = noise.seeded(5), counter.init_state(), []
            for x in stream:
                _, state = counter.step(state, x, rng)
                out.append([int(v) for v in state.decoded[0]])
            ys.append(np.array(out, dtype=object))
        dv = (ys[1] - ys[0]).astype(float)
        losses.append(float((dv * dv).sum()) / (2 * float(counter.sigma2_grid)))
    assert max(losses) <= rho * (1 + 1e-9)
    assert max(losses) >= 0.5 * rho


def test_a_horizon_is_required_and_kept():
    with pytest.raises(InvalidParamsError, match='horizon'):
        BandedInverseCounter(rho=1.0, bands=4)
    counter = BandedInverseCounter(rho=1.0, bands=4, horizon=2)
    rng, state = noise.seeded(0), counter.init_state()
    for _ in range(2):
        _, state = counter.step(state, [1], rng)
    with pytest.raises(UnsupportedMechanismError):
        counter.step(state, [1], rng)
    assert counter.privacy_cost().rho == 1.0


def test_its_state_survives_the_state_coder():
    counter = BandedInverseCounter(rho=1.0, bands=4, horizon=10, dimension=2)
    rng, state = noise.seeded(0), counter.init_state()
    for x in ([1, 2], [3, 0], [5, 5]):
        _, state = counter.step(state, x, rng)
    back = state_coder.decode(state_coder.encode(state))
    a, _ = counter.step(state, [1, 1], noise.seeded(9))
    b, _ = counter.step(back, [1, 1], noise.seeded(9))
    assert np.array_equal(a, b)


def test_auto_compares_it_and_it_can_be_forced():
    unit = UserLevel(unit_fn=len, max_keys_per_unit=4, max_contributions_per_step=2,
                     max_steps_per_unit=52)
    budget = PrivacyBudget(rho=0.5)
    chosen = choose_counter('auto', None, budget, 365, None, *unit.sensitivity(1.0), 1,
                            unit.participation(1.0))
    assert mechanism_name(chosen).startswith('banded_inverse[')
    report = expected_error(budget, 365, l1_sensitivity=unit.sensitivity(1.0)[0],
                            l2_sensitivity=unit.sensitivity(1.0)[1],
                            participation=unit.participation(1.0))
    names = {e.name: e.rmse for e in report.estimates}
    assert min(v for k, v in names.items() if k.startswith('banded_inverse')) <= min(
        v for k, v in names.items() if k.startswith('banded['))
    driver = KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=unit,
                                clock=StepClock(0, 1, last_step=364),
                                layout=KeyLayout.of(['a'], 1), mechanism='banded_inverse')
    assert driver.mechanism_name.startswith('banded_inverse[p=')
    assert driver.noise_stddev(364) == pytest.approx(
        math.sqrt(driver.counter(1).release_variance(365)))
    with pytest.raises(InvalidParamsError, match='horizon'):
        KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=unit,
                           clock=StepClock(0, 1), layout=KeyLayout.of(['a'], 1),
                           mechanism='banded_inverse')


def test_its_column_norms_stay_bounded_where_the_square_roots_grow():
    short = BandedInverseCounter(rho=1.0, bands=16, horizon=100)
    long = BandedInverseCounter(rho=1.0, bands=16, horizon=10_000)
    assert long.column_norm <= short.column_norm * 1.01
    assert BandedCounter(rho=1.0, bands=512, horizon=10_000).column_norm > long.column_norm


class TestBandedInverseContract(test_banded.TestBandedContract):
    """The mechanism contract (tests/mechanisms/contract.py) for the banded inverse square root:
    the banded square root's parameters and inputs, a known horizon (required here)."""

    def make(self, **overrides):
        kwargs = dict(rho=0.5, bands=4, horizon=40, l1_sensitivity=8.0, l2_sensitivity=6.0,
                      dimension=3, participation=test_banded.PATTERN)
        kwargs.update(overrides)
        return BandedInverseCounter(**kwargs)

    def invalid_params(self):
        return super().invalid_params() + [({'horizon': None}, 'horizon')]
