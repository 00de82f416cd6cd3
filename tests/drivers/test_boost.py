"""The Boost driver: blocks sealed by event time (empty ones included), late rows refused and
never changing a sealed block (criterion 31), deterministic query order, pending windows,
idempotent replay (criterion 30), ledger rows, typed outputs with Avro schemas, and parity with
driving the mechanism directly (criterion 29's pure reference)."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.boost import rectangle_query
from beam_dp.errors import InvalidParamsError
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostBlockSealed
from beam_dp.io.boost import BoostLedgerRow
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.boost import BoostRefusal
from beam_dp.io.boost import boost_from_avro
from beam_dp.io.boost import boost_to_avro
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset

SHAPE = (2, 4)
LEN = 100


def _driver(**kw):
    mech = preset('tree_pmw_bypass', 8, readiness=Readiness(c0=2, s0=1), **kw)
    return BoostDriver('covid', SHAPE, mech, start_micros=1000, block_micros=LEN)


def _rows(block, count, seed):
    rng = np.random.default_rng(seed)
    return [(1000 + block * LEN + int(rng.integers(LEN)), (int(rng.integers(2)),
                                                           int(rng.integers(4))))
            for _ in range(count)]


def _q(qid, first=0, last=0, latest=0, subsets=([1], [])):
    return BoostQueryRecord(qid, 'covid', [list(s) for s in subsets], [], first, last, latest)


def _loaded(driver, blocks=3, rows=3000):
    state = driver.init_state()
    for b in range(blocks):
        state, rejected = driver.add_rows(state, _rows(b, rows, b))
        assert rejected == []
    state, out = driver.seal_until(state, 1000 + blocks * LEN, noise.seeded(0))
    return state, out


def test_blocks_sealed_in_order_with_empty_ones():
    d = _driver()
    state = d.init_state()
    state, _ = d.add_rows(state, _rows(0, 50, 0) + _rows(2, 70, 1))
    state, out = d.seal_until(state, 1000 + 3 * LEN - 1, noise.seeded(0))
    assert [(r.block, r.size) for r in out] == [(0, 50), (1, 0)]
    state, out = d.seal_until(state, 1000 + 3 * LEN, noise.seeded(0))
    assert [(r.block, r.size) for r in out] == [(2, 70)]
    assert all(isinstance(r, BoostBlockSealed) for r in out)
    assert state.mech.sizes == (50, 0, 70)


def test_late_rows_never_change_a_sealed_block():                           # criterion 31
    d = _driver()
    state, _ = _loaded(d)
    state, first = d.submit(state, [_q('a', 0, 1)], noise.seeded(1))
    sizes, cum = state.mech.sizes, state.mech.cum.copy()
    state, rejected = d.add_rows(state, _rows(0, 500, 9) + _rows(1, 5, 9))
    assert [r.reason for r in rejected] == (
        ['late: step 0 was already released (allowed lateness 0s)'] * 500
        + ['late: step 1 was already released (allowed lateness 0s)'] * 5)
    state, rej2 = d.add_block_counts(state, 2, np.ones(8, dtype=np.int64))
    assert rej2[0].reason.startswith('late: step ')
    assert state.mech.sizes == sizes and np.array_equal(state.mech.cum, cum)
    again, out = d.submit(state, [_q('a', 0, 1)], noise.seeded(1))
    assert out[0].value == first[0].value


def test_malformed_rows_are_refused():
    d = _driver()
    state, rejected = d.add_rows(d.init_state(), [(999, (0, 0)), (1001, (2, 0)), (1001, (0,)),
                                                  ('x', (0, 0)), (1001, 'ab')])
    assert [r.reason.split(':')[0] for r in rejected] == [
        'event time is before the release start', 'malformed', 'malformed', 'malformed',
        'malformed']
    assert state.open_blocks == ()


def test_replay_returns_identical_answer_at_no_charge():                     # criterion 30
    d = _driver()
    state, _ = _loaded(d)
    state, out = d.submit(state, [_q('q1', 0, 2), _q('q2', 1, 1)], noise.seeded(5))
    consumed = dict(state.mech.filters.consumed)
    answers = {r.query_id: r for r in out if isinstance(r, BoostAnswerRecord)}
    state, replay = d.submit(state, [_q('q2', 1, 1), _q('q1', 0, 2)], noise.seeded(77))
    assert [r.query_id for r in replay] == ['q1', 'q2']
    assert all(r.replay and r._replace(replay=False) == answers[r.query_id] for r in replay)
    assert not any(isinstance(r, BoostLedgerRow) for r in replay)
    assert state.mech.filters.consumed == consumed


def test_order_within_a_batch_is_deterministic():
    d = _driver()
    state, _ = _loaded(d)
    batch = [_q(f'q{i}', i % 3, 2, subsets=([i % 2], [])) for i in range(12)]
    _, a = d.submit(state, batch, noise.seeded(3))
    _, b = d.submit(state, list(reversed(batch)), noise.seeded(3))
    assert a == b


def test_pending_queries_wait_for_their_blocks():
    d = _driver()
    state, _ = _loaded(d, blocks=2)
    state, out = d.submit(state, [_q('later', 1, 2), _q('now', 0, 1)], noise.seeded(1))
    assert [r.query_id for r in out if isinstance(r, BoostAnswerRecord)] == ['now']
    assert [q.query_id for q in state.pending] == ['later']
    state, _ = d.add_rows(state, _rows(2, 3000, 2))
    state, out = d.seal_until(state, 1000 + 3 * LEN, noise.seeded(1))
    assert [type(r).__name__ for r in out][:1] == ['BoostBlockSealed']
    assert any(isinstance(r, BoostAnswerRecord) and r.query_id == 'later' for r in out)
    assert state.pending == ()


def test_latest_window_and_refusals():
    d = _driver(epsilon_budget=1e-6)
    state, _ = _loaded(d)
    state, out = d.submit(state, [_q('x', latest=2), BoostQueryRecord('y', 'other', [[], []], [],
                                                                       0, 0, 0),
                                  _q('z', 0, 0, subsets=([5], []))], noise.seeded(1))
    reasons = {r.query_id: (r.reason, r.first_block, r.last_block) for r in out}
    assert reasons == {'x': ('budget_exhausted', 1, 2), 'y': ('wrong_dataset', 0, 0),
                       'z': ('invalid_query', 0, 0)}
    assert all(isinstance(r, BoostRefusal) for r in out)


def test_ledger_rows_match_the_filters():
    d = _driver(epsilon_budget=100.0)
    state, _ = _loaded(d, blocks=4)
    ledger = []
    for i in range(60):
        state, out = d.submit(state, [_q(f'q{i}', i % 4, 3, subsets=([i % 2], [i % 4]))],
                              noise.seeded(i))
        ledger += [r for r in out if isinstance(r, BoostLedgerRow)]
    for block in range(4):
        rows = [r for r in ledger if r.block == block]
        assert sum(r.epsilon for r in rows) == pytest.approx(state.mech.filters.spent(block))
        assert rows[-1].consumed == pytest.approx(state.mech.filters.spent(block))
        assert all(r.capacity == 100.0 for r in rows)


def test_driver_equals_the_pure_mechanism():
    d = _driver()
    state, _ = _loaded(d)
    mech, mstate = d.mechanism, state.mech
    outs = []
    for i in range(30):
        q = _q(f'q{i:02d}', i % 3, 2, subsets=([i % 2], [i % 4]))
        state, out = d.submit(state, [q], noise.seeded(8))
        outs.append(out[0])
        request = BoostRequest(rectangle_query(SHAPE, q.subsets), q.first_block, q.last_block,
                               q.query_id)
        ans, mstate = mech.answer(mstate, request,
                                  noise.seeded(8).derive('boost', 'covid', q.query_id))
        assert (ans.value, ans.path) == (out[0].value, out[0].path)


def test_outputs_round_trip_through_avro():
    d = _driver()
    state, sealed = _loaded(d)
    state, out = d.submit(state, [_q('a', 0, 2)], noise.seeded(1))
    for record in sealed + out + [_q('a')]:
        assert boost_from_avro(type(record), boost_to_avro(record)) == record


def test_rectangle_query():
    q = rectangle_query(SHAPE, [[1], [0, 3]])
    assert list(np.flatnonzero(q.dense())) == [4, 7]
    assert rectangle_query(SHAPE, [[], []]).dense().sum() == 8
    with pytest.raises(InvalidParamsError):
        rectangle_query(SHAPE, [[2], []])
    with pytest.raises(InvalidParamsError):
        BoostDriver('covid', (2, 3), preset('laplace', 8))
