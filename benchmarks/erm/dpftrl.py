"""DP-FTRL baseline (Kairouz et al. 2021) built on beam_dp's own continual counters.

The one-step-per-block, pure-ε, loss-L₁ configuration is the library's ``DPFTRL``
(``beam_dp.mechanisms.erm.ftrl``, ``ContinualERM(algorithm='dp_ftrl')``); see ``run_dpftrl``.

Each counter step is a mini-batch of m stream records (padding slots have zero gradient); m = n_max
(``batch=None``) makes one step per block, so the counter's horizon is the number of releases.
Every record's gradient at the current model is computed once (its features are clipped, so
‖∇ℓ‖₂ ≤ L = √2·C and ‖∇ℓ‖₁ ≤ L₁ = ``loss.lipschitz_l1(d)`` = 2√d·C for softmax), rounded onto
the public grid 2^-k and summed; the counter releases noisy prefix sums S_s of these integer
vectors. Counters: ``BinaryTreeCounter`` with the known horizon or ``InfiniteTreeCounter`` for an
unbounded stream (Honaker's variance-reduced estimator), ``BalancedTreeCounter`` (the
negative-digit k-ary tree, known horizon), 'auto' = ``beam_dp.analysis.select_counter`` (the
library's own choice of the lowest-RMSE counter for the horizon and budget: per-step noise
summed for T ≤ 34, the balanced tree beyond), or the ρ-zCDP ``BLTCounter``. The model is the FTRL
solution of the linearised, strongly-convex-regularised objective

    w_{s+1} = argmin_w ⟨S_s, w⟩ + ((μ·N_s + 1/η)/2)·‖w‖² = −S_s / (μ·N_s + 1/η),

N_s = nominal records so far (public). Post-processing of the counter's output, so the whole
sequence of models has the counter's guarantee. Neighbours: substitution of one record, the same
relation as the Watson et al. releases: one record changes one step's integer vector by at most
2(L₁·2^k + D/2) in L1 (pure ε, discrete Laplace; ``l1_bound='cauchy_schwarz'`` uses the looser
√D·L for L₁, the earlier benchmark's constant) and 2(L·2^k + √D/2) in L2 (ρ-zCDP, discrete
Gaussian): each coordinate's rounding moves by at most ½ per record. Equal privacy: ε for the
Laplace counters; ρ = ε²/2 for the Gaussian ones (an ε-DP mechanism is ε²/2-zCDP, so both sides
are then ρ-zCDP; the Gaussian side is not ε-DP).
"""

import math

import numpy as np

from beam_dp.accounting import PrivacyBudget
from beam_dp.analysis import select_counter
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.erm import ftrl
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter

GRID_BITS = 8


def _counter(kind: str, noise: str, eps: float, dim: int, lip: float, lip_l1: float,
             horizon: int):
    """kind: 'tree' (known horizon), 'balanced' (negative-digit k-ary tree, known horizon),
    'auto' (``select_counter``), 'infinite' (unbounded) or 'blt' (BLT, ρ-zCDP only)."""
    scale = 1 << GRID_BITS
    l1 = 2.0 * (lip_l1 * scale + dim / 2.0)
    l2 = 2.0 * (lip * scale + math.sqrt(dim) / 2.0)
    privacy = dict(epsilon=eps, l1_sensitivity=l1) if noise == 'laplace' else dict(
        rho=eps * eps / 2.0, l1_sensitivity=l1, l2_sensitivity=l2)
    if kind == 'auto':
        budget = PrivacyBudget(epsilon=eps) if noise == 'laplace' else PrivacyBudget(
            rho=eps * eps / 2.0)
        return select_counter(budget, horizon, dim, l1, None if noise == 'laplace' else l2)
    if kind == 'balanced':
        return BalancedTreeCounter(horizon=horizon, dimension=dim, **privacy)
    if kind == 'tree':
        return BinaryTreeCounter(horizon=horizon, dimension=dim, **privacy)
    if kind == 'blt':
        return BLTCounter(horizon=horizon, dimension=dim, **privacy)
    return InfiniteTreeCounter(dimension=dim, **privacy)


def run_dpftrl(loss, x_blocks, y_blocks, n_max: int, eps: float, rng, batch=16,
               mu: float = 0.002, inv_eta: float = 2.0, counter: str = 'tree',
               noise: str = 'laplace', l1_bound: str = 'loss'):
    """Yields the model after each block. x_blocks: clipped (n_b, d) arrays, ≤ n_max rows.
    batch: records per counter step (None: n_max, one step per block). l1_bound: 'loss'
    (``loss.lipschitz_l1``) or 'cauchy_schwarz' (√D·L).

    One step per block, pure ε, the loss's L₁ (the README's ``ftrl_laplace_auto`` and
    ``ftrl_laplace_infinite (L₁, 1 step/block)`` rows): the library's
    ``beam_dp.mechanisms.erm.DPFTRL`` (what ``ContinualERM(algorithm='dp_ftrl')`` runs), fed
    this benchmark's own noise addresses ('ftrl', b, 0). The other rows (mini-batches, zCDP
    counters, the looser L₁, ε = ∞) run the same per-step arithmetic here, with the library's
    ``grid_gradient_sum`` / ``ftrl_weights``."""
    features = x_blocks[0].shape[1]
    dim = loss.n_params(features)
    private = math.isfinite(eps)
    if batch is None and noise == 'laplace' and l1_bound == 'loss' and private:
        yield from _run_library(loss, x_blocks, y_blocks, n_max, eps, rng, mu, inv_eta, counter)
        return
    batch = n_max if batch is None else batch
    steps_per_block = -(-n_max // batch)
    horizon = steps_per_block * len(x_blocks)
    lip_l1 = (loss.lipschitz_l1(features) if l1_bound == 'loss'
              else math.sqrt(dim) * loss.lipschitz)
    mech = _counter(counter, noise, eps, dim, loss.lipschitz, lip_l1, horizon) if private else None
    state = mech.init_state() if private else None
    exact = np.zeros(dim)
    w = np.zeros(dim)
    slots = 0
    for b, (xb, yb) in enumerate(zip(x_blocks, y_blocks)):
        for s in range(steps_per_block):
            lo, hi = s * batch, min((s + 1) * batch, n_max)
            units = ftrl.grid_gradient_sum(loss, w, xb[lo:hi], yb[lo:hi], GRID_BITS)
            slots += hi - lo                       # rows past len(yb) are padding
            if private:
                total, state = mech.step(state, units, rng.derive('ftrl', b, s))
            else:
                exact += units
                total = exact
            w = ftrl.ftrl_weights(total, GRID_BITS, mu, slots, inv_eta)
        yield w.copy()


def _run_library(loss, x_blocks, y_blocks, n_max, eps, rng, mu, inv_eta, counter):
    features = x_blocks[0].shape[1]
    explicit = None if counter == 'auto' else _counter(
        counter, 'laplace', eps, loss.n_params(features), loss.lipschitz,
        loss.lipschitz_l1(features), len(x_blocks))
    mech = ftrl.DPFTRL(loss, n_max, features, eps, horizon=len(x_blocks), mu=mu,
                       learning_rate=1.0 / inv_eta, grid_bits=GRID_BITS, counter=explicit)
    state = mech.init_state()
    for b, (xb, yb) in enumerate(zip(x_blocks, y_blocks)):
        event, state = mech.release_block(state, xb, yb, rng.derive('ftrl', b, 0))
        yield np.array(event.model.weights)
