"""DP audit of ERM Alg 2 (``ContinualERM(algorithm='alg2')``'s schedule and release; spec 003,
issue 28).

* Exact audit of the schedule (``DyadicERMSchedule``): for every block b of a 64-block horizon,
  the privacy loss of a record in b is the sum of the costs of the nodes whose blocks cover b
  (one node per level, ε/2^{k+1}): ≤ ε for every block, and the worst block reaches
  ε(1 − 2^{-(K+1)}) (K the top level reached). With power: a schedule that charged every node
  ε/2 (no halving across levels) is over ε.
* Empirical audit of one node's release (``PSGD.release``, L2-Laplace output perturbation at
  the node's ε): neighbouring datasets (one example replaced), 3,000 releases per side with
  independent permutations and noise, d = 1: over the half-line events at 49 pooled quantiles
  with ≥ 300 releases on both sides, the realised loss is ≤ the node's ε + 0.1 and above 0; a
  release with a quarter of the calibrated noise exceeds the node's ε.
"""

import math

import numpy as np

from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import DyadicERMSchedule
from beam_dp.mechanisms.erm.losses import BinaryLogistic
from beam_dp.noise import seeded

EPS = 1.0


def _block_losses(schedule, blocks):
    state, spent = schedule.init_state(), np.zeros(blocks)
    for t in range(1, blocks + 1):
        step, state = schedule.on_block(state, t)
        for job in step.jobs:
            spent[job.lo:job.hi] += job.eps_cost
    return spent


def test_exact_audit_of_the_alg2_schedule():
    for base in (1, 2, 3):
        spent = _block_losses(DyadicERMSchedule(blocks_per_base=base, epsilon=EPS), 64)
        top = int(math.log2(64 // base))
        assert spent.max() <= EPS
        assert spent.max() >= EPS * (1 - 2.0 ** -(top + 1)) - 1e-12


class _NoHalving(DyadicERMSchedule):
    """A broken schedule: every node at ε/2 (what the per-level halving prevents)."""

    def on_block(self, state, t):
        step, state = super().on_block(state, t)
        import dataclasses  # pylint: disable=import-outside-toplevel
        jobs = tuple(dataclasses.replace(j, eps_cost=EPS / 2, eps_noise=EPS / 2)
                     for j in step.jobs)
        return dataclasses.replace(step, jobs=jobs), state


def test_the_schedule_audit_catches_a_schedule_without_halving():
    assert _block_losses(_NoHalving(blocks_per_base=1, epsilon=EPS), 64).max() > EPS


LOSS = BinaryLogistic(num_classes=2, clip_norm=1.0)
X = np.array([[1.0], [1.0], [-1.0], [0.5], [-0.5], [1.0], [-1.0], [0.25]])
Y = np.array([1, 0, 1, 1, 0, 1, 0, 0])
RUNS = 3000


def _loss(a, b, min_hits=300):
    worst = 0.0
    for c in np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0.02, 0.98, 49))):
        for side in (np.greater, np.less_equal):
            na, nb = int(side(a, c).sum()), int(side(b, c).sum())
            if min(na, nb) == 0 and max(na, nb) >= 2 * min_hits:
                return math.inf
            if min(na, nb) >= min_hits:
                worst = max(worst, abs(math.log(na / nb)))
    return worst


def _node_audit(psgd, eps_node):
    y2 = Y.copy()
    y2[0] = 1 - y2[0]                       # one example replaced (its label flipped)
    sides = []
    for y, offset in ((Y, 0), (y2, 10 ** 6)):
        sides.append(np.array([psgd.release(X, y, len(Y), eps_node, seeded(offset + s),
                                            'n').weights[0] for s in range(RUNS)]))
    return _loss(*sides)


class _QuarterNoise(PSGD):
    def sensitivity(self, n_nominal, lipschitz=None):
        return super().sensitivity(n_nominal, lipschitz) / 4


def test_empirical_audit_of_one_level_0_node_release():
    eps_node = EPS / 2                       # level 0 of Alg 2
    psgd = PSGD(LOSS, mu=2.0, passes=2)
    loss = _node_audit(psgd, eps_node)
    assert 0.05 < loss <= eps_node + 0.1
    assert _node_audit(_QuarterNoise(LOSS, mu=2.0, passes=2), eps_node) > eps_node
