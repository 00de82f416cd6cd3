"""A pure-ε continual counter for an unknown horizon: the negative-digit k-ary tree of
``BalancedTreeCounter`` (Andersson, Pagh, Steiner, Torkamani, arXiv 2408.07021) over an unbounded
number of levels, with a node budget that depends on the node's level *and* on the epoch of the
stream it serves, so that a release at step t pays roughly what a tree built for horizon t would.

Privacy unit and neighbours: as ``BalancedTreeCounter`` — any change of the input stream whose L1
norm (over all steps and bins) is at most ``l1_sensitivity``; add/remove neighbours. Pure ε only
(discrete Laplace): under ρ or (ε, δ) the unbounded BLT is already within 1% of its known-horizon
self.

Nodes and prefixes: level h holds the aligned intervals n(h, j) = (j·k^h, (j+1)·k^h], j ≥ 0, for
every h ≥ 0. A step t ≥ 1 has E(t) balanced base-k digits, E(t) = the least E with
H_E = (k^E − 1)/2 ≥ t ("epoch E(t)"); its prefix [1, t] is the signed union of ``segments(t)``
exactly as in ``BalancedTreeCounter`` with L = E(t) levels (higher digits are 0, so no node
above level E(t) − 1 is ever used by a release at t).

Node budgets (the schedule, public and data-independent): node n(h, j) gets Laplace scale
l1/(ε·w(h, j)) with
  * w(h, 0) = a_h for the first node of every level (it holds the stream's first k^h steps);
  * w(h, j) = v_h(E) for j ≥ 1, E = E((j + 1)·k^h) the epoch of the node's last step.
The a_h and v_h(E) for E ≤ ``len(table)`` are a table tuned (``benchmarks/counters/``) to keep
the mean release variance over t = 1..T within 3.51× of the known-horizon balanced tree's for
every T from 16 to 2^40 = ``MAX_STEPS`` (2.31×–3.50× up to 2^24) and at least 3.1× below the
infinite tree's (``InfiniteTreeCounter``) for 2^10 ≤ T ≤ 2^24; beyond the table
a_h = τ·(m + 1)/((h + 1)(h + 2)) (h ≥ m = len(shared); their sum is τ) and v_h(E) = (1 − A_{E−1})/E for every h < E, with A_n = Σ_{h ≥ n} a_h.

Privacy (pure ε, also for adaptively chosen streams): a unit's change δ moves node n by n·δ, so
the node mechanism (all node sums with independent discrete Laplace noise) has privacy loss
Σ_n |n·δ|/b_n ≤ Σ_u |δ_u|·Σ_{n ∋ u} 1/b_n ≤ (‖δ‖_1/l1)·ε·max_u S(u), S(u) = Σ_h w(node of u at
level h). Let u lie in epoch e (H_{e−1} < u ≤ H_e). Levels h ≥ e: u ≤ H_e < k^h, so u lies in
n(h, 0), weight a_h: together A_e. Level e − 1: n(e−1, 0) (a_{e−1}) or n(e−1, j ≥ 1), whose last
step is in (u, u + k^{e−1}] ⊂ (H_{e−1}, H_{e+1}]: epoch e or e + 1. Levels h < e − 1: u >
H_{e−1} ≥ k^h, so j ≥ 1, and the node's last step is again in epoch e or e + 1. Hence
  S(u) ≤ Σ_{h<e−1} max(v_h(e), v_h(e+1)) + max(a_{e−1}, v_{e−1}(e), v_{e−1}(e+1)) + A_e,
and ``check_schedule`` verifies that this is ≤ 1 for every epoch e ≤ len(table) + 2 in exact
rational arithmetic (at import, for every schedule). For e ≥ m + 2 both epochs use the formula:
v_h(e) ≥ v_h(e+1) ⇔ A_{e−1} + e·a_{e−1} ≤ 1 and a_{e−1} ≤ v_{e−1}(e) ⇔ a_{e-1}·e ≤ 1 − A_{e−1},
both implied by τ ≤ 1/4 (a_{e−1}·e ≤ τ, A_{e−1} ≤ τ), so S(u) ≤ (e − 1)·v(e) + v(e) + A_e =
1 − A_{e−1} + A_e = 1 − a_{e−1} ≤ 1. So the node mechanism is ε-DP for the whole unbounded
stream. Releases y_t = Σ_{n ∈ segments(t)} ±(n·x + η_n) are post-processing, for every stream
fixed in advance; for adaptively chosen streams Y_t = N_t + S_t(x_{≤t}), N = L·η independent of
the data, and P[N = n] = Σ_{Lη = n} P[η] ≤ e^ε·P[N = n − L·B·δ] term by term (as
``BalancedTreeCounter``): the pointwise bound holds whatever δ the history selects.

Online, exactly (as ``BalancedTreeCounter``): y_t = (exact prefix) + Σ_{segments(t)} ±η_n; each
node's noise is drawn once, when a release first uses it, from ``rng.derive('node', h, j)`` of
that step's source (so the address names the node), and kept while its run lasts (every node is
used by one contiguous run with one sign). Integer releases.

Closed form: Var[y_t] = Σ_{n ∈ segments(t)} Var(η_n) (independent nodes; ``release_variance``,
vectorised in ``variances``). State: the exact prefix, one (first, count, sign) run per level and
at most (k − 1)/2 noise rows per level: O(k·log_k t) integers (< 1 KiB per bin at t = 2^24).

Range: node scales grow slowly with the level; every scale used by the first ``MAX_STEPS`` =
2^40 steps is checked against the samplers' range at construction, and ``step`` refuses to go
further rather than fail inside a sampler.
"""

