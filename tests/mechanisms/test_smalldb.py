"""SmallDB and SmallDBG (spec 000 §2.6, Theorem 9): the synthetic size and candidate count, the
refusal of large domains at construction, the schedule SmallDBG inherits from BBScheduler, the
exact exponential-mechanism sampler, and an exact and an empirical DP audit of one SmallDB run
on neighbouring databases (swap one record), with a mis-calibrated box caught by the same
audit."""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import bbscheduler_schedule
from beam_dp.mechanisms.smalldb import MAX_CANDIDATES
from beam_dp.mechanisms.smalldb import SmallDB
from beam_dp.mechanisms.smalldb import SyntheticDatabase
from beam_dp.mechanisms.smalldb import smalldb_candidates
from beam_dp.mechanisms.smalldb import smalldb_probabilities
from beam_dp.mechanisms.smalldb import smalldb_size
from beam_dp.mechanisms.smalldb import smalldbg
from beam_dp.mechanisms.smalldb import smalldbg_alpha
from beam_dp.noise.exponential import exponential_mechanism
from beam_dp.noise.exponential import rational_down
from beam_dp.queries import LinearQuery

N = 4
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))


def test_synthetic_size_and_candidate_count():
    assert smalldb_size(4, 0.5) == math.ceil(math.log(4) / 0.25)
    assert smalldb_size(2, 10.0) == 1                 # never empty
    assert smalldb_candidates(4, 3) == 20
    assert smalldb_candidates(4, 3) == len(SmallDB(QUERIES, 3).candidates())
    rows = SmallDB(QUERIES, 3).candidates()
    assert (rows.sum(axis=1) == 3).all() and len({tuple(r) for r in rows}) == 20


def test_large_domains_are_refused_at_construction_with_the_count():
    with pytest.raises(InvalidParamsError, match='exponential in the domain.*N=16.*m=12'):
        SmallDB(tuple(LinearQuery.range(16, 0, b) for b in range(1, 5)), 12)
    with pytest.raises(InvalidParamsError, match='at most 2,000,000'):
        SmallDB(QUERIES, 2, max_candidates=10 ** 7)
    # SmallDBG computes m from (N, k, ε, β, n) and refuses before any data.
    big = tuple(LinearQuery.range(12, 0, b) for b in range(1, 13))
    with pytest.raises(InvalidParamsError, match='exponential in the domain'):
        smalldbg(queries=big, epsilon=1.0, beta=0.05, n=10 ** 6)


def test_query_weights_must_be_exact_and_bad_classes_are_refused():
    with pytest.raises(InvalidParamsError, match='multiples of 2\\^-16'):
        SmallDB((LinearQuery.from_vector([1 / 3, 0, 0, 1]), QUERIES[0]), 2)
    SmallDB((LinearQuery.from_vector([0.5, 0.25, 0, 1]), QUERIES[0]), 2)
    with pytest.raises(InvalidParamsError, match='at least 2 distinct queries'):
        smalldbg(queries=(QUERIES[0], QUERIES[0]), epsilon=1.0, beta=0.05, n=10 ** 5)
    with pytest.raises(InvalidParamsError, match='gamma'):
        smalldbg(queries=QUERIES, epsilon=1.0, beta=0.05, n=100)
    with pytest.raises(InvalidParamsError, match='non-empty sequence'):
        SmallDB((), 2)


def test_smalldbg_is_bbscheduler_with_theorem_9_constants():
    mech = smalldbg(queries=QUERIES, epsilon=1.0, beta=0.05, n=10 ** 5)
    assert isinstance(mech, BBScheduler)
    g = (64 * math.log(N) * math.log(4)) ** (1 / 3)
    gamma = (g ** 3 * math.log(1.05 / 0.05) / 1e5) ** (1 / 5)       # (g^{1/p}·Z)^{p/(2p+1)}
    assert mech.gamma == pytest.approx(gamma, rel=1e-12)
    alpha = smalldbg_alpha(mech.gamma, 0.0)
    assert alpha == pytest.approx(mech.gamma * (1 + mech.gamma) ** (2 / 3))
    assert mech.mechanism.m == smalldb_size(4, alpha)
    # α_i is epoch-independent (spec criterion 4), so m fits every epoch.
    for i in range(0, 30, 7):
        assert mech._params_for(i)[1] == pytest.approx(alpha, rel=1e-6)
    assert mech.guaranteed_error() == pytest.approx(alpha + mech.gamma / (1 + mech.gamma))


def test_runs_happen_at_the_epoch_starts_and_the_budget_adds_up():
    mech = smalldbg(queries=QUERIES, epsilon=2.0, beta=0.1, n=2000)
    starts = bbscheduler_schedule(2000, mech.gamma, 8)
    state, releases, rng = mech.init_state(), [], noise.seeded(3)
    data = np.arange(starts[-1] + 3) % N
    for i in range(0, data.size, 97):
        new, state = mech.add_data_with_releases(state, data[i:i + 97], rng)
        releases.extend(new)
    assert state.spent <= 2.0
    got = [r.t for r in releases]
    assert got == sorted(got) and got[0] == 2000 and set(got) <= set(starts)
    answer, _ = mech.answer(state, QUERIES[1], rng)
    assert answer.status == 'answered' and 0 <= answer.value <= 1
    assert isinstance(state.output, SyntheticDatabase) and sum(state.output.counts) == mech.mechanism.m


