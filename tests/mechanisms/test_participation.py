"""Multi-participation sensitivity of the factorization counters: the bound against the
brute-force supremum of ‖C·U‖ on small horizons, and the capped L2 against brute force."""

import itertools
import math

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import blt_optimize
from beam_dp.mechanisms import blt_tables
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms import participation
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.participation import banded_bound
from beam_dp.mechanisms.participation import capped_l2
from beam_dp.mechanisms.participation import toeplitz_overlaps


def _matrix(theta, w, horizon):
    c = blt_optimize.blt_coefficients(theta, w, horizon)
    return np.array([[c[i - j] if i >= j else 0.0 for j in range(horizon)]
                     for i in range(horizon)])


def _brute_sup(matrix, steps, per_step):
    """max ‖C·u‖ over u ∈ {0..per_step}^T with at most ``steps`` non-zero entries (a convex
    function: its supremum over the boxes is at a vertex, so integers cover it)."""
    horizon = matrix.shape[0]
    best = 0.0
    for support in itertools.combinations(range(horizon), min(steps, horizon)):
        for values in itertools.product(range(per_step + 1), repeat=len(support)):
            u = np.zeros(horizon)
            u[list(support)] = values
            best = max(best, float(np.linalg.norm(matrix @ u)))
    return best


PARAMS = [blt_tables.FINITE[4], blt_tables.UNBOUNDED[4], ([0.9, 0.3], [0.4, 0.2]),
          ([0.5], [0.99])]


@pytest.mark.parametrize('theta,w', PARAMS)
@pytest.mark.parametrize('horizon', [1, 4, 7])
def test_overlaps_match_the_gram_matrix(theta, w, horizon):
    m = _matrix(theta, w, horizon)
    gram = m.T @ m
    g = toeplitz_overlaps(theta, w, horizon, horizon)
    for d in range(horizon):
        assert g[d] == pytest.approx(gram[0, d], rel=1e-12)     # row 0: the untruncated overlap
        assert all(gram[i, i + d] <= g[d] * (1 + 1e-12) for i in range(horizon - d))
    assert np.all(np.diff(g) <= 1e-15)                          # non-increasing in d


@pytest.mark.parametrize('theta,w', PARAMS)
@pytest.mark.parametrize('horizon,steps,per_step', [(6, 1, 2), (6, 2, 1), (6, 3, 2), (7, 4, 1),
                                                    (5, 5, 1), (5, 9, 1)])
def test_bound_is_above_the_brute_force_supremum(theta, w, horizon, steps, per_step):
    m = _matrix(theta, w, horizon)
    truth = _brute_sup(m, steps, per_step)
    p = Participation(max_groups=1, max_steps=steps, step_bound=per_step,
                      total_bound=per_step * steps)
    g0 = toeplitz_overlaps(theta, w, horizon, 1)[0]
    bound = math.sqrt(g0) * p.l2_factor(theta, w, horizon)
    assert truth <= bound * (1 + 1e-12)
    # The triangle bound is S·a·‖c‖; the multi-participation bound is strictly better when
    # S ≥ 2 and close to the truth: the start-aligned consecutive pattern attains it up to the
    # truncated overlaps.
    assert bound <= min(steps, horizon) * per_step * math.sqrt(g0) * (1 + 1e-9)
    if 2 <= steps < horizon and sum(w) <= 1:
        assert bound < min(steps, horizon) * per_step * math.sqrt(g0)
        assert bound <= truth * 1.15


def test_unbounded_overlaps_are_the_limit_of_finite_ones():
    theta, w = blt_tables.UNBOUNDED[10]
    assert np.allclose(toeplitz_overlaps(theta, w, None, 20),
                       toeplitz_overlaps(theta, w, 1 << 40, 20), rtol=1e-9)


def test_banded_bound_of_one_step_is_the_column_norm():
    theta, w = blt_tables.FINITE[8]
    g = toeplitz_overlaps(theta, w, 256, 1)
    assert banded_bound(g) == pytest.approx(blt_optimize.sensitivity_squared(theta, w, 256))


def _brute_capped(total, cap, groups):
    best = 0.0
    grid = [i * 0.5 for i in range(int(2 * cap) + 1)]
    for n in itertools.product(grid, repeat=groups):
        if sum(n) <= total + 1e-12:
            best = max(best, math.sqrt(sum(x * x for x in n)))
    return best


@pytest.mark.parametrize('total,cap,groups', [(3, 2, 3), (4, 2, 3), (7, 2, 3), (1, 2, 2),
                                              (5.5, 2, 4), (9, 3, 2)])
def test_capped_l2_against_brute_force(total, cap, groups):
    assert capped_l2(total, cap, groups) == pytest.approx(_brute_capped(total, cap, groups))


def test_blt_calibrated_to_participation_spends_less_noise_and_never_more():
    theta, w = blt_tables.FINITE[10]
    plain = BLTCounter(rho=0.5, horizon=1024, l1_sensitivity=3 * 8, l2_sensitivity=3 * 8)
    p = Participation(max_groups=1, max_steps=8, step_bound=3, total_bound=24)
    aware = BLTCounter(rho=0.5, horizon=1024, l1_sensitivity=24, l2_sensitivity=24,
                       participation=p)
    assert aware.effective_l2 < plain.effective_l2 == 24
    assert aware.effective_l2 == pytest.approx(
        3 * p.effective_participations(*aware.exact_params, 1024))
    assert aware.release_variance(1024) < plain.release_variance(1024)
    single = Participation(max_groups=1, max_steps=1, step_bound=24, total_bound=24)
    same = BLTCounter(rho=0.5, horizon=1024, l1_sensitivity=24, participation=single)
    assert same.sensitivity == pytest.approx(plain.sensitivity, rel=1e-8)
    assert same.sensitivity >= plain.sensitivity * (1 - 1e-12)


def test_participation_parameters_are_named():
    with pytest.raises(InvalidParamsError, match='max_steps'):
        Participation(max_groups=1, max_steps=0, step_bound=1, total_bound=1)
    with pytest.raises(InvalidParamsError, match='participation'):
        BLTCounter(rho=1.0, horizon=8, participation=(1, 2, 3, 4))


# -- any S in bounded memory (review h2: S = 2^30 allocated 32 GiB at construction) ---------------

def test_blt_bound_is_the_exact_sum_below_the_cutoff():
    theta, w = [0.99, 0.6], [0.3, 0.2]
    for horizon in (None, 5000):
        g = toeplitz_overlaps(theta, w, horizon, 3000)
        bound, g0 = participation.blt_bound(theta, w, horizon, 3000)
        assert bound == pytest.approx(banded_bound(g), rel=1e-12)
        assert g0 == g[0]


def test_blt_bound_beyond_the_cutoff_is_an_upper_bound(monkeypatch):
    theta, w = [0.999, 0.6], [0.3, 0.2]
    exact = banded_bound(toeplitz_overlaps(theta, w, None, 6000))
    monkeypatch.setattr(participation, 'EXACT_OVERLAPS', 1 << 12)
    monkeypatch.setattr(participation, '_CHUNK', 1 << 10)
    bound, _ = participation.blt_bound(theta, w, None, 6000)
    assert exact <= bound <= exact * 1.05


def test_huge_steps_per_unit_build_in_bounded_memory():
    import tracemalloc
    theta, w = [0.999, 0.6], [0.3, 0.2]
    tracemalloc.start()
    try:
        r = Participation(3, 10 ** 12, 1.0, 1e12).effective_participations(theta, w, None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 1.0 <= r <= 10 ** 12
    assert peak < 64 << 20
