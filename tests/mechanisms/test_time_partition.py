"""TimePartitioner (C3/C4): schedule, skip-ahead bookkeeping, purity, infinite horizon."""

import math
import pickle

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms.sparse_vector import svt_noise_scales
from beam_dp.mechanisms.time_partition import TimePartitioner
from beam_dp.noise import seeded


def test_public_schedule_numbers_of_spec():
    # Spec §16 table (ε_p = 1, β = 0.1): θ / hi / lo for j = 1..5.
    p = TimePartitioner(1.0, 0.1)
    t_prev = [0, 2, 4, 16, 256]
    expected = [(29.3, 50.3, 4.2), (43.9, 73.1, 6.3), (59.2, 93.4, 8.5), (82.7, 120.3, 11.8),
                (124.6, 164.9, 17.8)]
    for j, (t, (theta, hi, lo)) in enumerate(zip(t_prev, expected), start=1):
        assert p.threshold(j, t) == pytest.approx(theta, abs=0.06)
        assert p.segment_upper_bound(j, t) == pytest.approx(hi, abs=0.06)
        assert p.segment_lower_bound(j, t) == pytest.approx(lo, abs=0.06)
    assert [p.deadline(j, t) for j, t in enumerate(t_prev, start=1)] == [2, 4, 16, 256, 65536]


def test_empty_stream_spurious_halt_probability_exact():
    # Spec §16: 4.5e-4 at β = 0.1 and 1.3e-4 at β = 0.05, independent of ε (counts are 0).
    for beta, target in [(0.1, 4.5e-4), (0.05, 1.3e-4)]:
        for eps in (0.5, 1.0):
            p = TimePartitioner(eps, beta)
            t_scale, q_scale = svt_noise_scales(eps)
            a = math.exp(-1 / float(t_scale))
            b = math.exp(-1 / float(q_scale))
            z = np.arange(-int(80 * float(t_scale)), int(80 * float(t_scale)) + 1)
            pz = (1 - a) / (1 + a) * a ** np.abs(z)
            ok = 1.0
            t_prev = 0
            for j in range(1, 6):
                k = math.floor(p.threshold(j, t_prev)) + z + 1
                q = np.where(k >= 1, b ** np.maximum(k, 1) / (1 + b), 1.0)
                length = p.deadline(j, t_prev) - t_prev - 1       # ticks before the forced one
                ok *= float(np.sum(pz * (1 - q) ** length))
                t_prev = p.deadline(j, t_prev)
            assert 1 - ok == pytest.approx(target, rel=0.25)


def test_empty_stream_to_2_pow_40_via_skip_ahead():
    p = TimePartitioner(1.0)
    closes, state = p.run({}, 2 ** 40, seeded(3))
    assert [c.close_tick for c in closes] == [2, 4, 16, 256, 65536, 2 ** 32]
    assert all(c.forced for c in closes)
    assert state.deadline == 2 ** 64 and isinstance(state.deadline, int)


def test_sparse_stream_to_2_pow_40_bounded_state():
    p = TimePartitioner(1.0)
    arrivals = {t: 3 for t in range(7, 2 ** 40, 2 ** 33 + 12345)}
    closes, state = p.run(arrivals, 2 ** 40, seeded(4))
    assert closes[-1].close_tick <= 2 ** 40 and len(closes) < 200
    assert state.tick == 2 ** 40
    assert len(pickle.dumps(state)) < 400          # O(1) state, Python ints


def test_finite_horizon_refuses_past_t():
    p = TimePartitioner(1.0, horizon=50)
    closes, state = p.run({3: 1}, 50, seeded(0))
    assert closes[-1].close_tick == 50 and closes[-1].forced
    with pytest.raises(UnsupportedMechanismError, match='past the finite horizon'):
        p.advance(state, 51, 0, seeded(0))


def test_max_segment_ticks_caps_length():
    p = TimePartitioner(1.0, max_segment_ticks=100)
    closes, _ = p.run({}, 1000, seeded(0))
    starts = [c.start_tick for c in closes]
    assert all(c.close_tick - c.start_tick + 1 <= 100 for c in closes)
    assert starts[:5] == [1, 3, 5, 17, 117]


def test_per_tick_and_skip_ahead_share_bookkeeping():
    arrivals = {5: 2, 40: 7, 41: 30, 300: 50}
    for skip in (True, False):
        p = TimePartitioner(1.0, skip_ahead=skip)
        closes, state = p.run(arrivals, 400, seeded(9))
        ticks = [c.close_tick for c in closes]
        assert ticks == sorted(ticks) and ticks[:3] == [2, 4, 16]
        assert all(b.start_tick == a.close_tick + 1 for a, b in zip(closes, closes[1:]))


def test_step_and_advance_do_not_mutate_state():
    p = TimePartitioner(1.0)
    rng = seeded(2)
    state = p.prime(p.init_state(), rng)
    blob = pickle.dumps(state)
    p.advance(state, 100, 3, rng)
    p.step(state, 1, rng)
    assert pickle.dumps(state) == blob


def test_noise_keyed_by_labels_not_batching():
    # Beam parity: the same arrivals give the same boundaries whether the DoFn wakes at every
    # tick or only at arrivals and sampled halts.
    p = TimePartitioner(0.5, c_theta=1.0)
    arrivals = {3: 1, 9: 2, 30: 1, 31: 4, 90: 2}
    a, _ = p.run(arrivals, 200, seeded(5))
    state, b = p.init_state(), []
    rng = seeded(5)
    for t in range(1, 201):
        closes, state = p.advance(state, t, arrivals.get(t, 0), rng)
        b.extend(closes)
    assert a == b


def test_release_time_purity():
    # Perturbing data inside segments 1..j that leaves t_1..t_j unchanged leaves every later
    # boundary unchanged (declaration property, spec §18.11).
    p = TimePartitioner(1.0)
    later = {t: 1 for t in range(100, 3000)}
    base, _ = p.run(later, 3000, seeded(8))
    assert len(base) > 10
    matched = 0
    for extra in ({1: 1}, {3: 2, 4: 1}, {10: 3, 12: 1}, {17: 5, 60: 4}):
        closes, _ = p.run({**extra, **later}, 3000, seeded(8))
        if [c.close_tick for c in closes[:4]] == [c.close_tick for c in base[:4]]:
            matched += 1
            assert closes == base
    assert matched >= 3


@pytest.mark.parametrize('kwargs, match', [
    ({'epsilon': 0}, 'TimePartitioner: epsilon must be positive, got 0'),
    ({'epsilon': 1, 'beta': 0}, 'beta must be in \\(0, 1\\)'),
    ({'epsilon': 1, 'c_theta': -1}, 'c_theta must be positive'),
    ({'epsilon': 1, 'horizon': 0}, 'horizon must be a positive integer'),
    ({'epsilon': 1, 'max_segment_ticks': 1.5}, 'max_segment_ticks must be an integer'),
    ({'epsilon': 1, 'skip_ahead': 'yes'}, 'skip_ahead must be a bool'),
])
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TimePartitioner(**kwargs)


def test_advance_rejects_past_ticks_and_negative_counts():
    p = TimePartitioner(1.0)
    _, state = p.advance(p.init_state(), 5, 0, seeded(0))
    with pytest.raises(InvalidParamsError, match='after the last processed tick 5'):
        p.advance(state, 5, 1, seeded(0))
    with pytest.raises(InvalidParamsError, match='count must be non-negative'):
        p.advance(state, 6, -1, seeded(0))