import dataclasses
import fractions
import functools
from typing import Dict, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms._counter_params import CounterPrivacy
from beam_dp.mechanisms.balanced_tree import BalancedTreeState
from beam_dp.mechanisms.balanced_tree import levels_for
from beam_dp.mechanisms.balanced_tree import segments
from beam_dp.mechanisms.infinite_counter import MAX_STEPS
from beam_dp.noise import RandomSource

__all__ = [
    'MAX_STEPS',
    'SCHEDULES',
    'Schedule',
    'UnboundedTreeCounter',
    'UnboundedTreeState',
    'check_schedule',
]


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The public node budget of one radix k (see the module docstring): ``shared[h]`` = a_h
    for h < m, ``table[E - 1][h]`` = v_h(E) for E ≤ len(table), h < E; ``tail`` = τ."""
    k: int
    shared: Tuple[float, ...]
    table: Tuple[Tuple[float, ...], ...]
    tail: float

    def shared_weight(self, h: int) -> fractions.Fraction:
        """a_h, exactly."""
        m = len(self.shared)
        if h < m:
            return fractions.Fraction(self.shared[h])
        return fractions.Fraction(self.tail) * (m + 1) / ((h + 1) * (h + 2))

    def shared_tail(self, n: int) -> fractions.Fraction:
        """A_n = Σ_{h ≥ n} a_h, exactly (the formula part telescopes)."""
        m = len(self.shared)
        start = min(n, m)
        head = sum((fractions.Fraction(a) for a in self.shared[start:]), fractions.Fraction(0))
        return head + fractions.Fraction(self.tail) * (m + 1) / (max(n, m) + 1)

    def level_weight(self, h: int, epoch: int) -> fractions.Fraction:
        """v_h(E) for a node n(h, j ≥ 1) whose last step is in epoch E (h < E)."""
        if epoch <= len(self.table):
            return fractions.Fraction(self.table[epoch - 1][h])
        return (1 - self.shared_tail(epoch - 1)) / epoch

    def step_share(self, e: int) -> fractions.Fraction:
        """The bound on S(u) for a step u of epoch e (the module docstring's inequality)."""
        below = sum((max(self.level_weight(h, e), self.level_weight(h, e + 1))
                     for h in range(e - 1)), fractions.Fraction(0))
        top = max(self.shared_weight(e - 1), self.level_weight(e - 1, e),
                  self.level_weight(e - 1, e + 1))
        return below + top + self.shared_tail(e)


def check_schedule(schedule: Schedule) -> None:
    """Raises ValueError unless every step's nodes spend at most ε (exact for the tabled epochs
    and the two after them; the formula epochs beyond follow from τ ≤ 1/4)."""
    if not 0 < schedule.tail <= 0.25:
        raise ValueError(f'schedule k={schedule.k}: tail {schedule.tail} not in (0, 1/4]')
    if len(schedule.shared) < len(schedule.table) - 1:
        raise ValueError(f'schedule k={schedule.k}: the table outruns the shared weights')
    for e, row in enumerate(schedule.table, 1):
        if len(row) != e or min(row) <= 0:
            raise ValueError(f'schedule k={schedule.k}: row {e} must hold {e} positive weights')
    if min(schedule.shared) <= 0:
        raise ValueError(f'schedule k={schedule.k}: shared weights must be positive')
    for e in range(1, max(len(schedule.table), len(schedule.shared)) + 3):
        share = schedule.step_share(e)
        if share > 1:
            raise ValueError(f'schedule k={schedule.k}: a step of epoch {e} spends '
                             f'{float(share):.6f} ε')


# Tuned by `python benchmarks/counters/tune_unbounded.py --k 13 --vs-infinite 3.1` (recorded in
# benchmarks/counters/README.md and results/unbounded_schedule_k13.json): minimise the worst
# ratio, over T = 16 .. 2^40, of the mean release variance over t = 1..T to the known-horizon
# balanced tree's at horizon T, with the mean variance ≥ 3.1× below the infinite tree's for
# 2^10 ≤ T ≤ 2^24. Weights rounded down to 6 decimals; ``_register`` checks them exactly.
SCHEDULES: Dict[int, Schedule] = {}


def _register(schedule: Schedule) -> None:
    check_schedule(schedule)
    SCHEDULES[schedule.k] = schedule


_register(Schedule(
    k=13, tail=0.005,
    shared=(0.403378, 0.26359, 0.110604, 0.070916, 0.037893, 0.027047, 0.020981, 0.016865,
            0.014023, 0.011808, 0.011001, 0.006887),
    table=(
        (0.403378,),
        (0.403378, 0.26359),
        (0.28162, 0.26359, 0.232362),
        (0.235788, 0.238324, 0.232362, 0.142015),
        (0.202599, 0.202539, 0.202332, 0.142015, 0.136897),
        (0.168282, 0.168245, 0.168316, 0.142015, 0.136897, 0.129674),
        (0.139589, 0.139784, 0.139978, 0.13978, 0.136897, 0.129674, 0.108708),
        (0.123142, 0.123861, 0.123347, 0.123278, 0.123739, 0.123344, 0.108708, 0.101856),
        (0.110361, 0.110872, 0.111275, 0.112037, 0.111175, 0.110911, 0.108708, 0.101856, 0.088103),
        (0.100555, 0.10177, 0.101602, 0.101282, 0.101902, 0.101516, 0.101746, 0.100976, 0.088103,
         0.077652),
        (0.091579, 0.091427, 0.091993, 0.091714, 0.091496, 0.09188, 0.091585, 0.091843, 0.088103,
         0.077652, 0.088834),
        (0.084516, 0.083172, 0.08478, 0.084528, 0.084216, 0.084146, 0.083621, 0.08417, 0.084262,
         0.077652, 0.088834, 0.071096),
        (0.083439, 0.083172, 0.083938, 0.080324, 0.077563, 0.076577, 0.073516, 0.073756, 0.072357,
         0.072238, 0.071929, 0.071096, 0.07246),
    )))


@dataclasses.dataclass(frozen=True)
class UnboundedTreeState(BalancedTreeState):
    """The balanced tree's state layout, over unboundedly many levels: d bins, t steps consumed,
    the exact ``prefix`` per bin, per level h (h < E(t)) the current run ``runs[h] = (first node
    j, count, sign)``, and ``noise`` level after level (``BalancedTreeState``)."""


@dataclasses.dataclass(frozen=True)
class UnboundedTreeCounter(CounterPrivacy):
    """Continual prefix sums over an unbounded stream, pure ε (negative-digit k-ary tree with an
    epoch-dependent node budget; see the module docstring).

    Args:
      epsilon: total ε (discrete Laplace). ``rho`` is refused (pure ε only).
      k: odd radix with a tuned schedule (``SCHEDULES``; default 13).
      l1_sensitivity, dimension: as ``BalancedTreeCounter``; l2_sensitivity is not used.
    A bad parameter raises InvalidParamsError naming it.
    """
    k: int = 13

    def __post_init__(self):
        owner = type(self).__name__
        if self.rho is not None:
            raise InvalidParamsError(f'{owner}: pure ε only (epsilon=...), got rho={self.rho!r}; '
                                     f'under zCDP use BLTCounter(horizon=None).')
        self.check_counter_privacy()
        v.check_positive_int(owner, 'k', self.k)
        if self.k not in SCHEDULES:
            raise InvalidParamsError(f'{owner}: k must be one of {sorted(SCHEDULES)} (a tuned '
                                     f'schedule), got {self.k}.')
        # Releases at t ≤ MAX_STEPS use levels h < E(MAX_STEPS), nodes of epochs ≤ E + 1.
        last = levels_for(MAX_STEPS, self.k)
        smallest = min([self.schedule.shared_weight(h) for h in range(last)]
                       + [self.schedule.level_weight(h, e) for e in range(1, last + 2)
                          for h in range(e)])
        _dyadic.check_node_noise(owner, self.noise_for_share(float(smallest)))

    @property
    def schedule(self) -> Schedule:
        return SCHEDULES[self.k]

    def privacy_cost(self) -> PrivacyCost:
        return _dyadic.cost(self.epsilon, None)

    def node_weight(self, h: int, j: int) -> float:
        """w(h, j): the share of ε node n(h, j) gets."""
        return _node_weight(self.schedule, h, j)

    def node_noise_for(self, h: int, j: int) -> _dyadic.NodeNoise:
        return self.noise_for_share(self.node_weight(h, j))

    def node_variance(self, h: int, j: int) -> float:
        return self.node_noise_for(h, j).variance()

    def init_state(self) -> UnboundedTreeState:
        return UnboundedTreeState(
            0, _dyadic.readonly(np.zeros(self.dimension, dtype=np.int64)),
            _dyadic.readonly(np.zeros((0, 3), dtype=np.int64)),
            _dyadic.readonly(np.zeros((0, self.dimension), dtype=np.int64)))

    def step(self, state: UnboundedTreeState, value,
             rng: RandomSource) -> Tuple[np.ndarray, UnboundedTreeState]:
        """Consumes step t+1's integer vector (already bounded); returns the noisy prefix sum."""
        if state.t >= MAX_STEPS:
            raise UnsupportedMechanismError(f'{type(self).__name__}: {MAX_STEPS} steps reached; '
                                            f'later noise scales were not validated.')
        t = state.t + 1
        value = _dyadic.exact_ints(value, self.dimension)
        prefix = _dyadic.exact_add(state.prefix, value)     # exact past int64 (exact_int.py)
        release, rows = prefix.copy(), []
        levels = levels_for(t, self.k)
        old_runs = state.runs.tolist() + [[0, 0, 0]] * (levels - len(state.runs))
        old_rows = state.level_rows()
        old_rows += [state.noise[:0]] * (levels - len(old_rows))
        runs = segments(t, self.k, levels)
        for h, (run, old, kept) in enumerate(zip(runs, old_runs, old_rows)):
            level_rows = self._level_rows(h, run, tuple(old), kept, rng)
            if run[2]:
                release = _dyadic.exact_add(release, run[2] * _dyadic.exact_sum(
                    list(level_rows)))
            rows.append(level_rows)
        noise = np.concatenate(rows) if rows else state.noise
        new_state = UnboundedTreeState(t, _dyadic.readonly(prefix),
                                       _dyadic.readonly(np.array(runs, dtype=np.int64)),
                                       _dyadic.readonly(noise))
        return release, new_state

    def _level_rows(self, h: int, run, old, kept: np.ndarray, rng: RandomSource) -> np.ndarray:
        """Level h's noise rows for ``run`` = (first, count, sign), given the previous run
        ``old`` and its rows ``kept`` (as ``BalancedTreeCounter._level_rows``)."""
        first, count, sign = run
        if run == old or sign == 0:
            return kept if sign else kept[:0]
        old_first, old_count, old_sign = old
        if sign > 0 and old_sign > 0 and first == old_first and count > old_count:
            fresh = self._draw(h, first + old_count, count - old_count, rng)
            return kept + fresh.sum(axis=0, keepdims=True)
        if (sign < 0 and old_sign < 0 and first + count == old_first + old_count
                and first > old_first):
            return kept[first - old_first:]               # nodes leave from the left
        if old_sign and old_first < first + count and first < old_first + old_count:
            raise AssertionError(f'level {h}: run {run} overlaps {old}')  # never (tested)
        fresh = self._draw(h, first, count, rng)
        return fresh.sum(axis=0, keepdims=True) if sign > 0 else fresh

    def _draw(self, h: int, first: int, nodes: int, rng: RandomSource) -> np.ndarray:
        """One noise row per node n(h, first .. first + nodes − 1), each from its own address."""
        return np.array([self.node_noise_for(h, j).sample(rng.derive('node', h, j),
                                                          self.dimension)
                         for j in range(first, first + nodes)],
                        dtype=np.int64).reshape(nodes, self.dimension)

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after step t."""
        if t <= 0:
            return 0.0
        total = 0.0
        for h, (first, count, _) in enumerate(segments(t, self.k, levels_for(t, self.k))):
            total += sum(self.node_variance(h, j) for j in range(first, first + count))
        return float(total)

    def variances(self, horizon: int) -> np.ndarray:
        """release_variance(t) for t = 1..horizon, vectorised (chunks of 2^20 steps)."""
        out = np.zeros(horizon)
        chunk = 1 << 20
        for lo in range(1, horizon + 1, chunk):
            hi = min(horizon, lo + chunk - 1)
            out[lo - 1:hi] = self._variances(np.arange(lo, hi + 1, dtype=np.int64))
        return out

    def _variances(self, t: np.ndarray) -> np.ndarray:
        k, half = self.k, (self.k - 1) // 2
        levels = levels_for(int(t[-1]), k)
        bounds = np.array([(k ** e - 1) // 2 for e in range(1, levels + 3)], dtype=np.int64)
        digits, u = [], t + (k ** levels - 1) // 2
        for _ in range(levels):
            digits.append(u % k - half)
            u = u // k
        total = np.zeros(t.shape)
        upper = np.zeros_like(t)                          # p_{h+1}
        for h in reversed(range(levels)):
            span, d = k ** h, digits[h]
            lower = upper + d * span                      # p_h
            first = np.where(d > 0, upper // span, np.where(d < 0, lower // span, 0))
            # by_epoch[E - 1]: Var of a node n(h, j ≥ 1) whose last step is in epoch E; [-1]:
            # the shared node n(h, 0) (j = 0 is looked up there through the mask below).
            by_epoch = np.array([self.noise_for_share(float(self.schedule.level_weight(
                h, e))).variance() if e > h else 0.0 for e in range(1, levels + 3)] + [
                self.noise_for_share(float(self.schedule.shared_weight(h))).variance()])
            size = np.abs(d)
            for i in range(half):
                used = size > i
                if not used.any():
                    break
                j = first + i
                slot = np.searchsorted(bounds, (j + 1) * span)       # epoch − 1
                slot[j == 0] = len(by_epoch) - 1
                total += by_epoch[slot] * used
            upper = lower
        return total

    def mean_variance(self, horizon: int) -> float:
        """Mean of release_variance(t) over t = 1..horizon."""
        return float(np.mean(self.variances(horizon)))


@functools.lru_cache(maxsize=65536)
def _node_weight(schedule: Schedule, h: int, j: int) -> float:
    if j == 0:
        return float(schedule.shared_weight(h))
    return float(schedule.level_weight(h, levels_for((j + 1) * schedule.k ** h, schedule.k)))
