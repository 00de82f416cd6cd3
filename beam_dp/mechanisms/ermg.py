"""ERMG (Cummings, Krehbiel, Lai, Tantipongpipat, "Differential Privacy for Growing Databases",
NeurIPS 2018, Theorem 12, Table 1): BBImprover rerunning a pure ε-DP empirical-risk minimiser at
every size t, with ε_t = √c ε/(3√ln(1/δ) t^{1/2+c}) (spec 000 §3.6).

The paper plugs in BST14's ε-DP ERM; the spec allows a simpler pure-ε box that declares its own
constants [inferred]. ``ERMBox`` is output perturbation (Chaudhuri, Monteleoni, Sarwate 2011) on
L2-regularised logistic regression over a PUBLIC table of N labelled points (the growing
database's finite universe: a record is the index of its (features, label) point):

    θ̂ = argmin_θ J(θ) = (1/t) Σ_i c_i ℓ(θ; x_i, y_i) + (Λ/2)‖θ‖²,   ℓ = log(1 + e^{−(2y−1)θ·x})

with ‖x_i‖₂ ≤ 1 (so ℓ is 1-Lipschitz, G = 1). Swapping one record moves θ̂ by at most 2G/(tΛ)
(CMS11, Cor. 8), so θ̂ + ν with ν ~ L2-Laplace(b), density ∝ exp(−‖ν‖/b), b = 2G/(tΛε), is
ε-DP (``beam_dp.noise.l2_laplace``; projected onto the ball of radius G/Λ that holds θ̂:
post-processing). θ̂ is found by damped Newton to a gradient norm ≤ 1e-12.

Declared constants [computed]: J is (1/4 + Λ)-smooth and ∇J(θ̂) = 0, so
J(θ_priv) − J(θ̂) ≤ (1/4 + Λ)/2·‖ν‖²; ‖ν‖ ~ Gamma(d, b) exceeds 2(d+1) b ln(1/β) with
probability ≤ β (β ≤ 1/e; Chernoff at 1/2). Hence a (p = 2, p' = 2, p'' = 0,
g = (1/4 + Λ)/2 · (4(d+1)G/Λ)²)-black box for the regularised empirical risk (Definition 5),
the strongly convex row of Table 1 (exponent 2 in 1/(εt)).
"""

import dataclasses
import math
from typing import Any, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.noise import RandomSource
from beam_dp.noise.l2_laplace import release_l2_laplace
from beam_dp.queries import LinearQuery

__all__ = [
    'ERMBox',
    'ERMModel',
    'ermg',
    'regularised_risk',
]

#: Newton stops at this gradient norm (the sensitivity bound holds for the exact minimiser).
GRADIENT_TOLERANCE = 1e-12


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _weights(counts, t):
    return np.asarray(counts, dtype=np.float64) / float(t)


def regularised_risk(theta, points, labels, counts, t, reg) -> float:
    """J(θ) = (1/t) Σ c_i log(1 + e^{−s_i θ·x_i}) + (Λ/2)‖θ‖², s_i = 2y_i − 1."""
    margins = (2 * labels - 1) * (points @ theta)
    return float(_weights(counts, t) @ np.logaddexp(0.0, -margins)
                 + 0.5 * reg * theta @ theta)


def _minimise(points, labels, w, reg) -> np.ndarray:
    d = points.shape[1]
    theta = np.zeros(d)
    for _ in range(200):
        p = _sigmoid(points @ theta)
        grad = points.T @ (w * (p - labels)) + reg * theta
        if np.linalg.norm(grad) <= GRADIENT_TOLERANCE:
            break
        hess = (points.T * (w * p * (1 - p))) @ points + reg * np.eye(d)
        step = np.linalg.solve(hess, grad)
        # Damped Newton on a strongly convex objective: halve until J decreases.
        value = _risk_w(theta, points, labels, w, reg)
        scale = 1.0
        while scale > 1e-8 and _risk_w(theta - scale * step, points, labels, w, reg) > value:
            scale *= 0.5
        theta = theta - scale * step
    return theta


def _risk_w(theta, points, labels, w, reg):
    margins = (2 * labels - 1) * (points @ theta)
    return float(w @ np.logaddexp(0.0, -margins) + 0.5 * reg * theta @ theta)


@dataclasses.dataclass(frozen=True)
class ERMModel:
    """An ERMG release: the private parameter vector θ (public) and the size t it was fit on."""
    theta: Tuple[float, ...]
    t: int

    def predictions(self, points: np.ndarray) -> np.ndarray:
        """P_θ(y = 1 | x_i) for every point of the table."""
        return _sigmoid(np.asarray(points) @ np.asarray(self.theta))


