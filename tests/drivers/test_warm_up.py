"""WarmUpPlan and WarmUpShardLoop (pure): validation, exact costs, the release clock, the
warm-up statistics, the choice is the offline chooser's, the release loop holds partials and
timers until its bounds arrive and then calibrates exactly to them, and ``replay``."""

import dataclasses
import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.drivers.bounds import unit_statistics
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.keyed import ShardPartial
from beam_dp.drivers.protocol import UNCHANGED
from beam_dp.drivers.protocol import NoiseRoot
from beam_dp.drivers.warm_up import WarmUpBounds
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.drivers.warm_up import WarmUpShardLoop
from beam_dp.drivers.warm_up import hold
from beam_dp.drivers.warm_up import replay
from beam_dp.drivers.warm_up import run_warm_up
from beam_dp.errors import InvalidParamsError
from beam_dp.privacy_unit import UserLevel

CLOCK = StepClock(0, 1_000_000, 0, 39)          # 40 steps of 1 s
LAYOUT = KeyLayout.of(['a', 'b', 'c'], 2)


def _plan(budget=PrivacyBudget(rho=0.5), w=10, **kw):
    return WarmUpPlan(budget, CLOCK, w, LAYOUT, **kw)


def _records(n_units=300, steps=40, seed=0):
    """(unit, key, step) in arrival order: units with a heavy tail of activity."""
    rng = np.random.default_rng(seed)
    out = []
    rate = rng.pareto(1.5, n_units) + 0.2
    for step in range(steps):
        for u in range(n_units):
            for _ in range(rng.poisson(min(rate[u], 8))):
                out.append((f'u{u}', 'abc'[int(rng.integers(0, 3 if u % 2 else 1))], step))
    return out


@pytest.mark.parametrize('budget, field', [(PrivacyBudget(rho=0.5), 'rho'),
                                           (PrivacyBudget(epsilon=2.0), 'epsilon')])
def test_the_costs_compose_to_the_budget_exactly(budget, field):
    plan = _plan(budget, bounds_share=0.25)
    costs = dict(plan.privacy_costs('T'))
    assert set(costs) == {'T/ChooseBounds', 'T'}
    total = getattr(costs['T/ChooseBounds'], field) + getattr(costs['T'], field)
    assert total == pytest.approx(getattr(budget, field), rel=1e-12)
    assert getattr(costs['T/ChooseBounds'], field) == pytest.approx(
        0.25 * getattr(budget, field), rel=1e-12)
    # every counter the plan builds costs at most the release's part
    for bounds in [(1, 1, 1, 0), (3, 5, 30, 100), (2, 1, 7, 0)]:
        cost = plan.release_driver(bounds).release_cost()
        assert getattr(cost, field) <= getattr(costs['T'], field) * (1 + 1e-9)


@pytest.mark.parametrize('kw, needle', [
    (dict(w=0), 'warm_up_steps'), (dict(w=40), 'warm_up_steps'),
    (dict(bounds_share=0.0), 'bounds_share'), (dict(bounds_share=1.0), 'bounds_share'),
    (dict(horizon=31), 'horizon'), (dict(fallback=(0, 1, 1, 0)), 'fallback'),
    (dict(fallback=(1, 1)), 'fallback'), (dict(extrapolate=1), 'extrapolate'),
    (dict(mechanism='nope'), 'mechanism'), (dict(key_share=0), 'key_share')])
def test_bad_parameters_are_refused_by_name(kw, needle):
    with pytest.raises(InvalidParamsError, match=needle):
        _plan(**kw)


def test_an_unbounded_clock_needs_a_horizon():
    with pytest.raises(InvalidParamsError, match='horizon'):
        WarmUpPlan(PrivacyBudget(rho=1), StepClock(0, 10), 5, LAYOUT)
    plan = WarmUpPlan(PrivacyBudget(rho=1), StepClock(0, 10), 5, LAYOUT, horizon=100)
    assert plan.release_clock.last_step is None and plan.horizon == 100


