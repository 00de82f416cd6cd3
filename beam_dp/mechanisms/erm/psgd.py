"""Alg 1, PSGD: permutation SGD on a strongly convex regularised ERM, then output perturbation
(Wu et al. 2017 "bolt-on"; spec 003 §2.3–2.4).

Objective over n_nominal slots (the first n_real hold records; the rest are padding or
non-sampled records with a zero data gradient, spec 003 §6 "masked SGD"):

    F(w) = (1/n_nominal) Σ_{real i} ℓ(w; z_i) + (μ/2)‖w − c‖²

Each pass visits every slot exactly once in a fresh uniformly random permutation (exact
Fisher–Yates over ``uniform_below``); the step is η_t = min(1/β_tot, 1/(μt)), β_tot = β + μ,
t the 1-based mini-batch counter. Then the L2 sensitivity of the output under substitution of one
record is Δ₂ ≤ 2L/(μ·n_nominal) for any number of passes and any batch size (the differing slot
moves the two runs apart by ≤ 2Lη/|S| per visit and the contraction ∏(1−μη) telescopes), and
releasing w + ν with ν ~ L2-Laplace(b) is (Δ₂/b)-DP: the per-record cost ``Δ₂/b`` is the only
formula the ledger uses. Normalising by n_nominal (never by the realised number of records) is
what keeps Δ₂ data-independent under padding and subsampling (trap T5).

Trap T2: a step parameter γ > μ (the paper's γ = 10 with λ = 1) makes the steps too small for the
contraction argument and the bound fails; it raises here unless ``reproduce_paper=True``.

``reproduce_paper=True`` reproduces spec 003 §9: γ = 10, batch 256, 500 iterations, the Yedida
constant L = (K−1)/(2mK)·‖X‖_F computed *from the private data*, and the paper's sensitivity
2L/(λn) with λ = μ/2. That mode is NOT differentially private and every model it returns says so.
"""

import dataclasses
import itertools
import math
from typing import Optional

import numpy as np

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm.losses import Loss
from beam_dp.noise import RandomSource
from beam_dp.noise import uniform_below
from beam_dp.noise.l2_laplace import release_l2_laplace

__all__ = [
    'NOT_DP_LABEL',
    'PSGD',
    'ReleasedModel',
    'permutation',
]

#: The label every output of ``reproduce_paper=True`` carries.
NOT_DP_LABEL = 'NOT DP: reproduce_paper (data-dependent Yedida L, gamma > mu)'


def permutation(rng: RandomSource, n: int, k: Optional[int] = None) -> np.ndarray:
    """The first k entries (default all n) of an exactly uniform permutation of range(n):
    Fisher–Yates on exact uniform integers, stopped after k swaps (a uniform k-subset in
    uniform order)."""
    perm = np.arange(n)
    k = n if k is None else min(k, n)
    if n < 2 or k == 0:
        return perm[:k]
    steps = min(k, n - 1)
    draws = uniform_below(rng, np.arange(n, n - steps, -1)).tolist()   # j_i in [i, n)
    for i, offset in enumerate(draws):
        j = i + offset
        perm[i], perm[j] = perm[j], perm[i]
    return perm[:k]


@dataclasses.dataclass(frozen=True, eq=False)
class ReleasedModel:
    """A noised model: the only thing a PBERM centre may be (trap T4).

    release_id: the job id that produced it. weights: read-only noisy weights. noise_scale: b.
    eps_noise: the ε it was calibrated to (Δ₂(n_nominal)/b). center_id: the release it was
    regularised toward (None: from scratch). not_dp: True under ``reproduce_paper``.
    """
    release_id: str
    weights: np.ndarray
    noise_scale: float
    eps_noise: float
    n_nominal: int
    center_id: Optional[str] = None
    not_dp: bool = False


