"""Counter totals never wrap around int64 (issue 10, defect 2), tested at the old wrap point.

Sums are counted in grid units: with grid_bits=30 one record of value 1.0 is 2^30 units, so a
true sum of 1.35e10 is 1.45e19 units, past int64's 9.2e18. Before the fix the counters released
such sums wrapped (a neighbouring pair differed by ±2^64 instead of by one record).
"""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms import BinaryTreeCounter
from beam_dp.mechanisms import InfiniteTreeCounter

GRID = 2 ** 30
STEPS = 15
# Units per step: every 8-step node (and the infinite counter's block 3) totals 1.35e10 value
# units = 1.45e19 grid units, past 2^63.
PER_STEP = int(1.35e10 / 8) * GRID


def _counter(kind, estimator):
    common = dict(epsilon=1.0, l1_sensitivity=GRID, estimator=estimator)
    if kind == 'finite':
        return BinaryTreeCounter(horizon=16, **common)
    return InfiniteTreeCounter(**common)


def _releases(counter, stream):
    state, out = counter.init_state(), []
    for t, value in enumerate(stream):
        # The same address per step for both neighbours: equal noise, so the releases differ
        # by exactly the neighbouring change (textbook) when nothing wraps.
        release, state = counter.step(state, [value], noise.seeded(4).derive('step', t))
        out.append(release[0])
    return out, state


@pytest.mark.parametrize('kind', ['finite', 'infinite'])
@pytest.mark.parametrize('estimator', ['textbook', 'variance_reduced'])
def test_neighbouring_streams_at_the_old_wrap_point(kind, estimator):
    counter = _counter(kind, estimator)
    a = [PER_STEP] * STEPS
    b = list(a)
    b[3] += GRID                                   # one more record of value 1.0 at step 3
    ra, _ = _releases(counter, a)
    rb, _ = _releases(counter, b)
    scale = 2 * 6 * GRID                           # ≥ every node's noise scale here
    for t in range(STEPS):
        truth = PER_STEP * (t + 1)
        assert abs(int(ra[t]) - truth) < 40 * scale, (t, ra[t], truth)
        assert abs(int(rb[t]) - truth - GRID * (t >= 3)) < 40 * scale
        if estimator == 'textbook':
            assert int(rb[t]) - int(ra[t]) == GRID * (t >= 3)
    assert PER_STEP * 8 / GRID == pytest.approx(1.35e10, rel=1e-6)
    assert PER_STEP * 8 > np.iinfo(np.int64).max


@pytest.mark.parametrize('kind', ['finite', 'infinite'])
def test_totals_stay_int64_while_they_fit(kind):
    counter = _counter(kind, 'textbook')
    _, state = _releases(counter, [GRID] * STEPS)
    assert state.open_sums.dtype == np.int64 and state.noisy.dtype == np.int64
    _, state = _releases(counter, [PER_STEP] * STEPS)
    total = state.noisy if kind == 'finite' else state.completed
    assert total.dtype == object                    # exact Python ints past int64


def test_a_single_step_beyond_int64_is_exact():
    counter = BinaryTreeCounter(horizon=4, epsilon=1.0, estimator='textbook', dimension=2)
    big = 2 ** 70
    release, _ = counter.step(counter.init_state(), [big, -big], noise.seeded(1))
    assert abs(int(release[0]) - big) < 200 and abs(int(release[1]) + big) < 200


def test_scatter_add_is_exact_past_int64():
    from beam_dp.mechanisms import exact_int       # pylint: disable=import-outside-toplevel
    small = exact_int.scatter_add(3, [([0, 2, 0], [1, 2, 3]), (np.array([1]), np.array([-4]))])
    assert small.dtype == np.int64 and small.tolist() == [4, -4, 2]
    big = exact_int.scatter_add(2, [([0], [6 * 10 ** 18]), ([0, 1], [6 * 10 ** 18, 2 ** 70])])
    assert big.tolist() == [12 * 10 ** 18, 2 ** 70]


def test_keyed_driver_sums_bundles_exactly():
    """Two bundles' pre-aggregated sums of one key at one step, 6e18 grid units each."""
    from beam_dp.accounting import PrivacyBudget    # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.clock import StepClock     # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.keyed import KeyLayout     # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.keyed import KeyedReleaseDriver  # pylint: disable=import-outside-toplevel
    from beam_dp.privacy_unit import EventLevel     # pylint: disable=import-outside-toplevel
    driver = KeyedReleaseDriver(metric='sum', budget=PrivacyBudget(epsilon=1.0),
                                privacy_unit=EventLevel(), clock=StepClock(0, 60_000_000),
                                layout=KeyLayout.of(['a'], 1), horizon_steps=16,
                                estimator='textbook', grid_bits=30)
    released, _ = driver.release_step(0, driver.init_shard(0),
                                      [([0], [6 * 10 ** 18]), ([0], [6 * 10 ** 18])],
                                      noise.seeded(2))
    assert released[0, 0] == pytest.approx(12e18 / GRID, abs=200)


def _new_counters():
    from beam_dp.mechanisms import BalancedTreeCounter  # pylint: disable=import-outside-toplevel
    from beam_dp.mechanisms import BLTCounter
    from beam_dp.mechanisms import KaryTreeCounter
    from beam_dp.mechanisms import PerStepCounter
    return {
        'per_step': PerStepCounter(epsilon=1.0, l1_sensitivity=GRID),
        'balanced_tree': BalancedTreeCounter(epsilon=1.0, l1_sensitivity=GRID, horizon=16),
        'kary_tree': KaryTreeCounter(epsilon=1.0, l1_sensitivity=GRID, horizon=16),
        'blt': BLTCounter(rho=0.5, l1_sensitivity=GRID, l2_sensitivity=GRID),
    }


@pytest.mark.parametrize('name', ['per_step', 'balanced_tree', 'kary_tree', 'blt'])
def test_the_other_counters_do_not_wrap_either(name):
    """The counters ``mechanism='auto'`` picks (per-step, balanced tree, k-ary, BLT) at the old
    wrap point: releases stay within noise of the true sums (per-step and the balanced tree
    wrapped by 2^64 before) and neighbours differ by one record."""
    counter = _new_counters()[name]
    a = [PER_STEP] * STEPS
    b = list(a)
    b[3] += GRID
    ra, _ = _releases(counter, a)
    rb, _ = _releases(counter, b)
    for t in range(STEPS):
        assert abs(int(ra[t]) - PER_STEP * (t + 1)) < 200 * GRID, (name, t)
        assert abs(int(rb[t]) - int(ra[t]) - GRID * (t >= 3)) < 200 * GRID, (name, t)
    assert PER_STEP * STEPS > np.iinfo(np.int64).max