def test_the_release_clock_starts_at_step_w():
    plan = _plan(w=10)
    rc = plan.release_clock
    assert rc.start_micros == CLOCK.step_bounds(10)[0]
    assert rc.last_step == 29 and plan.horizon == 30
    assert rc.release_time_micros(0) == CLOCK.release_time_micros(10)
    assert plan.warm_up_end_micros == CLOCK.release_time_micros(9)


def test_statistics_are_extrapolated_to_the_horizon():
    cells = {('a', 0): 2, ('a', 3): 1, ('b', 3): 4}       # K 2, m 4, S 2, C 7 in 10 steps
    assert unit_statistics(cells) == (2, 4, 2, 7)
    assert _plan(w=10).statistics(cells) == (2, 4, 6, 21)            # × 30/10
    assert _plan(w=10, extrapolate=False).statistics(cells) == (2, 4, 2, 7)
    busy = {('a', s): 1 for s in range(10)}
    assert _plan(w=10).statistics(busy)[2] == 30                      # S capped at horizon
    assert _plan(w=5).statistics({('a', s): 1 for s in range(5)})[2] == 35


def test_the_choice_is_the_offline_choosers():
    plan = _plan(w=10, extrapolate=False, horizon=20)
    units = {}
    for u, k, s in _records(steps=10):
        cells = units.setdefault(u, {})
        cells[(k, s)] = cells.get((k, s), 0) + 1
    rec, bounds = run_warm_up(plan, units, noise.seeded(4))
    offline = BoundsChooser(plan.chooser.budget, plan.release_budget, 20).run(
        [unit_statistics(c) for c in units.values()], noise.seeded(4))
    assert rec == offline
    assert bounds == (offline.max_keys_per_unit, offline.max_contributions_per_step,
                      offline.max_steps_per_unit, offline.max_total_contributions)


def test_no_units_still_chooses_bounds_that_run():
    plan = _plan()
    _, bounds = plan.choose(None, noise.seeded(1))
    assert plan.release_driver(bounds) is not None


def test_bounds_that_cannot_run_fall_back():
    plan = _plan(fallback=(2, 1, 3, 0))
    rec, chosen = plan.choose(None, noise.seeded(1))
    plan._drivers[WarmUpBounds(*chosen)] = None     # as if no counter ran there
    _, again = plan.choose(None, noise.seeded(1))
    assert again == WarmUpBounds(2, 1, 3, 0)


def _partial(plan, key, step, n):
    _, shard, position = plan.template_driver().locate(key)
    return shard, ShardPartial(step, np.array([position]), np.array([n]))


def test_the_loop_waits_for_its_bounds_then_releases_at_them():
    plan = _plan(budget=PrivacyBudget(rho=2.0))
    loop = WarmUpShardLoop(plan)
    root = NoiseRoot(noise.seeded(3), 'T')
    shard, payload = _partial(plan, 'a', 0, 5)
    start = loop.start(shard, root)
    assert start.timer_micros is None                   # no release before the bounds
    state = loop.fold(start.state, shard, payload).state
    assert loop.close(state, shard, plan.release_clock.release_time_micros(0), (),
                      root).releases == ()
    bounds = WarmUpBounds(2, 3, 4, 9)
    armed = loop.fold(state, shard, bounds)
    assert armed.timer_micros == plan.release_clock.release_time_micros(0)
    state = armed.state
    out = loop.close(state, shard, plan.release_clock.release_time_micros(0), (), root)
    expected = KeyedReleaseDriver(
        metric='count', budget=plan.release_budget,
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=2, max_contributions_per_step=3,
                               max_steps_per_unit=4, max_total_contributions=9),
        clock=plan.release_clock, layout=LAYOUT)
    assert {r.noise_stddev for r in out.releases} == {expected.noise_stddev(0)}
    assert {r.mechanism for r in out.releases} == {expected.mechanism_name}
    assert out.timer_micros == plan.release_clock.release_time_micros(1)


def test_a_second_bounds_element_changes_nothing():
    plan = _plan()
    loop = WarmUpShardLoop(plan)
    state = loop.start(0, None).state
    state = loop.fold(state, 0, WarmUpBounds(1, 1, 2, 0)).state
    again = loop.fold(state, 0, WarmUpBounds(5, 5, 5, 0))
    assert again.state is UNCHANGED and again.releases == () and again.timer_micros is None


