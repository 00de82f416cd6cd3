"""The k-ary tree counter with negative digits ("subtraction") for a known horizon: Andersson,
Pagh, Steiner, Torkamani, "Count on Your Elders: Laplace vs Gaussian Noise" (arXiv 2408.07021,
first titled "Improved counting under continual observation with pure differential privacy").

Privacy unit and neighbours: as ``KaryTreeCounter`` — any change of the input stream whose L1
norm (over all steps and bins) is at most ``l1_sensitivity`` (and, for the Gaussian variant,
whose per-bin totals have L2 norm at most ``l2_sensitivity``); add/remove neighbours.

Nodes: for odd k, level h ∈ [0, L) holds the aligned intervals n(h, j) = (j·k^h, (j+1)·k^h]
of steps, j ≥ 0 (the last ones may extend past T; steps after T never exist). L is the least
number of balanced base-k digits that writes every t ≤ T: (k^L − 1)/2 ≥ T.

Prefix identity: write t = Σ_h d_h k^h with digits d_h ∈ {−(k−1)/2 … (k−1)/2} (unique), and
p_h = Σ_{j ≥ h} d_j k^j (t rounded to the nearest multiple of k^h; p_L = 0, p_0 = t). Then
1_[1,t] = Σ_h sgn(d_h)·1_(p_{h+1}, p_h] (oriented), and (p_{h+1}, p_h] is the union of |d_h|
level-h nodes: j ∈ [p_{h+1}/k^h, p_h/k^h) added when d_h > 0, j ∈ [p_h/k^h, p_{h+1}/k^h)
subtracted when d_h < 0 (those lie after t). So, with B the node-sum matrix and L_t the signed
selection of ``segments(t)``, L_t·B = 1_[1,t] on every stream: |d_h| ≤ (k−1)/2 nodes per level,
mean |d_h| ≈ (k² − 1)/(4k) instead of the (k − 1)/2 of non-negative digits.

Privacy (pure ε; ρ alike): each step lies in exactly one node per level, so for neighbours x, x'
Σ_j |n(h, j)·(x − x')| ≤ ‖x − x'‖_1 ≤ l1 at every level: the node sums of level h with i.i.d.
discrete Laplace of scale l1/ε_h are ε_h-DP, all levels Σ_h ε_h = ε (discrete Gaussian
σ_h² = l2²/(2ρ_h): ρ_h-zCDP, Σ ρ_h = ρ). The split ε_h = ε·w_h is public: 'mean_variance'
(default) minimises the mean release variance, w_h ∝ c_h^(1/3) for Laplace (∝ c_h^(1/2) for
Gaussian), c_h the mean |d_h| over t = 1..T; 'uniform' is w_h = 1/L. The release sequence is
y_t = L_t·(B x + η) — post-processing of that node mechanism — for every stream fixed in advance.

Online, exactly: y_t = (exact prefix sum) + Σ_{(h,j) ∈ segments(t)} ±η_(h,j), which equals
L_t·(Bx + η) because L_t·B = 1_[1,t]; it reads only steps ≤ t, while the noise of a subtracted
(future) node is drawn when the node is first used. Every node is used by one contiguous run of
releases with one sign (tested): an added run only grows (the state keeps its noise sum), a
subtracted run only loses nodes from its left (the state keeps its ≤ (k − 1)/2 node noises);
each η_(h,j) is drawn once through ``rng`` and enters every release that uses it. Integer
releases. Adaptively chosen streams too: Y_t = N_t + S_t(x_{≤t}) with the noise process
N = L·η independent of the data, so P[Y = y] = P[N = y − S(y)] (S_t is fixed by y_{<t}), and
P[N = n] = Σ_{Lη = n} P[η] ≤ e^ε·P[N = n − L·B·δ] term by term for any change δ of the stream
with Σ_h ‖B_h δ‖_1 / b_h ≤ ε: the pointwise bound holds whatever δ the history selects.

Closed form: Var[y_t] = Σ_h |d_h(t)|·Var(η_h) (independent nodes). ``balanced_best_k`` picks
the odd k with the lowest mean variance for a horizon (one level, k ≥ 2T + 1, is per-step
noise).
"""

import dataclasses
import functools
import math
from typing import List, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms._counter_params import CounterPrivacy
from beam_dp.noise import RandomSource

__all__ = [
    'BalancedTreeCounter',
    'BalancedTreeState',
    'balanced_best_k',
]

_MAX_K = 129
SPLITS = ('mean_variance', 'uniform')


