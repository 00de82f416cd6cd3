"""Per-step and sliding-window values: the sum over the last W steps (W = 1: the step alone),
released after every step, from a dyadic tree cut at level h and its range decomposition.

Mechanism. Levels ℓ = 0..h; level ℓ's nodes are the aligned blocks of 2^ℓ steps
[j·2^ℓ, (j+1)·2^ℓ) (0-based steps). When a node's last step is consumed its exact sum gets fresh
discrete noise (Laplace of scale l1·(h+1)/ε, or Gaussian of σ² = l2²·(h+1)/(2ρ): every level gets
1/(h+1) of the budget). After step b the window [a, b+1) with a = max(0, b+1−W) is released as a
signed sum of completed nodes: a shortest path from position b+1 to position a on the integer
line, where a move from p to p − 2^ℓ (p a multiple of 2^ℓ) adds node [p−2^ℓ, p) and a move from p
to p + 2^ℓ ≤ b+1 subtracts node [p, p+2^ℓ) — the signs telescope to the indicator of [a, b+1).
Positions stay in [max(0, a − 2^h), b+1] (``_decomposition``, breadth-first: deterministic).
A shortest path repeats no position, so its nodes are distinct and their noises independent:
Var[release after b] = n(b)·Var(node noise), exactly (``release_variance``). h is chosen at
construction (``levels=None``) as the h ∈ [0, ⌈log2 W⌉] with the smallest worst-case variance in
the steady state (ties: the smaller h); n(b) ≤ 2·⌈log2 W⌉ + 1 for every h and b, so the error
depends on W, never on the horizon.

Never worse than differencing. h = 0 is fresh noise per step: its window is the sum of W noisy
increments — exactly what differencing two releases W steps apart of ``PerStepCounter`` (at the
same budget) gives — and h is picked to minimise the worst case over the same candidates, so the
worst-case variance is ≤ that differencing's, W·Var(DLap(l1/ε)) (resp. W·Var(DGauss(l2²/2ρ))). For
W = 1 (the per-step value) h = 0 is optimal among all the library's linear counters: the step's
value has sensitivity l1 (resp. l2), and differencing any counter whose releases are a ±1 or
real combination z ↦ Σ c_i z_i of noises calibrated to the whole stream (trees, BLT) keeps at
least one node of scale ≥ l1/ε (Laplace; ``Var`` grows with the scale) or, for a factorisation
B·C, variance ‖B_row‖²·‖C‖²_col/(2ρ) ≥ l2²/(2ρ) by Cauchy–Schwarz (|Δq| ≤ ‖B_row‖·‖CΔx‖). The
textbook binary tree's differencing over any horizon is compared release by release in
``tests/mechanisms/test_window.py`` (exact node counts); docs/windows.md has the proof.

Privacy unit and neighbours: as ``PerStepCounter`` (any change of L1 norm ≤ l1 over all steps
and bins; for the Gaussian variant per-bin totals with L2 norm ≤ l2): each level's nodes
partition the steps, so one level's node sums change by at most l1 in L1 (l2 in L2, by the
triangle inequality per bin); h + 1 levels at 1/(h+1) of the budget each compose to ε (ρ),
for every horizon. The releases are post-processing of the noisy nodes (exact integers).

State: the open (exact) sum of every level and, per level, the most recent noisy nodes some
release still uses (``kept_nodes``: at most ⌈(W + k^h)/k^ℓ⌉ + 1 of level ℓ, in practice the
few at the two ends of the window): O(W) vectors per key at most, independent of the horizon.
Cite: Dwork, Naor, Pitassi, Rothblum 2010 and Chan, Shi, Song 2011 (the binary tree's range
queries); Bolot et al. 2013 (decayed and sliding-window sums from the tree).
"""

import collections
import dataclasses
import functools
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms._counter_params import CounterPrivacy
from beam_dp.mechanisms.exact_int import exact_add
from beam_dp.mechanisms.exact_int import exact_ints
from beam_dp.noise import RandomSource

