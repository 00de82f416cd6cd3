"""PMWG (spec 000 §5, §6.6, §9 criteria 7, 8, 12-16, 18): schedule, cap, privacy sum, uniform
update, replay from the transcript, halting, immutability, validation."""

import dataclasses
import math
import pickle
import time
from contextlib import nullcontext as does_not_raise

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.mechanisms.pmwg import b_sum
from beam_dp.mechanisms.pmwg import uniform_mix
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery


def _b(tau, n_dom):
    return math.log(n_dom) / tau + math.log(tau - 1) / tau + math.log(tau / (tau - 1))


@pytest.mark.parametrize('kwargs, expectation', [
    ({}, does_not_raise()),
    ({'domain_size': 2}, pytest.raises(InvalidParamsError, match='domain_size must be at least 3')),
    ({'n': 20}, pytest.raises(InvalidParamsError, match='n must be at least 21 for this variant')),
    ({'n': 5, 'p': 0.25}, does_not_raise()),
    ({'p': 1.0}, pytest.raises(InvalidParamsError, match=r'p must be in \[0, 1\), got 1')),
    ({'delta': 1e-6, 'epsilon': 2.0}, pytest.raises(InvalidParamsError, match=r'epsilon must be in \(0, 1\] when delta > 0')),
    ({'delta': 0.4}, pytest.raises(InvalidParamsError, match=r'delta must be in \[0, 1/e\)')),
    ({'alpha': 0}, pytest.raises(InvalidParamsError, match='alpha must be positive, got 0')),
    ({'epsilon': float('inf')}, pytest.raises(InvalidParamsError, match='epsilon must be finite')),
])
def test_validation(kwargs, expectation):
    with expectation:
        PMWG(**{**dict(epsilon=1.0, alpha=0.1, n=1000, domain_size=64), **kwargs})


def test_xi_worked_numbers():
    """Spec §6.6."""
    assert PMWG(epsilon=1, alpha=0.1, n=10**4, domain_size=64).xi(10**4) == pytest.approx(0.0462, abs=1e-4)
    big = PMWG(epsilon=1, alpha=0.2, n=10**6, domain_size=1024)
    assert big.xi(10**6) == pytest.approx(11.90, abs=5e-3)
    assert big.xi(4 * 10**6) == pytest.approx(23.80, abs=1e-2)
    approx = PMWG(epsilon=1, alpha=0.1, n=10**6, domain_size=1024, delta=1e-6)
    assert approx.xi(10**6) == pytest.approx(123.1, abs=0.1)
    assert PMWG(epsilon=100, alpha=0.3, n=10**5, domain_size=8).xi(10**5) == pytest.approx(408.7, abs=0.1)


def test_hard_cap_worked_numbers():
    """Spec criterion 8."""
    m = PMWG(epsilon=1, alpha=0.1, n=1000, domain_size=64)
    assert m.cap_at(1000) == pytest.approx(14971.98, abs=0.01)
    assert m.cap_at(2000) == pytest.approx(45935.9, abs=0.1)
    assert m.cap_at(10_000) == pytest.approx(124518.7, abs=0.1)
    assert m.cap_at(100_000) == pytest.approx(253170.6, abs=0.1)


def test_lazy_b_sum_equals_step_by_step_and_large_jumps_are_lower_bounds():
    step = 0.0
    for tau in range(1001, 3001):
        step += _b(tau, 64)
    assert b_sum(1000, 3000, 64) == pytest.approx(step, abs=1e-9)
    split = b_sum(1000, 1700, 64) + b_sum(1700, 3000, 64)
    assert split == pytest.approx(step, abs=1e-9)
    lo, hi = 10_000, 10_000 + 5_000_000       # beyond the exact range: closed-form lower bound
    exact = math.fsum(b_sum(a, min(a + 1_000_000, hi), 64) for a in range(lo, hi, 1_000_000))
    bound = b_sum(lo, hi, 64)
    assert bound <= exact and bound == pytest.approx(exact, rel=1e-4)


@pytest.mark.parametrize('kwargs, limit', [
    (dict(epsilon=1, alpha=0.1, n=1000, domain_size=64), 0.73),
    (dict(epsilon=1, alpha=0.2, n=10**4, domain_size=1024), 0.701),
    (dict(epsilon=1, alpha=0.1, n=1000, domain_size=64, p=0.25), 1.0),
    (dict(epsilon=0.5, alpha=0.3, n=100, domain_size=16, p=0.75), 0.5),
])
def test_privacy_sum_is_within_budget(kwargs, limit):
    """Spec criterion 7: the numerically summed B.1 expression with the implementation's ξ."""
    bound = PMWG(**kwargs).privacy_bound()
    assert bound <= limit and bound <= kwargs['epsilon']


