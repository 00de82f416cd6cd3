"""The flat per-block baseline of Boost (spec 002 §3.6 last bullet, §6.7 "Flat histogram
structure", planner MaxCuts): one histogram per leaf block, Alg. 2 on the per-leaf cover."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.pmw_bypass import FLAT_TREE

from tests.mechanisms.boost.conftest import N, QUERIES, sealed


def _ask(mech, state, q, first, last, qid):
    return mech.answer(state, BoostRequest(q, first, last, qid), noise.seeded(0).derive(qid))


def test_cover_is_one_node_per_block_and_no_window_bound():
    mech = preset('max_cuts', N, window_bound=4)
    assert mech.planner == 'maxcuts'
    assert mech._cover(3, 9) == [(FLAT_TREE, t, t) for t in range(3, 10)]
    state = sealed(mech, 10)
    ans, state = _ask(mech, state, QUERIES[0], 0, 9, 'long')     # 10 blocks > window_bound
    assert ans.status == 'ok'
    assert sorted(b for b, _, _ in ans.charges) == list(range(10))   # each block once
    assert all(node[0] == FLAT_TREE and node[1] == node[2] for node in state.nodes)


def test_flat_leaves_train_and_answer_within_alpha():
    mech = preset('max_cuts', N, readiness=Readiness(c0=2, s0=1), epsilon_budget=200.0)
    state = sealed(mech, 6)
    counts = sealed(mech, 6).cum
    paths, errors = set(), []
    for i in range(300):
        a = i % 6
        b = min(5, a + i % 3)
        q = QUERIES[i % len(QUERIES)]
        ans, state = _ask(mech, state, q, a, b, str(i))
        paths.add(ans.path)
        blocks = [blk for blk, p, _ in ans.charges if p != 'sv_init']
        assert len(blocks) == len(set(blocks))                     # one charge per block
        truth = q.evaluate(np.asarray(counts[b + 1]) - np.asarray(counts[a])) / (
            10_000 * (b - a + 1))
        errors.append(abs(ans.value - truth))
    assert paths & {'R1', 'MIXED'}          # leaf histograms answer (part of) windows
    assert np.quantile(errors, 0.99) <= 0.05


def test_max_cuts_is_a_boost_queries_preset():
    from beam_dp import PrivacyBudget
    from beam_dp.transforms.boost import BoostQueries
    t = BoostQueries(public_datasets=['d'], shape=[2, 4], budget=PrivacyBudget(epsilon=1.0),
                     start=0, step=1, end=10, preset='max_cuts')
    assert t is not None
    with pytest.raises(Exception, match='preset must be one of'):
        BoostQueries(public_datasets=['d'], shape=[2, 4], budget=PrivacyBudget(epsilon=1.0),
                     start=0, step=1, end=10, preset='maxcut')
