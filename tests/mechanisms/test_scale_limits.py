"""Issue 21 items 3 and 4: every counter and every key selection refuses, at construction, a
noise parameter the exact samplers cannot draw (one rule: ``beam_dp.noise.noise_scale_problem``),
and a key selection accepts any ε without overflowing (its thresholds are computed in log space).

Each test here failed on 5367f6d: ``PerStepCounter`` and ``KaryTreeCounter`` (so
``mechanism='per_step' | 'kary_tree'``, e.g. ``upper=1e13``) raised ValueError "scale must be at
most 2**40" at the first release; ``ContinualKeySelection`` raised OverflowError at its first
threshold for a per-key ε above ~667 (and at late steps from ~660); the SVTs, the partitioner,
the node mechanism and the selections accepted a scale above 2**40 and raised at the first draw.
"""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import GaussianThresholdSelection
from beam_dp.mechanisms.key_selection import LaplaceThresholdSelection
from beam_dp.mechanisms.key_selection import TruncatedGeometricSelection
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.mechanisms.sparse_counter import SparseCounter
from beam_dp.mechanisms.sparse_vector import SparseVector
from beam_dp.mechanisms.time_partition import TimePartitioner
from beam_dp.noise.samplers import MAX_SCALE
from beam_dp.privacy_unit import EventLevel

_TREES = [
    lambda **kw: PerStepCounter(**kw),
    lambda **kw: KaryTreeCounter(horizon=100, **kw),
    lambda **kw: BalancedTreeCounter(horizon=100, **kw),
    lambda **kw: BinaryTreeCounter(horizon=100, **kw),
    lambda **kw: InfiniteTreeCounter(**kw),
]


def test_noise_scale_problem_is_the_samplers_range():
    """The one rule: a Laplace scale b or a Gaussian σ² in (0, 2**40] is drawn; the samplers
    themselves refuse exactly what it refuses."""
    for kind, sampler in (('laplace', noise.discrete_laplace),
                          ('gaussian', noise.discrete_gaussian)):
        for scale in (2.0 ** -30, 1e-3, 1.0, 1e6, float(MAX_SCALE)):
            assert noise.samplable(scale, kind), (kind, scale)
            sampler(noise.seeded(1), scale, 3)               # does not raise
        for scale in (MAX_SCALE * (1 + 1e-12), 1e13, math.inf, math.nan, 0.0, -1.0):
            assert not noise.samplable(scale, kind), (kind, scale)
            assert noise.noise_scale_problem(scale, kind)
        with pytest.raises(ValueError):
            sampler(noise.seeded(1), 1e13, 3)
    with pytest.raises(ValueError, match='kind'):
        noise.samplable(1.0, 'cauchy')


@pytest.mark.parametrize('make', _TREES)
@pytest.mark.parametrize('privacy,field', [({'epsilon': 1.0}, 'epsilon'),
                                           ({'rho': 0.5}, 'rho')])
def test_every_tree_counter_refuses_an_unsamplable_scale(make, privacy, field):
    make(l1_sensitivity=1024.0, **privacy)             # inside the range
    with pytest.raises(InvalidParamsError, match=f'exceeds the exact samplers.*{field}'):
        make(l1_sensitivity=1e13, **privacy)


@pytest.mark.parametrize('mechanism', ['per_step', 'kary_tree', 'balanced_tree', 'binary_tree'])
@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)])
def test_sum_with_upper_1e13_is_refused_at_construction(mechanism, budget):
    """The issue's case: ``upper=1e13`` at grid_bits=10 is a scale of ~1e16 grid units."""
    def build(upper):
        return KeyedReleaseDriver('sum', budget, EventLevel(), StepClock(0, 10 ** 6, 0, 9),
                                  layout=KeyLayout.of(['a']), upper=upper, mechanism=mechanism)
    build(100.0)
    with pytest.raises(InvalidParamsError, match='upper'):
        build(1e13)


def test_the_blt_has_no_cap_and_releases_upper_1e13():
    """BLT draws with ``discrete_gaussian_any`` (no cap): accepted, and it releases."""
    d = KeyedReleaseDriver('sum', PrivacyBudget(rho=0.5), EventLevel(), StepClock(0, 10 ** 6, 0, 9),
                           layout=KeyLayout.of(['a']), upper=1e13, mechanism='blt')
    released, _ = d.release_step(0, d.init_shard(0), [(np.array([0]), np.array([d.to_units(1e13)]))],
                                 noise.seeded(1))
    assert np.isfinite(released).all()


@pytest.mark.parametrize('build', [
    lambda e: SparseCounter(epsilon=e),
    lambda e: TwoStreamCounter(epsilon=e),
    lambda e: FullyDynamicCounter(epsilon=e),
    lambda e: TimePartitioner(e, 0.1),
    lambda e: SparseVector(epsilon=e, threshold=10.0),
    lambda e: ContinualKeySelection(epsilon=e, delta=1e-6),
    lambda e: LaplaceThresholdSelection(epsilon=e, delta=1e-6),
    lambda e: GaussianThresholdSelection(epsilon=e, delta=1e-6),
])
def test_a_tiny_epsilon_is_refused_at_construction(build):
    build(1e-3)
    with pytest.raises(InvalidParamsError, match='exceeds the exact samplers.*epsilon'):
        build(1e-13)


