"""Optimiser of buffered-linear-Toeplitz (BLT) factorizations of the prefix-sum matrix
(Dvijotham, McMahan, Pillutla, Steinke, Thakurta 2024, "Efficient and near-optimal noise
generation for streaming differential privacy", Sec. 3-5).

A BLT with n buffers is the lower-triangular Toeplitz matrix C with coefficients
    c_0 = 1,   c_m = Σ_i w_i θ_i^(m-1)   (m ≥ 1),   0 < θ_i < 1, w_i > 0,
the impulse response of the linear system s' = diag(θ) s + 1·x, y = x + wᵀs. Its inverse is the
system s' = M s + 1·y, x = y - wᵀs with M = diag(θ) - 1wᵀ (``inverse_coefficients``), so both C x
and C⁻¹ z run in O(n) state. With A the all-ones lower-triangular matrix and B = A C⁻¹ (Toeplitz,
coefficients b_m = Σ_{j≤m} ĉ_j), the mechanism releases B(Cx + z): for single participation the
ℓ2 sensitivity is the largest column norm of C, its first column ‖c_{0..T-1}‖ (the c_m are
positive), and the noise of the release at step t (1-based) has variance σ²·Σ_{m<t} b_m².

Losses (all closed forms through the eigen-decomposition of M; O(n²) per evaluation):
  * ``max``:  ‖c‖²·‖b‖²        (the largest per-step variance, at t = T, over σ² = sens²);
  * ``mean``: ‖c‖²·Σ_m b_m²(T-m)/T.
For an unbounded horizon the sensitivity is the limit ‖c‖²_∞ = 1 + Σ_ij w_i w_j/(1-θ_iθ_j),
an upper bound for every T, so privacy holds at every step.

Everything here is float64 and only chooses parameters; what is released and its privacy are
decided by ``beam_dp.mechanisms.blt`` from the (exact, dyadic) parameters it is given.
"""

import math
from typing import Optional, Sequence, Tuple

import numpy as np

__all__ = [
    'blt_coefficients',
    'inverse_coefficients',
    'inverse_coefficients_fast',
    'loss',
    'optimize',
    'sensitivity_squared',
    'sqrt_factorization_squared_norm',
]


def _geometric_sum(q: np.ndarray, horizon: Optional[int]) -> np.ndarray:
    """Σ_{m<T} q^m (complex q, |q| < 1); T = None means the infinite sum."""
    q = np.asarray(q, dtype=complex)
    one_minus = 1.0 - q
    if horizon is None:
        return 1.0 / one_minus
    return -np.expm1(horizon * np.log(q)) / one_minus


def _weighted_geometric_sum(q: np.ndarray, horizon: int) -> np.ndarray:
    """Σ_{m<T} (T-m) q^m for complex |q| < 1."""
    q = np.asarray(q, dtype=complex)
    g = _geometric_sum(q, horizon)
    # Σ m q^m = q (1 - T q^(T-1) + (T-1) q^T) / (1-q)^2
    q_t = np.exp(horizon * np.log(q))
    m_sum = q * (1.0 - horizon * q_t / q + (horizon - 1) * q_t) / (1.0 - q) ** 2
    return horizon * g - m_sum


def sensitivity_squared(theta, w, horizon: Optional[int]) -> float:
    """‖c_{0..T-1}‖² (T = None: the limit over all T, an upper bound for every T)."""
    theta, w = np.asarray(theta, float), np.asarray(w, float)
    qq = np.outer(theta, theta)
    g = _geometric_sum(qq, None if horizon is None else horizon - 1).real
    return float(1.0 + np.sum(np.outer(w, w) * g))


def _inverse_modes(theta, w):
    """ĉ_m = Σ_i u_i λ_i^(m-1) for m ≥ 1: eigen-decomposition of M = diag(θ) - 1wᵀ."""
    theta, w = np.asarray(theta, float), np.asarray(w, float)
    m = np.diag(theta) - np.outer(np.ones_like(theta), w)
    lam, vecs = np.linalg.eig(m)
    u = -(w @ vecs) * np.linalg.solve(vecs, np.ones_like(theta))
    return lam.astype(complex), u.astype(complex)


