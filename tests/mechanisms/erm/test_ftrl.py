"""DPFTRL (beam_dp.mechanisms.erm.ftrl): exact grid sums, the model formula, one record's
substitution within the counter's L1 sensitivity, select_counter's choice, the ledger, the
noise addresses, bounded state and refused parameters."""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import SWAP_ONE
from beam_dp.accounting import PrivacyBudget
from beam_dp.analysis import select_counter
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.erm import DPFTRL
from beam_dp.mechanisms.erm import BinaryLogistic
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import clip_features
from beam_dp.mechanisms.erm import ftrl
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.per_step import PerStepCounter

D_X = 65
SOFTMAX = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)


def _block(rng, n, d=D_X, classes=10, scale=3.0):
    x = clip_features(rng.normal(size=(n, d)) * scale, 1.0)
    return x, rng.integers(0, classes, n)


@pytest.mark.parametrize('bits', [0, 4, 8, 12])
def test_grid_sum_is_exact_and_within_half_a_unit_per_record_of_the_float_sum(bits):
    rng = np.random.default_rng(bits)
    x, y = _block(rng, 40)
    w = rng.normal(size=SOFTMAX.n_params(D_X)) * 3
    units = ftrl.grid_gradient_sum(SOFTMAX, w, x, y, bits)
    assert units.dtype == np.int64
    grads = SOFTMAX.per_example_grads(w, x, y)
    exact = np.rint(grads * (1 << bits)).astype(np.int64)
    assert np.array_equal(units, exact.sum(axis=0))        # integer sum, order-free
    error = np.abs(units / (1 << bits) - grads.sum(axis=0))
    assert error.max() <= 40 * 0.5 / (1 << bits) + 1e-9
    assert not ftrl.grid_gradient_sum(SOFTMAX, w, x[:0], y[:0], bits).any()


def test_model_is_minus_the_prefix_sum_over_mu_n_plus_inverse_eta():
    total = np.array([512, -256, 3], dtype=np.int64)
    w = ftrl.ftrl_weights(total, 8, 0.25, 12, 1.0 / 0.5)
    assert np.allclose(w, -np.array([2.0, -1.0, 3 / 256]) / (0.25 * 12 + 2.0))


def test_release_is_the_formula_of_the_counters_own_output():
    """A release equals −S/2^k/(μN + 1/η) of the counter driven on the block sums at the
    previous release, with the same block rng; N counts nominal slots (padding included)."""
    mech = DPFTRL(SOFTMAX, 16, D_X, 5.0, horizon=4, mu=0.01, learning_rate=0.25)
    counter, cstate = mech.counter, mech.counter.init_state()
    state = mech.init_state()
    rng = np.random.default_rng(1)
    w = np.zeros(mech.n_params)
    src = noise.seeded(3)
    for b, n in enumerate((16, 3, 0, 16)):
        x, y = _block(rng, n)
        events, state = mech.step(state, (x, y), src)
        units = ftrl.grid_gradient_sum(SOFTMAX, w, x, y, 8)
        total, cstate = counter.step(cstate, units, src.derive('dp_ftrl', b))
        w = -np.asarray(total, dtype=np.float64) / 256 / (0.01 * 16 * (b + 1) + 4.0)
        (event,) = events
        assert np.array_equal(event.model.weights, w)
        assert event.job.job_id == f'ftrl:t{b}' and (event.job.lo, event.job.hi) == (b, b + 1)
        assert event.model.n_nominal == 16 * (b + 1) and event.job.center is None
        assert event.model.noise_scale == pytest.approx(
            math.sqrt(counter.release_variance(b + 1)) / 256 / (0.01 * 16 * (b + 1) + 4.0))
        assert event.ledger_worst == 5.0
    assert state.ledger.size() <= 1                  # one live interval: bounded


@pytest.mark.parametrize('loss, classes', [(SOFTMAX, 10), (BinaryLogistic(clip_norm=1.0), 2)],
                         ids=['softmax', 'logistic'])
def test_one_substitution_changes_a_block_sum_by_at_most_the_l1_sensitivity(loss, classes):
    l1 = ftrl.step_l1_sensitivity(loss, D_X, 8)
    assert l1 == pytest.approx(2 * (loss.lipschitz_l1(D_X) * 256 + loss.n_params(D_X) / 2))
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(300):
        x = clip_features(rng.choice([-1.0, 1.0], size=(8, D_X)) * rng.uniform(0.5, 3), 1.0)
        y = rng.integers(0, classes, 8)
        w = rng.normal(size=loss.n_params(D_X)) * rng.uniform(0, 50)
        x2, y2 = x.copy(), y.copy()
        x2[3] = clip_features(rng.choice([-1.0, 1.0], size=(1, D_X)), 1.0)[0]
        y2[3] = (y[3] + rng.integers(1, classes)) % classes
        change = np.abs(ftrl.grid_gradient_sum(loss, w, x, y, 8)
                        - ftrl.grid_gradient_sum(loss, w, x2, y2, 8)).sum()
        worst = max(worst, change / l1)
    assert worst <= 1.0
    assert worst > 0.5                  # the bound is not vacuous