@dataclasses.dataclass(frozen=True)
class PSGD:
    """Permutation SGD + L2-Laplace output perturbation (Alg 1; PBERM when given a centre).

    Args:
      loss: a ``Loss`` (its clip norm fixes L and β).
      mu: strong convexity μ of the regulariser (μ/2)‖w − c‖²; ``paper_lambda`` λ means μ = 2λ.
      passes: whole passes over the n_nominal slots (honest mode).
      batch_size: mini-batch size (any size keeps Δ₂ = 2L/(μn)).
      gamma: the step parameter of η_t = min(1/β, 1/(γt)); default μ; γ > μ raises (trap T2).
      reproduce_paper: the paper's constants (γ=10, batch 256, 500 iterations, Yedida L), NOT DP.
      iterations: mini-batch steps in paper mode (default 500).
    """
    loss: Loss
    mu: float
    passes: int = 10
    batch_size: int = 1
    gamma: Optional[float] = None
    reproduce_paper: bool = False
    iterations: int = 500

    def __post_init__(self):
        owner = 'PSGD'
        if not isinstance(self.loss, Loss):
            raise InvalidParamsError(f'{owner}: loss must be a Loss, got {self.loss!r}.')
        v.check_positive(owner, 'mu', self.mu)
        v.check_positive_int(owner, 'passes', self.passes)
        v.check_positive_int(owner, 'batch_size', self.batch_size)
        v.check_positive_int(owner, 'iterations', self.iterations)
        if self.gamma is not None:
            v.check_positive(owner, 'gamma', self.gamma)
            if self.gamma > self.mu * (1 + 1e-12) and not self.reproduce_paper:
                raise InvalidParamsError(
                    f'{owner}: gamma must be at most mu ({self.mu:g}) for the 2L/(mu n) '
                    f'sensitivity bound, got {self.gamma:g} (spec 003 trap T2); pass '
                    f'reproduce_paper=True for the paper\'s non-DP setting.')

    @classmethod
    def paper(cls, loss: Loss, paper_lambda: float = 1.0) -> 'PSGD':
        """The paper's §9 optimiser: λ=1 (μ=2λ), γ=10, batch 256, 500 iterations. NOT DP."""
        return cls(loss=loss, mu=2.0 * paper_lambda, batch_size=256, gamma=10.0,
                   reproduce_paper=True, iterations=500)

    @property
    def step_gamma(self) -> float:
        return self.gamma if self.gamma is not None else self.mu

    def lipschitz(self, x: np.ndarray) -> float:
        """Honest: the loss's per-example L. Paper mode: Yedida (K−1)/(2mK)·‖X‖_F (NOT DP)."""
        if not self.reproduce_paper:
            return self.loss.lipschitz
        k, m = self.loss.num_classes, max(1, len(x))
        return (k - 1) / (2.0 * m * k) * float(np.linalg.norm(x))

    def sensitivity(self, n_nominal: int, lipschitz: Optional[float] = None) -> float:
        """Δ₂ = 2L/(μn) (honest) or the paper's 2L/(λn) = 4L/(μn)."""
        lip = self.loss.lipschitz if lipschitz is None else lipschitz
        factor = 4.0 if self.reproduce_paper else 2.0
        return factor * lip / (self.mu * n_nominal)

    def _batches(self, rng: RandomSource, n_slots: int):
        """Mini-batches of slot indices: whole permutation passes (paper: `iterations` steps)."""
        steps = 0
        for p in itertools.count():
            perm = permutation(rng.derive('perm', p), n_slots)
            for start in range(0, n_slots, self.batch_size):
                if self.reproduce_paper and steps == self.iterations:
                    return
                steps += 1
                yield perm[start:start + self.batch_size]
            if not self.reproduce_paper and p + 1 == self.passes:
                return

    def train(self, x, y, n_nominal: int, center: Optional[np.ndarray],
              rng: RandomSource) -> np.ndarray:
        """The pre-noise SGD iterate (never released: only ``release`` output leaves)."""
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y)
        if x.ndim != 2 or x.shape[0] != y.shape[0]:
            raise InvalidParamsError(f'PSGD: x must be (n, d) with n = len(y), got {x.shape}.')
        n_real = len(y)
        if n_nominal < max(1, n_real):
            raise InvalidParamsError(f'PSGD: n_nominal ({n_nominal}) must be at least the '
                                     f'number of records ({n_real}).')
        dim = x.shape[1]
        c = np.zeros(self.loss.n_params(dim)) if center is None else np.asarray(center, float)
        w = c.copy()
        mu, beta = self.mu, self.loss.smoothness + self.mu
        gamma = self.step_gamma
        factor = 1.0                                  # pending contraction of dummy batches
        for t, batch in enumerate(self._batches(rng, n_nominal), start=1):
            eta = 1.0 / (gamma * t) if self.reproduce_paper else min(1.0 / beta, 1.0 / (mu * t))
            real = batch[batch < n_real]
            if real.size == 0:
                factor *= 1.0 - eta * mu                 # w ← c + (1 − ημ)(w − c)
                continue
            if factor != 1.0:
                w = c + factor * (w - c)
                factor = 1.0
            g = self.loss.grad_sum(w, x[real], y[real]) / batch.size + mu * (w - c)
            w = w - eta * g
        return c + factor * (w - c)

    def release(self, x, y, n_nominal: int, eps_noise: float, rng: RandomSource,
                release_id: str, center: Optional[ReleasedModel] = None) -> ReleasedModel:
        """Trains and releases w + ν, ν ~ L2-Laplace(Δ₂(n_nominal)/eps_noise); eps_noise = ∞
        gives the non-private reference (scale 0). ``center`` must be a released model."""
        if center is not None and not isinstance(center, ReleasedModel):
            raise InvalidParamsError(
                f'PSGD.release: center must be a ReleasedModel (a noised release), got '
                f'{type(center).__name__} (spec 003 trap T4).')
        if not eps_noise > 0:
            raise InvalidParamsError(f'PSGD.release: eps_noise must be positive, got {eps_noise}.')
        x = np.asarray(x, dtype=np.float64)
        w = self.train(x, y, n_nominal, None if center is None else center.weights,
                       rng.derive('sgd'))
        scale = 0.0 if math.isinf(eps_noise) else self.sensitivity(
            n_nominal, self.lipschitz(x)) / eps_noise
        noisy = release_l2_laplace(rng.derive('noise'), w, scale)
        noisy.setflags(write=False)
        return ReleasedModel(release_id=release_id, weights=noisy, noise_scale=scale,
                             eps_noise=eps_noise, n_nominal=int(n_nominal),
                             center_id=None if center is None else center.release_id,
                             not_dp=self.reproduce_paper)
