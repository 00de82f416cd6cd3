"""Means and variances per key (``beam_dp.drivers.mean`` in the keyed driver): unit tests and a
DP audit on neighbouring streams.

The audit drives two neighbouring streams through ``KeyedReleaseDriver`` with the same seed, so
the noise is identical and the releases differ only by the unit's contribution. From the
releases alone (a mean's released count and sum, decoded back to the counter's coordinates)
and the public parameters it computes the exact privacy loss of the transcript: Σ|Δ|/b over
every step and coordinate for per-step Laplace noise (≤ ε), Σ Δu²/(2σ_t²) for BLT (≤ ρ). The
unit is the worst case for its bounds (values at the upper bound, K keys, m per step, S steps).
A driver calibrated as a sum (one coordinate: the count's share ignored) fails the same audit.
"""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers import mean as ratio
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms import blt_optimize
from beam_dp.mechanisms.blt import grid_offset
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import replay

KEYS = ('a', 'b', 'c')
HORIZON = 12
SEED = 7
LOWER, UPPER = -10.0, 30.0      # midpoint 10, half-range 20


def _driver(metric='mean', unit=None, budget=PrivacyBudget(epsilon=1.0), mechanism='per_step',
            grid_bits=6, count_share=None):
    return KeyedReleaseDriver(metric=metric, budget=budget, privacy_unit=unit or EventLevel(),
                              clock=StepClock(0, 60_000_000, last_step=HORIZON - 1),
                              layout=KeyLayout.of(list(KEYS), 1), mechanism=mechanism,
                              lower=LOWER, upper=UPPER, grid_bits=grid_bits,
                              count_share=count_share)


def _user(**kwargs):
    bounds = dict(max_keys_per_unit=2, max_contributions_per_step=2, max_steps_per_unit=3)
    bounds.update(kwargs)
    return UserLevel(unit_fn=len, **bounds)


# -- coordinates, sensitivity, decoding ---------------------------------------------------------

def test_coordinates_are_clamped_centred_and_bounded():
    d = 1 << 6
    assert ratio.coordinates('mean', LOWER, UPPER, 6, 10.0) == (d, 0)
    assert ratio.coordinates('mean', LOWER, UPPER, 6, 30.0) == (d, d)
    assert ratio.coordinates('mean', LOWER, UPPER, 6, 1e300) == (d, d)        # clamped
    assert ratio.coordinates('mean', LOWER, UPPER, 6, -math.inf) == (d, -d)
    assert ratio.coordinates('variance', LOWER, UPPER, 6, 0.0) == (d, -32, -32)  # u = -1/2
    assert ratio.coordinates('variance', LOWER, UPPER, 6, 10.0) == (d, 0, -d)
    with pytest.raises(ValueError, match='NaN'):
        ratio.coordinates('mean', LOWER, UPPER, 6, math.nan)


@pytest.mark.parametrize('metric,dim', [('mean', 2), ('variance', 3)])
def test_sensitivity_is_the_record_norm_times_the_unit_bounds(metric, dim):
    d = 1 << 6
    driver = _driver(metric)
    assert driver.bins_per_key == dim
    assert driver.sensitivity() == (dim * d, pytest.approx(math.sqrt(dim) * d))
    user = _driver(metric, unit=_user())
    kms = 2 * 2 * 3
    l1, l2 = user.sensitivity()
    assert l1 == kms * dim * d
    assert l2 == pytest.approx(math.sqrt(2) * 6 * math.sqrt(dim) * d)   # √K·m·S per record L2


def test_extract_and_bad_values():
    driver = _driver('variance')
    key_index, step, shard, slot, units = driver.extract('b', 60_000_000, ('b', 20.0), lambda r: r[1])
    assert (step, shard, slot) == (1, 0, 3) and units == (64, 32, -32)
    for bad in ('x', None, math.nan, object()):
        with pytest.raises(InvalidRecordError, match='value is not a number'):
            driver.extract('a', 0, bad, lambda r: r)


