"""The optional Gaussian noise of Boost (``noise='gaussian'``; spec 002 C5/C6, App. A.5): the
Laplace answers (bypass R3, the per-node answers of the tree's Laplace part and the all-noise
replan after a failed sparse-vector test) are released with exact discrete Gaussian noise and
charged in ρ-zCDP to per-block zCDP filters; the sparse vector keeps its Laplace noise.

Release (one node of n public rows, fraction statistic of sensitivity Δ = 1/n under replace-one):
the statistic is floored onto the public grid 2^-k with Δ·2^k ≥ 2^16 (``HEADROOM_BITS``; k
depends only on n), so neighbouring grid statistics differ by at most g = ⌈Δ·2^k⌉ + 2 units
(``real_laplace.grid_sensitivity``: +1 for the floor, +1 for floating-point error), and exact
discrete Gaussian noise N_Z(0, σ²) with σ² = g²/(2ρ) (rounded *up* to the sampler's rational grid)
is added: ρ-zCDP exactly (Canonne, Kamath, Steinke 2020, Thm 14: Δ²/(2σ²) for an integer
statistic of sensitivity Δ). In fraction units the std parameter is g/(2^k √(2ρ)) ≤
Δ/√(2ρ)·(1 + 3·2^-16).

Accuracy (``tail_bound``, rigorous): node i's error in grid units is X_i − f_i with X_i ~ N_Z(0,
σ_i²) and f_i ∈ [0, 1) the floor remainder (plus < 1 unit of float error). Write X_i = V_i − U_i,
V_i = X_i + U_i with U_i ~ U(−½, ½) independent: V_i has the symmetric unimodal density
p(round(y)). For σ ≥ 3, V_i is *more peaked* than N(0, (σ_i + 1)²) (Pr[|V| ≤ t] ≥
Pr[|N| ≤ t] for all t): for t ≥ (σ+1)/2 from Pr[V > t] ≤ Φ̄((t − ½)/σ) (|round(y)| ≥ y − ½ and
the normaliser Σ_x e^{−x²/2σ²} ≥ √(2π)σ by Poisson summation); for t ≤ (σ+1)/2 the density
ratio p(round(y))/φ_{σ+1}(y) ≥ (1 + (σ² − 2σ − 1)/(2σ³))/(1 + 2Σ_j e^{−2π²σ²j²}) ≥ 1 on [0, t].
Peakedness is preserved by independent sums of symmetric unimodal variables (Birnbaum 1948,
Thm 1) and by scaling, so with weights w_i = n_i/n_Lap and units u_i = 2^-k_i,
Pr[|Σ w_i u_i (X_i − f_i)| > α] ≤ 2Φ̄((α − Σ w_i u_i·2.5)/√(Σ w_i² u_i² (σ_i + 1)²)).
``calibrate_gaussian`` (exact Gaussian tail) at α·(1 − GRID_SLACK) keeps that ≤ β_L whenever
α·n_Lap ≥ 1 (the margin α·2^-8 dwarfs the grid's 2^-16-relative terms); ``tail_bound`` computes
it for a given plan (tested).
"""

import fractions
import math
import statistics
from typing import Iterable, Tuple

from beam_dp import _validation as v
from beam_dp.noise import RandomSource
from beam_dp.noise import as_rational_up
from beam_dp.noise.real_laplace import GRID_HEADROOM_BITS
from beam_dp.noise.real_laplace import floor_to_grid
from beam_dp.noise.real_laplace import from_grid
from beam_dp.noise.real_laplace import grid_bits
from beam_dp.noise.real_laplace import grid_sensitivity
from beam_dp.noise.wide_gaussian import discrete_gaussian_any

__all__ = [
    'HEADROOM_BITS',
    'NOISES',
    'check_noise',
    'gaussian_release',
    'grid_sigma2',
    'node_std',
    'tail_bound',
]

NOISES = ('laplace', 'gaussian')
#: Δ·2^k ≥ 2^HEADROOM_BITS: the grid adds at most 3·2^-16 relative noise (6 bits finer than the
#: Laplace grid, which needs no per-node shift term).
HEADROOM_BITS = 16
#: Grid units of deterministic shift per node: ½ (V = X + U) + 1 (floor) + 1 (float error).
_SHIFT_UNITS = 2.5