def test_privacy_sum_approximate_dp():
    m = PMWG(epsilon=1, alpha=0.1, n=1000, domain_size=64, delta=1e-6)
    eps = m.privacy_bound()
    # Invert ε = τ/2 + √(2τ ln(1/δ)) and compare τ with spec §6.6 (Σ ε_i² = 1.787e-3).
    log_inv = math.log(1e6)
    root = -math.sqrt(2 * log_inv) + math.sqrt(2 * log_inv + 2 * eps)
    assert root ** 2 == pytest.approx(1.787e-3, rel=2e-3)
    assert eps <= 2 * math.sqrt(1.787e-3 * log_inv) <= 1


def test_uniform_update_lazy_equals_single_steps():
    """Spec criterion 12."""
    gen = np.random.default_rng(0)
    y = gen.dirichlet(np.ones(16))
    lazy = np.exp(uniform_mix(np.log(y), 1000, 1500))
    single = y.copy()
    for s in range(1000, 1500):
        single = s / (s + 1) * single + 1 / ((s + 1) * 16)
    assert np.max(np.abs(lazy - single)) <= 1e-12


def test_lemma_15_relative_entropy_increase():
    """Spec criterion 13: adding one record + the uniform update raises RE by at most b_{t+1}."""
    gen = np.random.default_rng(1)
    for _ in range(2000):
        n_dom = int(gen.integers(3, 40))
        t = int(gen.integers(2, 500))
        counts = np.bincount(gen.integers(0, n_dom, t), minlength=n_dom)
        y = gen.dirichlet(np.ones(n_dom) * gen.uniform(0.05, 2))
        y = np.maximum(y, 1e-300)
        new_counts = counts.copy()
        new_counts[gen.integers(0, n_dom)] += 1
        y_new = t / (t + 1) * y + 1 / ((t + 1) * n_dom)

        def re(c, yy, size):
            x = c / size
            nz = x > 0
            return float(np.sum(x[nz] * np.log(x[nz] / yy[nz])))
        increase = re(new_counts, y_new, t + 1) - re(counts, y, t)
        assert increase <= _b(t + 1, n_dom) + 1e-12