def test_replay_counts_only_the_release_period_at_the_chosen_bounds():
    plan = _plan(budget=PrivacyBudget(rho=0.5), w=10)
    records = _records()
    rec, bounds, out = replay(plan, records, noise.seeded(2), 'T')
    assert {s for _, s, _, _ in out} == set(range(10, 40))
    final = {k: (v, sd) for k, s, v, sd in out if s == 39}
    # the final totals are the bounded counts of steps 10..39, within 5 noise sds
    from beam_dp.drivers.bounding import UnitUsage
    level = bounds.user_level(len)
    usage, kept = {}, {'a': 0, 'b': 0, 'c': 0}
    for u, k, s in records:
        if s >= 10 and usage.setdefault(u, UnitUsage(level)).offer(k, s - 10)[0] is None:
            kept[k] += 1
    for k in kept:
        value, sd = final[k]
        assert abs(value - kept[k]) <= 5 * sd
    true = {k: sum(1 for _, kk, s in records if kk == k and s >= 10) for k in kept}
    assert sum(kept.values()) < sum(true.values())       # the bounds bind on this data
    assert bounds.c and sum(kept.values()) <= bounds.c * len({u for u, _, _ in records})
    assert rec.max_total_contributions == bounds.c and not math.isnan(rec.predicted_noise)


def test_the_plan_is_frozen():
    plan = _plan()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.warm_up_steps = 3


@pytest.mark.parametrize('budget, field', [(PrivacyBudget(rho=0.5), 'rho'),
                                           (PrivacyBudget(epsilon=2.0, delta=1e-6), 'epsilon')])
def test_default_bounds_costs_three_parts_exactly(budget, field):
    plan = _plan(budget, bounds_share=0.2, warm_up_release='default_bounds',
                 warm_up_share=0.3, fallback=(2, 1, 3, 4))
    costs = plan.privacy_costs('T')
    assert [label for label, _ in costs] == ['T/ChooseBounds', 'T/WarmUpRelease', 'T']
    parts = [getattr(cost, field) for _, cost in costs]
    total = getattr(budget, field)
    assert parts == pytest.approx([0.2 * total, 0.3 * total, 0.5 * total], rel=1e-12)
    assert sum(parts) == pytest.approx(total, rel=1e-12)
    driver = plan.warm_up_driver
    assert driver.clock.last_step == 9 and driver.clock.start_micros == CLOCK.start_micros
    assert driver.clock.release_time_micros(9) == plan.warm_up_end_micros
    assert getattr(driver.release_cost(), field) <= parts[1] * (1 + 1e-9)
    unit = driver.privacy_unit
    assert (unit.max_keys_per_unit, unit.max_contributions_per_step, unit.max_steps_per_unit,
            unit.max_total_contributions) == (2, 1, 3, 4)
    # the release from W on gets the rest; 'none' keeps the two-part split
    assert getattr(plan.release_cost(), field) == pytest.approx(0.5 * total, rel=1e-12)
    none = _plan(budget, bounds_share=0.2)
    assert none.warm_up_driver is None and len(none.privacy_costs('T')) == 2


def test_default_bounds_replay_releases_every_step_and_the_warm_up_at_the_fallback():
    plan = _plan(warm_up_release='default_bounds', fallback=(1, 1, 2, 0))
    records = _records(n_units=60)
    rec, bounds, out = replay(plan, records, noise.seeded(5), 'T')
    steps = sorted({s for _, s, _, _ in out})
    assert steps == list(range(40))
    none_rec, none_bounds, none_out = replay(_plan(), records, noise.seeded(5), 'T')
    for name in STATISTICS:                               # the same noisy histograms
        assert getattr(none_rec, name) == getattr(rec, name)
    assert none_rec.predicted_noise < rec.predicted_noise  # the release has less budget
    assert {s for _, s, _, _ in none_out} == set(range(10, 40))
    # the warm-up noise is its own (address T/WarmUpRelease), its sd the warm-up driver's
    warm = [x for x in out if x[1] < 10]
    assert len(warm) == 3 * 10 and len({x[3] for x in warm if x[1] == 9}) == 1
    # exact counts, noise removed: a unit adds at most S = 2 records over the warm-up
    units = {u for u, _, s in records if s < 10}
    final = sum(v for _, s, v, _ in warm if s == 9)
    assert final < 2 * len(units) + 6 * max(x[3] for x in warm)