__all__ = [
    'WindowCounter',
    'WindowState',
    'window_decomposition',
]

MAX_WINDOW = 1 << 12


def decomposition(window: int, k: int, h: int, b: int) -> Tuple[Tuple[int, int, int], ...]:
    """The signed nodes ((sign, level, j), ...) whose noisy sums give the window ending at step
    b (0-based), node (ℓ, j) = steps [j·k^ℓ, (j+1)·k^ℓ): a shortest signed path from b+1 to
    a = max(0, b+1−W) (module docstring), by a digit recursion with one carry.

    The path's end side can only descend (a node past b+1 is not complete): at each level it
    drops its digit (adding those nodes); the start side either drops its digit (subtracting
    nodes below a) or rounds up to the next multiple of k^(ℓ+1) (adding nodes above a), if that
    stays ≤ b+1; the two meet at level h (the difference in level-h nodes, either sign) or as
    soon as they coincide. At most two start positions per level: O(h) per release.
    ``tests/mechanisms/test_window.py`` checks it against a breadth-first search.
    """
    end = b + 1
    start = max(0, end - window)
    best = {start: (0, ())}      # start-side position → (cost, nodes), positions ≡ 0 mod k^ℓ
    x, x_nodes = end, ()
    found = None                 # the cheapest complete path so far
    size = 1
    for level in range(h + 1):
        # Meet here: the gap between the two sides in level-ℓ nodes (both are multiples of k^ℓ,
        # both ≤ b+1: every node between them is complete).
        for y, (cost, nodes) in best.items():
            n = abs(x - y) // size
            if x > y:
                gap = tuple((1, level, y // size + i) for i in range(n))
            else:
                gap = tuple((-1, level, x // size + i) for i in range(n))
            if found is None or len(x_nodes) + cost + n < found[0]:
                found = (len(x_nodes) + cost + n, x_nodes + nodes + gap)
        if level == h:
            break
        r = (x // size) % k
        x_nodes = x_nodes + tuple((1, level, x // size - i - 1) for i in range(r))
        x -= r * size
        nxt = {}
        for y, (cost, nodes) in best.items():
            ry = (y // size) % k
            options = [(y - ry * size, ry,
                        tuple((-1, level, y // size - i - 1) for i in range(ry)))]
            if ry and y + (k - ry) * size <= end:
                options.append((y + (k - ry) * size, k - ry,
                                tuple((1, level, y // size + i) for i in range(k - ry))))
            for y2, c, add in options:
                cand = (cost + c, nodes + add)
                if y2 not in nxt or cand[0] < nxt[y2][0]:
                    nxt[y2] = cand
        best = nxt
        size *= k
    return found[1]


@functools.lru_cache(maxsize=65536)
def _cached(window: int, k: int, h: int, b: int):
    return decomposition(window, k, h, b)


def window_decomposition(window: int, k: int, h: int, b: int
                         ) -> Tuple[Tuple[int, int, int], ...]:
    """``decomposition``, cached by phase: once b ≥ W + 2·k^h it depends only on b mod k^h
    (node indices shift by whole periods)."""
    period = k ** h
    first = window + 2 * period
    if b < first:
        return _cached(window, k, h, b)
    rep = first + (b - first) % period
    shift = (b - rep) // period                    # whole periods of level-h nodes
    return tuple((s, lv, j + shift * (k ** (h - lv))) for s, lv, j in
                 _cached(window, k, h, rep))


def node_count(window: int, k: int, h: int, b: int) -> int:
    """``len(decomposition(window, k, h, b))`` without building the nodes (the same recursion)."""
    end = b + 1
    start = max(0, end - window)
    best = {start: 0}
    x, x_cost, found, size = end, 0, None, 1
    for level in range(h + 1):
        for y, cost in best.items():
            n = x_cost + cost + abs(x - y) // size
            found = n if found is None or n < found else found
        if level == h:
            break
        r = (x // size) % k
        x_cost += r
        x -= r * size
        nxt = {}
        for y, cost in best.items():
            ry = (y // size) % k
            y2 = y - ry * size
            if y2 not in nxt or cost + ry < nxt[y2]:
                nxt[y2] = cost + ry
            if ry and y + (k - ry) * size <= end:
                y2 = y + (k - ry) * size
                if y2 not in nxt or cost + k - ry < nxt[y2]:
                    nxt[y2] = cost + k - ry
        best = nxt
        size *= k
    return found


@functools.lru_cache(maxsize=4096)
def worst_nodes(window: int, k: int, h: int) -> int:
    """The most nodes any release uses: every early step (b < W + 2·k^h) and every phase of the
    steady state (periodic in b mod k^h afterwards), exactly."""
    if h == 0:
        return window
    return max(node_count(window, k, h, b) for b in range(window + 3 * k ** h))


def _sampled_worst(window: int, k: int, h: int, samples: int = 1500) -> int:
    """A lower estimate of ``worst_nodes`` on at most ``samples`` evenly spread steps (to rank
    the candidates quickly; the winner is then checked exactly)."""
    last = window + 3 * k ** h
    stride = max(1, last // samples)
    return max(node_count(window, k, h, b) for b in range(0, last, stride))


@functools.lru_cache(maxsize=4096)
def kept_nodes(window: int, k: int, h: int) -> Tuple[int, ...]:
    """Per level, how far back (in completed nodes of that level) any release reaches: the
    maximum of completed − j over the decompositions of every early step and every phase (the
    steady state repeats the phases with the same offsets)."""
    back = [1] * (h + 1)
    for b in range(window + 3 * k ** h):
        for _, level, j in decomposition(window, k, h, b):
            back[level] = max(back[level], (b + 1) // k ** level - j)
    return tuple(back)


_ARITIES = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64)


@functools.lru_cache(maxsize=1024)
def candidates(window: int) -> Tuple[Tuple[int, int, int], ...]:
    """Every tree considered for this window: (sampled worst node count, k, h) for k in
    ``_ARITIES`` ≤ W and 1 ≤ h with k^(h−1) < W and k^h ≤ 4W, plus (W, 2, 0): fresh noise."""
    out = [(window, 2, 0)]
    for k in _ARITIES:
        if k > window:
            break
        h = 1
        while k ** (h - 1) < window and k ** h <= 4 * window:
            out.append((_sampled_worst(window, k, h), k, h))
            h += 1
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def choose_tree(window: int, kind: str) -> Tuple[int, int]:
    """(k, h) with the smallest worst-case variance for this window: n·(h+1)² node variances
    for Laplace, n·(h+1) for Gaussian (each level gets 1/(h+1) of the budget), n the most nodes
    a release uses; h = 0 is fresh noise per step (n = W; k is then 1). Candidates are ranked
    on a sample of steps, and the best is confirmed on every step (``worst_nodes``): the choice
    is never worse than h = 0. Ties: the fewer levels."""
    power = 2 if kind == 'laplace' else 1
    ranked = []
    for k in _ARITIES:
        if k > window:
            break
        h = 1
        while k ** (h - 1) < window and k ** h <= 4 * window:
            ranked.append((_sampled_worst(window, k, h) * (h + 1) ** power, h, k))
            h += 1
    for estimate, h, k in sorted(ranked):
        if estimate >= window:
            break
        if worst_nodes(window, k, h) * (h + 1) ** power < window:
            return k, h
    return 1, 0


@dataclasses.dataclass(frozen=True)
class WindowState:
    """t steps consumed; ``open`` the exact sum of each level's current node; ``nodes[ℓ]`` the
    most recent completed noisy nodes of level ℓ, oldest first (read-only arrays)."""
    t: int
    open: Tuple[np.ndarray, ...]
    nodes: Tuple[Tuple[np.ndarray, ...], ...]

    def nbytes(self) -> int:
        return 8 + sum(a.nbytes for a in self.open) + sum(a.nbytes for lv in self.nodes
                                                             for a in lv)


@dataclasses.dataclass(frozen=True)
class WindowCounter(CounterPrivacy):
    """Releases the sum of the last ``window`` steps (fewer at the start) after every step.

    Args:
      window: W ≥ 1 (1: the per-step value, fresh noise at the whole budget).
      arity, levels: the tree: nodes of k^ℓ steps for ℓ = 0..levels−1 (None, None: chosen by
        ``choose_tree``; levels = 1 is fresh noise per step, whatever the arity).
      epsilon / rho, l1_sensitivity, l2_sensitivity, dimension: as ``PerStepCounter``.

    Raises:
      InvalidParamsError: on a bad parameter, or a noise scale outside the exact samplers'
        range.
    """
    window: int = 1
    arity: Optional[int] = None
    levels: Optional[int] = None
    participation: Optional[Tuple[float, int, float]] = None

    def __post_init__(self):
        owner = type(self).__name__
        self.check_counter_privacy()
        v.check_positive_int(owner, 'window', self.window)
        if self.window > MAX_WINDOW:
            raise InvalidParamsError(f'{owner}: window must be at most {MAX_WINDOW}, got '
                                     f'{self.window}.')
        if (self.arity is None) != (self.levels is None):
            raise InvalidParamsError(f'{owner}: give both arity and levels, or neither (chosen).')
        if self.participation is not None:
            ok = (isinstance(self.participation, tuple) and len(self.participation) == 3
                  and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                          and math.isfinite(x) and x > 0 for x in self.participation))
            if not ok:
                raise InvalidParamsError(f'{owner}: participation must be (step cap > 0, max '
                                         f'steps > 0, total > 0), got {self.participation!r}.')
        if self.arity is None:
            k, h = self._choose()
            object.__setattr__(self, 'arity', k)
            object.__setattr__(self, 'levels', h + 1)
        v.check_positive_int(owner, 'levels', self.levels)
        if self.levels > 13:          # W ≤ 2^12 needs at most ⌈log2 W⌉ + 1 = 13 levels
            raise InvalidParamsError(f'{owner}: levels must be at most 13, got {self.levels}.')
        if (not isinstance(self.arity, int) or isinstance(self.arity, bool) or self.arity < 2
                or self.arity > MAX_WINDOW):
            raise InvalidParamsError(f'{owner}: arity must be an int in [2, {MAX_WINDOW}], got '
                                     f'{self.arity!r}.')
        if self.levels > 1 and self.arity ** (self.levels - 2) >= self.window:
            raise InvalidParamsError(f'{owner}: levels {self.levels} has nodes of '
                                     f'{self.arity ** (self.levels - 1)} steps, more than needed '
                                     f'for window {self.window} (at most ⌈log_k W⌉ + 1 levels).')
        self.check_noise_scales()

    @property
    def h(self) -> int:
        return self.levels - 1

    def noises(self) -> Tuple[_dyadic.NodeNoise, ...]:
        return (self.node_noise,)

    @property
    def node_noise(self) -> _dyadic.NodeNoise:
        return self._noise(self.arity, self.h)

    def level_l2_squared(self, k: int, h: int) -> Tuple[float, ...]:
        """Per level ℓ ≤ h, a bound on Σ (node-sum change)² over the level's nodes and bins
        when one privacy unit changes: l2² (per-bin totals' L2, ``l2_sensitivity``), and with
        ``participation`` = (c, S, T) — at most c per step and bin, S steps per key, T in L1
        over everything — also max|x|·Σ|x| ≤ min(c·min(k^ℓ, S), T)·T."""
        l2 = self.l1_sensitivity if self.l2_sensitivity is None else self.l2_sensitivity
        out = []
        for level in range(h + 1):
            bound = l2 * l2
            if self.participation is not None:
                cap, steps, total = self.participation
                bound = min(bound, min(cap * min(k ** level, steps), total) * total)
            out.append(bound)
        return tuple(out)

    def _noise(self, k: int, h: int) -> _dyadic.NodeNoise:
        """The node noise of the tree (k, h): Laplace l1·(h+1)/ε (each level 1/(h+1) of ε);
        Gaussian σ² = Σ_ℓ Δ_ℓ²/(2ρ) for every node (the Gaussian mechanism on all node sums
        at once, whose squared L2 sensitivity is at most Σ_ℓ Δ_ℓ², ``level_l2_squared``)."""
        if self.epsilon is not None:
            return self.noise_for_share(1.0 / (h + 1))
        return _dyadic.NodeNoise('gaussian', sum(self.level_l2_squared(k, h)) / (2 * self.rho))

    def _choose(self) -> Tuple[int, int]:
        """(k, h) with the smallest worst-case variance: the candidates ranked on a sample of
        steps, the four best and fresh noise (h = 0) then compared exactly (``worst_nodes``),
        so the choice is never worse than fresh noise. Ties: the fewer levels."""
        def variance(k, h):
            try:
                return self._noise(k, h).variance()
            except ValueError:          # outside the samplers' range: refused just below
                return math.inf

        ranked = sorted((sampled * variance(k, h), h, k)
                        for sampled, k, h in candidates(self.window))
        best = None
        for _, h, k in ranked[:4] + [(0.0, 0, 2)]:
            exact = worst_nodes(self.window, k, h) * variance(k, h)
            if best is None or exact < best[0] * (1 - 1e-9) or (
                    exact <= best[0] * (1 + 1e-9) and h < best[1]):
                best = (exact, h, k)
        return best[2], best[1]

    def privacy_cost(self) -> PrivacyCost:
        return _dyadic.cost(self.epsilon, self.rho)

    def kept(self, level: int) -> int:
        """How many completed nodes of ``level`` the state keeps: the most recent ones any
        release uses (``kept_nodes``)."""
        return kept_nodes(self.window, self.arity, self.h)[level]

    def init_state(self) -> WindowState:
        zeros = _dyadic.readonly(np.zeros(self.dimension, dtype=np.int64))
        return WindowState(0, (zeros,) * self.levels, ((),) * self.levels)

    def step(self, state: WindowState, value, rng: RandomSource
             ) -> Tuple[np.ndarray, WindowState]:
        """Consumes step t+1's integer vector (already bounded); returns the noisy sum of the
        last min(W, t+1) steps."""
        value = exact_ints(value, self.dimension)
        b = state.t
        opens, nodes = [], []
        for level in range(self.levels):
            total = exact_add(state.open[level], value)
            kept = state.nodes[level]
            if (b + 1) % (self.arity ** level) == 0:
                node = exact_add(total, self.node_noise.sample(rng, self.dimension))
                kept = (kept + (_dyadic.readonly(node),))[-self.kept(level):]
                total = np.zeros(self.dimension, dtype=np.int64)
            opens.append(_dyadic.readonly(total))
            nodes.append(kept)
        new_state = WindowState(b + 1, tuple(opens), tuple(nodes))
        release = np.zeros(self.dimension, dtype=np.int64)
        for sign, level, j in window_decomposition(self.window, self.arity, self.h, b):
            completed = (b + 1) // (self.arity ** level)     # nodes 0..completed-1 exist
            node = nodes[level][len(nodes[level]) - (completed - j)]
            release = exact_add(release, node if sign > 0 else -node)
        return release, new_state

    def nodes_used(self, t: int) -> int:
        """How many noisy nodes the release after t steps sums (0 before the first step)."""
        if t <= 0:
            return 0
        return len(window_decomposition(self.window, self.arity, self.h, t - 1))

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after t steps: n(t)·Var(node)."""
        return self.nodes_used(t) * self.node_noise.variance()

    def worst_variance(self) -> float:
        """The largest ``release_variance`` over every step (any horizon)."""
        return worst_nodes(self.window, self.arity, self.h) * self.node_noise.variance()

    def variances(self, horizon: int) -> np.ndarray:
        return np.array([self.release_variance(t) for t in range(1, horizon + 1)])

    @property
    def noise_stddev(self) -> float:
        """The std of one node's noise."""
        return math.sqrt(self.node_noise.variance())