def _answer_stream(mech, seed, queries=300, drift=True):
    rng = seeded(seed)
    gen = np.random.default_rng(seed)
    n_dom = mech.domain_size
    state = mech.add_data(mech.init_state(), gen.integers(0, n_dom // 2, mech.n), rng)
    transcript, halts_per_query = [], []
    for k in range(queries):
        if drift and k % 10 == 0:
            state = mech.add_data(state, gen.integers(n_dom // 2, n_dom, mech.n // 20), rng)
        q = LinearQuery.from_vector(gen.random(n_dom) ** 3)
        before = state.round.halts
        ans, state = mech.answer(state, q, rng)
        halts_per_query.append(state.round.halts - before)
        transcript.append((state.t, q, ans))
    return state, transcript, halts_per_query


def test_replay_reproduces_public_histogram_exactly():
    """Spec criterion 14: y is a deterministic function of the released transcript."""
    mech = PMWG(epsilon=30, alpha=0.3, n=2000, domain_size=16)
    state, transcript, _ = _answer_stream(mech, 7)
    assert state.public.hard >= 3
    replayed = mech.replay(transcript)
    assert np.array_equal(replayed.log_y, state.public.log_y)
    assert dataclasses.replace(replayed, log_y=None) == dataclasses.replace(state.public, log_y=None)
    # ...and of nothing else: changing one released hard value changes the replayed y.
    k = max(i for i, (_, _, a) in enumerate(transcript) if a.status == 'hard')
    t, q, ans = transcript[k]
    flipped = dataclasses.replace(ans, value=1.0 - ans.value if ans.value < 0.5 else -ans.value)
    other = mech.replay(transcript[:k] + [(t, q, flipped)] + transcript[k + 1:])
    assert not np.array_equal(other.log_y, state.public.log_y)


def test_replay_rejects_a_hard_answer_beyond_the_cap():
    mech = PMWG(epsilon=30, alpha=1.0, n=2000, domain_size=3)
    q = LinearQuery.point(3, 0)
    from beam_dp.mechanisms.pmw import PMWAnswer
    cap = math.floor(mech.cap_at(2000))
    fake = [(2000, q, PMWAnswer('hard', 0.9, 2000, 0.0))] * (cap + 1)
    with pytest.raises(InvalidRecordError, match="transcript says 'hard' at t=2000"):
        mech.replay(fake)


def test_one_natg_halt_per_query_and_rounds_bounded():
    """Spec criterion 16."""
    mech = PMWG(epsilon=30, alpha=0.3, n=2000, domain_size=16)
    state, transcript, halts = _answer_stream(mech, 8)
    assert max(halts) <= 1
    assert state.round.rounds <= state.public.hard + 1
    assert all(a.epsilon_spent <= mech.epsilon for _, _, a in transcript)


def test_cap_checked_before_release_and_halted_forever():
    """Spec criterion 15 / P2: the over-cap hard answer is not released; the state stays halted,
    also after a simulated restart (pickle round trip)."""
    mech = PMWG(epsilon=1000, alpha=0.3, n=1000, domain_size=8)
    rng = seeded(9)
    state = mech.add_data(mech.init_state(), [0] * 1000, rng)
    cap = mech.cap_at(1000)
    state = dataclasses.replace(state, public=dataclasses.replace(state.public, hard=math.floor(cap)))
    hard_query = LinearQuery.point(8, 0)          # true 1.0 vs public 1/8: surely hard
    ans, state = mech.answer(state, hard_query, rng)
    assert ans.status == 'halted' and ans.value is None
    assert state.public.halted and state.public.hard == math.floor(cap)
    restored = pickle.loads(pickle.dumps(state))
    restored = mech.add_data(restored, [1] * 5000, rng)     # growth never un-halts
    for q in (hard_query, LinearQuery.point(8, 3)):
        ans, after = mech.answer(restored, q, rng)
        assert ans.status == 'halted' and after is restored


def test_not_started_and_invalid_queries_leave_state_unchanged():
    mech = PMWG(epsilon=1, alpha=0.2, n=100, domain_size=8)
    rng = seeded(10)
    state = mech.add_data(mech.init_state(), [1] * 50, rng)
    ans, same = mech.answer(state, LinearQuery.point(8, 1), rng)
    assert ans.status == 'not_started' and same is state and ans.epsilon_spent == 0
    with pytest.raises(InvalidRecordError, match='domain of size 8, got 9'):
        mech.answer(state, LinearQuery.point(9, 1), rng)
    with pytest.raises(InvalidRecordError, match='must be a LinearQuery'):
        mech.answer(state, np.ones(8), rng)


def test_answer_does_not_mutate_input_state():
    mech = PMWG(epsilon=30, alpha=0.3, n=500, domain_size=16)
    rng = seeded(12)
    state = mech.add_data(mech.init_state(), np.arange(500) % 3, rng)
    before = pickle.dumps(state)
    for k in range(30):
        mech.answer(state, LinearQuery.point(16, k % 16), rng)
    mech.add_data(state, [5, 6], rng)
    assert pickle.dumps(state) == before
    assert not state.public.log_y.flags.writeable and not state.counts.flags.writeable


def test_query_time_for_large_domain():
    n_dom = 10_000
    mech = PMWG(epsilon=1, alpha=0.2, n=10**6, domain_size=n_dom)
    rng = seeded(13)
    gen = np.random.default_rng(0)
    state = mech.add_data(mech.init_state(), gen.integers(0, n_dom, 10**6), rng)
    queries = [LinearQuery.from_vector(gen.random(n_dom)) for _ in range(100)]
    start = time.perf_counter()
    for q in queries:
        _, state = mech.answer(state, q, rng)
    per_query = (time.perf_counter() - start) / len(queries)
    assert per_query < 0.01        # ~1 ms on a laptop core; generous for shared CI machines


def test_answers_convert_to_avro_records():
    from beam_dp.drivers.growing import answer_record
    from beam_dp.io.queries import answer_from_avro, answer_to_avro
    mech = PMWG(epsilon=30, alpha=0.3, n=100, domain_size=8)
    rng = seeded(14)
    state = mech.add_data(mech.init_state(), [1] * 99, rng)
    early, state = mech.answer(state, LinearQuery.point(8, 1), rng)
    state = mech.add_data(state, [2], rng)
    ans, state = mech.answer(state, LinearQuery.point(8, 1), rng)
    for result, refusal in ((early, 'NOT_STARTED'), (ans, None)):
        record = answer_record('q', 'pmwg', 123, result)
        assert record.refusal == refusal and record.t == result.t
        assert answer_from_avro(answer_to_avro(record)) == record