@pytest.mark.parametrize('kw, needle', [
    (dict(warm_up_release='hold'), 'warm_up_release'),
    (dict(warm_up_release='default_bounds', warm_up_share=0.0), 'warm_up_share'),
    (dict(warm_up_release='default_bounds', bounds_share=0.4, warm_up_share=0.6),
     'warm_up_share')])
def test_default_bounds_bad_arguments(kw, needle):
    with pytest.raises(InvalidParamsError, match=needle):
        _plan(**kw)


# -- warm_up_release='held' ------------------------------------------------------------------------


@pytest.mark.parametrize('budget, field', [(PrivacyBudget(rho=0.5), 'rho'),
                                           (PrivacyBudget(epsilon=2.0, delta=1e-6), 'epsilon')])
def test_held_costs_two_parts_summing_to_the_budget(budget, field):
    plan = _plan(budget, bounds_share=0.2, warm_up_release='held', warm_up_share=0.3)
    costs = plan.privacy_costs('T')
    assert [label for label, _ in costs] == ['T/ChooseBounds', 'T']     # no warm-up share
    parts = [getattr(cost, field) for _, cost in costs]
    assert parts == pytest.approx([0.2 * getattr(budget, field), 0.8 * getattr(budget, field)],
                                  rel=1e-12)
    assert sum(parts) == pytest.approx(getattr(budget, field), rel=1e-12)
    assert plan.warm_up_driver is None
    # one counter over the whole stream: the stream's clock, bounds chosen for 40 steps
    assert plan.release_clock == CLOCK and plan.step_offset == 0
    assert plan.counted_steps == 40 and plan.chooser.horizon == 40
    for bounds in [(1, 1, 1, 0), (3, 5, 40, 100)]:
        cost = plan.release_driver(bounds).release_cost()
        assert getattr(cost, field) <= parts[1] * (1 + 1e-9)
        assert plan.release_driver(bounds).clock.last_step == 39


def test_held_statistics_are_extrapolated_to_the_whole_stream():
    cells = {('a', 0): 2, ('a', 3): 1, ('b', 3): 4}       # K 2, m 4, S 2, C 7 in 10 steps
    assert _plan(w=10, warm_up_release='held').statistics(cells) == (2, 4, 8, 28)   # × 40/10


def test_held_cap_is_the_largest_candidate_or_the_fallback():
    plan = _plan(warm_up_release='held', max_value=64, fallback=(1, 100, 2, 0))
    top = plan.chooser.edges[-1]
    assert top == 64
    assert plan.hold_cap == WarmUpBounds(3, 100, 40, 64)       # K ≤ keys, S ≤ 40 steps
    # every bound the chooser can pick is within the cap (noisy histograms, any data)
    units = {f'u{i}': {('abc'[i % 3], s): 1 + i % 70 for s in range(i % 10 + 1)}
             for i in range(200)}
    for seed in range(5):
        _, bounds = run_warm_up(plan, units, noise.seeded(seed))
        assert all(b <= c for b, c in zip(bounds, plan.hold_cap))


