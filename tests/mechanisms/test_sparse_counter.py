"""C5 SparseCounter: releases only at closes, histogram support, skip-ahead driving, budget."""

import pickle

import numpy as np
import pytest

from beam_dp.mechanisms.sparse_counter import SparseCounter
from beam_dp.noise import seeded


def test_answers_change_only_at_segment_closes_and_track_the_count():
    mech = SparseCounter(2.0, c_theta=1.0)
    rng = seeded(0)
    state = mech.init_state()
    previous = state.answer
    for t in range(1, 1501):
        release, state = mech.advance(state, t, 1, rng, prime=False)
        if not release.closes:
            assert release.answer == previous          # nothing new between closes
        previous = release.answer
    assert abs(previous[0] - 1500) < 150
    assert mech.privacy_cost().epsilon == 2.0
    assert mech.epsilon_partition + mech.epsilon_aggregate == pytest.approx(2.0)


def test_histogram_and_immutability():
    mech = SparseCounter(4.0, c_theta=1.0, dimension=3)
    rng = seeded(1)
    state = mech.init_state()
    for t in range(1, 601):
        blob = pickle.dumps(state)
        _, new = mech.advance(state, t, [1, 0, 2], rng, prime=False)
        assert pickle.dumps(state) == blob
        state = new
    answer = np.asarray(state.answer)
    assert np.all(np.abs(answer - np.array([600, 0, 1200])) < 300)   # noise + segment lag


def test_skip_ahead_driver_matches_tick_by_tick():
    mech = SparseCounter(1.0, c_theta=1.0)
    arrivals = {5: 3, 50: 10, 51: 20, 400: 5}
    rng_a, rng_b = seeded(3), seeded(3)
    a, b = mech.init_state(), mech.init_state()
    out_a, out_b = [], []
    for t in range(1, 1001):
        rel, a = mech.advance(a, t, arrivals.get(t, 0), rng_a)
        out_a.extend((c.close_tick, rel.answer) for c in rel.closes)
    tick = 0
    while tick < 1000:
        nxt = min([t for t in arrivals if t > tick] + [mech.next_event_tick(b), 1000])
        rel, b = mech.advance(b, nxt, arrivals.get(nxt, 0), rng_b)
        out_b.extend((c.close_tick, rel.answer) for c in rel.closes)
        tick = nxt
    assert out_a == out_b


@pytest.mark.parametrize('kwargs, match', [
    ({'epsilon': 0}, 'SparseCounter: epsilon must be positive'),
    ({'epsilon': 1, 'partition_fraction': 0}, 'partition_fraction must be in \\(0, 1\\)'),
    ({'epsilon': 1, 'dimension': 0}, 'dimension must be a positive integer'),
    ({'epsilon': 1, 'c_theta': 0}, 'TimePartitioner: c_theta must be positive'),
])
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SparseCounter(**kwargs)
