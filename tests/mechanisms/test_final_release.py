"""Unit tier of ``FinalReleaseCounter`` (a one-shot release of the total at the known last step,
combined with the continual counter's release by inverse variance): the steps before the end are
the continual counter's own draws, the last is exactly w·c + (1 − w)·o with o drawn at the child
address 'final_release', the variance and the cost are the closed forms, and a later start ends
at its own step."""

import dataclasses

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.final_release import FINAL_LABEL
from beam_dp.mechanisms.final_release import FinalReleaseCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.per_step import PerStepCounter

T = 12


def _pair(kind='laplace', dimension=3):
    if kind == 'laplace':
        inner = KaryTreeCounter(horizon=T, epsilon=0.5, k=3, l1_sensitivity=2.0,
                                dimension=dimension)
        one_shot = PerStepCounter(epsilon=0.5, l1_sensitivity=2.0, dimension=dimension)
    else:
        inner = BLTCounter(rho=0.25, horizon=T, dimension=dimension)
        one_shot = PerStepCounter(rho=0.25, dimension=dimension)
    return inner, FinalReleaseCounter(inner, one_shot, final_steps=T, dimension=dimension)


def _run(counter, values, seed):
    state, out = counter.init_state(), []
    for t, value in enumerate(values):
        release, state = counter.step(state, value, noise.seeded(seed).derive(t))
        out.append(np.asarray(release, dtype=float))
    return out, state


@pytest.mark.parametrize('kind', ['laplace', 'gaussian'])
def test_the_steps_before_the_end_are_the_continual_counters_own(kind):
    inner, wrapped = _pair(kind)
    values = [np.array([t % 3, 1, 2 * t], dtype=np.int64) for t in range(T)]
    alone, _ = _run(inner, values, seed=4)
    combined, state = _run(wrapped, values, seed=4)
    for t in range(T - 1):
        np.testing.assert_array_equal(alone[t], combined[t])
    assert state.t == T and state.total.tolist() == np.sum(values, axis=0).tolist()


@pytest.mark.parametrize('kind', ['laplace', 'gaussian'])
def test_the_last_step_is_the_inverse_variance_combination(kind):
    inner, wrapped = _pair(kind)
    values = [np.array([5, 0, t], dtype=np.int64) for t in range(T)]
    alone, _ = _run(inner, values, seed=9)
    combined, _ = _run(wrapped, values, seed=9)
    total = np.sum(values, axis=0)
    one_shot, _ = wrapped.final.step(wrapped.final.init_state(), total,
                                     noise.seeded(9).derive(T - 1).derive(FINAL_LABEL))
    v_c, v_o = inner.release_variance(T), wrapped.final.release_variance(1)
    w = v_o / (v_c + v_o)
    np.testing.assert_allclose(combined[-1], w * alone[-1] + (1 - w) * one_shot, rtol=1e-12)
    assert wrapped.continual_weight(T) == pytest.approx(w)
    assert wrapped.release_variance(T) == pytest.approx(v_c * v_o / (v_c + v_o))
    assert wrapped.release_variance(T - 1) == inner.release_variance(T - 1)
    assert wrapped.release_variance(T) < min(v_c, v_o)


def test_cost_is_the_sequential_composition():
    inner, wrapped = _pair('laplace')
    assert wrapped.privacy_cost().epsilon == pytest.approx(1.0)
    inner, wrapped = _pair('gaussian')
    assert wrapped.privacy_cost().rho == pytest.approx(0.5)


def test_a_later_start_ends_at_its_own_step():
    inner, wrapped = _pair('laplace')
    values = [np.ones(3, dtype=np.int64)] * 5
    state = wrapped.init_state(final_steps=5)
    for t, value in enumerate(values):
        release, state = wrapped.step(state, value, noise.seeded(1).derive(t))
    alone, _ = _run(inner, values, seed=1)
    assert not np.array_equal(release, alone[-1])        # combined at its 5th step
    assert wrapped.release_variance(5, 5) < inner.release_variance(5)
    assert wrapped.release_variance(5) == inner.release_variance(5)


def test_widening_widens_both_counters():
    _, wrapped = _pair('laplace', dimension=1)
    wide = dataclasses.replace(wrapped, dimension=7)
    assert wide.continual.dimension == wide.final.dimension == 7
    assert wide.init_state().total.shape == (7,)


def test_validation():
    inner, wrapped = _pair('laplace')
    with pytest.raises(InvalidParamsError, match='final_steps'):
        FinalReleaseCounter(inner, wrapped.final, final_steps=0, dimension=3)
    with pytest.raises(InvalidParamsError, match='PerStepCounter'):
        FinalReleaseCounter(inner, inner, final_steps=T, dimension=3)
    with pytest.raises(InvalidParamsError, match='must not itself'):
        FinalReleaseCounter(wrapped, wrapped.final, final_steps=T, dimension=3)
    with pytest.raises(InvalidParamsError, match='final_steps'):
        wrapped.init_state(final_steps=0)
