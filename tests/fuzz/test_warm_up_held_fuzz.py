"""Fuzzing the input path of ``WarmUpContinualCountPerKey(warm_up_release='held')``: the
construction arguments, 'SplitWarmUp' (held: every record to the release, the warm-up's also to
the statistics) and 'BoundPerUnit' (``_HeldBoundsFn``: held records capped per unit, then
bounded at the bounds that arrive) driven by hand on generated streams of calls. Required: no
exception escapes; every record has exactly one outcome at the cap (held or one 'HoldWarmUp'
dead letter with a reason); what is held equals ``beam_dp.drivers.warm_up.hold`` (per unit, in
arrival order, across calls and bag compactions); and what is counted when the bounds arrive
is each unit's held records bounded at them with ONE usage per unit, within (K, m, S, C)."""

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import PrivacyBudget
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.warm_up import WarmUpBounds
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.drivers.warm_up import hold
from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import DeadLetter
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.contribution_bounding import MAX_DELTAS
from beam_dp.transforms.shell import key_bytes
from beam_dp.transforms.warm_up_bounds import WARM_UP
from beam_dp.transforms.warm_up_bounds import SplitWarmUpFn
from beam_dp.transforms.warm_up_held import _HeldBoundsFn
from tests.fuzz import strategies as fz
from tests.fuzz.harness import _Bag
from tests.fuzz.harness import _Cell
from tests.fuzz.harness import _Timer

pytestmark = pytest.mark.fuzz

W, STEPS = 4, 12
CLOCK = StepClock(0, 1_000_000, 0, STEPS - 1)
PLAN = WarmUpPlan(PrivacyBudget(rho=1.0), CLOCK, W, KeyLayout.of(['a', 'b', 'c'], 1),
                  warm_up_release='held', max_value=4)
CAP = PLAN.hold_cap
UNITS = [1, 1.0, True, 'u', b'u', ('u',), None, -7]     # equal in Python, distinct as units


@fz.FUZZ
@given(step=st.integers(-3, 30), item=st.tuples(st.integers(0, 2), st.integers()))
def test_split_sends_every_record_to_the_release_and_the_warm_up_to_both(step, item):
    element = ('u', (item[0], step, item[1], 'text'))
    out = list(SplitWarmUpFn(W, held=True).process(element))
    tagged = [o for o in out if getattr(o, 'tag', None) == WARM_UP]
    main = [o for o in out if getattr(o, 'tag', None) is None]
    assert main == [element]                                        # the stream's step
    assert [t.value for t in tagged] == ([element] if step < W else [])


@settings(fz.FUZZ, max_examples=1_000)     # each case builds a chooser and counters
@given(share=st.one_of(st.floats(-1, 2), st.just(float("nan"))), warm=st.floats(-1, 2),
       release=st.sampled_from(['held', 'none', 'default_bounds', 'Held', '', None, 3]))
def test_construction_refuses_or_splits_the_budget_exactly(share, warm, release):
    try:
        plan = WarmUpPlan(PrivacyBudget(rho=1.0), CLOCK, W, KeyLayout.of(['a'], 1),
                          bounds_share=share, warm_up_share=warm, warm_up_release=release)
    except InvalidParamsError as e:
        assert any(n in str(e) for n in ('bounds_share', 'warm_up_share', 'warm_up_release'))
        return
    costs = [c.rho for _, c in plan.privacy_costs('T')]
    assert sum(costs) == pytest.approx(1.0, rel=1e-9)
    assert len(costs) == (3 if release == 'default_bounds' else 2)
    if release == 'held':
        assert plan.release_clock == CLOCK and all(
            b <= c for b, c in zip(plan.fallback, plan.hold_cap))


_records = st.lists(st.tuples(st.sampled_from(range(len(UNITS))), st.integers(0, 2),
                              st.integers(0, STEPS - 1)), max_size=25)


def _process(fn, states, element):
    cells = states
    return list(fn.process(element, cells['kept'], cells['released'], cells['timer'],
                           cells['end'], cells['bounds'], cells['held'], cells['hold']))


@settings(fz.FUZZ, max_examples=2_000)
@given(calls=st.lists(_records, max_size=MAX_DELTAS + 3),
       bounds=st.tuples(st.integers(1, CAP.k), st.integers(1, CAP.m), st.integers(1, CAP.s),
                        st.integers(0, CAP.c)))
def test_the_hold_caps_then_bounds_each_unit_once(calls, bounds):
    fn = _HeldBoundsFn(UserLevel(unit_fn=len, max_keys_per_unit=1, max_contributions_per_step=1,
                                 max_steps_per_unit=1), 'Fuzz', None, CAP)
    states = {'kept': _Bag(), 'released': _Cell(), 'timer': _Timer(), 'end': _Timer(),
              'bounds': _Cell(), 'held': _Bag(), 'hold': _Bag()}
    arrival, capped, n = [], set(), 0
    for call in calls:
        groups = {}
        for u, key, step in call:
            item = (key, step, n, f'record {n}')
            groups.setdefault(key_bytes(UNITS[u]), (UNITS[u], []))[1].append((item, n))
            arrival.append((u, key, step, n))
            n += 1
        element = (0, tuple((enc, unit, tuple(recs)) for enc, (unit, recs) in groups.items()))
        for out in _process(fn, states, element):
            dead = out.value
            assert out.tag == 'dead_letter' and isinstance(dead, DeadLetter)
            assert dead.stage == 'HoldWarmUp' and dead.reason.startswith('warm-up hold cap: ')
            capped.add(int(dead.record.split()[-1]))
        assert len(states['hold'].items) < MAX_DELTAS
    # exactly one outcome per record at the cap, as the reference's ``hold``
    held_ref, dropped = hold(PLAN, [(u, k, s) for u, k, s, _ in arrival])
    assert len(capped) == dropped
    held = [r for r in arrival if r[3] not in capped]
    assert [(u, k, s) for u, k, s, _ in held] == held_ref
    # the bounds arrive: the held records bounded at them, one usage per unit
    counted = _process(fn, states, (0, WarmUpBounds(*bounds)))
    kept_ids = sorted(out[2] for out in counted if not hasattr(out, 'tag'))
    level = WarmUpBounds(*bounds).user_level(len)
    usages, expected = {}, []
    for u, k, s, i in held:
        if usages.setdefault(u, UnitUsage(level)).offer(k, s)[0] is None:
            expected.append(i)
    assert kept_ids == sorted(expected)
    assert not states['hold'].items and not states['held'].items
    # a second bounds element changes nothing
    assert _process(fn, states, (0, WarmUpBounds(*bounds))) == []
