"""Statistical tier of SmallDB / SmallDBG (spec 000 criterion 21, Theorem 9).

* Criterion 21: on N = 4, k = 4 the sampling distribution over the C(N+m−1, m) candidates
  matches the exponential-mechanism probabilities (χ², 10^5 draws, the spec's size), through
  ``SmallDB.run`` itself at a smaller size; with power: the same test rejects the law of a
  box whose ε is 30% off either way.
* Theorem 9: a SmallDBG stream (n = 10^5 → 4·10^5, adversarial drift: early records on
  element 0, later ones on element 3) keeps every answer of ℱ, at every epoch start and at
  the end of every epoch (maximal staleness), within the guaranteed γ(1+γ)^{2/3} + γ/(1+γ)
  in ≥ 95% of 40 seeds (the paper's 1 − β = 95%).
"""

import numpy as np
import pytest
from scipy import stats

from beam_dp import noise
from beam_dp.mechanisms.smalldb import SmallDB
from beam_dp.mechanisms.smalldb import smalldb_probabilities
from beam_dp.mechanisms.smalldb import smalldbg
from beam_dp.noise.exponential import exponential_mechanism
from beam_dp.queries import LinearQuery

pytestmark = pytest.mark.statistical

N = 4
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))
BOX = SmallDB(QUERIES, 3)
X, T, EPS = np.array([5, 2, 2, 1]), 10, 1.0


def _pvalue(counts, law):
    expected = law * counts.sum()
    keep = expected >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def _draws(size, seed):
    num, den = BOX.coefficient(EPS)
    return exponential_mechanism(noise.seeded(seed), BOX.losses(X, T), num, den, size=size)


def test_criterion_21_sampling_law_is_the_exponential_mechanism_with_power():
    law = smalldb_probabilities(BOX, X, T, EPS)
    counts = np.bincount(_draws(100_000, 21), minlength=law.size)
    assert _pvalue(counts, law) > 1e-3
    for off in (0.7, 1.3):                     # 30% mis-scaled: rejected
        assert _pvalue(counts, smalldb_probabilities(BOX, X, T, EPS * off)) < 1e-3


def test_the_box_run_draws_from_the_same_law():
    law = smalldb_probabilities(BOX, X, T, EPS)
    index = {tuple(r): i for i, r in enumerate(BOX.candidates())}
    runs = 6000
    got = [index[BOX.run(X, T, EPS, None, None, noise.seeded(7).derive(i)).counts]
           for i in range(runs)]
    counts = np.bincount(got, minlength=law.size)
    assert _pvalue(counts, law) > 1e-3
    assert _pvalue(counts, smalldb_probabilities(BOX, X, T, EPS * 1.6)) < 1e-3


def _max_error(mech, seed, end=400_000):
    """The worst |f(y) − f(x_τ)| over ℱ at every epoch start and epoch end."""
    rng = noise.seeded(seed)
    state, worst = mech.init_state(), 0.0
    i = 0
    start = mech.start(0)
    data = np.where(np.arange(end) < 150_000, 0, 3)          # drift: staleness hurts
    t = 0
    while start <= end:
        _, state = mech.add_data_with_releases(state, data[t:start], rng.derive(i))
        t = start
        # maximal staleness: just before the next run
        nxt = mech.start(state.epoch + 1)
        for at in (t, min(nxt, end + 1) - 1):
            counts = np.bincount(data[:at], minlength=N)
            for q in QUERIES:
                value = state.output.answer(q)
                worst = max(worst, abs(value - q.evaluate(counts) / at))
        i += 1
        start = nxt
    return worst


def test_theorem_9_every_answer_within_the_guarantee_in_95_percent_of_seeds():
    mech = smalldbg(queries=QUERIES, epsilon=1.0, beta=0.05, n=100_000)
    bound = mech.guaranteed_error()
    errors = [_max_error(mech, seed) for seed in range(40)]
    assert np.mean(np.array(errors) <= bound) >= 0.95
    # What the bound hides: the measured worst error is far below it (recorded in the docs).
    assert max(errors) < bound
