"""Spec 002 §10 criteria 25-27 on Covid-shaped data (N = 128, attributes [positive 2, gender 2,
age 4, ethnicity 8], the rectangle query pool, Zipf workloads): convergence of PMW-Bypass,
its budget against Exact-Cache and vanilla PMW, and warm start in streams."""

import itertools

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import LearningRate
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset
from beam_dp.queries import LinearQuery

pytestmark = pytest.mark.statistical

SHAPE = (2, 2, 4, 8)
N = 128
AGE = np.array([0.224, 0.312, 0.312, 0.152])
ETH = np.array([0.002, 0.15, 0.402, 0.042, 0.004, 0.006, 0.343, 0.053])
POS_AGE = np.array([0.1, 0.55, 0.22, 0.13])
POS_ETH = np.array([0.002, 0.06, 0.62, 0.03, 0.006, 0.004, 0.22, 0.058])


def _outer(*ms):
    out = ms[0]
    for m in ms[1:]:
        out = np.multiply.outer(out, m)
    return out


def covid_block(rng, n=1_000_000, positivity=0.1, drift=0.0):
    pos_eth = (1 - drift) * POS_ETH + drift * ETH
    p = np.stack([(1 - positivity) * _outer(np.array([.5, .5]), AGE, ETH),
                  positivity * _outer(np.array([.48, .52]), POS_AGE, pos_eth)]).reshape(-1)
    return rng.multinomial(n, p / p.sum())


class Pool:
    """All 34,425 rectangles, shuffled; queries built lazily and memoised."""

    def __init__(self, seed):
        per = [[c for r in range(1, d + 1) for c in itertools.combinations(range(d), r)]
               for d in SHAPE]
        self.rects = list(itertools.product(*per))
        self.order = np.random.default_rng(seed).permutation(len(self.rects))
        self.memo = {}

    def __len__(self):
        return len(self.rects)

    def __getitem__(self, i):
        if i not in self.memo:
            mask = np.zeros(SHAPE, dtype=bool)
            mask[np.ix_(*self.rects[self.order[i]])] = True
            self.memo[i] = LinearQuery.from_vector(mask.reshape(-1).astype(float))
        return self.memo[i]

    def zipf(self, k, count, rng):
        w = 1.0 / np.arange(1, len(self) + 1, dtype=float) ** k
        return rng.choice(len(self), size=count, p=w / w.sum())


def test_pmw_bypass_converges_within_5000_updates():                        # criterion 25
    rng = np.random.default_rng(0)
    counts = covid_block(rng)
    pool = Pool(1)
    mech = preset('pmw_bypass', N, readiness=Readiness(c0=100, s0=5),
                  learning_rate=LearningRate(((0, 0.025),)), tau=0.05, epsilon_budget=1e9)
    state = mech.add_data(mech.init_state(), counts)
    validation = [pool[int(i)] for i in rng.integers(0, len(pool), 300)]
    truth = np.array([q.evaluate(counts) / counts.sum() for q in validation])
    src = noise.seeded(0)
    accuracy, updates = 0.0, 0
    for i, rank in enumerate(pool.zipf(1.0, 30_000, rng)):
        _, state = mech.answer(state, BoostRequest(pool[int(rank)], 0, 0, str(i)), src.derive(i))
        if i % 500 == 499:
            h = state.nodes[(-1, 0, 0)]
            accuracy = np.mean([abs(h.estimate(q) - t) <= 0.025 for q, t in zip(validation, truth)])
            updates = h.updates
            if accuracy >= 0.9:
                break
    assert accuracy >= 0.9 and updates <= 5000


def _final_budget(system, counts, ranks, pool, **kw):
    mech = preset(system, N, epsilon_budget=1e9, **kw)
    state = mech.add_data(mech.init_state(), counts)
    src = noise.seeded(3)
    for i, rank in enumerate(ranks):
        _, state = mech.answer(state, BoostRequest(pool[int(rank)], 0, 0, str(i)), src.derive(i))
    return state.filters.spent(0)


@pytest.mark.slow
def test_boost_beats_exact_cache_and_vanilla_pmw_uniform_workload():       # criterion 26
    rng = np.random.default_rng(2)
    counts = covid_block(rng)
    pool = Pool(2)
    ranks = pool.zipf(0.0, 70_000, rng)
    boost = _final_budget('pmw_bypass', counts, ranks, pool, readiness=Readiness(c0=100, s0=5))
    exact = _final_budget('exact_cache', counts, ranks, pool)
    vanilla = _final_budget('vanilla_pmw', counts, ranks, pool)
    assert exact / boost >= 3 and vanilla / boost >= 3


@pytest.mark.slow
def test_warm_start_uses_no_more_budget_in_streams():                      # criterion 27
    blocks, per_block, seeds = 8, 500, 5
    totals = {False: [], True: []}
    pool = Pool(3)
    for seed in range(seeds):
        rng = np.random.default_rng(100 + seed)
        data = [covid_block(rng, positivity=0.06 + 0.01 * t, drift=t / blocks)
                for t in range(blocks)]
        ranks = pool.zipf(1.0, blocks * per_block, rng)
        sizes = rng.integers(1, blocks + 1, size=ranks.size)
        for warm in (False, True):
            mech = preset('tree_pmw_bypass_warm' if warm else 'tree_pmw_bypass', N,
                          readiness=Readiness(c0=100, s0=5), epsilon_budget=1e9)
            state, src = mech.init_state(), noise.seeded(seed)
            for i, rank in enumerate(ranks):
                if i % per_block == 0:
                    state = mech.add_data(state, data[state.num_blocks])
                last = state.num_blocks - 1
                first = max(0, last - int(sizes[i]) + 1)
                _, state = mech.answer(state, BoostRequest(pool[int(rank)], first, last, str(i)),
                                       src.derive(i))
            totals[warm].append(state.filters.total() / blocks)
    assert np.mean(totals[True]) <= np.mean(totals[False])
