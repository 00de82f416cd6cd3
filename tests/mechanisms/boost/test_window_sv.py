"""``TreePMWBypass(sv_scope='window')`` (``boost.window_sv``, the artifact's whole-window SV
rule): parameters, accounting per path (one SV over the window, Laplace nodes at the window's
all-Laplace calibration, nothing paid twice after a failure), ledger = filters, atomic
admission, and accuracy (statistical): over all answers ≤ β; the all-Laplace answer after a
failure at its β/2 calibration, with power against a 30 % mis-scaled sampler."""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import calibration as cal
from beam_dp.mechanisms.boost import pmw_bypass as pb
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.heuristic import LearningRate
from beam_dp.mechanisms.boost.histogram import uniform_node
from beam_dp.mechanisms.boost.grid_sv import GRID_SLACK

from tests.mechanisms.boost.conftest import N, QUERIES, sealed

ALPHA_CAL = 0.05 * (1 - GRID_SLACK)
FROZEN = LearningRate(((0, 1e-9),))      # the histogram never learns: both SV outcomes recur


def _ask(mech, state, q, first, last, qid):
    return mech.answer(state, BoostRequest(q, first, last, qid), noise.seeded(0).derive(qid))


def _one_ready_node(mech, state):
    """Window [0, 2] = nodes (0,0,1) (always ready) + (0,2,2) (never ready)."""
    return pb.dataclasses.replace(state, nodes={
        (0, 0, 1): uniform_node(mech.domain_size, Readiness(c0=0.0)),
        (0, 2, 2): uniform_node(mech.domain_size, Readiness(c0=math.inf))})


@pytest.mark.parametrize('kwargs', [dict(sv_scope='x'), dict(planner='nocuts'),
                                    dict(sv_failure='r2'), dict(sv_reset='eager'),
                                    dict(mode='laplace')])
def test_bad_params_raise(kwargs):
    base = dict(sv_scope='window')
    base.update(kwargs)
    with pytest.raises(InvalidParamsError):
        preset('tree_pmw_bypass', N, **base)


def test_window_rule_charges():
    mech = preset('tree_pmw_bypass', N, sv_scope='window', exact_cache=False,
                  learning_rate=FROZEN, readiness=Readiness(c0=1.0, s0=0.0))
    state = _one_ready_node(mech, sealed(mech, 4))
    eps_lap = cal.calibrate_laplace(ALPHA_CAL, 5e-4, 30_000, 2)       # C4 over the window
    eps_sv = cal.calibrate_pmw(ALPHA_CAL, 5e-4, 30_000)               # C3 over the window
    # Alg. 2 (sv_scope='run') pays the lone Laplace node at C1 over its own n at β/2: dearer.
    assert eps_lap < cal.calibrate_laplace(ALPHA_CAL, 5e-4, 10_000, 1) / 2
    live, seen = False, set()
    for i in range(200):
        ans, state = _ask(mech, state, QUERIES[i % 8], 0, 2, str(i))
        seen.add(ans.path)
        lap = sorted(b for b, p, _ in ans.charges if p == 'laplace')
        init = sorted(b for b, p, _ in ans.charges if p == 'sv_init')
        assert init == ([] if live else [0, 1, 2])      # 3ε_SV on every block of the window
        assert lap == ([2] if ans.path == 'MIXED' else [0, 1, 2])    # never twice per query
        for _, p, e in ans.charges:
            assert e == pytest.approx({'sv_init': 3 * eps_sv, 'laplace': eps_lap}[p])
        assert ans.path in ('MIXED', 'R2')
        live = ans.path == 'MIXED'                       # a failure halts the SV (lazy)
    assert seen == {'MIXED', 'R2'}


def test_cached_node_is_answered_from_the_cache_not_the_histogram():
    mech = preset('tree_pmw_bypass', N, sv_scope='window', readiness=Readiness(always=True))
    state = sealed(mech, 4)
    first, state = _ask(preset('tree_exact_cache', N), state, QUERIES[9], 2, 2, 'b')
    assert first.path == 'R3'                    # node (0,2,2) cached at C1 over its own n
    ans, _ = _ask(mech, state, QUERIES[9], 0, 2, 'c')
    assert sorted(b for b, p, _ in ans.charges if p == 'sv_init') == [0, 1, 2]
    lap = sorted(b for b, p, _ in ans.charges if p == 'laplace')
    assert lap == ([] if ans.path == 'MIXED' else [0, 1])     # block 2 reuses its cached result


