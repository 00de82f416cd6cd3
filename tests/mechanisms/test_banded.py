"""BandedCounter and PerCellCounter (issue 23 item 2): contract, the sensitivity bounds against
the brute-force supremum, the closed forms, and 'auto' at user level never above fresh per-cell
noise. (Statistical checks and DP audits: tests/statistical/test_participation_counters.py.)"""

import itertools
import math

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.counter_choice import choose_counter
from beam_dp.drivers.counter_choice import mechanism_name
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import banded
from beam_dp.mechanisms.banded import BandedCounter
from beam_dp.mechanisms.counter_selection import counter_variances
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.per_cell import PerCellCounter
from beam_dp.mechanisms.per_cell import cell_l2
from beam_dp.privacy_unit import UserLevel
from tests.mechanisms.contract import CounterContract

PATTERN = Participation(max_groups=2, max_steps=3, step_bound=2.0, total_bound=8.0)


class TestBandedContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(rho=0.5, bands=4, horizon=40, l1_sensitivity=8.0, l2_sensitivity=6.0,
                      dimension=3, participation=PATTERN)
        kwargs.update(overrides)
        return BandedCounter(**kwargs)

    def invalid_params(self):
        return super().invalid_params() + [({'bands': 0}, 'bands'),
                                           ({'bands': banded.MAX_BANDS + 1}, 'bands'),
                                           ({'participation': 3}, 'participation')]

    def make_noise_free(self):
        return self.make(rho=1e24)

    def inputs(self):
        return [np.array([t % 3, 1, 5 * (t % 2)]) for t in range(40)]


class TestBandedUnboundedContract(TestBandedContract):

    def make(self, **overrides):
        overrides.setdefault('horizon', None)
        overrides.setdefault('participation', None)
        return super().make(**overrides)


class TestPerCellContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(rho=0.5, l1_sensitivity=8.0, l2_sensitivity=6.0, dimension=3,
                      participation=PATTERN)
        kwargs.update(overrides)
        return PerCellCounter(**kwargs)

    def invalid_params(self):
        return super().invalid_params() + [({'participation': 'x'}, 'participation')]

    def make_noise_free(self):
        return self.make(rho=1e16)

    def inputs(self):
        return [np.array([t % 3, 1, 5 * (t % 2)]) for t in range(30)]


# -- sensitivity against brute force --------------------------------------------------------------

def _toeplitz(coefficients, steps):
    c = np.zeros(steps)
    c[:min(steps, len(coefficients))] = coefficients[:steps]
    return np.array([[c[i - j] if i >= j else 0.0 for j in range(steps)] for i in range(steps)])


def _patterns(steps, p: Participation):
    """Every integer change of ONE group (values 0..a on ≤ S steps)."""
    a = int(p.step_bound)
    for u in itertools.product(range(a + 1), repeat=steps):
        if sum(1 for x in u if x) <= p.max_steps and sum(u) <= p.total_bound:
            yield np.array(u, dtype=float)


def _brute_force(matrix, steps, p: Participation):
    """sup ‖C·U‖_F over changes of ≤ max_groups groups (integer values), by enumeration."""
    singles = [(float(u.sum()), float(np.sum((matrix @ u) ** 2))) for u in _patterns(steps, p)]
    best = 0.0
    for combo in itertools.combinations_with_replacement(range(len(singles)), p.max_groups):
        total = sum(singles[i][0] for i in combo)
        if total <= p.total_bound:
            best = max(best, sum(singles[i][1] for i in combo))
    return math.sqrt(best)


@pytest.mark.parametrize('bands,steps,pattern', [
    (2, 6, Participation(1, 3, 2.0, 6.0)),
    (3, 6, Participation(1, 6, 1.0, 6.0)),
    (6, 6, Participation(2, 2, 2.0, 5.0)),
    (4, 7, Participation(2, 3, 1.0, 4.0)),
    (5, 6, Participation(1, 4, 3.0, 7.0)),
])
def test_banded_sensitivity_bounds_the_brute_force_supremum(bands, steps, pattern):
    m = BandedCounter(rho=1.0, bands=bands, horizon=steps, l1_sensitivity=100.0,
                      participation=pattern)
    brute = _brute_force(_toeplitz(m.exact_coefficients, steps), steps, pattern)
    assert brute <= m.sensitivity * (1 + 1e-9)
    assert m.sensitivity <= 1.6 * brute          # and is not vacuous


