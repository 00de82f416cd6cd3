"""C6-C9: Fenwick invariants in noise-free mode (§18.7), restart logic (§18.8), budget ledger
(§18.9), C6 two-stream, debug-mode safety, validation and immutability."""

import math
import pickle
import random

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import fenwick
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.dynamic import Update
from beam_dp.mechanisms.dynamic_node import NOISE_FREE_ACKNOWLEDGEMENT
from beam_dp.mechanisms.dynamic_node import NodeMechanism
from beam_dp.mechanisms.dynamic_node import NoiseFreeDebug
from beam_dp.mechanisms.dynamic_node import laplace_sum_bound
from beam_dp.noise import discrete_laplace
from beam_dp.noise import secure_rng
from beam_dp.noise import seeded

DEBUG = NoiseFreeDebug(NOISE_FREE_ACKNOWLEDGEMENT)


def test_fenwick_closed_forms():
    assert [fenwick.node_level(k) for k in (1, 2, 3, 4, 6, 12)] == [1, 2, 1, 3, 2, 3]
    assert fenwick.prefix_chain(13) == [13, 12, 8]
    assert fenwick.retiring_nodes(8) == [7, 6, 4]
    for q in range(1, 300):
        covered = sorted(s for a in fenwick.prefix_chain(q) for s in fenwick.node_range(a))
        assert covered == list(range(1, q + 1))        # Lemma 9: the chain partitions [1, q]


def _random_stream(seed, ticks):
    rnd = random.Random(seed)
    live, next_id, stream = set(), 0, []
    for t in range(1, ticks + 1):
        ups = []
        if rnd.random() < 0.8:
            ups.append(Update(next_id, 1, next_id % 3))
            if rnd.random() < 0.1:                        # same-tick pair: netted out
                ups.append(Update(next_id, -1, next_id % 3))
            else:
                live.add(next_id)
            next_id += 1
        if live and rnd.random() < 0.4:
            rid = rnd.choice(sorted(live))
            live.discard(rid)
            ups.append(Update(rid, -1, rid % 3))
        if rnd.random() < 0.05:
            ups.append(Update(-t, -1, 0))                 # invalid deletion
        if rnd.random() < 0.03 and live:
            rid = next(iter(live))
            ups.append(Update(rid, 1, rid % 3))          # duplicate insertion
        if rnd.random() < 0.03:
            ups.append(Update(None, 1, 0))               # missing id
        stream.append(ups)
    return stream


def test_fenwick_invariants_noise_free():
    mech = FullyDynamicCounter(50.0, c_theta=0.3, dimension=3, max_segment_ticks=2, debug=DEBUG)
    rng = seeded(1)
    state = mech.init_state()
    homes = {}
    exact = {}
    for t, ups in enumerate(_random_stream(0, 2100), start=1):
        for u in sorted(ups, key=lambda u: -u.op):
            if u.record_id is None:
                continue
            if u.op == 1 and u.record_id not in exact:
                exact[u.record_id] = u.item
            elif u.op == -1:
                exact.pop(u.record_id, None)
        release, state = mech.advance(state, t, ups, rng, prime=False)
        if not release.closes:
            continue
        k = state.segments
        assert sorted(state.nodes) == sorted(fenwick.prefix_chain(k))
        holders = {}
        for a, node in state.nodes.items():
            level = fenwick.node_level(a)
            for rid in node.live_records():
                assert rid not in holders, 'a live record sits in two active nodes'
                holders[rid] = a
                assert homes.setdefault((rid, level), a) == a, 'record in two nodes of a level'
        assert set(holders) == set(state.live)
        hist = np.bincount(list(exact.values()), minlength=3) if exact else np.zeros(3)
        assert release.answer == tuple(float(x) for x in hist)    # histogram and count exact
    assert state.segments >= 1000


def _node(gamma):
    return NodeMechanism(1.0, 0.1, debug=NoiseFreeDebug(NOISE_FREE_ACKNOWLEDGEMENT, gamma))


def test_restart_exactly_past_half_with_gamma_zero():
    mech = _node(0.0)
    rng = seeded(0)
    state = mech.build(1, {i: 0 for i in range(10)}, rng)
    for step, rid in enumerate(range(10), start=1):
        answer, state = mech.step(state, {rid: 0}, rng)
        assert answer == (10.0 - step,)                 # exact
        if step <= 5:
            assert state.round == 1
        if step == 6:
            assert state.round == 2 and state.restarts == 1   # 6 > 10/2: first excess
    assert state.halted is False or answer == (0.0,)