def _b_norms(theta, w, horizon: int) -> Tuple[float, float]:
    """(Σ_{m<T} b_m², Σ_{m<T} (T-m) b_m²) for b_m = 1 + Σ_{j=1..m} ĉ_j."""
    lam, u = _inverse_modes(theta, w)
    gamma = u / (1.0 - lam)
    beta = 1.0 + np.sum(gamma)
    # b_m = β - Σ_i γ_i λ_i^m.
    ll = np.outer(lam, lam)
    gg = np.outer(gamma, gamma)
    plain = (horizon * beta * beta - 2 * beta * np.sum(gamma * _geometric_sum(lam, horizon))
             + np.sum(gg * _geometric_sum(ll, horizon)))
    weighted = (beta * beta * horizon * (horizon + 1) / 2
                - 2 * beta * np.sum(gamma * _weighted_geometric_sum(lam, horizon))
                + np.sum(gg * _weighted_geometric_sum(ll, horizon)))
    return float(plain.real), float(weighted.real)


def loss(theta, w, horizon: int, kind: str = 'max', sensitivity_horizon: Optional[int] = -1
         ) -> float:
    """Per-step noise variance over σ²/sens² (see the module docstring).

    ``sensitivity_horizon`` = -1 uses ``horizon``; None uses the limiting sensitivity.
    """
    sens_h = horizon if sensitivity_horizon == -1 else sensitivity_horizon
    sens2 = sensitivity_squared(theta, w, sens_h)
    plain, weighted = _b_norms(theta, w, horizon)
    return sens2 * (plain if kind == 'max' else weighted / horizon)


def blt_coefficients(theta, w, n: int) -> np.ndarray:
    """c_0..c_{n-1} by direct recursion (reference for tests and benchmarks)."""
    theta, w = np.asarray(theta, float), np.asarray(w, float)
    out = np.empty(n)
    out[0] = 1.0
    powers = np.ones_like(theta)
    for m in range(1, n):
        out[m] = float(w @ powers)
        powers = powers * theta
    return out


def inverse_coefficients(theta, w, n: int) -> np.ndarray:
    """ĉ_0..ĉ_{n-1} of C⁻¹ by running the inverse system on a unit impulse (reference)."""
    theta, w = np.asarray(theta, float), np.asarray(w, float)
    s = np.zeros_like(theta)
    out = np.empty(n)
    for m in range(n):
        y = 1.0 if m == 0 else 0.0
        x = y - float(w @ s)
        out[m] = x
        s = theta * s + x
    return out


def inverse_coefficients_fast(theta, w, n: int) -> np.ndarray:
    """ĉ_0..ĉ_{n-1} of C⁻¹ in closed form (ĉ_m = Σ_i u_i λ_i^(m-1), eigenmodes of M)."""
    lam, u = _inverse_modes(theta, w)
    m = np.arange(n - 1, dtype=float)
    modes = np.exp(np.outer(m, np.log(lam)))
    return np.concatenate([[1.0], (modes @ u).real])


def sqrt_factorization_squared_norm(horizon: int) -> float:
    """Σ_{m<T} r_m², r_m = binom(2m, m)/4^m: the square-root factorization's ‖c‖² = ‖b‖².

    Its largest per-step variance is (Σ r_m²)²·σ²/sens² (Henzinger, Upadhyay, Upadhyay 2023;
    Fichtenberger, Henzinger, Upadhyay 2023)."""
    m = np.arange(1, horizon, dtype=float)
    r = np.concatenate([[1.0], np.cumprod((2 * m - 1) / (2 * m))])
    return float(np.sum(r * r))


def sqrt_factorization_variances(horizon: int) -> np.ndarray:
    """Per-step noise variance (t = 1..T) of the square-root factorization over σ²/sens²."""
    m = np.arange(1, horizon, dtype=float)
    r = np.concatenate([[1.0], np.cumprod((2 * m - 1) / (2 * m))])
    return float(np.sum(r * r)) * np.cumsum(r * r)


