"""Losses with honest per-example constants from feature clipping (spec 003 §2.1, trap T3).

Every feature vector is clipped before it reaches a loss: x ← x·min(1, C/‖x‖₂), the bias column
included in the norm (``clip_features``). C is a public parameter fixed before any data is seen,
so the constants below are per-example bounds over the whole parameter space, not averages and
not functions of the data (the paper's Yedida constant is both; it is only used by
``reproduce_paper=True``, which is labelled not DP).

| loss | labels | per-example L = sup‖∇_w ℓ‖₂ | β of the data term |
|---|---|---|---|
| ``BinaryLogistic`` | {0, 1} | C | C²/4 |
| ``SoftmaxCrossEntropy`` (W ∈ R^{K×d}, Frobenius) | {0..K−1} | √2·C (‖(p−e_y)xᵀ‖ ≤ √2‖x‖) | C²/2 |
| ``HuberSVM`` (width h) | {0, 1} | C | C²/(2h) |

``lipschitz_l1(d)`` bounds ‖∇_w ℓ‖₁ for d features (what an L1-calibrated mechanism, e.g.
DP-FTRL on a discrete-Laplace counter, needs): ‖x‖₁ ≤ √d·‖x‖₂ ≤ √d·C, so √d·C for the binary
losses (|φ'| ≤ 1) and 2√d·C for softmax (‖(p − e_y)xᵀ‖₁ = ‖p − e_y‖₁·‖x‖₁, ‖p − e_y‖₁ =
2(1 − p_y) ≤ 2): below the generic √(K·d)·L (Cauchy–Schwarz over all K·d parameters) by √(K/2)
for K ≥ 2 classes; attained as p_y → 0 by a row with equal-magnitude entries.

The regulariser (μ/2)‖w−c‖² of PSGD/PBERM adds μ to β but not to L: neighbours differ only in
the data term, and the centre c is a released model shared by both (spec 003 §2.1). Squared
hinge and ridge are not offered: their gradients are unbounded on an unconstrained domain, so
they have no finite L without a projection radius.

Weights are flat float64 vectors of ``n_params(d)`` entries (softmax: K rows of d, row-major).
"""

import dataclasses
import math

import numpy as np

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError

__all__ = [
    'BinaryLogistic',
    'HuberSVM',
    'Loss',
    'SoftmaxCrossEntropy',
    'clip_features',
]


