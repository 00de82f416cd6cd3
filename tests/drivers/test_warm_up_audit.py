"""DP audit of the warm-up path (``WarmUpContinualCountPerKey``'s, through ``replay``, which
the pipeline tests pin to the Beam job) on neighbouring streams: a background stream with and
without one heavy unit u (records in the warm-up and after it, over every key, at every step,
far over every bound), the same seed. Noise is drawn at the same addresses in both runs, so
the transcripts differ only by u's effect, which the audit recovers from the two outputs alone:

* the warm-up histograms differ in exactly one bucket by 1 in each of the four, and the
  privacy loss of that transcript from their declared noise is the histograms' share of ρ;
* the bounds chosen are the same in both runs (post-processing of nearly the same
  histograms, at this background), and the releases differ by the cumulative sums of u's kept
  records per (key, step); recovered cell by cell, their L2 norm is at most the one the
  counter is calibrated to at those bounds (``PerCellCounter.cell_sensitivity``), so the loss
  of the release transcript is at most the release's share of ρ, and u, far over the bounds,
  uses most of it;
* the losses add up to at most the budget.

The audit has power: bounding at twice the chosen bounds (while calibrating at them) gives a
release loss well over the release's share."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.warm_up import WarmUpBounds
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.drivers.warm_up import hold
from beam_dp.drivers.warm_up import replay

KEYS = ['a', 'b', 'c', 'd']
STEPS, W = 24, 6
BUDGET = PrivacyBudget(rho=1.0)


def _background(seed=0, units=400):
    rng = np.random.default_rng(seed)
    out = []
    for step in range(STEPS):
        for u in range(units):
            for _ in range(rng.poisson(0.6)):
                out.append((f'b{u}', KEYS[int(rng.integers(0, 2))], step))
    return out


def _with_heavy_unit(records):
    """u at every step, 3 records of every key (after the background's records of the step)."""
    out = []
    for step in range(STEPS):
        out += [r for r in records if r[2] == step]
        out += [('u', k, step) for k in KEYS for _ in range(3)]
    return out


def _plan():
    return WarmUpPlan(BUDGET, StepClock(0, 1, 0, STEPS - 1), W, KeyLayout.of(KEYS, 1),
                      bounds_share=0.2, mechanism='per_cell', key_share=0.3)


def _cells(values):
    """(key, step) → released value: per key, cell increments of the cumulative releases."""
    out = {}
    for key in KEYS:
        series = np.array([values[(key, s)] for s in range(W, STEPS)])
        out[key] = np.diff(np.concatenate([[0.0], series]))
    return out


def _histogram_loss(plan, rec0, rec1):
    """The histograms' exact zCDP loss between two transcripts; one bucket moves by 1 in each."""
    loss = 0.0
    for name in STATISTICS:
        d = np.array(getattr(rec1, name)) - np.array(getattr(rec0, name))
        assert np.abs(d).sum() == 1, (name, d)
        param = float(noise.as_rational_up(plan.chooser.histograms[name].noise_param))
        loss += float(d @ d) / (2 * param)
    return loss


def _release_loss(plan, bounds, delta_cells):
    counter = plan.release_driver(bounds).counter(1)
    norm2 = sum(float(d @ d) for d in delta_cells.values())
    return plan.release_budget.rho * norm2 / counter.cell_sensitivity ** 2


def test_the_transcripts_of_neighbouring_streams_lose_at_most_the_budget():
    plan = _plan()
    background = _background()
    neighbour = _with_heavy_unit(background)
    rec0, bounds0, out0 = replay(plan, background, noise.seeded(11), 'T')
    rec1, bounds1, out1 = replay(plan, neighbour, noise.seeded(11), 'T')
    # the histograms: one bucket by 1 in each, loss = the histograms' share
    hist_loss = _histogram_loss(plan, rec0, rec1)
    assert hist_loss == pytest.approx(0.2 * BUDGET.rho, rel=1e-3)
    # the release: same bounds, u's kept cells within the calibration
    assert bounds0 == bounds1
    v0 = {(k, s): v for k, s, v, _ in out0}
    v1 = {(k, s): v for k, s, v, _ in out1}
    c0, c1 = _cells(v0), _cells(v1)
    delta = {k: c1[k] - c0[k] for k in KEYS}
    assert all(np.all(d >= 0) and np.all(d == np.round(d)) for d in delta.values())
    assert sum(d.sum() for d in delta.values()) > 0                  # u was counted
    k, m, s, c = bounds1
    assert sum(1 for d in delta.values() if d.any()) <= k
    assert all(d.max() <= m and np.count_nonzero(d) <= s for d in delta.values())
    assert not c or sum(d.sum() for d in delta.values()) <= c
    release_loss = _release_loss(plan, bounds1, delta)
    assert release_loss <= plan.release_budget.rho * (1 + 1e-9)
    assert release_loss >= 0.25 * plan.release_budget.rho           # u uses a good part of it
    assert hist_loss + release_loss <= BUDGET.rho * (1 + 1e-9)


def test_the_audit_catches_bounding_looser_than_the_calibration():
    plan = _plan()
    _, bounds, _ = replay(plan, _with_heavy_unit(_background()), noise.seeded(11), 'T')
    loose = WarmUpBounds(*(2 * x for x in bounds))
    usage = UnitUsage(loose.user_level(len))
    delta = {key: np.zeros(STEPS - W) for key in KEYS}
    for _, key, step in [r for r in _with_heavy_unit([]) if r[2] >= W]:
        if usage.offer(key, step - W)[0] is None:
            delta[key][step - W] += 1
    assert _release_loss(plan, bounds, delta) > 1.5 * plan.release_budget.rho


def _default_bounds_plan(fallback=(2, 2, 3, 0)):
    return WarmUpPlan(BUDGET, StepClock(0, 1, 0, STEPS - 1), W, KeyLayout.of(KEYS, 1),
                      bounds_share=0.2, mechanism='per_cell', key_share=0.3,
                      warm_up_release='default_bounds', warm_up_share=0.3, fallback=fallback)


def _warm_cells(values):
    out = {}
    for key in KEYS:
        series = np.array([values[(key, s)] for s in range(W)])
        out[key] = np.diff(np.concatenate([[0.0], series]))
    return out


def _warm_loss(plan, delta_cells):
    counter = plan.warm_up_driver.counter(1)
    norm2 = sum(float(d @ d) for d in delta_cells.values())
    return plan.warm_up_budget.rho * norm2 / counter.cell_sensitivity ** 2


def test_default_bounds_the_three_transcripts_lose_at_most_the_budget():
    """warm_up_release='default_bounds': the warm-up release's transcript (steps 0..W−1) on
    neighbouring streams differs by u's records kept at the fallback bounds, within its
    calibration; with the histograms and the release the losses sum to at most the budget."""
    plan = _default_bounds_plan()
    background = _background()
    neighbour = _with_heavy_unit(background)
    rec0, bounds0, out0 = replay(plan, background, noise.seeded(11), 'T')
    rec1, bounds1, out1 = replay(plan, neighbour, noise.seeded(11), 'T')
    hist_loss = _histogram_loss(plan, rec0, rec1)
    assert hist_loss == pytest.approx(0.2 * BUDGET.rho, rel=1e-3)
    v0 = {(k, s): v for k, s, v, _ in out0}
    v1 = {(k, s): v for k, s, v, _ in out1}
    assert len(v0) == len(out0) == len(KEYS) * STEPS               # every step released
    warm = {k: d1 - d0 for (k, d1), d0 in zip(_warm_cells(v1).items(),
                                               _warm_cells(v0).values())}
    assert all(np.all(d >= 0) and np.all(d == np.round(d)) for d in warm.values())
    k, m, s, _ = plan.fallback
    assert sum(1 for d in warm.values() if d.any()) == k            # u at the fallback bounds
    assert all(d.max() <= m and np.count_nonzero(d) <= s for d in warm.values())
    warm_loss = _warm_loss(plan, warm)
    assert warm_loss == pytest.approx(plan.warm_up_budget.rho, rel=1e-9)   # u uses all of it
    assert bounds0 == bounds1
    delta = {key: c1 - c0 for (key, c1), c0 in zip(_cells(v1).items(), _cells(v0).values())}
    release_loss = _release_loss(plan, bounds1, delta)
    assert release_loss <= plan.release_budget.rho * (1 + 1e-9)
    assert hist_loss + warm_loss + release_loss <= BUDGET.rho * (1 + 1e-9)
    assert plan.warm_up_budget.rho + plan.release_budget.rho + 0.2 * BUDGET.rho == \
        pytest.approx(BUDGET.rho, rel=1e-12)


def test_the_audit_catches_a_warm_up_bounded_looser_than_its_calibration():
    plan = _default_bounds_plan()
    loose = WarmUpBounds(*(2 * x for x in plan.fallback))
    usage = UnitUsage(loose.user_level(len))
    delta = {key: np.zeros(W) for key in KEYS}
    for _, key, step in [r for r in _with_heavy_unit([]) if r[2] < W]:
        if usage.offer(key, step)[0] is None:
            delta[key][step] += 1
    assert _warm_loss(plan, delta) > 1.5 * plan.warm_up_budget.rho


# -- warm_up_release='held' ------------------------------------------------------------------------


def _held_plan():
    return WarmUpPlan(BUDGET, StepClock(0, 1, 0, STEPS - 1), W, KeyLayout.of(KEYS, 1),
                      bounds_share=0.2, mechanism='per_cell', key_share=0.3,
                      warm_up_release='held')


def _all_cells(values):
    """(key, step) → released value: per key, the cell increments over steps 0..STEPS−1."""
    return {key: np.diff(np.concatenate([[0.0], [values[(key, s)] for s in range(STEPS)]]))
            for key in KEYS}


def _held_delta(bounds, reset_at_w=False):
    """u's counted cells at ``bounds`` over the whole stream (one usage; ``reset_at_w``: a
    fresh usage from step W on, the mistake the audit must catch)."""
    level = WarmUpBounds(*bounds).user_level(len)
    usage = UnitUsage(level)
    delta = {key: np.zeros(STEPS) for key in KEYS}
    for _, key, step in _with_heavy_unit([]):
        if reset_at_w and step == W:
            usage, reset_at_w = UnitUsage(level), False
        if usage.offer(key, step)[0] is None:
            delta[key][step] += 1
    return delta


def test_held_the_transcripts_lose_at_most_the_budget():
    """'held': the histograms and ONE counter over steps 0..STEPS−1 (the held warm-up steps
    included); u's records are bounded once over the whole stream, so the counter's transcript
    moves by at most its calibration, and the two losses sum to at most the budget."""
    plan = _held_plan()
    u_warm = [r for r in _with_heavy_unit([]) if r[2] < W]
    assert hold(plan, u_warm) == (u_warm, 0)             # the cap never binds for u here
    background = _background()
    rec0, bounds0, out0 = replay(plan, background, noise.seeded(11), 'T')
    rec1, bounds1, out1 = replay(plan, _with_heavy_unit(background), noise.seeded(11), 'T')
    hist_loss = _histogram_loss(plan, rec0, rec1)
    assert hist_loss == pytest.approx(0.2 * BUDGET.rho, rel=1e-3)
    assert bounds0 == bounds1
    v0 = {(k, s): v for k, s, v, _ in out0}
    v1 = {(k, s): v for k, s, v, _ in out1}
    assert len(v0) == len(out0) == len(KEYS) * STEPS                # every step, from 0
    delta = {k: d1 - d0 for (k, d1), d0 in zip(_all_cells(v1).items(), _all_cells(v0).values())}
    assert all(np.all(d >= 0) and np.all(d == np.round(d)) for d in delta.values())
    assert sum(d[:W].sum() for d in delta.values()) > 0             # u counted in the warm-up
    k, m, s, c = bounds1
    assert sum(1 for d in delta.values() if d.any()) <= k
    assert all(d.max() <= m and np.count_nonzero(d) <= s for d in delta.values())
    assert not c or sum(d.sum() for d in delta.values()) <= c
    for key in KEYS:                              # exactly u's records bounded once
        assert np.array_equal(delta[key], _held_delta(bounds1)[key])
    release_loss = _release_loss(plan, bounds1, delta)
    assert 0.25 * plan.release_budget.rho <= release_loss <= plan.release_budget.rho * (1 + 1e-9)
    assert hist_loss + release_loss <= BUDGET.rho * (1 + 1e-9)
    assert hist_loss + plan.release_budget.rho == pytest.approx(BUDGET.rho, rel=1e-3)


def test_the_audit_catches_a_held_usage_reset_at_the_warm_up_end():
    """Power: bounding the held warm-up and the later steps with two usages (each within the
    bounds) would let u count up to twice its bounds; the loss is then over the share."""
    plan = _held_plan()
    _, bounds, _ = replay(plan, _with_heavy_unit(_background()), noise.seeded(11), 'T')
    once = _release_loss(plan, bounds, _held_delta(bounds))
    twice = _release_loss(plan, bounds, _held_delta(bounds, reset_at_w=True))
    assert once <= plan.release_budget.rho * (1 + 1e-9)
    assert twice > 1.3 * plan.release_budget.rho, (once, twice, bounds)
