"""The sparse-vector test as Boost uses it (spec 002 §3.2), and the Laplace release, both with
the project's exact discrete Laplace on a public power-of-two grid.

SV (AboveThreshold, c = 1; Lyu, Su, Li 2017 with ε₁ = ε, ε₂ = 2ε): at a reset the noisy
threshold α̃ = α/2 + Lap(1/(εn)) is drawn once and kept; each test compares the statistic
|q(Data) − q(h)| (sensitivity Δ = 1/n: h is a function of earlier DP outputs) plus fresh
Lap(1/(εn)) with α̃. Pass: the histogram answer is released for free. Fail: the SV is consumed.
One SV (every test up to and including the first failure) costs 3ε. The reset policy (lazy:
pay 3ε when the next ready query arrives; eager: prepay it on the failure, Alg. 1's "4ε") is the
caller's (erratum 12).

Where the paper draws continuous Laplace, this module uses ``beam_dp.noise``: statistics are
floored onto the grid 2^-k with Δ·2^k ≥ 2^10 and compared in integers; the threshold noise and
the test noise are exact discrete Laplace of integer scale ``grid_laplace_scale(1/(εn), Δ, k)``,
whose cost on a grid statistic is exactly Δ/b = ε (``beam_dp.noise.real_laplace``); the
test compares integers (statistic units + exact Y with the threshold units), never floats. Noise in value units is at most (1 + 3·2^-10)× the paper's; the mechanism absorbs
that in its accuracy margin (``GRID_SLACK``).
"""

import dataclasses
from typing import Tuple

from beam_dp.noise import RandomSource
from beam_dp.noise.real_laplace import discrete_laplace_any
from beam_dp.noise.real_laplace import floor_to_grid
from beam_dp.noise.real_laplace import grid_bits
from beam_dp.noise.real_laplace import grid_laplace
from beam_dp.noise.real_laplace import grid_laplace_scale

__all__ = [
    'GRID_SLACK',
    'LiveSV',
    'laplace_release',
    'start_sv',
    'sv_fails',
]

#: Accuracy margin for the grid: calibrations use α·(1 − GRID_SLACK) so that the ≤ 3·2^-10
#: relative scale inflation and the 2^-k flooring of the grid keep every (α, β) guarantee.
GRID_SLACK = 2.0 ** -8


@dataclasses.dataclass(frozen=True)
class LiveSV:
    """A live sparse vector on one node-set. SECRET: ``threshold_units`` (the noisy threshold on
    the grid 2^-bits); never logged or released. ``epsilon``: the ε of its noise; ``n``: n_SV."""
    threshold_units: int
    bits: int
    epsilon: float
    n: int
    started_by: str


def _grid(epsilon: float, n: int):
    sensitivity = 1.0 / n
    bits = grid_bits(sensitivity)
    return bits, grid_laplace_scale(1.0 / (epsilon * n), sensitivity, bits)


def start_sv(alpha: float, epsilon: float, n: int, started_by: str,
             rng: RandomSource) -> LiveSV:
    """An SV reset: draws α̃ = α/2 + Lap(1/(εn)) once (the caller charges 3ε)."""
    bits, scale = _grid(epsilon, n)
    units = floor_to_grid(alpha / 2.0, bits) + int(discrete_laplace_any(rng, scale))
    return LiveSV(units, bits, epsilon, n, started_by)


def sv_fails(sv: LiveSV, true_value: float, estimate: float, rng: RandomSource) -> bool:
    """One test: fails iff ⌊|q(Data) − q(h)|·2^k⌋ + Y ≥ α̃ (Y fresh discrete Laplace).

    Erratum 1: the statistic is |r* − r_H| (true minus histogram), not |r* − r_SV|.
    """
    bits, scale = _grid(sv.epsilon, sv.n)
    stat = floor_to_grid(abs(true_value - estimate), bits)
    # Y is drawn exactly (CKS sampler: O(1) expected work at any scale; the per-tick Bernoulli
    # of ``bernoulli_dlap_tail`` loops ~scale times at the large grid scales used here).
    return stat + int(discrete_laplace_any(rng, scale)) >= sv.threshold_units


def laplace_release(true_value: float, epsilon: float, n: int,
                    rng: RandomSource) -> Tuple[float, float]:
    """q(Data) + Lap(1/(εn)) on the grid; returns (released, noise scale in fraction units).

    Cost ε for a statistic of sensitivity 1/n (replace-one within the node's public n rows).
    """
    scale = 1.0 / (epsilon * n)
    released, _ = grid_laplace(rng, true_value, scale, 1.0 / n)
    return float(released), scale