@dataclasses.dataclass(frozen=True)
class BalancedTreeState:
    """Immutable state over d bins: t steps consumed, the exact ``prefix`` sum per bin, per
    level h the current run of nodes ``runs[h] = (first node j, count, sign)``, and ``noise``,
    level after level: one row (the run's noise sum) for an added run, which only grows; one
    row per node, in node order, for a subtracted run, which only loses nodes from its left;
    none for an empty level. Arrays are read-only."""
    t: int
    prefix: np.ndarray
    runs: np.ndarray
    noise: np.ndarray

    def nbytes(self) -> int:
        return self.prefix.nbytes + self.runs.nbytes + self.noise.nbytes + 8

    def level_rows(self) -> List[np.ndarray]:
        """The noise rows of each level (views)."""
        out, at = [], 0
        for _, count, sign in self.runs.tolist():
            rows = 1 if sign > 0 else (count if sign < 0 else 0)
            out.append(self.noise[at:at + rows])
            at += rows
        return out


def levels_for(horizon: int, k: int) -> int:
    """L: the least number of balanced base-k digits writing every t ≤ T."""
    levels = 1
    while (k ** levels - 1) // 2 < horizon:
        levels += 1
    return levels


def balanced_digits(t: int, k: int, levels: int) -> List[int]:
    """d_h(t), h = 0 .. levels-1, each in [-(k-1)/2, (k-1)/2]."""
    half, out = (k - 1) // 2, []
    for _ in range(levels):
        digit = (t + half) % k - half
        out.append(digit)
        t = (t - digit) // k
    if t:
        raise ValueError(f'{t} does not fit {levels} balanced base-{k} digits')
    return out


