"""Every noise scale is checked against the exact samplers' range (2**40) at construction, with
the parameter to change named (issue 10, defect 3), instead of failing at the first timer."""

import pytest

import beam_dp
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import BinaryTreeCounter
from beam_dp.mechanisms import InfiniteTreeCounter
from beam_dp.mechanisms import infinite_counter


def test_binary_tree_refuses_a_scale_past_the_cap():
    with pytest.raises(InvalidParamsError, match='BinaryTreeCounter: .*Laplace scale .*2\\*\\*40.*'
                                                 'raise epsilon or lower l1_sensitivity'):
        BinaryTreeCounter(horizon=1024, epsilon=1e-3, l1_sensitivity=1e9)
    with pytest.raises(InvalidParamsError, match='Gaussian variance sigma2.*raise rho or lower '
                                                 'l2_sensitivity'):
        BinaryTreeCounter(horizon=1024, rho=1e-6, l1_sensitivity=2e3)
    BinaryTreeCounter(horizon=1024, epsilon=1.0, l1_sensitivity=2 ** 40 / 11)   # at the cap


def test_infinite_counter_checks_every_block_it_may_reach():
    # Block releases fit (2·l1/ε = 2^35) but the trees of late blocks (2·40·l1/ε) do not: the
    # old code accepted this and failed ~2^39 steps later, inside a timer.
    with pytest.raises(InvalidParamsError, match='InfiniteTreeCounter: .*grid_bits'):
        InfiniteTreeCounter(epsilon=1.0, l1_sensitivity=2 ** 34)
    InfiniteTreeCounter(epsilon=1.0, l1_sensitivity=2 ** 33)
    counter = InfiniteTreeCounter(epsilon=1.0)
    state = counter.init_state()
    state = type(state)(infinite_counter.MAX_STEPS, *[getattr(state, f) for f in (
        'completed', 'completed_variance', 'block_sum', 'open_sums', 'noisy', 'est_last',
        'est_prev')])
    with pytest.raises(beam_dp.errors.UnsupportedMechanismError, match='steps reached'):
        counter.step(state, [0], beam_dp.noise.seeded(0))


def test_the_issue_example_fails_at_construction():
    unit = beam_dp.UserLevel(lambda r: r[2], max_keys_per_unit=5, max_contributions_per_step=10,
                             max_steps_per_unit=100)
    with pytest.raises(InvalidParamsError, match='upper/lower, grid_bits'):
        beam_dp.ContinualSumPerKey(public_keys=['a', 'b'], start=0, step=60,
                                   budget=beam_dp.PrivacyBudget(epsilon=0.5), privacy_unit=unit,
                                   value_fn=lambda r: r[1], lower=0.0, upper=1e6)