@pytest.mark.parametrize('steps,pattern', [(5, Participation(1, 3, 2.0, 6.0)),
                                           (4, Participation(2, 2, 2.0, 5.0))])
def test_cell_l2_is_the_brute_force_supremum(steps, pattern):
    assert _brute_force(np.eye(steps), steps, pattern) == pytest.approx(cell_l2(pattern))


def test_per_cell_lowers_only_the_gaussian_l2():
    m = PerCellCounter(rho=0.5, l1_sensitivity=8.0, l2_sensitivity=6.0, participation=PATTERN)
    assert m.cell_sensitivity == pytest.approx(math.sqrt(2 * 4 + 2 * 4))   # 4 cells at a=2
    assert m.step_noise.param == pytest.approx(16.0 / (2 * 0.5))
    assert m.l2_sensitivity == 6.0                                   # the declared bound
    pure = PerCellCounter(epsilon=1.0, l1_sensitivity=8.0, participation=PATTERN)
    assert pure.l2_sensitivity is None and pure.step_noise.param == 8.0


# -- closed forms -----------------------------------------------------------------------------

def test_release_variance_is_the_decoder_matrix_norm():
    m = BandedCounter(rho=0.5, bands=5, horizon=30)
    c = _toeplitz(m.exact_coefficients, 30)
    b = np.tril(np.ones((30, 30))) @ np.linalg.inv(c)
    expected = m.step_noise_variance * np.sum(b * b, axis=1)
    np.testing.assert_allclose(m.variances(30), expected, rtol=1e-9)
    assert m.release_variance(17) == pytest.approx(expected[16], rel=1e-9)


def test_series_inverse_inverts():
    c = banded.sqrt_coefficients(7)
    inv = banded.series_inverse(c, 300)
    prod = np.convolve(c, inv)[:300]
    np.testing.assert_allclose(prod, np.eye(1, 300)[0], atol=1e-12)


def test_bands_one_is_fresh_per_step_noise():
    m = BandedCounter(rho=0.5, bands=1, horizon=10, l1_sensitivity=3.0)
    np.testing.assert_allclose(m.variances(10), np.arange(1, 11) * m.step_noise_variance)


# -- the counter choice at user level ---------------------------------------------------------

def _rmse(counter, horizon):
    return math.sqrt(float(np.mean(counter_variances(counter, horizon))))


GRID = [(k, m, s, c, t) for k in (1, 4, 30) for m in (1, 3) for s in (1, 8, 52, 365)
        for c in (None, 20, 400) for t in (10, 100, 365) if s <= t or s == 365]


@pytest.mark.parametrize('budget', [PrivacyBudget(rho=0.5), PrivacyBudget(rho=0.01),
                                    PrivacyBudget(epsilon=1.0, delta=1e-6)])
def test_auto_is_never_above_fresh_per_cell_noise(budget):
    """Over a grid of K, m, S, C and horizons: the RMSE over the horizon (what 'auto'
    minimises) and the final release's noise."""
    worse = []
    for k, m, s, c, t in GRID:
        unit = UserLevel(unit_fn=str, max_keys_per_unit=k, max_contributions_per_step=m,
                         max_steps_per_unit=s, max_total_contributions=c)
        l1, l2 = unit.sensitivity(1.0)
        p = unit.participation(1.0)
        auto = choose_counter('auto', None, budget, t, None, l1, l2, 1, p)
        cell = choose_counter('per_cell', None, budget, t, None, l1, l2, 1, p)
        assert mechanism_name(cell) == 'per_cell/summed/discrete_gaussian'
        if (_rmse(auto, t) > _rmse(cell, t) * (1 + 1e-12)
                or auto.release_variance(t) > cell.release_variance(t) * (1 + 1e-12)):
            worse.append((k, m, s, c, t, mechanism_name(auto)))
    assert not worse


