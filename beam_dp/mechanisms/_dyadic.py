"""Shared pieces of the dyadic-tree counters: node noise and the variance-reduced combination.

Both counters (finite ``BinaryTreeCounter`` and infinite ``InfiniteTreeCounter``) keep, per tree
level h, the exact partial sum of the open node, the noisy value of the last closed node, and —
for the variance-reduced estimator — the best estimate of the last two closed nodes. A prefix
[1, t] is the disjoint union of the last closed node of every level h whose bit is set in t
(those nodes are always left children), so the prefix estimate is a sum over set bits.

Variance reduction (Honaker 2015, "Efficient use of differentially private binary trees",
Sec. 3, the bottom-up pass): when a node with raw noisy value z (noise variance σ_h²) closes, its
two children already have estimates of variance v_{h-1} each; the inverse-variance combination
    ẑ = (v_h/σ_h²)·z + (v_h/(2v_{h-1}))·(ẑ_left + ẑ_right),   1/v_h = 1/σ_h² + 1/(2v_{h-1})
is unbiased with variance v_h < σ_h². It only post-processes released values, so it costs no
privacy; the top-down pass of Honaker's offline estimator needs future nodes and is not online.
"""

import dataclasses
import functools
from typing import List, Optional

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import exact_int
from beam_dp.noise import RandomSource
from beam_dp.noise import discrete_gaussian
from beam_dp.noise import discrete_laplace
from beam_dp.noise import discrete_laplace_variance
from beam_dp.noise.samplers import as_rational_up
from beam_dp.noise.samplers import check_noise_scale
from beam_dp.noise.wide_gaussian import discrete_gaussian_variance_any

ESTIMATORS = ('textbook', 'variance_reduced')
# Exact totals: see exact_int.py (re-exported here for the counters).
exact_add = exact_int.exact_add
exact_ints = exact_int.exact_ints
exact_sum = exact_int.exact_sum


@dataclasses.dataclass(frozen=True)
class NodeNoise:
    """Discrete noise of one tree node: Laplace with ``scale`` or Gaussian with ``sigma2``."""
    kind: str
    param: float   # Laplace scale b (P ∝ exp(-|y|/b)) or Gaussian σ².

    def sample(self, rng: RandomSource, size: int) -> np.ndarray:
        if self.kind == 'laplace':
            return discrete_laplace(rng, self.param, size)
        return discrete_gaussian(rng, self.param, size)

    def variance(self) -> float:
        """The exact variance of the sampled (rounded-up) distribution."""
        return _variance(self.kind, self.param)


@functools.lru_cache(maxsize=4096)
def _variance(kind: str, param: float) -> float:
    rounded = float(as_rational_up(param))
    if kind == 'laplace':
        return discrete_laplace_variance(rounded)
    # Exact summation below σ² = 100, σ² above (equal in float64): the summation walks ~24σ
    # terms, seconds per call near the samplers' limit σ² = 2**40 (issue 21).
    return discrete_gaussian_variance_any(rounded)


def check_privacy_params(owner: str, epsilon, rho, l1_sensitivity, l2_sensitivity):
    """Validates the (ε | ρ, sensitivity) part shared by every tree counter."""
    if (epsilon is None) == (rho is None):
        raise InvalidParamsError(f'{owner}: give exactly one of epsilon (pure DP, discrete Laplace) '
                                 f'or rho (zCDP, discrete Gaussian), got epsilon={epsilon!r}, '
                                 f'rho={rho!r}.')
    if epsilon is not None:
        v.check_positive(owner, 'epsilon', epsilon)
    else:
        v.check_positive(owner, 'rho', rho)
    v.check_positive(owner, 'l1_sensitivity', l1_sensitivity)
    if l2_sensitivity is not None:
        v.check_positive(owner, 'l2_sensitivity', l2_sensitivity)
        if l2_sensitivity > l1_sensitivity:
            raise InvalidParamsError(f'{owner}: l2_sensitivity must not exceed l1_sensitivity, got '
                                     f'{l2_sensitivity:g} > {l1_sensitivity:g}.')


def check_counter_fields(mech) -> None:
    """Validates a tree counter's (ε | ρ, sensitivities), ``dimension`` and ``estimator``
    fields, naming ``type(mech)``."""
    owner = type(mech).__name__
    check_privacy_params(owner, mech.epsilon, mech.rho, mech.l1_sensitivity, mech.l2_sensitivity)
    v.check_positive_int(owner, 'dimension', mech.dimension)
    v.check_choice(owner, 'estimator', mech.estimator, ESTIMATORS)


def check_node_noise(owner: str, noise: NodeNoise) -> None:
    """Refuses, at construction, a node noise outside the exact samplers' range (2**40)."""
    if noise.kind == 'laplace':
        change = 'raise epsilon or lower l1_sensitivity'
    else:
        change = 'raise rho or lower l2_sensitivity'
    check_noise_scale(owner, noise.param, change + ' (in a transform: raise the budget, or lower '
                      "upper/lower, grid_bits or the privacy unit's bounds K, m, S)", noise.kind)


def node_noise(epsilon: Optional[float], rho: Optional[float], share: float, l1: float,
               l2: Optional[float]) -> NodeNoise:
    """Noise for a set of disjoint nodes that together get ``share`` of the budget.

    Laplace: scale = l1 / (ε·share). Gaussian: σ² = l2² / (2ρ·share).
    """
    if epsilon is not None:
        return NodeNoise('laplace', l1 / (epsilon * share))
    l2 = l1 if l2 is None else l2
    return NodeNoise('gaussian', l2 * l2 / (2 * rho * share))


def cost(epsilon: Optional[float], rho: Optional[float]) -> PrivacyCost:
    return PrivacyCost(epsilon=epsilon) if epsilon is not None else PrivacyCost(rho=rho)


def reduced_variances(node_variances: List[float]) -> List[float]:
    """v_h of the bottom-up combination for raw node variances σ_h², h = 0, 1, ..."""
    out = []
    for h, s2 in enumerate(node_variances):
        out.append(s2 if h == 0 else _combined_variance(s2, out[h - 1]))
    return out


def _combined_variance(s2: float, v_child: float) -> float:
    if s2 <= 0 or v_child <= 0:
        return 0.0 if s2 <= 0 else min(s2, 2.0 * v_child)
    return 1.0 / (1.0 / s2 + 1.0 / (2.0 * v_child))


def combine(raw: np.ndarray, left: np.ndarray, right: np.ndarray, s2: float,
            v_child: float) -> np.ndarray:
    """Honaker's inverse-variance combination of a raw node and its two children's estimates."""
    raw = np.asarray(raw).astype(np.float64)
    if s2 <= 0:
        return raw                             # Noise-free node: nothing to improve.
    if v_child <= 0:
        return (left + right).astype(np.float64)
    v_node = _combined_variance(s2, v_child)
    return (v_node / s2) * raw + (v_node / (2.0 * v_child)) * (left + right)


def readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