def test_held_loop_releases_the_warm_up_steps_together_at_the_warm_up_end():
    plan = _plan(budget=PrivacyBudget(rho=2.0), warm_up_release='held')
    loop = WarmUpShardLoop(plan)
    root = NoiseRoot(noise.seeded(3), 'T')
    shard, _ = _partial(plan, 'a', 0, 1)
    state = loop.start(shard, root).state
    for step in range(10):
        state = loop.fold(state, shard, _partial(plan, 'a', step, step + 1)[1]).state
    armed = loop.fold(state, shard, WarmUpBounds(1, 20, 40, 0))
    assert armed.timer_micros == plan.warm_up_end_micros + 1 == CLOCK.release_time_micros(9) + 1
    out = loop.close(armed.state, shard, armed.timer_micros, (), root)
    steps = sorted({r.step for r in out.releases})
    assert steps == list(range(10))                                 # 0..W−1 at once
    assert out.timer_micros == CLOCK.release_time_micros(10)        # then step W on schedule
    later = loop.close(out.state, shard, out.timer_micros, (), root)
    assert {r.step for r in later.releases} == {10}
    # each step its own noise address: the same as releasing step by step
    one = loop.fold(state, shard, WarmUpBounds(1, 20, 40, 0)).state
    by_step = []
    for step in range(10):
        res = loop.close(one, shard, CLOCK.release_time_micros(step), (), root)
        one, by_step = res.state, by_step + list(res.releases)
    assert sorted(out.releases) == sorted(by_step)


def test_held_hold_caps_each_unit_on_its_own_records():
    plan = _plan(warm_up_release='held', max_value=4, fallback=(1, 1, 1, 0))
    assert plan.hold_cap == WarmUpBounds(3, 4, 4, 4)
    records = [('u', 'a', 0)] * 6 + [('v', 'b', 1)] * 3 + [('u', 'b', 2)]
    kept, dropped = hold(plan, records)
    assert kept == [('u', 'a', 0)] * 4 + [('v', 'b', 1)] * 3       # m = 4, then C = 4 for u
    assert dropped == 3


def test_held_replay_counts_every_step_at_the_chosen_bounds():
    plan = _plan(budget=PrivacyBudget(rho=0.5), warm_up_release='held')
    records = _records(n_units=120)
    rec, bounds, out = replay(plan, records, noise.seeded(2), 'T')
    assert sorted({s for _, s, _, _ in out}) == list(range(40))
    assert len(out) == 3 * 40
    none_rec, _, _ = replay(_plan(budget=PrivacyBudget(rho=0.5)), records, noise.seeded(2), 'T')
    assert rec.predicted_noise != none_rec.predicted_noise     # chosen for 40 steps, not 30
    from beam_dp.drivers.bounding import UnitUsage
    level = bounds.user_level(len)
    usage, kept = {}, {'a': 0, 'b': 0, 'c': 0}
    for u, k, s in records:                  # one usage per unit over the whole stream
        if usage.setdefault(u, UnitUsage(level)).offer(k, s)[0] is None:
            kept[k] += 1
    final = {k: (v, sd) for k, s, v, sd in out if s == 39}
    for k in kept:
        assert abs(final[k][0] - kept[k]) <= 5 * final[k][1]
    assert sum(kept.values()) < len(records)                   # the bounds bind


class _Recording(noise.RandomSource):
    """A seeded source that records, per address, how many sources derived it and drew."""

    def __init__(self, inner, path=(), log=None):
        self._inner, self._path = inner, path
        self.log = {} if log is None else log

    def derive(self, *labels):
        return _Recording(self._inner.derive(*labels), self._path + labels, self.log)

    def uint64(self, size):
        self.log.setdefault(self._path, set()).add(id(self))
        return self._inner.uint64(size)


@pytest.mark.parametrize('release', ['held', 'none', 'default_bounds'])
def test_every_noise_address_is_drawn_by_one_source(release):
    """No two draws of a replay (the job's noise, ``replay``) share an address: each address
    that draws is drawn by one derived source; with 'held' the counter's draws are at (label,
    shard, step) for every step 0..39, the histograms' under 'warm_up_histograms'."""
    plan = _plan(warm_up_release=release)
    source = _Recording(noise.seeded(1))
    replay(plan, _records(n_units=40), source, 'T')
    assert source.log and all(len(ids) == 1 for ids in source.log.values())
    counter = {p for p in source.log if p[:1] == ('T',) and len(p) >= 3
               and isinstance(p[1], int)}
    hist = {p for p in source.log if p[1:2] == ('warm_up_histograms',)}
    assert hist and not hist & counter
    if release == 'held':
        assert {p[2] for p in counter} == set(range(40))
        assert {p[1] for p in counter} == {0, 1}                # both shards
