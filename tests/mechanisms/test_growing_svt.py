"""ATG / NATG / NSG (spec 000 §4): threshold noise once per round, halting, ledgers, validation."""

import dataclasses
import pickle
from contextlib import nullcontext as does_not_raise

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms.growing_svt import AboveThresholdGrowing
from beam_dp.mechanisms.growing_svt import NumericAboveThresholdGrowing
from beam_dp.mechanisms.growing_svt import NumericSparseGrowing
from beam_dp.mechanisms.growing_svt import PowerNoise
from beam_dp.mechanisms.growing_svt import SVTRound
from beam_dp.mechanisms.growing_svt import svt_query
from beam_dp.mechanisms.growing_svt import threshold_value
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery

N = 4
LOW = LinearQuery.point(N, 0)      # no records of type 0: value 0
HIGH = LinearQuery.range(N, 1, N)  # every record: value 1


def _loaded(mech, rng, size=100):
    return mech.add_data(mech.init_state(), np.full(size, 1), rng)


@pytest.mark.parametrize('kwargs, expectation', [
    ({'c': 1.0, 'p': 0.5}, does_not_raise()),
    ({'c': 0.0}, pytest.raises(InvalidParamsError, match='PowerNoise: c must be positive, got 0')),
    ({'c': 1.0, 'p': 1.5}, pytest.raises(InvalidParamsError, match=r'p must be in \[0, 1\], got 1.5')),
    ({'c': float('nan')}, pytest.raises(InvalidParamsError, match='c must not be NaN')),
])
def test_power_noise_validation(kwargs, expectation):
    with expectation:
        PowerNoise(**kwargs)


@pytest.mark.parametrize('kwargs, expectation', [
    ({}, does_not_raise()),
    ({'n': 0}, pytest.raises(InvalidParamsError, match='n must be a positive integer, got 0')),
    ({'domain_size': 1.5}, pytest.raises(InvalidParamsError, match='domain_size must be an integer')),
    ({'noise': 3.0}, pytest.raises(InvalidParamsError, match='noise must be a PowerNoise')),
    ({'max_halts': 0}, pytest.raises(InvalidParamsError, match='max_halts must be a positive integer')),
])
def test_nsg_validation(kwargs, expectation):
    base = dict(threshold=0.5, noise=PowerNoise(1.0), n=100, domain_size=N, max_halts=3)
    with expectation:
        NumericSparseGrowing(**{**base, **kwargs})


def test_threshold_noise_drawn_once_per_round():
    """Spec criterion 10 / pitfall P1: (T̂_t − T)·ξ_t is the same η for every t of a round."""
    noise = PowerNoise(50.0, 0.5)
    rng = seeded(1)
    rnd = SVTRound()
    etas, rounds = [], []
    for t in range(100, 400):
        above, _, rnd_after = svt_query(rnd, 0.0, t, noise.xi(t), noise.xi_delta(t), 0.5, True, rng)
        if rnd_after.active:
            etas.append((threshold_value(0.5, rnd_after, noise.xi(t)) - 0.5) * noise.xi(t))
            rounds.append(rnd_after.rounds)
        rnd = rnd_after
    etas, rounds = np.array(etas), np.array(rounds)
    for r in np.unique(rounds):
        assert np.allclose(etas[rounds == r], etas[rounds == r][0], rtol=1e-12, atol=1e-12)
    # New rounds draw new η (value 0 vs threshold 0.5 with this noise: some rounds do halt).
    if len(np.unique(rounds)) > 1:
        firsts = [etas[rounds == r][0] for r in np.unique(rounds)]
        assert len(set(np.round(firsts, 12))) == len(firsts)


def test_atg_halts_and_stays_halted():
    mech = AboveThresholdGrowing(threshold=0.5, noise=PowerNoise(1e4), n=100, domain_size=N)
    rng = seeded(2)
    state = _loaded(mech, rng)
    ans, state = mech.answer(state, LOW, rng)
    assert ans.status == 'below' and ans.value is None and ans.hard is False
    ans, state = mech.answer(state, HIGH, rng)
    assert ans.status == 'above' and ans.value == 1.0
    for q in (LOW, HIGH):
        ans, state2 = mech.answer(state, q, rng)
        assert ans.status == 'halted' and state2 is state
    restored = pickle.loads(pickle.dumps(state))
    assert mech.answer(restored, LOW, rng)[0].status == 'halted'
    assert mech.privacy_cost().epsilon == pytest.approx(mech.noise.xi_delta(100))


def test_not_started_before_n():
    mech = NumericAboveThresholdGrowing(threshold=0.5, noise=PowerNoise(1.0), n=100, domain_size=N)
    rng = seeded(3)
    state = mech.add_data(mech.init_state(), [1] * 99, rng)
    ans, same = mech.answer(state, HIGH, rng)
    assert ans.status == 'not_started' and same is state and ans.epsilon_spent == 0


def test_natg_numeric_is_exact_without_noise():
    """With ξ huge the numeric answer equals f(x_t) up to the public grid."""
    mech = NumericAboveThresholdGrowing(threshold=0.5, noise=PowerNoise(1e9, 0.5), n=100,
                                        domain_size=N)
    rng = seeded(4)
    state = mech.add_data(mech.init_state(), [1] * 75 + [0] * 25, rng)
    ans, state = mech.answer(state, HIGH, rng)
    assert ans.status == 'above' and ans.value == pytest.approx(0.75, abs=1e-5)
    assert mech.privacy_cost().epsilon == pytest.approx(9 / 8 * 1e9 * 100 ** -0.5)


def test_nsg_caps_halts_and_ledger():
    noise = PowerNoise(1e4, 0.5)
    mech = NumericSparseGrowing(threshold=0.5, noise=noise, n=100, domain_size=N, max_halts=3)
    rng = seeded(5)
    state = _loaded(mech, rng)
    expected = noise.xi_delta(100)
    statuses = []
    for k in range(6):
        state = mech.add_data(state, [1], rng)
        ans, new = mech.answer(state, HIGH, rng)
        statuses.append(ans.status)
        if ans.status == 'above':
            expected += 9 / 8 * noise.xi_delta(state.t)
            assert ans.epsilon_spent == pytest.approx(expected)
        state = new
    assert statuses == ['above'] * 3 + ['halted'] * 3
    assert state.round.rounds == 3 and state.round.halts == 3
    assert state.epsilon_spent <= mech.privacy_cost().epsilon
    with pytest.raises(UnsupportedMechanismError, match='unbounded without max_halts'):
        dataclasses.replace(mech, max_halts=None).privacy_cost()


def test_answer_does_not_mutate_state_and_rejects_bad_queries():
    mech = NumericSparseGrowing(threshold=0.5, noise=PowerNoise(10.0), n=10, domain_size=N,
                                max_halts=5)
    rng = seeded(6)
    state = _loaded(mech, rng, 20)
    before = pickle.dumps(state)
    for q in (LOW, HIGH, LOW):
        mech.answer(state, q, rng)
        mech.add_data(state, [2, 3], rng)
    assert pickle.dumps(state) == before
    assert not state.counts.flags.writeable
    with pytest.raises(InvalidRecordError, match='domain of size 4, got 5'):
        mech.answer(state, LinearQuery.point(5, 0), rng)
    with pytest.raises(InvalidRecordError, match=r'records must be in \[0, 4\)'):
        mech.add_data(state, [0, 4], rng)
    with pytest.raises(InvalidRecordError, match='integer element indices'):
        mech.add_data(state, [0.5], rng)
    assert pickle.dumps(state) == before
