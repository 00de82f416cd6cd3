"""Unit tier of ``final_share`` on the keyed drivers (count, sum, histogram, mean, variance,
quantiles; event and user level; public and private keys): the budget split is exact and
recorded entry by entry, ``noise_stddev`` is the combination's exact sd at the last step and
the continual counter's at (1 − f) of the budget before it, the refusals, and seeded releases
through ``beam_dp.testing.replay``."""

import math

import numpy as np
import pytest

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualMeanPerKey
from beam_dp import ContinualQuantilesPerKey
from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import epsilon_from_rho
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.drivers.quantiles import QuantilesDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.final_release import FinalReleaseCounter
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay

T = 40
KEYS = ['a', 'b', 'c']
USER = UserLevel(unit_fn=len, max_keys_per_unit=2, max_contributions_per_step=2,
                 max_steps_per_unit=5)
BUDGETS = [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5),
           PrivacyBudget(epsilon=1.0, delta=1e-6)]


def _driver(metric='count', budget=BUDGETS[0], final_share=0.5, unit=EventLevel(), **kw):
    extra = {}
    if metric in ('sum', 'mean', 'variance'):
        extra = dict(lower=-1.0, upper=3.0, grid_bits=4)
    if metric == 'histogram':
        extra = dict(bins=('x', 'y'))
    extra.update(kw)
    layout = None if 'private_keys' in extra else KeyLayout(KEYS, 1)
    return KeyedReleaseDriver(metric=metric, budget=budget, privacy_unit=unit,
                              clock=StepClock(0, 1, last_step=T - 1), layout=layout,
                              final_share=final_share, **extra)


@pytest.mark.parametrize('budget', BUDGETS, ids=['eps', 'rho', 'eps_delta'])
@pytest.mark.parametrize('metric', ['count', 'sum', 'histogram', 'mean', 'variance'])
@pytest.mark.parametrize('unit', [EventLevel(), USER], ids=['event', 'user'])
def test_the_split_is_exact_and_recorded(budget, metric, unit):
    drv = _driver(metric, budget, 0.7, unit)
    costs = drv.privacy_costs('X')
    assert [label for label, _ in costs] == ['X', 'X/FinalRelease']
    final = drv.final_counter
    assert isinstance(final, FinalReleaseCounter)
    accountant = BudgetAccountant(budget)
    accountant.spend_all(costs)          # fits: BudgetExceededError otherwise
    if budget.is_zcdp:
        assert sum(c.to_rho() for _, c in costs) <= budget.rho
        assert costs[1][1].to_rho() == pytest.approx(0.7 * budget.rho)
    elif budget.delta == 0:
        assert costs[0][1].epsilon + costs[1][1].epsilon <= budget.epsilon
        assert costs[1][1].epsilon == pytest.approx(0.7)
    else:
        total = drv.release_cost()
        eps = (total.epsilon if not total.is_zcdp
               else epsilon_from_rho(total.rho, budget.delta))
        assert eps <= budget.epsilon * (1 + 1e-9)
    assert 'final_one_shot[share=0.7]' in drv.mechanism_name
    assert drv.release_metadata()['mechanism'] == drv.mechanism_name


@pytest.mark.parametrize('budget', BUDGETS[:2], ids=['eps', 'rho'])
def test_noise_stddev_is_the_combination_at_the_end_and_the_rest_before(budget):
    f = 0.6
    drv = _driver('sum', budget, f)
    rest = (PrivacyBudget(epsilon=budget.epsilon * (1 - f)) if not budget.is_zcdp
            else PrivacyBudget(rho=budget.rho * (1 - f)))
    alone = _driver('sum', rest, None)
    final = drv.final_counter
    assert final.continual == alone.counter(1)
    for step in (0, 7, T - 2):
        assert drv.noise_stddev(step) == pytest.approx(alone.noise_stddev(step))
    v_c = alone.noise_stddev(T - 1) ** 2
    v_o = final.one_shot_variance() / (1 << 4) ** 2
    assert drv.noise_stddev(T - 1) == pytest.approx(math.sqrt(v_c * v_o / (v_c + v_o)))
    whole = _driver('sum', budget, None)
    assert drv.noise_stddev(T - 1) < whole.noise_stddev(T - 1)


