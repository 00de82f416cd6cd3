"""The private-keys shard state machine, driven by hand (no Beam)."""

import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.drivers.private_keys import stable_shard
from beam_dp.errors import InvalidParamsError
from beam_dp.privacy_unit import EventLevel

SELECT = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=4)


def driver(**overrides):
    kwargs = dict(metric='count', budget=PrivacyBudget(epsilon=1e7), privacy_unit=EventLevel(),
                  clock=StepClock(0, 60), private_keys=SELECT)
    kwargs.update(overrides)
    return KeyedReleaseDriver(**kwargs)


def test_shards_are_stable_hashes():
    assert stable_shard('station-7', 4) == stable_shard('station-7', 4) == SELECT.shard_of(
        'station-7')
    assert {stable_shard(f'k{i}', 4) for i in range(100)} == {0, 1, 2, 3}


def test_merge_sums_pre_aggregated_payloads_per_key():
    merged = driver().private_shard.merge([{'a': ((1, 2), 1)}, {'a': ((3, 4), 2), 'b': ((1, 0), 1)}])
    assert merged == {'a': ((4, 6), 3), 'b': ((1, 0), 1)}


def test_selection_then_exact_totals_without_back_fill():
    d = driver()
    shard = d.private_shard
    state, released = shard.init_state(), []
    for step in range(6):
        out, state = shard.release_step(state, {'big': ((50,), 50), 'solo': ((1,), 1)}
                                        if step == 0 else {'big': ((50,), 50)}, noise.seeded(3))
        released += [(key, step, round(row[0], 6), sd) for key, row, sd in out]
    assert released and {k for k, *_ in released} == {'big'}
    first = released[0][1]
    # The first release counts everything since start; then one release per step, none before.
    assert [(s, v) for _, s, v, _ in released] == [(s, 50.0 * (s + 1)) for s in range(first, 6)]
    assert released[0][3] == pytest.approx(d.counter_noise_stddev(1))
    assert state.next_step == 6 and 'solo' in state.candidates and 'big' in state.selected


def test_costs_are_selection_then_release():
    d = driver(budget=PrivacyBudget(epsilon=0.5))
    labels = [label for label, _ in d.privacy_costs('T')]
    assert labels == ['T/SelectKeys', 'T']
    assert d.privacy_cost().epsilon == pytest.approx(1.5) and d.privacy_cost().delta == 1e-6
    meta = d.release_metadata()
    assert meta['mechanism'].endswith('+continual_key_selection') and meta['epsilon'] == 1.5


@pytest.mark.parametrize('kwargs, match', [
    ({'budget': PrivacyBudget(epsilon=1.0)}, 'budget must have epsilon > 0 and delta > 0'),
    ({'budget': 1.0}, 'budget must be a PrivacyBudget'),
    ({'num_shards': 0}, 'num_shards must be a positive integer'),
])
def test_validation(kwargs, match):
    params = dict(budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    params.update(kwargs)
    with pytest.raises(InvalidParamsError, match=f'PrivateKeys: {match}'):
        PrivateKeys(**params)


def test_idle_candidates_are_not_evaluated_every_step_and_groups_share_a_counter():
    from beam_dp.mechanisms.key_selection import ContinualKeySelection
    d = driver()
    shard = d.private_shard
    calls = []
    original = ContinualKeySelection.advance

    def counting(self, *args, **kwargs):
        calls.append(args[1])
        return original(self, *args, **kwargs)

    ContinualKeySelection.advance = counting
    try:
        state = shard.init_state()
        first = {f'solo{i}': ((1,), 1) for i in range(30)}
        first.update({'big1': ((500,), 500), 'big2': ((500,), 500)})
        for step in range(40):
            out, state = shard.release_step(state, first if step == 0 else {}, noise.seeded(8))
    finally:
        ContinualKeySelection.advance = original
    # 30 single-unit candidates over 40 steps: tested one by one only for 1 + EAGER_STEPS
    # steps, then drawn ahead (their next scheduled test is astronomically far).
    from beam_dp.drivers.private_keys import EAGER_STEPS
    assert len(calls) <= 32 * (1 + EAGER_STEPS)
    assert all(due > 40 for due in state.wake) and len(state.candidates) == 30
    # Both big keys were selected at step 0 and share one vector counter.
    assert state.groups[0][0] == ('big1', 'big2') and {k for k, *_ in out} == {'big1', 'big2'}