def clip_features(x, clip_norm: float) -> np.ndarray:
    """Rows scaled by min(1, C/‖row‖₂) (a copy; the bias column, if any, is part of the row)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    norms = np.linalg.norm(x, axis=1)
    factor = np.minimum(1.0, clip_norm / np.maximum(norms, 1e-300))
    return x * factor[:, None]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclasses.dataclass(frozen=True)
class Loss:
    """Common parameters: ``clip_norm`` C (public) and ``num_classes`` K."""
    clip_norm: float = 1.0
    num_classes: int = 2

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive(owner, 'clip_norm', self.clip_norm)
        v.check_positive_int(owner, 'num_classes', self.num_classes)
        if self.num_classes < 2:
            raise InvalidParamsError(f'{owner}: num_classes must be at least 2, got '
                                     f'{self.num_classes}.')

    @property
    def lipschitz(self) -> float:
        raise NotImplementedError

    @property
    def smoothness(self) -> float:
        raise NotImplementedError

    def n_params(self, dim: int) -> int:
        return dim

    def lipschitz_l1(self, dim: int) -> float:
        """A per-example bound on ‖∇_w ℓ‖₁ for ``dim`` features (generic: Cauchy–Schwarz
        √(n_params)·L; the concrete losses override it with a tighter bound)."""
        return math.sqrt(self.n_params(dim)) * self.lipschitz

    def per_example_grads(self, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(n, n_params) per-example gradients of the data term."""
        raise NotImplementedError

    def grad_sum(self, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Σ_i ∇ℓ(w; x_i, y_i) (flat)."""
        return self.per_example_grads(w, x, y).sum(axis=0)

    def losses(self, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def decision(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def predict(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.decision(w, x)

    def accuracy(self, w, x, y) -> float:
        return float(np.mean(self.predict(np.asarray(w), np.asarray(x)) == np.asarray(y)))


class _Binary(Loss):
    """Binary losses of the margin z = s·⟨w, x⟩, s = 2y − 1 ∈ {±1}; ``dphi`` is φ'(z)."""

    def __post_init__(self):
        super().__post_init__()
        if self.num_classes != 2:
            raise InvalidParamsError(f'{type(self).__name__}: num_classes must be 2 for a binary '
                                     f'loss, got {self.num_classes}.')

    @property
    def lipschitz(self) -> float:
        return self.clip_norm          # |φ'| ≤ 1

    def lipschitz_l1(self, dim: int) -> float:
        return math.sqrt(dim) * self.clip_norm          # |φ'|·‖x‖₁ ≤ √d·‖x‖₂

    def phi(self, z):
        raise NotImplementedError

    def dphi(self, z):
        raise NotImplementedError

    def per_example_grads(self, w, x, y):
        s = 2.0 * np.asarray(y, dtype=np.float64) - 1.0
        return (self.dphi(s * (x @ w)) * s)[:, None] * x

    def grad_sum(self, w, x, y):
        s = 2.0 * np.asarray(y, dtype=np.float64) - 1.0
        return (self.dphi(s * (x @ w)) * s) @ x

    def losses(self, w, x, y):
        s = 2.0 * np.asarray(y, dtype=np.float64) - 1.0
        return self.phi(s * (x @ w))

    def decision(self, w, x):
        return (x @ w > 0).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class BinaryLogistic(_Binary):
    """ℓ = ln(1 + e^{−z}); L = C, β = C²/4."""

    @property
    def smoothness(self) -> float:
        return self.clip_norm ** 2 / 4.0

    def phi(self, z):
        return np.logaddexp(0.0, -z)

    def dphi(self, z):
        return -_sigmoid(-z)


@dataclasses.dataclass(frozen=True)
class HuberSVM(_Binary):
    """Huber-smoothed hinge of width h (Chaudhuri et al. 2011); L = C, β = C²/(2h)."""
    huber_width: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        v.check_positive(type(self).__name__, 'huber_width', self.huber_width)

    @property
    def smoothness(self) -> float:
        return self.clip_norm ** 2 / (2.0 * self.huber_width)

    def phi(self, z):
        h = self.huber_width
        return np.where(z > 1 + h, 0.0,
                        np.where(z < 1 - h, 1.0 - z, (1 + h - z) ** 2 / (4 * h)))

    def dphi(self, z):
        h = self.huber_width
        return np.where(z > 1 + h, 0.0, np.where(z < 1 - h, -1.0, -(1 + h - z) / (2 * h)))


@dataclasses.dataclass(frozen=True)
class SoftmaxCrossEntropy(Loss):
    """Multinomial logistic regression, W ∈ R^{K×d}; L = √2·C, β = C²/2 (spec 003 §2.1)."""
    num_classes: int = 10

    @property
    def lipschitz(self) -> float:
        return math.sqrt(2.0) * self.clip_norm

    @property
    def smoothness(self) -> float:
        return self.clip_norm ** 2 / 2.0

    def n_params(self, dim: int) -> int:
        return self.num_classes * dim

    def lipschitz_l1(self, dim: int) -> float:
        return 2.0 * math.sqrt(dim) * self.clip_norm    # ‖p − e_y‖₁·‖x‖₁ ≤ 2·√d·C

    def _residual(self, w, x, y):
        logits = x @ w.reshape(self.num_classes, -1).T
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(y)), np.asarray(y, dtype=np.int64)] -= 1.0
        return p

    def per_example_grads(self, w, x, y):
        r = self._residual(w, x, y)
        return (r[:, :, None] * x[:, None, :]).reshape(len(y), -1)

    def grad_sum(self, w, x, y):
        return (self._residual(w, x, y).T @ x).reshape(-1)

    def losses(self, w, x, y):
        logits = x @ w.reshape(self.num_classes, -1).T
        top = logits.max(axis=1)
        lse = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        return lse - logits[np.arange(len(y)), np.asarray(y, dtype=np.int64)]

    def decision(self, w, x):
        return np.argmax(x @ w.reshape(self.num_classes, -1).T, axis=1)