@dataclasses.dataclass(frozen=True)
class ERMBox:
    """Output-perturbation ERM (L2-regularised logistic regression) over a public point table,
    a (2, 2, 0, g)-black box (``StaticMechanism``; module docstring).

    Privacy unit and relation: one record (the index of a table point), swap-one (t public).

    Sensitivity and guarantee: ‖θ̂(x) − θ̂(x')‖ ≤ 2/(tΛ); θ̂ + L2-Laplace(2/(tΛε)) is ε-DP
    (idealised continuous law, snapped to a grid: ``beam_dp.noise.l2_laplace``).

    Not guaranteed: accuracy, which is J(θ) − min J ≤ g (ln(1/β)/(εt))² w.p. 1 − β.

    Answers: a ``LinearQuery`` f gets ⟨f, P_θ(y = 1 | x_i)⟩ (a point query: the model's
    probability at that point; post-processing). ``model`` of a run is the released θ.

    Cite: Chaudhuri, Monteleoni, Sarwate 2011; Cummings et al. 2018, Theorem 12.

    Args:
      points: N×d features, each row of L2 norm ≤ 1. labels: N labels in {0, 1}.
      reg: Λ > 0.
    """
    points: Any
    labels: Any
    reg: float
    name: str = 'erm_output_perturbation'

    def __post_init__(self):
        owner = 'ERMBox'
        try:
            pts = np.array(self.points, dtype=np.float64)
            lab = np.array(self.labels, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidParamsError(f'{owner}: points must be an N×d array of numbers and '
                                     f'labels N numbers in {{0, 1}}.') from None
        if pts.ndim != 2 or pts.shape[0] < 1 or pts.shape[1] < 1 or not np.all(np.isfinite(pts)):
            raise InvalidParamsError(f'{owner}: points must be a finite N×d array, got shape '
                                     f'{pts.shape}.')
        if lab.shape != (pts.shape[0],) or not np.all((lab == 0) | (lab == 1)):
            raise InvalidParamsError(f'{owner}: labels must be N = {pts.shape[0]} values in '
                                     f'{{0, 1}}.')
        if np.any(np.linalg.norm(pts, axis=1) > 1 + 1e-12):
            raise InvalidParamsError(f'{owner}: every point must have L2 norm ≤ 1 (the loss is '
                                     f'then 1-Lipschitz); scale them, e.g. '
                                     f'beam_dp.mechanisms.erm.losses.clip_features(points, 1.0).')
        v.check_positive(owner, 'reg', self.reg)
        pts.setflags(write=False)
        lab.setflags(write=False)
        object.__setattr__(self, 'points', pts)
        object.__setattr__(self, 'labels', lab)

    def __hash__(self):
        return hash((self.points.tobytes(), self.labels.tobytes(), self.reg))

    def __eq__(self, other):
        return (isinstance(other, ERMBox) and self.reg == other.reg
                and np.array_equal(self.points, other.points)
                and np.array_equal(self.labels, other.labels))

    @property
    def domain_size(self) -> int:
        return self.points.shape[0]

    @property
    def dim(self) -> int:
        return self.points.shape[1]

    @property
    def p(self) -> float:
        return 2.0

    @property
    def g(self) -> float:
        return (0.25 + self.reg) / 2 * (4 * (self.dim + 1) / self.reg) ** 2

    def sensitivity(self, t: int) -> float:
        """2G/(tΛ), G = 1."""
        return 2.0 / (t * self.reg)

    def noise_scale(self, epsilon: float, t: int) -> float:
        return self.sensitivity(t) / epsilon

    def cost(self, epsilon: float) -> PrivacyCost:
        return PrivacyCost(epsilon=epsilon, relation=SWAP_ONE)

    def minimiser(self, counts, t: int) -> np.ndarray:
        """θ̂ (not private)."""
        return _minimise(self.points, self.labels, _weights(counts, t), self.reg)

    def run(self, counts, t, epsilon, alpha, ln_inv_beta, rng: RandomSource) -> ERMModel:
        del alpha, ln_inv_beta
        theta = release_l2_laplace(rng, self.minimiser(counts, t), self.noise_scale(epsilon, t))
        radius = 1.0 / self.reg                              # ‖θ̂‖ ≤ G/Λ
        norm = float(np.linalg.norm(theta))
        if norm > radius:
            theta = theta * (radius / norm)
        return ERMModel(tuple(float(x) for x in theta), int(t))

    def answer(self, epoch: ERMModel, query: LinearQuery, rng) -> Tuple[Any, Any]:
        del rng
        return query.evaluate(epoch.predictions(self.points)), epoch


def ermg(*, points: Sequence, labels: Sequence, reg: float, epsilon: float, delta: float,
         beta: float, n: int, c: float = 0.1) -> BBImprover:
    """ERMG (Theorem 12): a lazy ``BBImprover`` running ``ERMBox`` (p = 2, p' = 2, p'' = 0).

    Privacy unit and relation: one record, swap-one; the size t is PUBLIC.

    Sensitivity and guarantee: (ε, δ)-DP, ε ∈ (0, 1), δ ∈ (0, 1/e] (Σ ε_t² ≤ ε²/(9 ln(1/δ)),
    CDP composition).

    Not guaranteed: accuracy: α_t = g(1/(ε_t t))² ln²(2t²/β) per run (``bbimprover_alpha``),
    vacuous until t is very large (spec P14).

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    box = ERMBox(points, labels, reg)
    return BBImprover(mechanism=box, epsilon=epsilon, delta=delta, beta=beta, n=n,
                      domain_size=box.domain_size, c=c, p1=2.0, p2=0.0, lazy=True)