def test_off_by_default_and_at_zero():
    for share in (None, 0, 0.0):
        drv = _driver(final_share=share)
        assert drv.final_counter is None and 'final' not in drv.mechanism_name
        assert [label for label, _ in drv.privacy_costs('X')] == ['X']


@pytest.mark.parametrize('kwargs, match', [
    (dict(final_share=1.0), r'final_share must be in \[0, 1\)'),
    (dict(final_share=-0.1), r'final_share must be in \[0, 1\)'),
    (dict(final_share='half'), 'final_share'),
    (dict(output='per_step'), "needs output='cumulative'"),
])
def test_refusals(kwargs, match):
    kw = dict(final_share=0.5)
    kw.update(kwargs)
    with pytest.raises(InvalidParamsError, match=match):
        _driver(**kw)


def test_refused_without_a_known_end():
    with pytest.raises(InvalidParamsError, match='needs a known last step'):
        KeyedReleaseDriver(metric='count', budget=BUDGETS[0], privacy_unit=EventLevel(),
                           clock=StepClock(0, 1), layout=KeyLayout(KEYS, 1), final_share=0.5)
    with pytest.raises(InvalidParamsError, match='needs a known last step'):
        ContinualCountPerKey(public_keys=KEYS, start=0, step=60,
                             budget=PrivacyBudget(epsilon=1.0), final_share=0.5)


def test_the_transform_declares_the_split_and_checks_it_at_construction():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=1.0))
    mean = ContinualMeanPerKey(public_keys=KEYS, start=0, step=60, end=60 * T, lower=0.0,
                               upper=1.0, budget=PrivacyBudget(epsilon=1.0), final_share=0.5,
                               accountant=accountant, label='M')
    assert [(label, round(c.epsilon, 9)) for label, c in mean.privacy_costs()] == [
        ('M', 0.5), ('M/FinalRelease', 0.5)]
    with pytest.raises(Exception, match='M'):      # more than the accountant holds
        ContinualMeanPerKey(public_keys=KEYS, start=0, step=60, end=60 * T, lower=0.0,
                            upper=1.0, budget=PrivacyBudget(epsilon=2.0), final_share=0.5,
                            accountant=accountant, label='M')


@pytest.mark.parametrize('metric', ['count', 'histogram', 'mean', 'variance'])
@pytest.mark.parametrize('budget', BUDGETS, ids=['eps', 'rho', 'eps_delta'])
def test_replayed_releases_carry_the_combined_stddev_at_the_end(metric, budget):
    drv = _driver(metric, budget, 0.5)
    value = {'histogram': 'y', 'mean': 1.5, 'variance': 2.0}.get(metric)
    events = keyed_events(drv, [(KEYS[i % 3], i % T, value) for i in range(200)], steps=T)
    out = replay(drv.loop_driver(), events, label='X', seed=3).releases
    assert {r.step for r in out} == set(range(T))
    by_step = {r.step: r.noise_stddev for r in out}
    assert by_step[T - 1] == pytest.approx(drv.noise_stddev(T - 1))
    assert by_step[T - 2] == pytest.approx(drv.noise_stddev(T - 2))
    assert by_step[T - 1] < by_step[T - 2]
    assert all(r.mechanism == drv.mechanism_name for r in out)
    again = replay(drv.loop_driver(), events, label='X', seed=3).releases
    assert release_table(again) == release_table(out)


def test_the_last_release_is_near_the_truth_with_the_stated_error():
    """One key, many seeds: the final release's spread matches its stated sd (coarse; the
    statistical tier has the test with power)."""
    drv = _driver('count', PrivacyBudget(epsilon=0.5), 0.8)
    events = keyed_events(drv, [('a', s, None) for s in range(T) for _ in range(3)], steps=T)
    finals = []
    for seed in range(60):
        out = replay(drv.loop_driver(), events, label='X', seed=seed).releases
        finals += [r.value - 3 * T for r in out if r.step == T - 1 and r.key == 'a']
    sd = drv.noise_stddev(T - 1)
    assert abs(np.mean(finals)) < 4 * sd / math.sqrt(len(finals))
    assert 0.6 * sd < np.std(finals) < 1.5 * sd


