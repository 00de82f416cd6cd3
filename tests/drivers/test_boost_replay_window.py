"""The Boost driver's bounded replay set: query ids kept for the public replay retention R of
query event time; an id older than that is refused 'replay_window_expired', never re-answered."""

import pytest

from beam_dp import noise
from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.boost_events import run_events
from beam_dp.errors import InvalidParamsError
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostRefusal
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset
from tests.drivers.test_boost import _loaded
from tests.drivers.test_boost import _q

R = 1000


def _driver(retention=R):
    mech = preset('tree_pmw_bypass', 8, readiness=Readiness(c0=2, s0=1))
    return BoostDriver('covid', (2, 4), mech, start_micros=1000, block_micros=100,
                       replay_retention_micros=retention)


def test_bad_retention_raises():
    with pytest.raises(InvalidParamsError, match='replay_retention_micros'):
        _driver(0)


def test_replay_inside_the_window_is_identical_and_outside_is_refused():
    d = _driver()
    state, _ = _loaded(d)
    rng = noise.seeded(4)
    state, out = d.submit(state, [_q('a', 0, 1)], rng, now_micros=5_000)
    first = out[0]
    assert isinstance(first, BoostAnswerRecord)
    spent = dict(state.mech.filters.consumed)
    # Other queries move the clock; 'a' is replayed with its own event time.
    for i, t in enumerate(range(5_100, 5_100 + R, 100)):
        state, _ = d.submit(state, [_q(f'b{i}', 2, 2, subsets=([i % 2], []))], rng, now_micros=t)
    state, again = d.submit(state, [_q('a', 0, 1)], rng, now_micros=5_000)
    assert again[0].replay and again[0]._replace(replay=False) == first
    # Two retentions later 'a' was dropped: refused, nothing charged, nothing re-answered.
    state, _ = d.submit(state, [_q('c', 2, 2)], rng, now_micros=5_000 + 3 * R)
    spent = dict(state.mech.filters.consumed)
    state, late = d.submit(state, [_q('a', 0, 1)], rng, now_micros=5_000)
    assert late == [BoostRefusal('covid', 'a', 'replay_window_expired', 0, 1, False)]
    assert dict(state.mech.filters.consumed) == spent


def test_processed_ids_are_bounded():
    d, unbounded = _driver(), _driver(None)
    s_b, _ = _loaded(d)
    s_u, _ = _loaded(unbounded)
    rng = noise.seeded(1)
    for i in range(200):
        t = 5_000 + 50 * i
        s_b, _ = d.submit(s_b, [_q(f'q{i}', 0, 0)], rng, now_micros=t)
        s_u, _ = unbounded.submit(s_u, [_q(f'q{i}', 0, 0)], rng, now_micros=t)
    kept = len(s_b.processed) + len(s_b.processed_old)
    assert kept <= 2 * R // 50 + 1 and len(s_u.processed) == 200


def test_run_events_passes_the_query_time():
    d = _driver()
    state, _ = _loaded(d)
    clock = type('C', (), {'last_step': None, 'allowed_lateness_micros': 0})()
    items = [('query', 5_000, _q('x', 0, 0)), ('query', 5_000 + 2 * R, _q('y', 0, 0)),
             ('query', 5_000 + 3 * R, _q('z', 0, 0))]
    state, out, rest = run_events(d, clock, state, items, 5_000 + 3 * R, noise.seeded(0))
    assert rest == [] and state.replay_clock == 5_000 + 3 * R
    state, out, _ = run_events(d, clock, state, [('query', 5_000, _q('x', 0, 0))],
                               5_000 + 3 * R, noise.seeded(0))
    assert [r.reason for r in out if isinstance(r, BoostRefusal)] == ['replay_window_expired']
    assert not any(isinstance(r, BoostAnswerRecord) for r in out)


def test_a_waiting_query_replayed_late_is_not_refused_then_answered():
    d = _driver()
    state, _ = _loaded(d)                                  # blocks 0-2 sealed
    rng = noise.seeded(2)
    state, out = d.submit(state, [_q('w', 3, 3)], rng, now_micros=5_000)
    assert out == [] and [p.query_id for p in state.pending] == ['w']
    state, _ = d.submit(state, [_q('c', 0, 0)], rng, now_micros=5_000 + 3 * R)
    state, out = d.submit(state, [_q('w', 3, 3)], rng, now_micros=5_000)
    assert out == [] and [p.query_id for p in state.pending] == ['w']
    state, out = d.seal_until(state, 1000 + 4 * 100, rng)
    assert [r.query_id for r in out if isinstance(r, (BoostAnswerRecord, BoostRefusal))] == ['w']


def test_an_id_seen_again_after_the_retention_draws_fresh_noise():
    """Forgotten ids can come back: the second query with id 'a' (same query, same sealed block,
    a Laplace answer) must not repeat the first one's noise (that would release the exact
    difference of two different queries over the same node)."""
    mech = preset('laplace', 8)
    d = BoostDriver('covid', (2, 4), mech, start_micros=1000, block_micros=100,
                    replay_retention_micros=R)
    state, _ = _loaded(d)
    rng = noise.seeded(7)
    state, first = d.submit(state, [_q('a', 0, 0)], rng, now_micros=5_000)
    state, _ = d.submit(state, [_q('c', 1, 1)], rng, now_micros=5_000 + 3 * R)
    state, second = d.submit(state, [_q('a', 0, 0)], rng, now_micros=5_000 + 3 * R)
    assert isinstance(first[0], BoostAnswerRecord) and isinstance(second[0], BoostAnswerRecord)
    assert not second[0].replay and second[0].value != first[0].value
    assert state.answer_seq == 3
    # Without a retention the address is unchanged: a fresh driver gives the first answer.
    plain = BoostDriver('covid', (2, 4), mech, start_micros=1000, block_micros=100)
    s2, _ = _loaded(plain)
    _, again = plain.submit(s2, [_q('a', 0, 0)], noise.seeded(7), now_micros=5_000)
    assert again[0].query_id == 'a' and s2.answer_seq == 0