def test_ledger_equals_filters_and_admission_is_atomic():
    mech = preset('tree_pmw_bypass', N, sv_scope='window', readiness=Readiness(c0=2, s0=1),
                  epsilon_budget=0.5)
    state = sealed(mech, 8, n=2000)
    per_block, refused, paths = {}, 0, set()
    for i in range(400):
        a = i % 8
        before = state
        ans, state = _ask(mech, state, QUERIES[i % len(QUERIES)], a, min(7, a + i % 5), str(i))
        paths.add(ans.path)
        if ans.status == 'refused':
            refused += 1
            assert ans.reason == 'budget_exhausted' and state is before
        for b, _, e in ans.charges:
            per_block[b] = per_block.get(b, 0.0) + e
    assert refused > 0 and {'MIXED', 'R3'} <= paths
    assert per_block.keys() == state.filters.consumed.keys()
    for b, total in per_block.items():
        assert total == pytest.approx(state.filters.consumed[b], rel=1e-12)
        assert total <= 0.5 + 1e-12


# -- accuracy (spec §10 criterion 24 for this rule) ---------------------------------------------

ALPHA, BETA, ANSWERS = 0.05, 0.05, 3000


def _answer_stream(count, seed, queries=None):
    """(path, |answer − truth|) of ``count`` queries over window [0, 2] (node (0,0,1) ready and
    never learning, node (0,2,2) never ready)."""
    from tests.mechanisms.boost.test_accuracy_statistical import P
    from tests.mechanisms.boost.test_accuracy_statistical import _queries
    mech = preset('tree_pmw_bypass', len(P), sv_scope='window', alpha=ALPHA, beta=BETA,
                  epsilon_budget=math.inf, exact_cache=False, learning_rate=FROZEN,
                  readiness=Readiness(c0=1.0, s0=0.0))
    state = _one_ready_node(mech, sealed(mech, 4, 10_000, p=P))
    rng, out = noise.seeded(seed), []
    for i, q in enumerate(queries or _queries(count, seed)):
        ans, state = mech.answer(state, BoostRequest(q, 0, 2, str(i)), rng.derive(i))
        out.append((ans.path, abs(ans.value - pb.TreePMWBypass._true_value(state, [(0, 0, 2)],
                                                                            q))))
    return out


def _accurate(errs, beta) -> bool:
    errs = np.asarray(errs)
    return float(np.mean(errs > ALPHA)) <= beta + 3 * math.sqrt(beta * (1 - beta) / errs.size)


@pytest.mark.statistical
def test_window_rule_accurate_over_all_answers():
    out = _answer_stream(ANSWERS, 5)
    assert {p for p, _ in out} >= {'MIXED', 'R2'}
    assert _accurate([e for _, e in out], BETA)
    assert _accurate([e for p, e in out if p == 'MIXED'], BETA)


def _always_failing(seed):
    """Point query on bin 0 (true 0.3, uniform estimate 1/16): every SV test fails, so every
    answer is the all-Laplace plan of the window at β/2 (two nodes)."""
    from tests.mechanisms.boost.test_accuracy_statistical import P
    q = pb.LinearQuery.from_vector(np.eye(len(P))[0])
    out = _answer_stream(ANSWERS, seed, [q] * ANSWERS)
    assert {p for p, _ in out} == {'R2'}
    return [e for _, e in out]


@pytest.mark.statistical
def test_all_laplace_answer_accurate_at_half_beta():
    errs = _always_failing(6)
    assert _accurate(errs, BETA / 2)
    assert np.mean(np.asarray(errs) > ALPHA) > 0.25 * BETA / 2      # tight, not lavish


@pytest.mark.statistical
def test_accuracy_check_has_power_against_a_mis_scaled_sampler(monkeypatch):
    real = pb.laplace_release

    def mis_scaled(value, epsilon, n, rng):
        return real(value, epsilon / 1.3, n, rng)
    monkeypatch.setattr(pb, 'laplace_release', mis_scaled)
    assert not _accurate(_always_failing(7), BETA / 2)
