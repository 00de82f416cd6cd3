"""Multi-participation sensitivity: how much one privacy unit can move a counter's noisy
encoding when it contributes at several steps, for the user-level calibration of the
factorization counters (``BLTCounter``) and the capped L2 bound every counter uses.

A unit's change of the input stream (add/remove neighbours, after ``BoundContributions``) is
described by a ``Participation``: it touches at most ``max_groups`` groups of bins (its keys;
a histogram key is a group of bins), in each group at most ``max_steps`` steps, with L1 norm
over the group's bins at most ``step_bound`` per step, and at most ``total_bound`` in L1 over
everything.

The factorization counters add noise to C·x, with C lower-triangular Toeplitz with coefficients
c_0 = 1 ≥ c_1 ≥ c_2 ≥ … > 0 (BLT: c_m = Σ_i w_i θ_i^(m-1)). Their sensitivity is
sup ‖C·U‖_F over the unit's changes U (T steps × bins). Derivation of the bound used here:

1. C ≥ 0 entrywise, so ‖C·u‖ ≤ ‖C·|u|‖ and, for u, u' ≥ 0, ‖Cu‖² + ‖Cu'‖² ≤ ‖C(u + u')‖²: a
   group's bins are no worse than one stream with the group's per-step L1, u_s ∈ [0, a] (a =
   ``step_bound``) on at most S = ``max_steps`` steps.
2. ‖Cu‖² = Σ_{i,j} u_i u_j G_ij, G = CᵀC ≥ 0, and for i ≤ j, d = j - i,
   G_ij = Σ_{m=0}^{T-1-j} c_m c_{m+d} ≤ g_d := Σ_{m=0}^{T-1-d} c_m c_{m+d}, which is
   non-increasing in d when c is. For sorted support p_1 < … < p_S, p_b - p_a ≥ b - a, so
   ‖Cu‖² ≤ a²·U(S), U(S) = S·g_0 + 2·Σ_{d=1}^{S-1} (S - d)·g_d (S capped at T): the pattern of
   S consecutive steps at the start with the untruncated overlaps. Hence per group
   ‖Cu‖ ≤ a·√g_0·r_S with r_S = √(U(S)/g_0) ∈ [√S, S] the *effective participations* (the
   triangle inequality gives S).
3. Also ‖Cu‖ ≤ n·√g_0 for a group whose L1 total is n (triangle inequality over columns). So
   per group ‖Cu‖² ≤ g_0·min(n, a·r_S)², and over groups with Σ n ≤ ``total_bound`` and at most
   ``max_groups`` groups, Σ_k min(n_k, cap)² is largest when as many groups as possible reach
   the cap (convexity): ``capped_l2(total_bound, a·r_S, max_groups)``.

So the main sensitivity term is √g_0 · min(l2, capped_l2(total, a·r_S, groups)), where
√g_0 = ‖c_{0..T-1}‖ is the single-participation column norm. Floats (g_d in closed form) are
inflated by 1e-9 relative, as the column norm is. ``tests/mechanisms/test_participation.py``
checks the bound against the brute-force supremum on small T.

Tree and per-step counters use ``capped_l2`` on the per-key totals (their documented neighbour
relation is the per-bin totals of absolute changes): the safe bound, without a
multi-participation refinement.
"""

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v

__all__ = [
    'Participation',
    'banded_bound',
    'blt_bound',
    'capped_l2',
    'toeplitz_overlaps',
]

_INFLATION = 1 + 1e-9


def capped_l2(total: float, cap: float, groups: Optional[int] = None) -> float:
    """max ‖n‖₂ over n ≥ 0 with Σ n ≤ total, every n_k ≤ cap and at most ``groups`` non-zero
    entries (None: no limit): ⌊total/cap⌋ entries at the cap and the remainder in one more."""
    if cap <= 0 or total <= 0:
        return 0.0
    full = math.floor(total / cap)
    if groups is not None and full >= groups:
        return math.sqrt(groups) * cap
    rest = min(cap, total - full * cap)
    return math.sqrt(full * cap * cap + rest * rest)


