"""Static PMW: budget calibration, easy/hard semantics, cap, validation, immutability."""

import math
import pickle
from contextlib import nullcontext as does_not_raise

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms.pmw import PrivateMultiplicativeWeights
from beam_dp.mechanisms.pmw import public_estimate
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery


@pytest.mark.parametrize('kwargs, expectation', [
    ({}, does_not_raise()),
    ({'epsilon': 0}, pytest.raises(InvalidParamsError, match='epsilon must be positive, got 0')),
    ({'alpha': 1.5}, pytest.raises(InvalidParamsError, match=r'alpha must be in \(0, 1\], got 1.5')),
    ({'domain_size': 1}, pytest.raises(InvalidParamsError, match='domain_size must be at least 2, got 1')),
    ({'delta': 0.5}, pytest.raises(InvalidParamsError, match=r'delta must be in \[0, 1/e\), got 0.5')),
    ({'n': -3}, pytest.raises(InvalidParamsError, match='n must be a positive integer, got -3')),
])
def test_validation(kwargs, expectation):
    with expectation:
        PrivateMultiplicativeWeights(**{**dict(epsilon=1.0, alpha=0.2, n=1000, domain_size=16),
                                        **kwargs})


@pytest.mark.parametrize('delta', [0.0, 1e-6])
def test_budget_is_spent_exactly_at_the_cap(delta):
    pmw = PrivateMultiplicativeWeights(epsilon=0.8, alpha=0.25, n=1000, domain_size=32,
                                       delta=delta)
    assert pmw.hard_cap == math.floor(36 * math.log(32) / 0.25 ** 2)
    assert pmw._ledger(pmw.hard_cap) == pytest.approx(0.8, rel=1e-9)
    assert pmw._ledger(pmw.hard_cap) <= 0.8
    assert pmw.privacy_cost().epsilon == 0.8 and pmw.privacy_cost().delta == delta


def test_lifecycle_easy_answers_are_public_estimate_and_accurate():
    rng = seeded(11)
    gen = np.random.default_rng(0)
    n, n_dom = 20_000, 8
    pmw = PrivateMultiplicativeWeights(epsilon=200.0, alpha=0.2, n=n, domain_size=n_dom)
    state = pmw.add_data(pmw.init_state(), gen.integers(0, 4, n - 1), rng)
    ans, state = pmw.answer(state, LinearQuery.point(n_dom, 0), rng)
    assert ans.status == 'not_started'
    state = pmw.add_data(state, [5], rng)
    with pytest.raises(InvalidRecordError, match='holds n=20000 records, got 20001'):
        pmw.add_data(state, [1], rng)
    errors = []
    for _ in range(200):
        q = LinearQuery.from_vector(gen.random(n_dom))
        estimate = public_estimate(state.log_y, q)
        ans, state = pmw.answer(state, q, rng)
        if ans.status == 'easy':
            assert ans.value == estimate           # no fresh noise on easy answers
        errors.append(abs(ans.value - q.evaluate(state.counts) / n))
        assert ans.epsilon_spent <= pmw.epsilon
    assert max(errors) <= pmw.alpha and state.hard >= 1 and not state.halted


def test_init_state_with_counts_and_immutability():
    pmw = PrivateMultiplicativeWeights(epsilon=1.0, alpha=0.5, n=10, domain_size=4)
    with pytest.raises(InvalidRecordError, match='summing to n=10'):
        pmw.init_state(np.array([1, 2, 3, 3]))
    state = pmw.init_state(np.array([1, 2, 3, 4]))
    before = pickle.dumps(state)
    pmw.answer(state, LinearQuery.point(4, 3), seeded(1))
    assert pickle.dumps(state) == before