def segments(t: int, k: int, levels: int) -> List[Tuple[int, int, int]]:
    """Per level h: (first node index j, number of nodes, sign) of t's prefix identity."""
    out, upper = [], 0                                   # upper = p_{h+1}
    digits = balanced_digits(t, k, levels)
    for h in reversed(range(levels)):
        span, d = k ** h, digits[h]
        lower = upper + d * span                         # p_h
        if d > 0:
            out.append((upper // span, d, 1))
        elif d < 0:
            out.append((lower // span, -d, -1))
        else:
            out.append((0, 0, 0))
        upper = lower
    return out[::-1]


def _abs_digit_sum(lo: int, hi: int, span: int, k: int) -> int:
    """Σ_{u=lo}^{hi} |⌊u/span⌋ mod k − (k−1)/2|, in O(k)."""
    def upto(n):                                         # u = 0 .. n-1
        full, rest = divmod(n, span * k)
        weights = [abs(a - (k - 1) // 2) for a in range(k)]
        blocks, tail = divmod(rest, span)
        return (full * span * sum(weights) + span * sum(weights[:blocks])
                + (tail * weights[blocks] if blocks < k else 0))
    return upto(hi + 1) - upto(lo)


@functools.lru_cache(maxsize=1024)
def mean_abs_digits(horizon: int, k: int) -> Tuple[float, ...]:
    """c_h: the mean |d_h(t)| over t = 1..T (balanced digits of t are the ordinary digits of
    t + (k^L − 1)/2, each minus (k − 1)/2)."""
    levels = levels_for(horizon, k)
    offset = (k ** levels - 1) // 2
    return tuple(_abs_digit_sum(offset + 1, offset + horizon, k ** h, k) / horizon
                 for h in range(levels))


@dataclasses.dataclass(frozen=True)
class BalancedTreeCounter(CounterPrivacy):
    """Continual prefix sums over a known horizon with the negative-digit k-ary tree.

    Args:
      horizon: T, the number of steps; public.
      epsilon: total ε (discrete Laplace); or (keyword-only) rho: total ρ (discrete Gaussian).
      k: odd branching factor, 3 ≤ k ≤ 129 (default: ``balanced_best_k``).
      split: 'mean_variance' (default) or 'uniform': how the budget is split over the levels.
      l1_sensitivity, l2_sensitivity, dimension: as ``KaryTreeCounter``.
    A bad parameter raises InvalidParamsError naming it.
    """
    horizon: int
    k: Optional[int] = None
    split: str = 'mean_variance'

    def __post_init__(self):
        self.check_horizon_counter('split', SPLITS)
        if self.k is None:
            object.__setattr__(self, 'k', balanced_best_k(
                self.horizon, self.rho is not None, self.split))
        owner = type(self).__name__
        v.check_positive_int(owner, 'k', self.k)
        if not 3 <= self.k <= _MAX_K or self.k % 2 == 0:
            raise InvalidParamsError(f'{owner}: k must be odd and in [3, {_MAX_K}], got '
                                     f'{self.k}.')
        self.check_noise_scales()

    def noises(self) -> Tuple[_dyadic.NodeNoise, ...]:
        return self.level_noise

    @property
    def levels(self) -> int:
        return levels_for(self.horizon, self.k)

    @functools.cached_property
    def level_weights(self) -> Tuple[float, ...]:
        """w_h: level h spends w_h of the budget (Σ w_h = 1)."""
        if self.split == 'uniform':
            return (1.0 / self.levels,) * self.levels
        power = 1 / 2 if self.rho is not None else 1 / 3
        raw = [c ** power for c in mean_abs_digits(self.horizon, self.k)]
        return tuple(r / sum(raw) for r in raw)

    @functools.cached_property
    def level_noise(self) -> Tuple[_dyadic.NodeNoise, ...]:
        return tuple(self.noise_for_share(w) for w in self.level_weights)

    @functools.cached_property
    def level_variances(self) -> Tuple[float, ...]:
        return tuple(n.variance() for n in self.level_noise)

    def privacy_cost(self) -> PrivacyCost:
        return _dyadic.cost(self.epsilon, self.rho)

    def init_state(self) -> BalancedTreeState:
        return BalancedTreeState(
            0, _dyadic.readonly(np.zeros(self.dimension, dtype=np.int64)),
            _dyadic.readonly(np.zeros((self.levels, 3), dtype=np.int64)),
            _dyadic.readonly(np.zeros((0, self.dimension), dtype=np.int64)))

    def step(self, state: BalancedTreeState, value,
             rng: RandomSource) -> Tuple[np.ndarray, BalancedTreeState]:
        """Consumes step t+1's integer vector (already bounded); returns the noisy prefix sum."""
        t, value = self.next_step(state.t, value)
        prefix = _dyadic.exact_add(state.prefix, value)     # exact past int64 (exact_int.py)
        release, rows = prefix.copy(), []
        old_rows = state.level_rows()
        runs = segments(t, self.k, self.levels)
        for h, (run, old, kept) in enumerate(zip(runs, state.runs.tolist(), old_rows)):
            level_rows = self._level_rows(h, run, tuple(old), kept, rng)
            release = _dyadic.exact_add(release, run[2] * level_rows.sum(axis=0))
            rows.append(level_rows)
        noise = np.concatenate(rows)
        new_state = BalancedTreeState(t, _dyadic.readonly(prefix),
                                      _dyadic.readonly(np.array(runs, dtype=np.int64)),
                                      _dyadic.readonly(noise))
        return release, new_state

    def _level_rows(self, h: int, run, old, kept: np.ndarray, rng: RandomSource) -> np.ndarray:
        """Level h's noise rows for ``run`` = (first, count, sign), given the previous ``old``
        run and its rows ``kept``; a node not in the previous run is new (each node is used by
        one contiguous run, so it was never drawn before) and is drawn now, in node order."""
        first, count, sign = run
        if run == old or sign == 0:
            return kept if sign else kept[:0]
        old_first, old_count, old_sign = old
        if sign > 0 and old_sign > 0 and first == old_first and count > old_count:
            return kept + self._draw(h, count - old_count, rng).sum(axis=0, keepdims=True)
        if (sign < 0 and old_sign < 0 and first + count == old_first + old_count
                and first > old_first):
            return kept[first - old_first:]               # nodes leave from the left
        if old_sign and old_first < first + count and first < old_first + old_count:
            raise AssertionError(f'level {h}: run {run} overlaps {old}')  # never (tested)
        fresh = self._draw(h, count, rng)
        return fresh.sum(axis=0, keepdims=True) if sign > 0 else fresh

    def _draw(self, h: int, nodes: int, rng: RandomSource) -> np.ndarray:
        noise = self.level_noise[h]
        return np.array([noise.sample(rng, self.dimension) for _ in range(nodes)],
                        dtype=np.int64).reshape(nodes, self.dimension)

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after step t: Σ_h |d_h(t)|·Var_h."""
        if t <= 0:
            return 0.0
        digits = balanced_digits(t, self.k, self.levels)
        return float(sum(abs(d) * var for d, var in zip(digits, self.level_variances)))

    def variances(self, horizon: Optional[int] = None) -> np.ndarray:
        """release_variance(t) for t = 1..T, vectorised."""
        steps = horizon or self.horizon
        half = (self.k - 1) // 2
        u = np.arange(1, steps + 1, dtype=np.int64) + (self.k ** self.levels - 1) // 2
        total = np.zeros(steps)
        for var in self.level_variances:
            total += np.abs(u % self.k - half) * var
            u //= self.k
        return total

    def mean_variance(self) -> float:
        """Mean of release_variance(t) over t = 1..T (exact, no per-t loop)."""
        return float(sum(c * var for c, var in zip(mean_abs_digits(self.horizon, self.k),
                                                   self.level_variances)))

    @property
    def noise_stddev(self) -> float:
        """The largest release noise std over t = 1..T."""
        return math.sqrt(float(np.max(self.variances())))


@functools.lru_cache(maxsize=256)
def balanced_best_k(horizon: int, gaussian: bool = False, split: str = 'mean_variance') -> int:
    """The odd k with the lowest mean release variance over t = 1..T (unit budget; ties to the
    smaller k)."""
    privacy = {'rho': 1.0} if gaussian else {'epsilon': 1.0}
    best, best_mean = 3, math.inf
    for k in range(3, _MAX_K + 1, 2):
        mean = BalancedTreeCounter(horizon=horizon, k=k, split=split, **privacy).mean_variance()
        if mean < best_mean * (1 - 1e-12):
            best, best_mean = k, mean
        if levels_for(horizon, k) == 1:
            break                                  # larger k: the same single level
    return best