@pytest.mark.parametrize('kwargs,match', [
    (dict(lower=1.0, upper=1.0), 'needs lower < upper'),
    (dict(lower=2.0, upper=1.0), 'must not exceed'),
    (dict(lower=0.0, upper=math.inf), 'must be finite'),
])
def test_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        KeyedReleaseDriver(metric='mean', budget=PrivacyBudget(epsilon=1.0),
                           privacy_unit=EventLevel(), clock=StepClock(0, 60_000_000),
                           layout=KeyLayout.of(['a'], 1), **kwargs)


def test_finish_noise_free_values_and_clamps():
    # n = 4 values 0, 10, 20, 30 (u = -1/2, 0, 1/2, 1; 2u² - 1 = -1/2, -1, -1/2, 1): mean 15,
    # variance 125.
    est = np.array([[4.0, 1.0, -1.0]])
    values, extra = ratio.finish('variance', LOWER, UPPER, est, sigma=0.0)
    assert values[0] == pytest.approx(125.0)
    n, total, mean, mean_sd, var_sd = extra[0]
    assert (n, total, mean, mean_sd, var_sd) == (4.0, 60.0, 15.0, 0.0, 0.0)
    # Tiny / negative noisy counts: the value stays in the bounds, the sds are capped.
    values, extra = ratio.finish('mean', LOWER, UPPER, np.array([[-3.0, 5.0], [0.2, -9.0]]), 5.0)
    assert values.tolist() == [30.0, -10.0]
    assert extra[:, 2].tolist() == [40.0, 40.0]
    values, extra = ratio.finish('variance', LOWER, UPPER, np.array([[0.5, 0.0, 9.0]]), 5.0)
    assert values[0] == 400.0 and extra[0, 4] == 400.0


def test_delta_method_sd_matches_monte_carlo():
    """The mean's reported sd against the empirical sd of the ratio under the same noise."""
    rng = np.random.default_rng(3)
    n, su, sigma = 400.0, 100.0, 6.0          # ū = 1/4
    draws = np.stack([n + rng.normal(0, sigma, 200_000), su + rng.normal(0, sigma, 200_000)],
                     axis=1)
    values, _ = ratio.finish('mean', LOWER, UPPER, draws, sigma)
    _, extra = ratio.finish('mean', LOWER, UPPER, np.array([[n, su]]), sigma)
    assert np.std(values) == pytest.approx(extra[0, 2], rel=0.02)


def test_replayed_means_and_variances_are_exact_without_noise():
    budget = PrivacyBudget(epsilon=1e7)
    for metric in ('mean', 'variance'):
        driver = _driver(metric, budget=budget, mechanism='auto')
        contributions = [('a', 0, 0.0), ('a', 0, 10.0), ('a', 2, 20.0), ('a', 2, 30.0),
                         ('b', 1, 99.0)]
        out = replay(driver.loop_driver(), keyed_events(driver, contributions, 3), label='M', end_input=False,
                     seed=1)
        got = {(r.key, r.step): r for r in out.releases}
        assert len(got) == 9 and all(r.metric == metric for r in out.releases)
        if metric == 'mean':
            assert got[('a', 0)].value == pytest.approx(5.0, abs=1e-5)
            assert got[('a', 2)].value == pytest.approx(15.0, abs=1e-5)
            assert got[('b', 2)].value == pytest.approx(30.0, abs=1e-5)    # clamped
            assert got[('a', 2)].values[:2] == pytest.approx([4.0, 60.0], abs=1e-4)
        else:
            assert got[('a', 0)].value == pytest.approx(25.0, abs=1e-4)
            assert got[('a', 2)].value == pytest.approx(125.0, abs=1e-3)
            assert got[('b', 2)].value == pytest.approx(0.0, abs=1e-4)
        # no data yet: count ≈ 0, n₊ = 1: the midpoint, and half the largest variance r²
        assert got[('c', 1)].value == pytest.approx(10.0 if metric == 'mean' else 200.0,
                                                    abs=1e-3)


# -- DP audit on neighbouring streams -----------------------------------------------------------