def test_private_keys_end_after_their_own_number_of_steps():
    keys = PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=1)
    drv = _driver('count', PrivacyBudget(epsilon=1.0), 0.5, private_keys=keys)
    shard = drv.private_shard
    state = shard.init_state()
    first, last_sd = {}, {}
    for step in range(T):
        contributions = {}
        if step >= 3:           # 'early': 40 new units every step; 'late': a few, near the end
            contributions['early'] = ((40,), 40)
        if step >= T - 4:
            contributions['late'] = ((2,), 2)
        released, state = shard.release_step(state, contributions,
                                              noise.seeded(5).derive(step))
        for key, _, sd in released:
            first.setdefault(key, step)
            if step == T - 1:
                last_sd[key] = sd
    assert 'early' in first and first['early'] < T - 1
    for key, start in first.items():
        n = T - start
        assert last_sd[key] == pytest.approx(drv.counter_noise_stddev(n, n))
        assert last_sd[key] < drv.counter_noise_stddev(n) or n == 1


@pytest.mark.parametrize('layout', ['flat', 'tree'])
@pytest.mark.parametrize('unit', [EventLevel(), USER], ids=['event', 'user'])
def test_quantiles_release_the_combined_histogram(layout, unit):
    drv = QuantilesDriver(metric='histogram', budget=PrivacyBudget(epsilon=1.0),
                          privacy_unit=unit, clock=StepClock(0, 1, last_step=T - 1),
                          layout=KeyLayout(KEYS, 1), lower=0.0, upper=8.0, depth=3,
                          percentiles=(50.0, 90.0), histogram_layout=layout, final_share=0.5)
    assert drv.resolved_layout == layout
    assert isinstance(drv.final_counter, FinalReleaseCounter)
    assert [label for label, _ in drv.privacy_costs('Q')] == ['Q', 'Q/FinalRelease']
    events = keyed_events(drv, [(KEYS[i % 3], i % T, (i * 7) % 8 + 0.5) for i in range(300)],
                          steps=T)
    out = replay(drv.loop_driver(), events, label='Q', seed=2).releases
    last = [r for r in out if r.step == T - 1]
    before = [r for r in out if r.step == T - 2]
    assert len(last) == 3
    assert last[0].noise_stddev == pytest.approx(drv.noise_stddev(T - 1))
    assert last[0].noise_stddev < before[0].noise_stddev


def test_quantiles_transform_takes_final_share():
    q = ContinualQuantilesPerKey(public_keys=KEYS, start=0, step=60, end=60 * T, lower=0.0,
                                 upper=1.0, budget=PrivacyBudget(rho=0.5), final_share=0.5)
    assert 'final_one_shot' in q.driver.mechanism_name


@pytest.mark.parametrize('layout', ['flat', 'tree'])
def test_quantiles_with_private_keys_at_user_level(layout):
    keys = PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=1)
    drv = QuantilesDriver(metric='histogram', budget=PrivacyBudget(rho=0.5), privacy_unit=USER,
                          clock=StepClock(0, 1, last_step=T - 1), private_keys=keys,
                          lower=0.0, upper=8.0, depth=2, histogram_layout=layout,
                          final_share=0.5)
    shard = drv.private_shard
    state = shard.init_state()
    bins = drv.bins_per_key
    first, last = {}, {}
    for step in range(T):
        contributions = {'hot': (tuple([10] * bins), 40)} if step >= 2 else {}
        released, state = shard.release_step(state, contributions,
                                              noise.seeded(8).derive(step))
        for key, _, sd in released:
            first.setdefault(key, step)
            if step == T - 1:
                last[key] = sd
    n = T - first['hot']
    assert last['hot'] == pytest.approx(drv.counter_noise_stddev(n, n))
    assert last['hot'] < drv.counter_noise_stddev(n)
