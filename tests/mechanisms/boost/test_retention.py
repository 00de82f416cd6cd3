"""Bounded Boost state: the exact-cache capacity, block retention (tree retirement) and the
state size they keep flat (beam_dp.mechanisms.boost.retention)."""

import pickle

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.cache import BoundedCache
from beam_dp.mechanisms.boost.retention import state_bytes
from beam_dp.queries import LinearQuery
from tests.mechanisms.boost.conftest import N
from tests.mechanisms.boost.conftest import blocks

POOL = [LinearQuery.from_vector((np.arange(N) % (i + 2) == 0).astype(float)) for i in range(6)]


def test_bounded_cache_keeps_at_most_capacity_and_recent_entries():
    cache = BoundedCache(10)
    for i in range(100):
        cache = cache.set(('k', i), i)
        cache = cache.promote(('k', 0))              # the hot key survives every rotation
        assert len(cache) <= 10
    assert cache.get(('k', 0)) == 0 and cache.get(('k', 99)) == 99
    assert cache.get(('k', 50)) is None and ('k', 50) not in cache
    again = pickle.loads(pickle.dumps(cache))
    assert again == cache and len(again) == len(cache)
    assert dict(cache.keep(lambda k: k[1] > 95).items()) == {('k', i): i for i in (96, 97, 98,
                                                                                   99)}


def test_bad_bounds_raise():
    with pytest.raises(InvalidParamsError, match='cache_capacity'):
        preset('tree_pmw_bypass', N, cache_capacity=1)
    with pytest.raises(InvalidParamsError, match='retention_blocks'):
        preset('tree_pmw_bypass', N, retention_blocks=0)


def test_evicted_answer_is_charged_again():
    mech = preset('exact_cache', N, cache_capacity=4)
    state = mech.add_data(mech.init_state(), blocks(1)[0])
    rng = noise.seeded(0)
    for i, q in enumerate(POOL):
        _, state = mech.answer(state, BoostRequest(q, 0, 0, str(i)), rng)
        assert len(state.cache) <= 4
    spent = state.filters.spent(0)
    first, state = mech.answer(state, BoostRequest(POOL[0], 0, 0, 'again'), rng)
    assert first.path == 'R3' and state.filters.spent(0) > spent        # evicted: re-charged
    last, state2 = mech.answer(state, BoostRequest(POOL[0], 0, 0, 'hit'), rng)
    assert last.path == 'EXACT' and state2.filters.spent(0) == state.filters.spent(0)


def _play(mech, n_blocks, queries_per_block, seed=3):
    """Seals blocks one by one; after each, queries on windows of the latest ≤ 4 blocks."""
    state, rng, out, sizes = mech.init_state(), noise.seeded(seed), [], []
    pick = np.random.default_rng(seed)
    for t, counts in enumerate(blocks(n_blocks, n=5_000, seed=seed)):
        state = mech.add_data(state, counts)
        for j in range(queries_per_block):
            width = int(pick.integers(1, min(4, t + 1) + 1))
            q = POOL[int(pick.integers(len(POOL)))]
            answer, state = mech.answer(state, BoostRequest(q, t + 1 - width, t, f'{t}-{j}'),
                                        rng.derive(t, j))
            out.append(answer)
        sizes.append(state_bytes(state))
    return state, out, sizes


def test_retention_keeps_answers_and_drops_retired_trees():
    kw = dict(window_bound=4, readiness=Readiness(c0=3, s0=1), epsilon_budget=1e9)
    unbounded = preset('tree_pmw_bypass', N, **kw)
    bounded = preset('tree_pmw_bypass', N, retention_blocks=6, **kw)
    s_u, a_u, _ = _play(unbounded, 24, 12)
    s_b, a_b, _ = _play(bounded, 24, 12)
    # Every window starts within the retention: the same answers, charges and paths.
    assert [(a.value, a.path, a.charges) for a in a_u] == [(a.value, a.path, a.charges)
                                                          for a in a_b]
    horizon = 24 - 6
    assert s_b.cum_base == horizon and s_b.cum.shape[0] == 24 - horizon + 1
    assert all(node[1] >= horizon for node in s_b.nodes)
    assert {node[0] for node in s_b.nodes} == {horizon // 4, horizon // 4 + 1}   # κ = 4, 5
    assert min(node[1] for node in s_u.nodes) == 0          # the unbounded one kept tree 0
    assert all(b >= horizon for b in s_b.filters.consumed)
    assert all((k[2][0] if k[0] == 'window' else k[2][1]) >= horizon for k in s_b.cache)
    answer, _ = bounded.answer(s_b, BoostRequest(POOL[0], horizon - 1, horizon), noise.seeded(1))
    assert (answer.status, answer.reason) == ('refused', 'window_expired')


def test_state_size_is_flat_with_bounds_and_grows_without():
    kw = dict(window_bound=4, readiness=Readiness(c0=3, s0=1), epsilon_budget=1e9)
    _, _, grow = _play(preset('tree_pmw_bypass', N, **kw), 40, 8)
    _, _, flat = _play(preset('tree_pmw_bypass', N, retention_blocks=8, cache_capacity=64,
                                **kw), 40, 8)
    assert grow[-1] > 1.8 * grow[19]
    assert flat[-1] < 1.15 * flat[19]


def test_histogram_answers_are_cached_only_when_asked():
    uniform = np.full(N, 1_000, dtype=np.int64)          # q(h) = q(Data): the SV passes
    for cached, second in ((True, 'EXACT'), (False, 'R1')):
        mech = preset('pmw_bypass', N, readiness=Readiness(c0=0, s0=1),
                      cache_histogram_answers=cached)
        state = mech.add_data(mech.init_state(), uniform)
        first, state = mech.answer(state, BoostRequest(POOL[1], 0, 0, 'a'), noise.seeded(2))
        again, _ = mech.answer(state, BoostRequest(POOL[1], 0, 0, 'b'), noise.seeded(3))
        assert (first.path, again.path) == ('R1', second)