def _worst_case(unit):
    """One unit's records {(key position, step): n}, every value at the upper bound."""
    out = {}
    for key in range(unit.max_keys_per_unit if isinstance(unit, UserLevel) else 1):
        for step in range(unit.max_steps_per_unit if isinstance(unit, UserLevel) else 1):
            out[(key, step)] = unit.max_contributions_per_step if isinstance(unit, UserLevel) else 1
    return out


BACKGROUND = {(0, 0): [1.0, 5.0], (1, 2): [29.0], (2, 5): [-10.0, 0.0, 3.0], (0, 9): [12.0]}


def _releases(driver, cells):
    """The counter's coordinates (steps, keys·dim) in grid units, decoded from the releases
    alone: count and sum for a mean (``MEAN_VALUES``); the decoded estimates for a variance."""
    state = driver.init_shard(0)
    base = noise.seeded(SEED)
    dim = driver.bins_per_key
    w = np.tile(np.array(ratio.weights(driver.metric, driver.grid_bits, driver.count_share,
                                       gaussian=driver.budget.is_zcdp)), len(KEYS))
    r, mid = (UPPER - LOWER) / 2, (UPPER + LOWER) / 2
    rows = []
    for step in range(HORIZON):
        flat = {}
        for (k, s), values in cells.items():
            if s == step:
                for x in values:
                    for j, u in enumerate(driver.extract(KEYS[k], step * 60_000_000, x,
                                                         lambda v: v)[4]):
                        flat[k * dim + j] = flat.get(k * dim + j, 0) + u
        contributions = [(np.array(list(flat), dtype=np.int64),
                          np.array(list(flat.values()), dtype=np.int64))] if flat else []
        released, state = driver.release_step(0, state, contributions, base.derive(step))
        if driver.metric == 'mean':
            out = driver.finish_ratio(step, KEYS, released, 1.0, ('mean',) + ('',) * 5)
            n = np.array([o.values[0] for o in out])
            su = (np.array([o.values[1] for o in out]) - mid * n) / r
            rows.append(np.stack([n, su], axis=1).ravel() * w)
        else:
            rows.append(released.ravel() * w)
    return np.array(rows)


def _neighbours(driver, unit):
    with_unit = {cell: list(values) for cell, values in BACKGROUND.items()}
    for cell, n in _worst_case(unit).items():
        with_unit[cell] = with_unit.get(cell, []) + [UPPER] * n
    return _releases(driver, BACKGROUND), _releases(driver, with_unit)


def _laplace_loss(driver, unit):
    without, with_unit = _neighbours(driver, unit)
    increments = np.diff(with_unit - without, axis=0, prepend=0.0)
    scale = driver.counter(len(KEYS)).step_noise.param
    return float(np.sum(np.abs(np.round(increments, 3)))) / scale


@pytest.mark.parametrize('count_share', [None, 0.2])
@pytest.mark.parametrize('metric', ['mean', 'variance'])
@pytest.mark.parametrize('unit', [EventLevel(), _user()], ids=['event', 'user'])
def test_laplace_loss_is_exactly_epsilon_for_the_worst_case_unit(metric, unit, count_share):
    driver = _driver(metric, unit=unit, count_share=count_share)
    loss = _laplace_loss(driver, unit)
    assert loss == pytest.approx(1.0, rel=1e-6)


def test_the_audit_catches_a_sum_calibration():
    """Calibrated as a sum of one coordinate (L1 = D): the count's share is not paid for."""
    unit = _user()
    driver = _driver('mean', unit=unit)
    mis = _driver('mean', unit=_user(max_steps_per_unit=1, max_contributions_per_step=1))
    assert mis.sensitivity()[0] * 6 == driver.sensitivity()[0]
    assert _laplace_loss(mis, unit) == pytest.approx(6.0, rel=1e-6)


def _blt_loss(driver, unit):
    without, with_unit = _neighbours(driver, unit)
    counter = driver.counter(len(KEYS))
    theta, w = counter.exact_params
    c = blt_optimize.blt_coefficients(theta, w, HORIZON)
    increments = np.diff(with_unit - without, axis=0, prepend=0.0)
    loss = 0.0
    for t in range(HORIZON):
        cx = sum(c[m] * increments[t - m] for m in range(t + 1))
        k = counter.grid_bits + grid_offset(t + 1)
        du = np.round(np.ldexp(cx, k))
        loss += float(np.sum(du * du)) / (2 * float(counter.grid_sigma2(t + 1)))
    return loss


