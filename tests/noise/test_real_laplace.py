"""Grid Laplace helpers (beam_dp/noise/real_laplace.py): grid choice, calibration, big scales."""

import fractions
import math

import numpy as np
import pytest
from scipy import stats

from beam_dp.noise import seeded
from beam_dp.noise.real_laplace import GRID_HEADROOM_BITS
from beam_dp.noise.real_laplace import discrete_laplace_any
from beam_dp.noise.real_laplace import floor_to_grid
from beam_dp.noise.real_laplace import grid_bits
from beam_dp.noise.real_laplace import grid_laplace
from beam_dp.noise.real_laplace import grid_laplace_scale
from beam_dp.noise.real_laplace import grid_sensitivity


@pytest.mark.parametrize('sensitivity', [1.0, 1e-3, 1 / 7, 2.0 ** -30, 5000.0])
def test_grid_bits_is_the_smallest_with_headroom(sensitivity):
    k = grid_bits(sensitivity)
    assert math.ldexp(sensitivity, k) >= 2 ** GRID_HEADROOM_BITS
    assert k == 0 or math.ldexp(sensitivity, k - 1) < 2 ** GRID_HEADROOM_BITS


@pytest.mark.parametrize('bad', [0.0, -1.0, math.inf, math.nan])
def test_grid_bits_rejects_bad_sensitivity(bad):
    with pytest.raises(ValueError, match='sensitivity must be positive and finite'):
        grid_bits(bad)


def test_calibration_cost_is_exact_and_overhead_small():
    sens, scale = 1 / 1000, 0.02
    k = grid_bits(sens)
    int_scale = grid_laplace_scale(scale, sens, k)
    # Cost on the grid = grid_sensitivity/int_scale ≤ Δ/scale (rounded-up scale only adds noise).
    assert fractions.Fraction(grid_sensitivity(sens, k)) / int_scale <= fractions.Fraction(sens) / fractions.Fraction(scale)
    assert float(int_scale) / 2 ** k / scale <= 1 + 3 * 2 ** -GRID_HEADROOM_BITS


def test_neighbouring_statistics_differ_by_at_most_grid_sensitivity():
    gen = np.random.default_rng(0)
    t = 997
    k = grid_bits(1 / t)
    for _ in range(2000):
        counts = gen.integers(0, 50, 8)
        counts[0] += t - counts.sum() if counts.sum() < t else 0
        size = counts.sum()
        f = gen.random(8)
        other = counts.copy()
        i, j = gen.choice(8, 2, replace=False)
        if other[i] == 0:
            continue
        other[i] -= 1
        other[j] += 1
        a = floor_to_grid(float(f @ counts) / size, k)
        b = floor_to_grid(float(f @ other) / size, k)
        assert abs(a - b) <= grid_sensitivity(1 / size, k)


@pytest.mark.statistical
def test_big_scale_path_matches_law():
    """Above the 2^40 cap the Python-int path is used; its samples are Laplace(scale)."""
    rng = seeded(5)
    scale = 2.0 ** 41 + 12345.5
    x = discrete_laplace_any(rng, scale, size=4000).astype(np.float64)
    assert stats.kstest(x, 'laplace', args=(0, scale)).pvalue > 1e-4
    assert stats.kstest(x, 'laplace', args=(0, scale * 1.3)).pvalue < 1e-4
    assert isinstance(discrete_laplace_any(rng, scale), int)


@pytest.mark.statistical
def test_small_and_large_batches_have_the_same_law():
    rng = seeded(6)
    small = np.concatenate([discrete_laplace_any(rng, 7.5, size=10) for _ in range(800)])
    large = discrete_laplace_any(rng, 7.5, size=8000)
    assert stats.ks_2samp(small, large).pvalue > 1e-4


def test_grid_laplace_releases_on_the_grid():
    rng = seeded(7)
    released, bits = grid_laplace(rng, np.array([0.25, 0.5]), 0.01, 1e-3)
    assert bits == grid_bits(1e-3)
    assert np.all(np.ldexp(released, bits) == np.round(np.ldexp(released, bits)))
    value, _ = grid_laplace(rng, 0.3, 0.01, 1e-3)
    assert isinstance(value, float) and abs(value - 0.3) < 1