def _grid(n: int) -> Tuple[int, int]:
    sensitivity = 1.0 / n
    bits = grid_bits(sensitivity) + HEADROOM_BITS - GRID_HEADROOM_BITS
    return bits, grid_sensitivity(sensitivity, bits)


def grid_sigma2(rho: float, n: int) -> Tuple[int, fractions.Fraction]:
    """(k, σ²): the public grid exponent and the discrete Gaussian's σ² in grid units (exactly
    g²/(2ρ) rounded up to the sampler's 2^-20 grid: the cost is at most ρ)."""
    bits, units = _grid(n)
    s2 = fractions.Fraction(units * units) / (2 * fractions.Fraction(rho))
    return bits, as_rational_up(s2, 'sigma2', cap=False)


def node_std(rho: float, n: int) -> float:
    """The nominal noise std of a node in fraction units, 1/(n √(2ρ)) (the cache-reuse scale)."""
    return 1.0 / (n * math.sqrt(2.0 * rho))


def gaussian_release(true_value: float, rho: float, n: int,
                     rng: RandomSource) -> Tuple[float, float]:
    """q(Data) + N_Z(0, σ²)·2^-k on the grid; returns (released, nominal std). Cost ρ-zCDP for
    a statistic of sensitivity 1/n (replace-one within the node's public n rows)."""
    bits, s2 = grid_sigma2(rho, n)
    noise = int(discrete_gaussian_any(rng, s2, 1)[0])
    return float(from_grid(floor_to_grid(true_value, bits) + noise, bits)), node_std(rho, n)


def tail_bound(alpha: float, parts: Iterable[Tuple[int, float]]) -> float:
    """The rigorous bound on Pr[|aggregate error| > α] of a Gaussian plan (module docstring):
    ``parts`` = (n_i, ρ_i) of its fresh nodes, aggregated with weights n_i/Σn."""
    parts = list(parts)
    total = sum(n for n, _ in parts)
    shift, var = 0.0, 0.0
    for n, rho in parts:
        bits, s2 = grid_sigma2(rho, n)
        sigma = math.sqrt(float(s2))
        if sigma < 3:
            return 1.0                                   # the peakedness lemma needs σ ≥ 3
        scale = math.ldexp(n / total, -bits)             # weight × grid unit
        shift += _SHIFT_UNITS * scale
        var += (scale * (sigma + 1.0)) ** 2
    if alpha <= shift:
        return 1.0
    return min(1.0, 2.0 * (1.0 - statistics.NormalDist().cdf((alpha - shift) / math.sqrt(var))))


def check_noise(owner: str, mech) -> None:
    """InvalidParamsError unless ``mech``'s noise options fit together: 'gaussian' needs a
    ``rho_budget`` and applies only to the Laplace answers of the default executor
    (``sv_failure='replan'``, ``bypass_calibration='laplace'``): the seed's R2 release and the
    PMW-calibrated bypass are calibrated on the Laplace tail (Lemma A.2), so vanilla PMW is
    refused too."""
    v.check_choice(owner, 'noise', mech.noise, NOISES)
    if mech.noise == 'laplace':
        if mech.rho_budget is not None:
            v._fail(owner, "rho_budget applies to noise='gaussian' only; the Laplace budget is "
                           "epsilon_budget.")
        return
    if mech.rho_budget is None:
        v._fail(owner, "noise='gaussian' needs rho_budget (the zCDP capacity of every block).")
    v.check_positive(owner, 'rho_budget', mech.rho_budget, allow_inf=True)
    if mech.sv_failure != 'replan':
        v._fail(owner, "noise='gaussian' needs sv_failure='replan' (the R2 release of the seed "
                       "is calibrated on the Laplace tail, Lemma A.2); vanilla PMW is Laplace "
                       "only.")
    if mech.bypass_calibration != 'laplace':
        v._fail(owner, "noise='gaussian' needs bypass_calibration='laplace'.")