def test_auto_picks_a_band_when_few_participations_and_per_cell_when_many():
    def auto(s):
        unit = UserLevel(unit_fn=str, max_keys_per_unit=4, max_contributions_per_step=1,
                         max_steps_per_unit=s)
        p = unit.participation(1.0)
        return mechanism_name(choose_counter('auto', None, PrivacyBudget(rho=0.5), 366, None,
                                             *unit.sensitivity(1.0), 1, p))
    assert auto(366) == 'per_cell/summed/discrete_gaussian'
    assert auto(8).startswith(('banded[', 'banded_inverse[', 'blt/'))


@pytest.mark.parametrize('mechanism', ['per_cell', 'banded'])
def test_forced_mechanisms(mechanism):
    p = Participation(4, 52, 2.0, 416.0)
    counter = choose_counter(mechanism, None, PrivacyBudget(rho=0.5), 100, None, 416.0, 208.0, 1,
                             p)
    assert mechanism_name(counter).startswith(mechanism)
    assert counter.participation == p
    with pytest.raises(InvalidParamsError, match='estimator'):
        choose_counter(mechanism, 'textbook', PrivacyBudget(rho=0.5), 100, None, 4.0, 2.0, 1, p)


def test_banded_needs_a_gaussian_budget():
    with pytest.raises(InvalidParamsError, match="mechanism='banded' needs a zCDP budget"):
        choose_counter('banded', None, PrivacyBudget(epsilon=1.0), 100, None, 4.0, 2.0, 1, None)


def test_forced_banded_without_horizon_or_participation_builds_in_bounded_memory():
    """Review h2: event level (or private keys) and no end listed the bands with a pattern of
    2^30 steps, whose BLT candidate allocated a 2^30 × buffers array (32 GiB: MemoryError)."""
    import tracemalloc
    tracemalloc.start()
    try:
        counter = choose_counter('banded', None, PrivacyBudget(rho=0.5), None, None, 1.0, 1.0,
                                 1, None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counter.participation is None and counter.effective_l2 == 1.0
    assert peak < 1 << 30          # the 2^20-step error curves of every candidate: ~300 MB


def test_banded_effective_participations_for_huge_steps_is_the_band_closed_form():
    m = BandedCounter(rho=1.0, bands=8, l1_sensitivity=1e12,
                      participation=Participation(1, 10 ** 12, 1.0, 1e12))
    g, s = m.overlaps, 10 ** 12
    u = s * g[0] + 2 * sum((s - d) * g[d] for d in range(1, len(g)))
    assert m.effective_participations() == pytest.approx(math.sqrt(u / g[0]), rel=1e-9)


def test_per_cell_replace_recalibrates_to_the_new_participation():
    """Review h2: the constructor wrote the lowered L2 into ``l2_sensitivity``, so
    ``dataclasses.replace(counter, participation=<a larger pattern>)`` kept the smaller
    pattern's noise (under-calibrated for the pattern it then declared)."""
    import dataclasses
    small = Participation(max_groups=1, max_steps=1, step_bound=1.0, total_bound=1.0)
    large = Participation(max_groups=2, max_steps=3, step_bound=2.0, total_bound=8.0)
    direct = PerCellCounter(rho=0.5, l1_sensitivity=8.0, l2_sensitivity=6.0, participation=large)
    replaced = dataclasses.replace(
        PerCellCounter(rho=0.5, l1_sensitivity=8.0, l2_sensitivity=6.0, participation=small),
        participation=large)
    assert replaced.step_noise == direct.step_noise
    assert dataclasses.replace(direct, participation=None).step_noise.param == pytest.approx(
        36.0 / (2 * 0.5))
    assert dataclasses.replace(direct, dimension=5).step_noise == direct.step_noise