def test_halts_exactly_when_nothing_remains_with_gamma_half():
    mech = _node(0.5)
    rng = seeded(0)
    state = mech.build(1, {i: 0 for i in range(4)}, rng)
    _, state = mech.step(state, {i: 0 for i in range(4)}, rng)     # 4 > 4/2 + 1: restart, 0 left
    assert state.halted and state.answer == (0.0,)
    state = mech.build(2, {i: 0 for i in range(8)}, rng)
    _, state = mech.step(state, {i: 0 for i in range(6)}, rng)     # 6 > 5: restart, 2 left
    assert state.round == 2 and not state.halted and state.answer == (2.0,)


def test_budget_ledger_many_restarts_and_segments():
    mech = FullyDynamicCounter(1.0, max_segment_ticks=1,
                               debug=NoiseFreeDebug(NOISE_FREE_ACKNOWLEDGEMENT, 0.0))
    rng = seeded(3)
    state = mech.init_state()
    restarts, levels = 0, set()
    for t in range(1, 4120):
        ups = [Update(t, 1)] + ([Update(t - 30, -1)] if t > 30 else [])
        _, state = mech.advance(state, t, ups, rng, prime=False)
        for a, node in state.nodes.items():
            level = fenwick.node_level(a)
            levels.add(level)
            eps_v = mech.level_epsilon(level)
            assert node.spent_epsilon <= eps_v * (1 + 1e-12)
            # Σ over rounds of 4·ε_r is bounded by ε_v for ANY number of rounds.
            assert sum(4 * mech.node_mechanism(level).round_epsilon(r)
                       for r in range(1, node.round + 1)) <= eps_v
        restarts = max(restarts, sum(n.restarts for n in state.nodes.values()))
    assert state.segments >= 2 ** 12
    assert restarts >= 20
    assert sum(mech.level_epsilon(l) for l in levels) < mech.epsilon_tree
    assert mech.epsilon_partition + mech.epsilon_tree <= mech.epsilon * (1 + 1e-12)


def test_each_event_touches_one_svt_instance():
    mech = FullyDynamicCounter(1.0)
    closes, state = [], mech.init_state()
    rng = seeded(4)
    for t in range(1, 400):
        release, state = mech.advance(state, t, [Update(t, 1)], rng, prime=False)
        closes.extend(release.closes)
    spans = [range(c.start_tick, c.close_tick + 1) for c in closes]
    for t in range(1, closes[-1].close_tick + 1):
        assert sum(t in s for s in spans) == 1


def test_noisy_c9_runs_and_is_immutable():
    mech = FullyDynamicCounter(2.0, c_theta=1.0, dimension=2)
    rng = seeded(5)
    state = mech.init_state()
    for t, ups in enumerate(_random_stream(1, 300), start=1):
        blob = pickle.dumps(state)
        _, new = mech.advance(state, t, ups, rng)
        assert pickle.dumps(state) == blob
        state = new
    assert state.segments > 5
    assert mech.privacy_cost().epsilon == 2.0


def test_debug_mode_cannot_run_in_production():
    mech = FullyDynamicCounter(1.0, debug=DEBUG)
    with pytest.raises(UnsupportedMechanismError, match='refuses a secure random source'):
        mech.advance(mech.init_state(), 1, [], secure_rng())
    with pytest.raises(UnsupportedMechanismError, match='no privacy cost'):
        mech.privacy_cost()
    with pytest.raises(InvalidParamsError, match='acknowledge'):
        NoiseFreeDebug('yes')


def test_two_stream_counter_tracks_live_count():
    mech = TwoStreamCounter(4.0, c_theta=1.0)
    rng = seeded(6)
    state = mech.init_state()
    for t in range(1, 1201):
        ups = [Update(t, 1)] + ([Update(t - 100, -1)] if t > 100 else [])
        release, state = mech.advance(state, t, ups, rng, prime=False)
    assert abs(release.answer[0] - 100) < 60
    assert mech.privacy_cost().epsilon == 4.0


def test_laplace_sum_bound_holds_empirically():
    rng = seeded(7)
    scales = [2.0, 2.0, 6.0, 6.0, 6.0]
    gamma = laplace_sum_bound(scales, 0.1)
    assert gamma <= sum(b * math.log(2 * 5 / 0.1) for b in scales)
    draws = sum(discrete_laplace(rng, b, 20000) for b in scales)
    assert np.mean(np.abs(draws) > gamma) <= 0.1 + 3 * math.sqrt(0.1 / 20000)


@pytest.mark.parametrize('cls, kwargs, match', [
    (FullyDynamicCounter, {'epsilon': -1}, 'FullyDynamicCounter: epsilon must be positive'),
    (FullyDynamicCounter, {'epsilon': 1, 'partition_fraction': 1}, 'partition_fraction must be'),
    (FullyDynamicCounter, {'epsilon': 1, 'debug': 'on'}, 'debug must be a NoiseFreeDebug'),
    (TwoStreamCounter, {'epsilon': 0}, 'epsilon must be positive'),
    (NodeMechanism, {'epsilon': 1, 'beta': 2}, 'NodeMechanism: beta must be in'),
])
def test_validation(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)
