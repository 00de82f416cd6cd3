"""``ContinualKeySelection.advance_lazy``: the law of a test on every step without a draw per
step (skip-ahead + thinning), split-invariant draws, stickiness; its law against the exact
selection-time distribution, with power against a mis-scaled sampler."""

import math

import numpy as np
import pytest
from scipy import stats

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import KeySelectionState
from beam_dp.noise import seeded
from beam_dp.noise.geometric import dlap_tail

# scale 1, τ_1 = 12 ... τ_60 = 20. With Z = 0 and count 7 the gap is 6..10 before step 10
# (skip-ahead + thinning); 8 more units at step 10 bring it to 2..6 (step-by-step tests, then
# thinning again as τ_t grows).
SEL = ContinualKeySelection(2.0, 0.05)
COUNT, JUMP_STEP, JUMP, HORIZON = 7, 10, 8, 60
RUNS = 2000          # mis-scaled: p ≈ 0 at this size; true scale: p ≈ 0.88 (seed 77)


class _MisScaled(ContinualKeySelection):
    """A deliberately wrong sampler: 30% more test noise than the nominal law."""
    @property
    def scale(self):
        return 1.3 * super().scale


def _lazy_selection_step(sel, rng):
    state = KeySelectionState(step=0, count=COUNT, noise=0)
    ok, state = sel.advance_lazy(state, JUMP_STEP - 1, 0, rng)
    if not ok:
        ok, state = sel.advance_lazy(state, JUMP_STEP, JUMP, rng)
    if not ok:
        ok, state = sel.advance_lazy(state, HORIZON, 0, rng)
    return state.selected_step if ok else HORIZON + 1


def _exact_pmf():
    """P[selected at t] = q_t Π_{u<t} (1 - q_u), t ≤ HORIZON; the rest at HORIZON + 1."""
    pmf, alive = [], 1.0
    for t in range(1, HORIZON + 1):
        count = COUNT + (JUMP if t >= JUMP_STEP else 0)
        q = dlap_tail(SEL.scale, SEL.threshold(t) - count + 1)
        pmf.append(alive * q)
        alive *= 1 - q
    return np.asarray(pmf + [alive])


def _pvalue(samples):
    pmf = _exact_pmf()
    observed = np.bincount(np.asarray(samples) - 1, minlength=HORIZON + 1).astype(float)
    expected = pmf * len(samples)
    # Pool neighbouring cells until each expects ≥ 5 observations.
    cells_o, cells_e, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed, expected):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            cells_o.append(acc_o)
            cells_e.append(acc_e)
            acc_o = acc_e = 0.0
    cells_o[-1] += acc_o
    cells_e[-1] += acc_e
    return stats.chisquare(cells_o, cells_e).pvalue


@pytest.mark.statistical
def test_lazy_selection_time_has_the_exact_law_and_power_against_a_wrong_scale():
    root = seeded(77)
    right = [_lazy_selection_step(SEL, root.derive('ok', i)) for i in range(RUNS)]
    wrong = [_lazy_selection_step(_MisScaled(2.0, 0.05), root.derive('bad', i))
             for i in range(RUNS)]
    assert _pvalue(right) > 1e-3
    assert _pvalue(wrong) < 1e-6
    # Both regimes were exercised: selections before the jump (thinning) and after it.
    assert min(right) < JUMP_STEP and any(JUMP_STEP <= s <= HORIZON for s in right)


@pytest.mark.statistical
def test_lazy_and_per_step_selection_agree():
    """Two-sample check against ``advance`` (a draw on every step) on the same workload."""
    root = seeded(78)
    lazy = [_lazy_selection_step(SEL, root.derive('lazy', i)) for i in range(RUNS)]
    per_step = []
    for i in range(RUNS):
        rng, state, ok = root.derive('step', i), KeySelectionState(step=0, count=COUNT, noise=0), 0
        for t in range(1, HORIZON + 1):
            ok, state = SEL.advance(state, t, JUMP if t == JUMP_STEP else 0, rng)
            if ok:
                break
        per_step.append(state.selected_step if ok else HORIZON + 1)
    assert _pvalue(per_step) > 1e-3
    table = np.array([np.bincount(np.asarray(x) - 1, minlength=HORIZON + 1) for x in
                      (lazy, per_step)])
    table = table[:, table.sum(axis=0) >= 10]
    assert stats.chi2_contingency(table).pvalue > 1e-3


def test_draws_do_not_depend_on_how_the_steps_are_split():
    for seed in range(40):
        rng = seeded(seed)
        whole = SEL.advance_lazy(KeySelectionState(step=0, count=COUNT, noise=0), 9, 0, rng)
        state, ok = KeySelectionState(step=0, count=COUNT, noise=0), False
        for t in range(1, 10):
            ok, state = SEL.advance_lazy(state, t, 0, rng)
            if ok:
                break
        assert whole[0] == ok and whole[1].selected_step == state.selected_step
        if not ok:
            assert whole[1].due == state.due


def test_schedule_names_the_next_step_to_evaluate_and_selection_is_sticky():
    rng = seeded(5)
    state = SEL.schedule(SEL.init_state(1), rng)
    when, mode, _ = state.due
    assert when >= 1 and mode in ('test', 'thin', 'redraw') and state.noise is not None
    # Nothing can happen before the scheduled step: evaluating up to it draws nothing new.
    if when > 1:
        ok, before = SEL.advance_lazy(state, when - 1, 0, rng)
        assert not ok and before.due == state.due
    big = KeySelectionState(step=0, count=10 ** 6, noise=0)
    ok, chosen = SEL.advance_lazy(big, 3, 0, rng)
    assert ok and chosen.selected_step == 1
    ok, later = SEL.advance_lazy(chosen, 50, 5, rng)
    assert ok and later.selected_step == 1


def test_single_unit_key_is_rarely_woken():
    """A key with one unit: its gap is ≈ z0 + m_t ≫ 1, so its schedule skips far ahead."""
    sel = ContinualKeySelection(1.0, 1e-6)
    wakes = []
    for seed in range(20):
        state = sel.schedule(sel.advance_lazy(sel.init_state(1), 1, 1, seeded(seed))[1],
                             seeded(seed))
        wakes.append(state.due[0])
    assert np.median(wakes) > 10 ** 6


def test_validation():
    with pytest.raises(InvalidParamsError, match='need step > 4'):
        SEL.advance_lazy(KeySelectionState(step=4), 4, 0, seeded(1))
    with pytest.raises(InvalidParamsError, match='new_units >= 0'):
        SEL.advance_lazy(KeySelectionState(step=4), 5, -1, seeded(1))
    assert math.isfinite(SEL.scale)