@pytest.mark.parametrize('epsilon', [600.0, 660.0, 667.0, 668.0, 700.0, 720.0, 1e4, 1e7])
def test_a_large_selection_epsilon_runs(epsilon):
    """The issue's case (per-key ε above ~667): thresholds at early and late steps, one step
    of every selection, without an OverflowError."""
    sel = ContinualKeySelection(epsilon=epsilon, delta=1e-6, max_partitions=1)
    assert sel.failure_probability >= 0
    assert math.isfinite(sel.log_failure_probability)
    for t in (1, 2, 10 ** 3, 10 ** 9, 2 ** 62):
        assert 1 <= sel.threshold(t) < 100
    rng = noise.seeded(3)
    _, state = sel.advance(sel.init_state(), 5, 3, rng.derive('a'))
    sel.advance_lazy(state, 10 ** 6, 0, rng.derive('a'))
    sel.schedule(sel.init_state(7), rng.derive('b'))
    for cls in (LaplaceThresholdSelection, GaussianThresholdSelection,
                TruncatedGeometricSelection):
        static = cls(epsilon=epsilon, delta=1e-6)
        for n in (0, 1, 2, 5):
            assert 0.0 <= static.selection_probability(n) <= 1.0
            static.select(n, rng.derive(cls.__name__, n))


def test_the_large_epsilon_thresholds_match_the_float_ones_where_both_work():
    """Log space changes nothing where the old arithmetic did not overflow."""
    for epsilon in (0.1, 1.0, 30.0, 600.0):
        sel = ContinualKeySelection(epsilon=epsilon, delta=1e-5, max_partitions=3)
        fp = sel.delta / (sel.max_partitions * (1 + math.exp(sel.key_epsilon)))
        assert math.isclose(sel.failure_probability, fp, rel_tol=1e-12)
        for t in (1, 7, 1000):
            assert sel.threshold(t) == _float_threshold(sel, t)


def _float_threshold(sel, t):
    """The pre-fix computation (target in floating point)."""
    from beam_dp.accounting import basel_weight
    from beam_dp.noise.geometric import dlap_tail
    from beam_dp.noise.samplers import as_rational_up

    def m_for(target):
        b = float(as_rational_up(sel.scale))
        a = math.exp(-1.0 / b)
        m = max(1, math.ceil(b * (math.log(1 / target) - math.log1p(a))))
        while dlap_tail(sel.scale, m) > target * (1 - 1e-9):
            m += 1
        return m
    fp = sel.failure_probability
    return m_for(fp / 2) + m_for(fp / 2 * basel_weight(t)) - 1


def test_private_keys_release_with_a_large_epsilon():
    """The continual transforms' timer path: a private-keys shard of a count releases."""
    d = KeyedReleaseDriver('count', PrivacyBudget(epsilon=1.0), EventLevel(),
                           StepClock(0, 10 ** 6),
                           private_keys=PrivateKeys(PrivacyBudget(epsilon=700.0, delta=1e-6)),
                           mechanism='per_step')
    shard = d.private_shard
    state = shard.init_state()
    rng = noise.seeded(5)
    out = []
    for step in range(4):
        rows, state = shard.release_step(state, {'k': ((3,), 3)} if step < 2 else {}, rng)
        out.append(rows)
    assert any(out)                         # ε = 700 selects a key with 3 units at once


@pytest.mark.parametrize('budget,upper,picked', [
    (PrivacyBudget(epsilon=1.0, delta=1e-6), 100.0, 'balanced_tree'),
    (PrivacyBudget(epsilon=1.0, delta=1e-6), 1e13, 'blt'),
    (PrivacyBudget(rho=0.5), 2000.0, 'blt'),
    (PrivacyBudget(rho=0.5), 1e13, 'blt'),
])
def test_auto_picks_among_the_counters_that_can_run(budget, upper, picked):
    """``mechanism='auto'`` skips a candidate whose noise is outside the samplers' range
    instead of refusing the whole configuration (on 5367f6d a Gaussian candidate's refusal
    refused every (ε, δ) sum over a known horizon, even upper=100)."""
    d = KeyedReleaseDriver('sum', budget, EventLevel(), StepClock(0, 60 * 10 ** 6, 0, 99),
                           layout=KeyLayout.of(['a']), upper=upper)
    assert d.mechanism_name.startswith(picked)
    released, _ = d.release_step(0, d.init_shard(0), [(np.array([0]), np.array([d.to_units(upper)]))],
                                 noise.seeded(2))
    assert np.isfinite(released).all()
