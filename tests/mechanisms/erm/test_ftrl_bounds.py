"""DPFTRL's integer range and the block checks of the pure layer: a construction whose prefix
sums could pass int64 is refused by name, the largest allowed one sums exactly (Python-int
reference), grid_gradient_sum is exact past int64, and check_block refuses non-finite features
and labels outside the loss's classes (DPFTRL and ERMRelease alike)."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import ContinualReleaseSchedule
from beam_dp.mechanisms.erm import DPFTRL
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import HuberSVM
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import ftrl
from beam_dp.mechanisms.erm.release import check_block
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter

# Per record: |gradient coordinate| ≤ C·2^30 = 2^50 (Huber at w = 0 has |φ'| = 1 exactly).
BIG = HuberSVM(clip_norm=float(1 << 20))
N_MAX = 1 << 10                     # a block sum reaches 2^60: 3 blocks fit below 2^62, 4 don't


def _reference(loss, w, x, y, bits):
    grads = loss.per_example_grads(w, x, y)
    return [sum(int(round(float(g) * (1 << bits))) for g in grads[:, j])
            for j in range(grads.shape[1])]


@pytest.mark.parametrize('horizon', [4, None])
def test_a_prefix_sum_that_could_pass_int64_is_refused_naming_the_parameters(horizon):
    with pytest.raises(InvalidParamsError, match='grid_bits=30.*records_per_block=1024.*horizon'):
        DPFTRL(BIG, N_MAX, 2, 1e6, horizon=horizon, grid_bits=30)
    counter = InfiniteTreeCounter(epsilon=1.0, dimension=2, l1_sensitivity=1e9)
    with pytest.raises(InvalidParamsError, match='horizon=None'):   # explicit counter too
        DPFTRL(BIG, N_MAX, 2, 1.0, horizon=None, grid_bits=30, counter=counter)


def test_default_sizes_allow_an_unbounded_horizon():
    assert ftrl.prefix_bound(SoftmaxCrossEntropy(), 10_000, 8, ftrl.MAX_UNBOUNDED_BLOCKS) < 2**62


def test_the_largest_allowed_construction_sums_exactly():
    mech = DPFTRL(BIG, N_MAX, 2, 1e6, horizon=3, grid_bits=30, mu=0.0)
    assert ftrl.prefix_bound(BIG, N_MAX, 30, 3) <= 2**62 < ftrl.prefix_bound(BIG, N_MAX, 30, 4)
    x = np.tile([BIG.clip_norm, 0.0], (N_MAX, 1))
    x[::3] = [0.0, BIG.clip_norm]
    y = np.ones(N_MAX, dtype=np.int64)
    w = np.zeros(2)
    units = ftrl.grid_gradient_sum(BIG, w, x, y, 30)
    assert units.dtype == np.int64 and units.tolist() == _reference(BIG, w, x, y, 30)
    assert abs(units).sum() == N_MAX << 50                # the bound is attained
    # Three blocks through the real counter: the prefix total is the exact sum plus noise.
    counter = mech.counter
    real_step = counter.step
    state = mech.init_state()
    rng = noise.seeded(11)
    cstate = counter.init_state()
    for b in range(3):
        weights = state.weights
        (event,), state = mech.step(state, (x, y), rng)
        total, cstate = real_step(cstate, ftrl.grid_gradient_sum(BIG, weights, x, y, 30),
                                  rng.derive('dp_ftrl', b))
        assert np.array_equal(event.model.weights, ftrl.ftrl_weights(total, 30, 0.0, 0, 2.0))
    # The worst case (every block at w = 0, all gradients at the bound) through the counter:
    # its int64 prefix passes 2^61 and is the Python-int sum plus noise, no wrap-around.
    x[:] = [BIG.clip_norm, 0.0]
    cstate, exact = counter.init_state(), 0
    for b in range(3):
        units = ftrl.grid_gradient_sum(BIG, w, x, y, 30)
        exact += _reference(BIG, w, x, y, 30)[0]
        total, cstate = real_step(cstate, units, rng.derive('worst', b))
    assert exact == -3 * (N_MAX << 50) and abs(exact) > 2**61
    assert abs(int(total[0]) - exact) < 2**50 and abs(int(total[1])) < 2**50


def test_grid_gradient_sum_is_exact_past_int64():
    loss = HuberSVM(clip_norm=float(1 << 40))
    x = np.tile([loss.clip_norm, -loss.clip_norm], (64, 1))
    y = np.ones(64, dtype=np.int64)
    w = np.zeros(2)
    units = ftrl.grid_gradient_sum(loss, w, x, y, 30)
    assert units.dtype == object and units.tolist() == _reference(loss, w, x, y, 30)
    assert units.tolist() == [-(64 << 70), 64 << 70]


@pytest.mark.parametrize('mutate, says', [
    (lambda x, y: x.__setitem__((1, 0), np.nan), 'finite'),
    (lambda x, y: x.__setitem__((0, 1), np.inf), 'finite'),
    (lambda x, y: y.__setitem__(2, 3), r'\[0, 3\)'),
    (lambda x, y: y.__setitem__(0, -1), r'\[0, 3\)'),
])
def test_check_block_refuses_non_finite_features_and_labels_outside_the_classes(mutate, says):
    x, y = np.ones((4, 2)), np.zeros(4, dtype=np.int64)
    mutate(x, y)
    with pytest.raises(InvalidParamsError, match=says):
        check_block('Owner', (x, y), 4, 2, 3)
    loss = SoftmaxCrossEntropy(num_classes=3)
    for mech in (DPFTRL(loss, 4, 2, 1.0, horizon=2),
                 ERMRelease(ContinualReleaseSchedule(2, 1.0), PSGD(loss, mu=0.5), 4, 2)):
        with pytest.raises(InvalidParamsError, match=says):
            mech.step(mech.init_state(), (x, y), noise.seeded(12))


def test_check_block_refuses_fractional_and_non_finite_labels_and_keeps_valid_ones():
    x = np.ones((3, 2))
    for bad in ([0.0, 1.5, 1.0], [0.0, np.nan, 1.0]):
        with pytest.raises(InvalidParamsError, match='integer'):
            check_block('Owner', (x, np.array(bad)), 3, 2, 2)
    bx, by = check_block('Owner', (x, [1.0, 0.0, 1.0]), 3, 2, 2)
    assert by.dtype == np.int64 and by.tolist() == [1, 0, 1] and not by.flags.writeable
    assert check_block('Owner', (x[:0], []), 3, 2, 2)[1].shape == (0,)