def _unpack(x: np.ndarray):
    n = x.size // 2
    gap = 1.0 / (1.0 + np.exp(-x[:n]))            # 1 - θ in (0, 1): θ stays in (0, 1).
    return 1.0 - gap, np.exp(x[n:])


def optimize(horizon: Optional[int], buffers: int = 4, kind: str = 'max',
             design_horizons: Sequence[int] = (), restarts: int = 8, seed: int = 0
             ) -> Tuple[np.ndarray, np.ndarray, float]:
    """BLT parameters (θ, w) minimising the loss; returns (θ, w, loss).

    horizon: T, or None for an unbounded horizon: then the sensitivity is the limiting one and
      the objective is the largest ratio, over ``design_horizons``, of the loss to the
      square-root factorization's loss at that horizon.
    """
    from scipy import optimize as sopt   # Only needed to (re)build the tables.
    rng = np.random.default_rng(seed)
    if horizon is None:
        targets = [(h, sqrt_factorization_squared_norm(h) ** 2) for h in design_horizons]

        def objective(x):
            theta, w = _unpack(x)
            return max(math.log(loss(theta, w, h, kind, None) / ref) for h, ref in targets)
        top = max(design_horizons)
    else:
        def objective(x):
            theta, w = _unpack(x)
            return math.log(loss(theta, w, horizon, kind))
        top = horizon
    best = None
    for r in range(restarts):
        gaps = np.geomspace(0.6, 1.0 / (4 * top), buffers) * np.exp(rng.normal(0, 0.3, buffers))
        gaps = np.clip(gaps, 1e-12, 0.95)
        weights = 0.3 * np.sqrt(gaps) * np.exp(rng.normal(0, 0.3, buffers))
        x0 = np.concatenate([np.log(gaps / (1.0 - gaps)), np.log(weights)])

        def safe(x):
            try:
                value = objective(x)
            except (FloatingPointError, np.linalg.LinAlgError, ValueError, OverflowError):
                return 1e6
            return value if math.isfinite(value) else 1e6
        res = sopt.minimize(safe, x0, method='Nelder-Mead',
                            options={'maxiter': 4000, 'xatol': 1e-7, 'fatol': 1e-10})
        res = sopt.minimize(safe, res.x, method='L-BFGS-B')
        if best is None or res.fun < best.fun:
            best = res
        del r
    theta, w = _unpack(best.x)
    order = np.argsort(-theta)
    return theta[order], w[order], float(math.exp(best.fun))


def build_tables(buffers: int = 4, exponents=range(4, 21), restarts: int = 6) -> str:
    """Source text of ``blt_tables.py``: optimised (θ, w) per horizon 2^e, finite and unbounded.

    Run ``python -m beam_dp.mechanisms.blt_optimize > beam_dp/mechanisms/blt_tables.py``.
    """
    import warnings
    warnings.simplefilter('ignore', RuntimeWarning)
    lines = ['"""Precomputed BLT parameters (generated by ``python -m beam_dp.mechanisms.blt_optimize``;',
             'do not edit). Keys: log2 of the horizon. FINITE[e]: optimised for T = 2^e with the',
             'sensitivity at T. UNBOUNDED[e]: calibrated to the limiting sensitivity (private for every',
             f't), optimised for the design horizon 2^e. {buffers} buffers, loss "max"."""', '',
             'FINITE = {']
    for e in exponents:
        theta, w, _ = optimize(2 ** e, buffers, 'max', restarts=restarts)
        lines.append(f'    {e}: ({[float(x) for x in theta]!r},\n         {[float(x) for x in w]!r}),')
    lines += ['}', '', 'UNBOUNDED = {']
    for e in exponents:
        theta, w, _ = optimize(None, buffers, 'max', design_horizons=[2 ** e], restarts=restarts)
        lines.append(f'    {e}: ({[float(x) for x in theta]!r},\n         {[float(x) for x in w]!r}),')
    lines.append('}')
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    print(build_tables(), end='')