@pytest.mark.parametrize('count_share', [None, 0.2])
@pytest.mark.parametrize('metric', ['mean', 'variance'])
def test_blt_user_level_loss_is_within_rho(metric, count_share):
    """Multi-participation BLT calibrated with one record's L2 norm (√2·D, √3·D)."""
    unit = _user()
    driver = _driver(metric, unit=unit, budget=PrivacyBudget(rho=0.5), mechanism='blt',
                     count_share=count_share)
    assert driver.mechanism_name.startswith('blt/') and 'multi_participation' in \
        driver.mechanism_name
    loss = _blt_loss(driver, unit)
    assert 0.5 * 0.5 <= loss <= 0.5


# -- count_share --------------------------------------------------------------------------------

def test_count_share_weights_and_validation():
    assert ratio.weights('mean', 10) == (1024, 1024)
    assert ratio.weights('mean', 10, 0.2) == (256, 1024)                 # ε_count = ε/5
    assert ratio.weights('mean', 10, 0.2, gaussian=True) == (512, 1024)  # ρ_count = ρ/5
    assert ratio.weights('variance', 10, 0.5) == (1024, 512, 512)
    assert _driver(count_share=0.2).sensitivity()[0] == 64 + 16
    for bad in (0.0, 1.0, -0.1, 'x'):
        with pytest.raises(InvalidParamsError, match='count_share'):
            _driver(count_share=bad)
    with pytest.raises(InvalidParamsError, match='count_share is for a mean or a variance'):
        KeyedReleaseDriver(metric='sum', budget=PrivacyBudget(epsilon=1.0),
                           privacy_unit=EventLevel(), clock=StepClock(0, 60_000_000),
                           layout=KeyLayout.of(['a'], 1), count_share=0.5)


def test_count_share_helps_a_mean_near_the_midpoint():
    """ū = 0: the count's noise does not enter the mean (first order), so giving the sum 90%
    of ε instead of 50% cuts the mean's sd by 0.9/0.5 = 1.8×; at ū = 1 it costs."""
    equal, skewed = _driver(count_share=None), _driver(count_share=0.1)
    for u_bar, better in ((0.0, True), (1.0, False)):
        est = np.array([[1000.0, 1000.0 * u_bar]])
        sds = [ratio.finish('mean', LOWER, UPPER, est, d.coordinate_stddevs(
            d.noise_stddev(HORIZON - 1)))[1][0, 2] for d in (equal, skewed)]
        assert (sds[1] < sds[0]) == better
        if u_bar == 0.0:
            assert sds[0] / sds[1] == pytest.approx(1.8, rel=0.02)


@pytest.mark.parametrize('output,expected', [
    ('per_step', {0: 5.0, 1: 25.0, 2: 10.0}),          # step 2: no record, the midpoint
    (('window', 2), {0: 5.0, 1: 15.0, 2: 25.0}),
])
def test_per_step_and_window_means(output, expected):
    """The keyed driver's per-step / window outputs (docs/windows.md) run on the mean's
    vector: each release decodes the window's (count, centred sum)."""
    driver = KeyedReleaseDriver(metric='mean', budget=PrivacyBudget(epsilon=1e7),
                                privacy_unit=EventLevel(),
                                clock=StepClock(0, 60_000_000, last_step=HORIZON - 1),
                                layout=KeyLayout.of(list(KEYS), 1), lower=LOWER, upper=UPPER,
                                output=output)
    contributions = [('a', 0, 0.0), ('a', 0, 10.0), ('a', 1, 20.0), ('a', 1, 30.0)]
    out = replay(driver.loop_driver(), keyed_events(driver, contributions, 3), label='W',
                 seed=1, end_input=False)
    got = {r.step: r.value for r in out.releases if r.key == 'a'}
    assert got == pytest.approx(expected, abs=1e-3)