def test_counter_is_select_counters_choice_at_the_step_sensitivity_and_cost_is_swap_one():
    mech = DPFTRL(SOFTMAX, 64, D_X, 100.0, horizon=21)
    dim = SOFTMAX.n_params(D_X)
    l1 = 2 * (2 * math.sqrt(D_X) * 256 + dim / 2)
    assert mech.counter == select_counter(PrivacyBudget(epsilon=100.0), 21, dim, l1)
    assert mech.counter.l1_sensitivity == pytest.approx(l1)
    cost = mech.privacy_cost()
    assert cost.epsilon == 100.0 and cost.relation == SWAP_ONE
    assert isinstance(DPFTRL(SOFTMAX, 64, D_X, 1.0, horizon=200).counter,
                      type(select_counter(PrivacyBudget(epsilon=1.0), 200, dim, l1)))


def test_ledger_charges_each_block_once_and_never_exceeds_epsilon():
    mech = DPFTRL(BinaryLogistic(), 4, 3, 2.0, counter=InfiniteTreeCounter(
        epsilon=2.0, l1_sensitivity=ftrl.step_l1_sensitivity(BinaryLogistic(), 3, 8),
        dimension=3))
    state = mech.init_state()
    rng = np.random.default_rng(2)
    for b in range(50):
        x, y = _block(rng, 4, d=3, classes=2)
        events, state = mech.step(state, (x, y), noise.seeded(b))
        assert state.ledger.block_cost(b) == 2.0 and events[0].ledger_worst == 2.0
    assert state.ledger.size() == 1 and state.ledger.worst() == 2.0


def _steps(mech, rng, blocks=3):
    state = mech.init_state()
    data = np.random.default_rng(5)
    out = []
    for _ in range(blocks):
        events, state = mech.step(state, _block(data, 8), rng)
        out.append(events[0].model.weights)
    return np.array(out)


def test_noise_addresses_are_dp_ftrl_per_block_and_replay_identically():
    mech = DPFTRL(SOFTMAX, 8, D_X, 10.0, horizon=3)
    first = _steps(mech, noise.seeded(7))
    assert np.array_equal(first, _steps(mech, noise.seeded(7)))
    assert not np.array_equal(first, _steps(mech, noise.seeded(8)))
    state = mech.init_state()
    x, y = _block(np.random.default_rng(5), 8)
    event, _ = mech.release_block(state, x, y, noise.seeded(7).derive('dp_ftrl', 0))
    assert np.array_equal(event.model.weights, first[0])


def _l1():
    return ftrl.step_l1_sensitivity(SOFTMAX, D_X, 8)


@pytest.mark.parametrize('kwargs, says', [
    (dict(horizon=None), 'horizon'),
    (dict(horizon=0), 'horizon'),
    (dict(epsilon=float('inf')), 'epsilon'),
    (dict(mu=-1.0), 'mu'),
    (dict(learning_rate=0.0), 'learning_rate'),
    (dict(grid_bits=31), 'grid_bits'),
    (dict(grid_bits=True), 'grid_bits'),
    (dict(records_per_block=0), 'records_per_block'),
    (dict(counter=PerStepCounter(epsilon=1.0, l1_sensitivity=100.0, dimension=650)),
     'l1_sensitivity'),
    (dict(counter=PerStepCounter(rho=1.0, l1_sensitivity=1e5, dimension=650)), 'pure'),
    (dict(counter=PerStepCounter(epsilon=2.0, l1_sensitivity=1e5, dimension=650)), 'pure'),
    (dict(counter=PerStepCounter(epsilon=1.0, l1_sensitivity=1e5, dimension=65)), 'dimension'),
    (dict(counter=BinaryTreeCounter(horizon=4, epsilon=1.0, l1_sensitivity=1e5,
                                    dimension=650)), 'horizon'),
    (dict(horizon=None, counter=BinaryTreeCounter(horizon=64, epsilon=1.0, l1_sensitivity=1e5,
                                                  dimension=650)), 'infinite-horizon'),
    (dict(counter='auto'), 'continual counter'),
])
def test_bad_parameters_are_refused_by_name(kwargs, says):
    params = dict(loss=SOFTMAX, records_per_block=64, feature_dim=D_X, epsilon=1.0, horizon=8)
    with pytest.raises(InvalidParamsError, match=says):
        DPFTRL(**{**params, **kwargs})


def test_a_counter_outside_the_samplers_range_is_refused_when_built():
    """Issue 21: the counter refuses its own unsamplable noise scale (before DPFTRL sees it)."""
    with pytest.raises(InvalidParamsError, match='exact samplers'):
        PerStepCounter(epsilon=1e-9, l1_sensitivity=9e3, dimension=650)


def test_unbounded_horizon_runs_on_an_infinite_horizon_counter():
    for counter in (InfiniteTreeCounter(epsilon=1.0, l1_sensitivity=_l1(), dimension=650),
                    PerStepCounter(epsilon=1.0, l1_sensitivity=_l1(), dimension=650)):
        mech = DPFTRL(SOFTMAX, 8, D_X, 1.0, counter=counter)
        assert _steps(mech, noise.seeded(1), blocks=2).shape == (2, 650)


def test_a_block_larger_than_n_max_is_refused():
    mech = DPFTRL(SOFTMAX, 4, D_X, 1.0, horizon=2)
    with pytest.raises(InvalidParamsError, match='at most 4'):
        mech.step(mech.init_state(), _block(np.random.default_rng(0), 5), noise.seeded(0))
