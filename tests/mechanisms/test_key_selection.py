"""Partition (key) selection: static rules and continual selection with the δ bound."""

import math

import numpy as np
import pytest

from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import GaussianThresholdSelection
from beam_dp.mechanisms.key_selection import LaplaceThresholdSelection
from beam_dp.mechanisms.key_selection import TruncatedGeometricSelection
from beam_dp.noise import seeded
from beam_dp.noise.samplers import as_rational_up


@pytest.mark.parametrize('eps, delta, k', [(1.0, 1e-5, 1), (0.5, 1e-6, 3), (2.0, 1e-3, 1)])
def test_static_rules_single_user_and_dp_constraints(eps, delta, k):
    for cls in (TruncatedGeometricSelection, LaplaceThresholdSelection,
                GaussianThresholdSelection):
        rule = cls(eps, delta, k)
        assert rule.selection_probability(0) == 0.0
        assert rule.selection_probability(1) <= delta / k * (1 + 1e-9)
    tg = TruncatedGeometricSelection(eps, delta, k)
    e, d = eps / k, delta / k
    for n in range(1, 80):
        p, q = tg.selection_probability(n), tg.selection_probability(n - 1)
        assert p <= math.exp(e) * q + d + 1e-12
        assert 1 - q <= math.exp(e) * (1 - p) + d + 1e-12


def test_truncated_geometric_dominates_laplace_threshold():
    # Optimality (Desfontaines et al. 2022): at every n the optimal rule selects at least as
    # often as PipelineDP-style Laplace thresholding with the same (ε, δ).
    for eps, delta in [(1.0, 1e-5), (0.3, 1e-7), (3.0, 1e-4)]:
        tg, lap = TruncatedGeometricSelection(eps, delta), LaplaceThresholdSelection(eps, delta)
        for n in range(0, 300):
            assert tg.selection_probability(n) >= lap.selection_probability(n) - 1e-12


def test_exact_sampling_frequencies():
    rng = seeded(4)
    tg = TruncatedGeometricSelection(1.0, 1e-5)
    lap = LaplaceThresholdSelection(1.0, 1e-5)
    runs = 1500
    for rule, n in [(tg, 12), (lap, 13)]:
        p = rule.selection_probability(n)
        hits = sum(rule.select(n, rng) for _ in range(runs))
        assert abs(hits / runs - p) < 5 * math.sqrt(p * (1 - p) / runs)


def single_user_release_bound(sel: ContinualKeySelection, first_step: int):
    """Upper bound on P[a key with one unit (count 1 from first_step on) is ever selected]:
    Σ_z P[Z=z]·min(1, Σ_{t ≤ H} q_t(z) + tail_H(z)), tail from the Basel construction."""
    b = sel.scale
    z0 = sel.noise_floor
    radius = int(60 * b) + z0
    z = np.arange(-radius, radius + 1)
    a = math.exp(-1 / float(as_rational_up(b)))
    pz = (1 - a) / (1 + a) * a ** np.abs(z)
    total = np.zeros_like(pz, dtype=float)
    a_q = math.exp(-1 / float(as_rational_up(b)))
    for t in range(first_step, 60):
        k = sel.threshold(t) + z                 # select ⟺ Y ≥ τ_t + Z − 1 + 1 (count 1)
        total += np.where(k >= 1, a_q ** np.maximum(k, 1) / (1 + a_q),
                          1 - a_q ** np.maximum(1 - k, 1) / (1 + a_q))
    # Steps ≥ 60: for z > -z0, q_t(z) ≤ (δ_f/2)·6/(π² t²), summed in closed form (≤ 1/(t-1)).
    tail = sel.failure_probability / 2 * 6 / math.pi ** 2 / (max(first_step, 60) - 1)
    per_z = np.where(z > -z0, np.minimum(1.0, total + tail), 1.0)
    return float(np.sum(pz * per_z))


@pytest.mark.parametrize('eps, delta, k, first', [(1.0, 1e-3, 1, 1), (0.5, 1e-5, 2, 7)])
def test_continual_single_user_key_probability_at_most_delta(eps, delta, k, first):
    sel = ContinualKeySelection(eps, delta, k)
    bound = single_user_release_bound(sel, first)
    assert bound <= sel.failure_probability * (1 + 1e-9)
    assert sel.failure_probability <= delta


def test_continual_selection_is_sticky_and_monotone():
    sel = ContinualKeySelection(1.0, 1e-3)
    rng = seeded(9)
    state = sel.init_state(first_step=10)
    selected_at = None
    for t in range(10, 400):
        ok, state = sel.advance(state, t, 2, rng)
        if ok and selected_at is None:
            selected_at = state.selected_step
        if selected_at is not None:
            assert ok and state.selected_step == selected_at      # stays selected
    assert selected_at is not None and selected_at >= 10          # never before it existed


@pytest.mark.statistical
def test_continual_single_user_monte_carlo():
    sel = ContinualKeySelection(2.0, 0.05)
    root = seeded(10)
    runs, hits = 600, 0
    for run in range(runs):
        rng = root.derive(run)
        ok, state = sel.advance(sel.init_state(1), 1, 1, rng)
        if not ok:
            ok, state = sel.advance(state, 40, 0, rng)
        hits += ok
    assert hits / runs <= sel.failure_probability + 3 * math.sqrt(sel.failure_probability / runs)


@pytest.mark.parametrize('cls, kwargs, match', [
    (TruncatedGeometricSelection, {'epsilon': 0, 'delta': 1e-5}, 'epsilon must be positive'),
    (LaplaceThresholdSelection, {'epsilon': 1, 'delta': 0}, 'delta must be in \\(0, 1\\)'),
    (ContinualKeySelection, {'epsilon': 1, 'delta': 1e-5, 'max_partitions': 0},
     'max_partitions must be a positive integer'),
])
def test_validation(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)
