"""Unit tier: the quantiles driver (``beam_dp.drivers.quantiles``) and the hierarchical
histogram counter (``beam_dp.mechanisms.hierarchical_histogram``), seeded, without Beam."""

import math

import numpy as np
import pytest

from beam_dp import EventLevel
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import QuantileRelease
from beam_dp import UserLevel
from beam_dp import noise
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.quantiles import QuantilesDriver
from beam_dp.drivers.quantiles import quantiles_from_buckets
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms import hierarchical_histogram as hh
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.testing import keyed_events
from beam_dp.testing import replay

CLOCK = StepClock(0, 1_000_000, last_step=9)


def make(keys=('a', 'b'), budget=PrivacyBudget(epsilon=1.0), unit=None, **kwargs):
    params = dict(lower=0.0, upper=64.0, percentiles=(50, 90), branching=2, depth=6)
    params.update(kwargs)
    private = params.pop('private_keys', None)
    return QuantilesDriver(metric='histogram', budget=budget,
                           privacy_unit=unit or EventLevel(), clock=CLOCK,
                           layout=None if private else KeyLayout.of(list(keys), None),
                           private_keys=private, **params)


# -- the tree ---------------------------------------------------------------------------------

@pytest.mark.parametrize('branching,depth', [(2, 1), (2, 4), (3, 2), (4, 3)])
def test_consistency_is_least_squares_and_exact_on_consistent_input(branching, depth):
    rng = np.random.default_rng(branching * 10 + depth)
    leaves = branching ** depth
    design = hh.node_counts(np.eye(leaves, dtype=np.int64), branching, depth).T   # N × M
    x = rng.integers(0, 9, leaves)
    assert np.allclose(hh.consistent_leaves(design @ x, branching, depth), x)
    y = design @ x + rng.normal(0, 3, design.shape[0])
    fit = np.linalg.lstsq(design, y, rcond=None)[0]
    assert np.allclose(hh.consistent_leaves(y, branching, depth), fit)


@pytest.mark.parametrize('branching,depth', [(2, 3), (3, 2)])
def test_prefix_factors_are_the_exact_variance_of_the_linear_map(branching, depth):
    leaves = branching ** depth
    design = hh.node_counts(np.eye(leaves), branching, depth).T
    pinv = np.linalg.pinv(design)                       # M × N: the least-squares map
    prefix = np.cumsum(pinv, axis=0)
    a, b, c = hh.prefix_variance_factors(branching, depth)
    assert np.allclose(a, (prefix ** 2).sum(axis=1))
    assert np.allclose(b, prefix @ prefix[-1])
    assert c == pytest.approx(a[-1])
    assert np.all(a <= np.arange(1, leaves + 1) + 1e-9)  # never worse than flat at equal noise


def test_node_counts_are_exact_with_python_ints():
    leaves = np.array([2 ** 70, 1, 0, 3], dtype=object)
    nodes = hh.node_counts(leaves, 2, 2)
    assert nodes.tolist() == [2 ** 70 + 4, 2 ** 70 + 1, 3, 2 ** 70, 1, 0, 3]


def test_the_wrapped_counter_runs_the_inner_counter_on_the_nodes():
    inner = PerStepCounter(epsilon=1.0, l1_sensitivity=3.0)
    counter = hh.HierarchicalHistogramCounter(inner, 2, 2, 2 * 4)
    state = counter.init_state()
    x = np.array([1, 0, 2, 0, 0, 0, 0, 5], dtype=np.int64)
    est, state = counter.step(state, x, noise.seeded(1))
    assert est.shape == (8,)
    inner_wide = PerStepCounter(epsilon=1.0, l1_sensitivity=3.0, dimension=14)
    ref, _ = inner_wide.step(inner_wide.init_state(),
                             hh.node_counts(x.reshape(2, 4), 2, 2).reshape(-1), noise.seeded(1))
    assert np.allclose(est, hh.consistent_leaves(ref.reshape(2, 7), 2, 2).reshape(-1))
    assert counter.release_variance(1) == inner.release_variance(1)
    assert counter.privacy_cost() == inner.privacy_cost()


# -- post-processing --------------------------------------------------------------------------

def test_quantiles_of_exact_counts_interpolate_inside_the_bucket():
    counts = np.array([[10, 0, 10, 20]], dtype=float)        # buckets of [0, 4)
    j, values, n = quantiles_from_buckets(counts, (0, 25, 50, 100), 0.0, 4.0)
    assert n.tolist() == [40.0]
    assert j.tolist() == [[0, 0, 2, 3]]
    assert values[0].tolist() == pytest.approx([0.0, 1.0, 3.0, 4.0])


def test_quantiles_are_monotone_and_bounded_whatever_the_noise():
    rng = np.random.default_rng(3)
    est = rng.normal(0, 30, (500, 16)) + rng.integers(0, 5, (500, 16))
    _, values, _ = quantiles_from_buckets(est, (1, 10, 25, 50, 75, 90, 99), -3.0, 5.0)
    assert np.all(np.diff(values, axis=1) >= 0)
    assert np.all((values >= -3.0) & (values <= 5.0))


# -- the driver -------------------------------------------------------------------------------

