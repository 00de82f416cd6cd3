"""§12 criteria 1–2: the L2-Laplace law (statistical, with power) and its density ratio."""

import importlib
import math
import pathlib

import numpy as np
import pytest
from scipy import stats

from beam_dp import noise

l2 = importlib.import_module('beam_dp.noise.l2_laplace')
N = 20_000


def _draws(dim, scale, n=N, seed=7, sampler=None):
    rng = noise.seeded(seed)
    sampler = sampler or l2.l2_laplace
    return np.stack([sampler(rng.derive(i), dim, scale) for i in range(n)])


def _miscaled(rng, dim, scale):
    return l2.l2_laplace(rng, dim, 1.3 * scale)


@pytest.mark.statistical
@pytest.mark.parametrize('dim', [1, 2, 10, 650])
def test_radius_is_gamma_and_direction_uniform(dim):
    n = N if dim < 650 else 4000
    scale = 0.7
    nu = _draws(dim, scale, n)
    radii = np.linalg.norm(nu, axis=1)
    assert stats.kstest(radii, stats.gamma(a=dim, scale=scale).cdf).pvalue > 1e-3
    directions = nu / radii[:, None]
    assert np.all(np.abs(directions.mean(axis=0)) < 4 / math.sqrt(n))
    if dim == 1:
        assert stats.kstest(nu[:, 0], stats.laplace(scale=scale).cdf).pvalue > 1e-3


@pytest.mark.statistical
@pytest.mark.parametrize('dim', [1, 2, 10, 650])
def test_power_a_scale_30_percent_off_fails(dim):
    n = N if dim < 650 else 4000
    nu = _draws(dim, 0.7, n, sampler=_miscaled)
    radii = np.linalg.norm(nu, axis=1)
    assert stats.kstest(radii, stats.gamma(a=dim, scale=0.7).cdf).pvalue < 1e-3


@pytest.mark.statistical
@pytest.mark.parametrize('dim', [2, 10, 650])
def test_lemma_a2_tail(dim):
    n = 5000 if dim < 650 else 2000
    radii = np.linalg.norm(_draws(dim, 1.0, n, seed=11), axis=1)
    bound = dim * math.log(dim / 0.01)
    assert np.mean(radii > bound) <= 0.01


def test_log_density_ratio_bounded_by_norm_over_scale():
    rng = np.random.default_rng(0)
    for dim in (1, 3, 50):
        b = 0.3
        for _ in range(200):
            x, step = rng.normal(size=dim), rng.normal(size=dim) * rng.exponential()
            gap = l2.l2_laplace_logpdf(x, b) - l2.l2_laplace_logpdf(x + step, b)
            assert gap <= np.linalg.norm(step) / b + 1e-9
        x = rng.normal(size=dim)
        along = 0.5 * x / np.linalg.norm(x)          # moving away along x: equality
        gap = l2.l2_laplace_logpdf(x, b) - l2.l2_laplace_logpdf(x + along, b)
        assert gap == pytest.approx(0.5 / b, rel=1e-9)


def test_normaliser_matches_closed_forms():
    assert l2.l2_laplace_logpdf([0.4], 2.0) == pytest.approx(-0.2 - math.log(4.0))
    assert l2.l2_laplace_logpdf([0.3, 0.4], 2.0) == pytest.approx(
        -0.25 - math.log(2 * math.pi * 4.0))


def test_seeded_draws_reproduce_and_snap_to_grid():
    a = l2.release_l2_laplace(noise.seeded(3).derive('x'), np.ones(5), 0.25)
    b = l2.release_l2_laplace(noise.seeded(3).derive('x'), np.ones(5), 0.25)
    assert np.array_equal(a, b)
    grid = 2.0 ** (l2.SNAP_BITS - math.floor(math.log2(0.25)))
    assert np.array_equal(a * grid, np.round(a * grid))
    assert np.array_equal(l2.l2_laplace(noise.seeded(1), 4, 0.0), np.zeros(4))


def test_no_coordinatewise_laplace_in_the_erm_path():
    root = pathlib.Path(l2.__file__).resolve().parents[1]
    sources = [root / 'noise' / 'l2_laplace.py'] + list((root / 'mechanisms' / 'erm').glob('*.py'))
    for path in sources:
        text = path.read_text()
        for forbidden in ('discrete_laplace(', 'np.random.laplace', '.laplace('):
            assert forbidden not in text, (path, forbidden)
