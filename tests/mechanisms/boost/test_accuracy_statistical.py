"""Spec 002 §10 criterion 24: every path is (α, β)-accurate, with power.

On fixed synthetic data (n = 10⁴, α = β = 0.05) each path answers ≥ 4,000 queries and the rate
of |error| > α must be ≤ β + 3σ (σ the binomial sd at β). Power: the same check on the R3 path
with a deliberately mis-scaled Laplace (scale × 1.3, realised failure rate β^{1/1.3} ≈ 0.10)
must fail. The R1/R2 bounds are loose by construction (Lemma A.2), so their check is the
criterion itself; the mixed-tree check splits β between its SV and Laplace halves.
"""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import pmw_bypass as pb
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.heuristic import LearningRate
from beam_dp.mechanisms.boost.histogram import uniform_node
from beam_dp.queries import LinearQuery

from tests.mechanisms.boost.conftest import sealed

pytestmark = pytest.mark.statistical

ALPHA, BETA, N_ROWS, ANSWERS = 0.05, 0.05, 10_000, 4000
N = 16
P = np.array([0.3, 0.02, 0.1, 0.02, 0.08, 0.02, 0.1, 0.02, 0.06, 0.04, 0.1, 0.02, 0.04, 0.04,
              0.02, 0.02])
FROZEN = LearningRate(((0, 1e-9),))          # the histogram never learns: every path stays busy


def _queries(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        mask = rng.random(N) < rng.uniform(0.1, 0.6)
        mask[rng.integers(N)] = True
        yield LinearQuery.from_vector(mask.astype(float))


def _errors(mech, state, first, last, path, count, seed):
    """|answer − truth| of the answers that took ``path`` (until ``count`` of them)."""
    rng = noise.seeded(seed)
    errs = []
    for i, q in enumerate(_queries(40 * count, seed)):
        ans, state = mech.answer(state, BoostRequest(q, first, last, str(i)), rng.derive(i))
        if ans.path == path:
            truth = pb.TreePMWBypass._true_value(state, [(0, first, last)], q)
            errs.append(abs(ans.value - truth))
            if len(errs) == count:
                break
    assert len(errs) == count, f'only {len(errs)} {path} answers'
    return np.array(errs)


def _accurate(errs) -> bool:
    bound = BETA + 3 * math.sqrt(BETA * (1 - BETA) / errs.size)
    return float(np.mean(errs > ALPHA)) <= bound


def _mech(name, **kw):
    base = dict(alpha=ALPHA, beta=BETA, epsilon_budget=math.inf, exact_cache=False,
                learning_rate=FROZEN)
    base.update(kw)
    return preset(name, N, **base)


def test_r3_bypass_path_accurate():
    mech = _mech('laplace')
    errs = _errors(mech, sealed(mech, 1, N_ROWS, p=P), 0, 0, 'R3', ANSWERS, 1)
    assert _accurate(errs)
    assert np.mean(errs > ALPHA) > 0.5 * BETA          # the calibration is tight, not lavish


def test_r3_check_has_power_against_a_mis_scaled_sampler(monkeypatch):
    real = pb.laplace_release

    def mis_scaled(value, epsilon, n, rng):
        return real(value, epsilon / 1.3, n, rng)
    monkeypatch.setattr(pb, 'laplace_release', mis_scaled)
    mech = _mech('laplace')
    errs = _errors(mech, sealed(mech, 1, N_ROWS, p=P), 0, 0, 'R3', ANSWERS, 2)
    assert not _accurate(errs)


@pytest.mark.parametrize('path', ['R1', 'R2'])
def test_sv_paths_accurate(path):
    mech = _mech('pmw_bypass', readiness=Readiness(always=True))
    errs = _errors(mech, sealed(mech, 1, N_ROWS, p=P), 0, 0, path, ANSWERS, 3)
    assert _accurate(errs)


def test_tree_mixed_path_accurate():
    mech = _mech('tree_pmw_bypass', readiness=Readiness(c0=1.0, s0=0.0))
    state = sealed(mech, 4, N_ROWS, p=P)
    ready = uniform_node(N, Readiness(c0=0.0))
    never = uniform_node(N, Readiness(c0=math.inf))
    state = pb.dataclasses.replace(state, nodes={(0, 0, 1): ready, (0, 2, 2): never})
    errs = _errors(mech, state, 0, 2, 'MIXED', ANSWERS, 4)
    assert _accurate(errs)