def test_buckets_clamp_and_refuse_non_numbers():
    d = make()
    assert d.bucket(-5) == 0 and d.bucket(0.0) == 0 and d.bucket(0.99) == 0
    assert d.bucket(1.0) == 1 and d.bucket(63.9) == 63 and d.bucket(64.0) == 63
    assert d.bucket(math.inf) == 63 and d.bucket(-math.inf) == 0 and d.bucket(2 ** 2000) == 63
    assert d.bucket(np.float32(2.5)) == 2
    for bad, reason in ((math.nan, 'value is NaN'), ('3', 'value is not a number'),
                        (True, 'value is not a number'), (None, 'value is not a number'),
                        ([1], 'value is not a number')):
        with pytest.raises(InvalidRecordError, match=reason):
            d.bucket(bad)


def test_parameters_are_checked_naming_them():
    for kwargs, word in ((dict(lower=1.0, upper=1.0), 'lower'),
                         (dict(upper=math.nan), 'upper'),
                         (dict(percentiles=(50, 101)), 'percentiles'),
                         (dict(percentiles=()), 'percentiles'),
                         (dict(percentiles=('x',)), 'percentiles'),
                         (dict(branching=1), 'branching'),
                         (dict(depth=0), 'depth'),
                         (dict(depth=11), 'buckets'),
                         (dict(histogram_layout='heap'), 'layout')):
        with pytest.raises(InvalidParamsError, match=word):
            make(**kwargs)


def test_sensitivity_counts_the_tree_depth():
    tree = make(histogram_layout='tree', depth=6)
    assert tree.sensitivity() == (7.0, pytest.approx(math.sqrt(7)))
    flat = make(histogram_layout='flat', depth=6)
    assert flat.sensitivity() == (1, 1)
    unit = UserLevel(unit_fn=len, max_keys_per_unit=2, max_contributions_per_step=1,
                     max_steps_per_unit=3)
    user_tree = make(histogram_layout='tree', unit=unit)
    l1, l2 = unit.sensitivity(1)
    assert user_tree.sensitivity() == (7 * l1, pytest.approx(math.sqrt(7) * l2))
    assert 7 * l1 == 2 * 3 * 7
    # The tree's per-node noise scales with its sensitivity (Laplace: L1 = D + 1; discrete
    # Laplace's variance 2b² − 1/6 + o(1) is not exactly quadratic in the scale b).
    assert tree.noise_stddev(0) == pytest.approx(7 * flat.noise_stddev(0), rel=0.05)


@pytest.mark.parametrize('budget,depth,expected', [
    (PrivacyBudget(epsilon=1.0), 4, 'flat'),       # 16 buckets: (D+1)² = 25 too dear
    (PrivacyBudget(epsilon=1.0), 10, 'tree'),      # 1024 buckets
    (PrivacyBudget(rho=0.5), 4, 'tree'),           # Gaussian: the tree pays only D + 1
])
def test_auto_layout_picks_the_smaller_closed_form(budget, depth, expected):
    d = make(budget=budget, depth=depth)
    variances = d.layout_variances()
    assert d.resolved_layout == expected == min(variances, key=variances.get)


def test_replay_releases_quantile_records_with_the_stated_error():
    d = make(histogram_layout='tree', percentiles=(10, 50, 90))
    rng = np.random.default_rng(0)
    contributions = [(k, s, float(rng.uniform(0, 64))) for s in range(10) for k in 'ab'
                     for _ in range(100)]
    out = replay(d.loop_driver(), keyed_events(d, contributions, 10), label='Q', seed=4)
    assert len(out.releases) == 20 and not out.dead_letters
    r = out.releases[-1]
    assert isinstance(r, QuantileRelease)
    assert r.metric == 'quantiles' and r.layout == 'tree' and r.step == 9
    assert r.mechanism.startswith('tree_histogram/')
    assert r.value_resolution == 1.0 and r.percentiles == [10.0, 50.0, 90.0]
    assert r.noise_stddev == pytest.approx(d.noise_stddev(9))
    a, b, c = hh.prefix_variance_factors(2, 6)
    for p, value, sd in zip((0.1, 0.5, 0.9), r.values, r.rank_error_stddev):
        j = min(int(value), 63)
        expected = r.noise_stddev * math.sqrt(a[j] - 2 * p * b[j] + p * p * c)
        assert sd == pytest.approx(expected) or j > 0 and value == int(value)
        assert abs(value - 64 * p) < 8                  # 1000 uniform values per key
    assert r.count == pytest.approx(1000, abs=6 * r.noise_stddev)


def test_same_seed_same_releases_and_other_seed_other_noise():
    d = make()
    events = keyed_events(d, [('a', 0, 3.0), ('b', 1, 40.0)], 3)
    one = replay(d.loop_driver(), events, label='Q', seed=1).releases
    two = replay(d.loop_driver(), events, label='Q', seed=1).releases
    other = replay(d.loop_driver(), events, label='Q', seed=2).releases
    assert one == two and one != other


def test_private_keys_release_quantiles_of_selected_keys():
    from beam_dp.drivers.private_keys import PrivateKeys
    from beam_dp.drivers.keyed import PrivatePartial
    from beam_dp.testing.replay import Element, Watermark
    d = make(private_keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=1),
             histogram_layout='tree', depth=3)
    per_bin = tuple([0, 0, 50, 50, 100, 0, 0, 0])
    events = [Element(0, None)] + [Element(0, PrivatePartial(s, {'k': (per_bin, 200)}))
                                   for s in range(3)]
    events.append(Watermark(CLOCK.release_time_micros(2)))
    out = replay(d.loop_driver(), events, label='P', seed=3)
    assert out.releases and all(isinstance(r, QuantileRelease) for r in out.releases)
    assert {r.key for r in out.releases} == {'k'}
    assert out.releases[-1].mechanism.endswith('+continual_key_selection')