def test_answers_are_the_synthetic_databases_answers():
    box = SmallDB(QUERIES, 3)
    y = box.run(np.array([5, 3, 1, 1]), 10, 1.0, None, None, noise.seeded(1))
    assert sum(y.counts) == 3
    value, same = box.answer(y, QUERIES[1], None)
    assert same is y and value == pytest.approx((y.counts[0] + y.counts[1]) / 3)


def test_rational_down_never_rounds_up():
    for x in (1e-9, 0.1, 1 / 3, 1.0, 2.0, 7.123456789, 1e6):
        num, den = rational_down(x)
        assert num / den <= x and num < 2 ** 30
        assert num / den >= x * (1 - 2 ** -28)
    assert rational_down(2.0 ** 40 + 0.5) == (2 ** 40, 1)
    assert rational_down(0.0) == (0, 1)


def test_exponential_mechanism_python_int_path_matches_the_law():
    """Losses too large for int64 products go through the Python-integer Bernoulli."""
    losses = np.array([0, 1, 2, 3], dtype=object) * (1 << 40) + (1 << 70)
    num, den = 1, 1 << 40                     # weights ∝ e^{-0}, e^{-1}, e^{-2}, e^{-3}
    draws = [exponential_mechanism(noise.seeded(i), losses, num, den) for i in range(4000)]
    freq = np.bincount(draws, minlength=4) / 4000
    law = np.exp(-np.arange(4.0)) / np.exp(-np.arange(4.0)).sum()
    assert np.abs(freq - law).max() < 0.03


def _neighbours():
    """Databases of size 40 that differ by swapping one record (element 0 → element 1): the
    pair with the largest loss among those searched (all swaps of six databases)."""
    x = np.array([40, 0, 0, 0])
    return x, x + np.array([-1, 1, 0, 0])


def _max_log_ratio(box, x, x2, t, eps):
    p, q = smalldb_probabilities(box, x, t, eps), smalldb_probabilities(box, x2, t, eps)
    return float(np.max(np.abs(np.log(p) - np.log(q))))


@pytest.mark.parametrize('eps', [0.1, 0.5, 2.0])
def test_exact_audit_of_one_run_on_neighbouring_databases(eps):
    """The exact law's privacy loss over every candidate is ≤ ε (and uses most of it)."""
    box = SmallDB(QUERIES, 3)
    x, x2 = _neighbours()
    worst = max(_max_log_ratio(box, a, b, 40, eps) for a, b in ((x, x2), (x2, x)))
    assert worst <= eps * (1 + 1e-9)
    assert worst >= 0.5 * eps            # the exponential mechanism uses ~ε on this pair


class _TwiceAsSharp(SmallDB):
    """A mis-calibrated box: exponent ε t err instead of ε t err / 2 (the audit's power)."""

    def coefficient(self, epsilon):
        num, den = super().coefficient(epsilon)
        return 2 * num, den


def test_the_exact_audit_catches_a_box_without_the_factor_two():
    box, eps = _TwiceAsSharp(QUERIES, 3), 0.5
    x, x2 = _neighbours()
    assert _max_log_ratio(box, x, x2, 40, eps) > 1.3 * eps


def _empirical_loss(box, x, x2, t, eps, runs):
    num, den = box.coefficient(eps)
    a = exponential_mechanism(noise.seeded(1), box.losses(x, t), num, den, size=runs)
    b = exponential_mechanism(noise.seeded(2), box.losses(x2, t), num, den, size=runs)
    size = len(box.candidates())
    pa = np.bincount(a, minlength=size) / runs
    pb = np.bincount(b, minlength=size) / runs
    keep = np.minimum(pa, pb) * runs >= 2000      # log ratio error ≤ ~0.07 at 3σ
    return float(np.max(np.abs(np.log(pa[keep] / pb[keep]))))


def test_empirical_audit_of_the_sampler_on_neighbouring_databases():
    """Draws from the exact sampler (not the formula): the realised log ratio of each
    well-sampled candidate is ≤ ε + sampling error, and the mis-calibrated box exceeds it."""
    eps, runs = 1.0, 200_000
    # A small database: the candidates that carry the loss are also likely (exact loss 0.66ε).
    x, x2 = np.array([4, 0, 0, 0]), np.array([3, 1, 0, 0])
    worst = _empirical_loss(SmallDB(QUERIES, 3), x, x2, 4, eps, runs)
    assert worst <= eps + 0.07
    assert worst >= 0.5 * eps
    assert _empirical_loss(_TwiceAsSharp(QUERIES, 3), x, x2, 4, eps, runs) > eps + 0.1


def test_max_candidates_default_is_documented():
    assert MAX_CANDIDATES == 100_000