def toeplitz_overlaps(theta, w, horizon: Optional[int], count: int,
                      start: int = 0) -> np.ndarray:
    """g_start..g_{start+count-1}, g_d = Σ_{m=0}^{T-1-d} c_m c_{m+d} for the BLT coefficients
    c_0 = 1, c_m = Σ_i w_i θ_i^(m-1) (m ≥ 1), in closed form (T = None: the infinite sums);
    d < T."""
    theta, w = np.asarray(theta, float), np.asarray(w, float)
    d = np.arange(start, start + count, dtype=float)
    q = np.outer(theta, theta)                                     # θ_i θ_j
    ww = np.outer(w, w)
    c_d = np.where(d == 0, 1.0, (w[None, :] * theta[None, :] ** (np.maximum(d, 1) - 1)[:, None])
                   .sum(axis=1))
    if horizon is None:
        geometric = np.broadcast_to(1.0 / (1.0 - q), (count,) + q.shape)
    else:
        exponent = (horizon - 1 - d)[:, None, None]
        geometric = (1.0 - q[None] ** exponent) / (1.0 - q[None])
    # Σ_{m≥1} c_m c_{m+d} = Σ_{i,j} w_i w_j θ_j^d Σ_{m'} (θ_i θ_j)^m'
    cross = (ww[None] * (theta[None, None, :] ** d[:, None, None]) * geometric).sum(axis=(1, 2))
    return c_d + cross


def banded_bound(overlaps: np.ndarray, steps: Optional[int] = None) -> float:
    """U(S) = S·g_0 + 2·Σ_{d=1}^{S-1} (S-d)·g_d for S = ``steps`` (default len(overlaps)),
    g_d = overlaps[d] and zero beyond them (a band)."""
    s = len(overlaps) if steps is None else int(steps)
    g = np.asarray(overlaps, dtype=float)[:s]
    weights = 2.0 * (s - np.arange(len(g), dtype=float))
    weights[0] = s
    return float(np.dot(weights, g))


#: ``blt_bound`` sums the overlaps g_d exactly for d below this, in chunks of ``_CHUNK``.
EXACT_OVERLAPS = 1 << 20
_CHUNK = 1 << 14


def blt_bound(theta, w, horizon: Optional[int], steps: int) -> Tuple[float, float]:
    """(U(S), g_0) for the BLT (θ, w) (non-increasing overlaps), in O(``_CHUNK``) memory for
    any S: the overlaps are summed exactly for d < ``EXACT_OVERLAPS`` (the same U(S) as
    ``banded_bound(toeplitz_overlaps(..., S))`` up to float summation order), and beyond
    every g_d is replaced by the last exact one, its upper bound (g non-increasing): still an
    upper bound of U(S), so the sensitivity stays valid."""
    exact = min(steps, EXACT_OVERLAPS)
    total, g0, last = 0.0, None, 0.0
    for start in range(0, exact, _CHUNK):
        count = min(_CHUNK, exact - start)
        g = toeplitz_overlaps(theta, w, horizon, count, start)
        d = np.arange(start, start + count, dtype=float)
        weights = 2.0 * (steps - d)
        if start == 0:
            weights[0] = steps
            g0 = float(g[0])
        total += float(np.dot(weights, g))
        last = float(g[-1])
    rest = steps - exact           # Σ_{d=exact}^{S-1} 2(S-d) = rest·(rest + 1)
    if rest > 0:
        total += max(last, 0.0) * float(rest) * float(rest + 1)
    return total, g0


@dataclasses.dataclass(frozen=True)
class Participation:
    """One unit's contribution pattern (module docstring).

    Args:
      max_groups: groups of bins (keys) one unit touches.
      max_steps: steps per group one unit touches (S).
      step_bound: L1 over a group's bins of one unit's change at one step (m·B).
      total_bound: L1 of one unit's whole change (min(K·m·S, C)·B).

    Raises:
      InvalidParamsError: on a bad parameter, named.
    """
    max_groups: int
    max_steps: int
    step_bound: float
    total_bound: float

    def __post_init__(self):
        owner = 'Participation'
        v.check_positive_int(owner, 'max_groups', self.max_groups)
        v.check_positive_int(owner, 'max_steps', self.max_steps)
        v.check_positive(owner, 'step_bound', self.step_bound)
        v.check_positive(owner, 'total_bound', self.total_bound)

    def effective_participations(self, theta, w, horizon: Optional[int]) -> float:
        """r_S = √(U(S)/g_0) ≤ S for the BLT (θ, w), inflated for float error; S when the
        coefficients are not non-increasing (c_1 = Σw > 1: the triangle inequality)."""
        steps = self.max_steps if horizon is None else min(self.max_steps, horizon)
        if float(np.sum(w)) > 1.0:
            return float(steps)
        bound, g0 = blt_bound(theta, w, horizon, steps)
        return min(float(steps), math.sqrt(bound / g0 * _INFLATION))

    def l2_factor(self, theta, w, horizon: Optional[int]) -> float:
        """capped_l2(total, step_bound·r_S, groups): the main sensitivity term over √g_0."""
        cap = self.step_bound * self.effective_participations(theta, w, horizon)
        return capped_l2(self.total_bound, cap, self.max_groups)
