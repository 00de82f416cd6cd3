"""DP-FTRL baseline (Kairouz et al. 2021) built on beam_dp's own continual counters.

Each counter step is a mini-batch of m stream records (padding slots have zero gradient). Every
record's gradient at the current model is computed once (its features are clipped, so
‖∇ℓ‖ ≤ L = √2·C for softmax), rounded onto the public grid 2^-k and summed; the counter releases
noisy prefix sums S_s of these integer vectors (``BinaryTreeCounter`` with the known horizon or
``InfiniteTreeCounter`` for an unbounded stream, Honaker's variance-reduced estimator; or the
ρ-zCDP ``BLTCounter``, the library's best counter for zCDP). The model
is the FTRL solution of the linearised, strongly-convex-regularised objective

    w_{s+1} = argmin_w ⟨S_s, w⟩ + ((μ·N_s + 1/η)/2)·‖w‖² = −S_s / (μ·N_s + 1/η),

N_s = nominal records so far (public). Post-processing of the counter's output, so the whole
sequence of models has the counter's guarantee. Neighbours: substitution of one record, the same
relation as the Watson et al. releases: one record changes one step's integer vector by at most
2(√D·L·2^k + D/2) in L1 (pure ε, discrete Laplace) and 2(L·2^k + √D/2) in L2 (ρ-zCDP, discrete
Gaussian). Equal privacy: ε for the Laplace counter; ρ = ε²/2 for the Gaussian one (an ε-DP
mechanism is ε²/2-zCDP, so both sides are then ρ-zCDP; the Gaussian side is not ε-DP).
"""

import math

import numpy as np

from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter

GRID_BITS = 8


def _counter(kind: str, noise: str, eps: float, dim: int, lip: float, horizon: int):
    """kind: 'tree' (known horizon), 'infinite' (unbounded) or 'blt' (BLT, ρ-zCDP only)."""
    scale = 1 << GRID_BITS
    l1 = 2.0 * (math.sqrt(dim) * lip * scale + dim / 2.0)
    l2 = 2.0 * (lip * scale + math.sqrt(dim) / 2.0)
    privacy = dict(epsilon=eps, l1_sensitivity=l1) if noise == 'laplace' else dict(
        rho=eps * eps / 2.0, l1_sensitivity=l1, l2_sensitivity=l2)
    if kind == 'tree':
        return BinaryTreeCounter(horizon=horizon, dimension=dim, **privacy)
    if kind == 'blt':
        return BLTCounter(horizon=horizon, dimension=dim, **privacy)
    return InfiniteTreeCounter(dimension=dim, **privacy)


def run_dpftrl(loss, x_blocks, y_blocks, n_max: int, eps: float, rng, batch: int = 16,
               mu: float = 0.002, inv_eta: float = 2.0, counter: str = 'tree',
               noise: str = 'laplace'):
    """Yields the model after each block. x_blocks: clipped (n_b, d) arrays, ≤ n_max rows."""
    dim = loss.n_params(x_blocks[0].shape[1])
    steps_per_block = -(-n_max // batch)
    horizon = steps_per_block * len(x_blocks)
    private = math.isfinite(eps)
    mech = _counter(counter, noise, eps, dim, loss.lipschitz, horizon) if private else None
    state = mech.init_state() if private else None
    exact = np.zeros(dim)
    w = np.zeros(dim)
    slots = 0
    for b, (xb, yb) in enumerate(zip(x_blocks, y_blocks)):
        for s in range(steps_per_block):
            lo, hi = s * batch, min((s + 1) * batch, n_max)
            xs, ys = xb[lo:hi], yb[lo:hi]          # rows past len(yb) are padding
            grads = loss.per_example_grads(w, xs, ys) if len(ys) else np.zeros((0, dim))
            units = np.rint(grads * (1 << GRID_BITS)).astype(np.int64).sum(axis=0) if len(
                ys) else np.zeros(dim, dtype=np.int64)
            slots += hi - lo
            if private:
                total, state = mech.step(state, units, rng.derive('ftrl', b, s))
            else:
                exact += units
                total = exact
            w = -np.asarray(total, dtype=np.float64) / (1 << GRID_BITS) / (mu * slots + inv_eta)
        yield w.copy()
