"""C8: the per-node deletion-only mechanism with private restarts (Qiu & Yi Algorithm 3,
Lemma 10), for counts and histograms, plus the public error bounds it thresholds on.

Privacy unit and neighbours: a node's input is its record set D(v) (fixed when the node is
built) and the stream of deletions of those records, one batch per closed segment. Neighbouring
inputs differ in one record (present or not) or in one deletion event.

Guarantee: (ε_v)-DP (pure) for ANY number of restarts. Round r has four components, each
changed by ≤ 1 record by a neighbour — ñ = |D(v)| + DLap(1/ε_r); the static release
S = hist(D(v)) + DLap(1/ε_r) per bin; the C2 counter of deleted histograms (ε_r); the C2
deletion count (ε_r) — with ε_r = 3ε_v/(2π² r²), so a round costs 4ε_r = 6ε_v/(π² r²) and
Σ_r ≤ ε_v. Restarts are decided from released noisy values only (post-processing; rounds compose
adaptively). The threshold γ is a public function of (ε_r, β_r, steps since the round start).

Restart rule (Qiu & Yi, Algorithm 3): after each step, if the noisy deletion count
nd > ñ/2 + 2γ, start round r + 1 on the surviving records; halt (answer 0 forever) if the new
ñ < 2γ_r with γ_r = (1/ε_r)·ln(1/β_r). Otherwise the node answers
S − (C2 deleted-histogram estimate).

Debug mode (``NoiseFreeDebug``): all noise is zero and γ may be overridden; it exists only for
structural tests, refuses a secure random source and has no privacy cost to spend.
"""

import dataclasses
import functools
import math
from typing import Dict, Hashable, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.plugin import PluginCounterState
from beam_dp.mechanisms.plugin import PluginInsertionCounter
from beam_dp.mechanisms.plugin import StaticLinearMechanism
from beam_dp.noise import RandomSource
from beam_dp.noise import discrete_laplace
from beam_dp.noise.samplers import as_rational_up
from beam_dp.noise.samplers import check_noise_scale

__all__ = [
    'NOISE_FREE_ACKNOWLEDGEMENT',
    'NodeMechanism',
    'NodeState',
    'NoiseFreeDebug',
    'counter_noise_scales',
    'laplace_sum_bound',
]

NOISE_FREE_ACKNOWLEDGEMENT = 'I understand this releases exact, non-private values (tests only)'


@dataclasses.dataclass(frozen=True)
class NoiseFreeDebug:
    """Test-only switch: zero noise (and optionally a fixed γ). Construct it with
    ``acknowledge=NOISE_FREE_ACKNOWLEDGEMENT``; mechanisms carrying it refuse a secure random
    source and raise from ``privacy_cost()``, so no budgeted pipeline can run it."""
    acknowledge: str
    gamma: Optional[float] = None

    def __post_init__(self):
        if self.acknowledge != NOISE_FREE_ACKNOWLEDGEMENT:
            raise InvalidParamsError('NoiseFreeDebug: acknowledge must be '
                                     'NOISE_FREE_ACKNOWLEDGEMENT (test-only mode).')
        if self.gamma is not None:
            v.check_non_negative('NoiseFreeDebug', 'gamma', self.gamma)


def check_debug(owner: str, debug: Optional[NoiseFreeDebug], rng: RandomSource) -> None:
    if debug is not None and getattr(rng, 'is_secure', False):
        raise UnsupportedMechanismError(
            f'{owner}: noise-free debug mode refuses a secure random source (tests only).')


def laplace_sum_bound(scales: Sequence[float], beta: float) -> float:
    """A public γ with P[|Σ_i Y_i| > γ] ≤ β for independent Y_i ~ DLap(scale_i).

    min of (a) the union bound Σ_i b_i·ln(2k/β) (P[|Y| ≥ m] = 2a^m/(1+a) ≤ 2e^{-m/b}) and
    (b) a two-sided Chernoff bound with the exact discrete-Laplace MGF
    M(s) = (1-a)²/((1-ae^s)(1-ae^{-s})), minimised over a grid of s < 1/b_max (any s is valid).
    A deterministic function of public values, so it is privacy-neutral.
    """
    return _laplace_sum_bound(tuple(sorted(float(as_rational_up(b)) for b in scales if b > 0)),
                              float(beta))


@functools.lru_cache(maxsize=65536)
def _laplace_sum_bound(scales: Tuple[float, ...], beta: float) -> float:
    if not scales:
        return 0.0
    k = len(scales)
    b = np.asarray(scales)
    union = float(np.sum(b) * math.log(2 * k / beta))
    s = np.linspace(0.02, 0.98, 49)[:, None] / b.max()
    # In log space: a·e^{±s} = e^{±s - 1/b}, and ±s - 1/b ≤ -0.02/b_max < 0, so no exp
    # overflows, however small the scales (e^s alone overflows once b_max < ~1/720, and then
    # 0·inf made the whole Chernoff branch NaN).
    inv_b = 1.0 / b[None, :]
    log_mgf = np.sum(2 * np.log1p(-np.exp(-inv_b)) - np.log1p(-np.exp(s - inv_b))
                     - np.log1p(-np.exp(-s - inv_b)), axis=1)
    chernoff = (log_mgf - math.log(beta / 2)) / s[:, 0]
    return min(union, float(chernoff.min()))


def counter_noise_scales(counter: InfiniteTreeCounter, s: int) -> Tuple[float, ...]:
    """The Laplace scales summed in the textbook C2 estimate after step s (public)."""
    if s <= 0:
        return ()
    block = s.bit_length() - 1
    scales = [counter.block_noise().param for b in range(block + 1)
              if s >= (1 << (b + 1)) - 1]
    r = s - (1 << block) + 1
    if r < (1 << block):
        scales += [counter.tree_noise(block).param] * bin(r).count('1')
    return tuple(scales)


@functools.lru_cache(maxsize=65536)
def _gamma(epsilon: float, beta: float, steps: int, r: int) -> float:
    eps_r = 3 * epsilon / (2 * math.pi ** 2 * r * r)
    beta_r = beta / (math.pi ** 2 * r * r)
    base = math.log(1 / beta_r) / eps_r
    counter = InfiniteTreeCounter(epsilon=eps_r, estimator='textbook')
    return max(laplace_sum_bound(counter_noise_scales(counter, steps), beta_r), base)


@dataclasses.dataclass(frozen=True)
class NodeState:
    """Immutable node state. ``records`` is D(v) of the current round (id → bin) and
    ``deleted`` the ids deleted in this round; both private and never released."""
    index: int
    round: int
    records: Dict[Hashable, int]
    deleted: frozenset
    n_tilde: int
    static: Tuple[int, ...]
    deletions_hist: object
    deletions_count: object
    steps: int
    halted: bool
    answer: Tuple[float, ...]
    spent_epsilon: float
    restarts: int = 0

    def live_records(self) -> Dict[Hashable, int]:
        return {rid: item for rid, item in self.records.items() if rid not in self.deleted}


@functools.lru_cache(maxsize=4096)
def _round_samplable(epsilon: float, dimension: int, r: int) -> bool:
    """Whether round r's noises (n~, the static release and its two C2 counters) are within
    the exact samplers' range."""
    eps_r = 3 * epsilon / (2 * math.pi ** 2 * r * r)
    try:
        check_noise_scale('NodeMechanism', 1 / eps_r, '')
        InfiniteTreeCounter(epsilon=eps_r, dimension=dimension, estimator='textbook')
    except InvalidParamsError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class NodeMechanism:
    """Algorithm 3 for one tree node with budget ε_v and failure probability β_v.

    Args:
      epsilon: ε_v (pure).
      beta: β_v (public thresholds only).
      dimension: 1 for counts, d for histograms.
      debug: ``NoiseFreeDebug`` for structural tests, else None.
      halt_unsamplable: a node of a deep level, built mid-stream: a round whose noise is past
        the samplers' range halts the node (answers 0) instead of raising. False (the first
        level, checked at construction): such a budget is refused.
    """
    epsilon: float
    beta: float
    dimension: int = 1
    debug: Optional[NoiseFreeDebug] = None
    halt_unsamplable: bool = False
    plugin: Optional[object] = None

    def __post_init__(self):
        owner = type(self).__name__
        if self.plugin is not None:
            if not isinstance(self.plugin, StaticLinearMechanism):
                raise InvalidParamsError(f'{owner}: plugin must be a StaticLinearMechanism, got '
                                         f'{self.plugin!r:.80}.')
            if self.debug is not None:
                raise InvalidParamsError(f'{owner}: debug mode has no plug-in variant.')
            if self.plugin.domain_size != self.dimension:
                raise InvalidParamsError(f'{owner}: plugin domain_size '
                                         f'{self.plugin.domain_size} != dimension '
                                         f'{self.dimension}.')
        object.__setattr__(self, 'epsilon', v.check_positive(owner, 'epsilon', self.epsilon))
        object.__setattr__(self, 'beta', v.check_probability(owner, 'beta', self.beta,
                                                             allow_zero=False))
        object.__setattr__(self, 'dimension', v.check_positive_int(owner, 'dimension',
                                                                   self.dimension))
        if self.debug is None and not self.halt_unsamplable:
            # Round 1's noises; later rounds (scales ∝ r²) halt when past the samplers' range.
            check_noise_scale(owner, 1 / self.round_epsilon(1), 'raise epsilon')
            self._counter(1, self.dimension)

    def privacy_cost(self) -> PrivacyCost:
        if self.debug is not None:
            raise UnsupportedMechanismError('NodeMechanism: debug mode has no privacy cost.')
        return PrivacyCost(epsilon=self.epsilon)

    @property
    def answer_dimension(self) -> int:
        """Bins (Laplace histogram) or |𝒬| (plug-in)."""
        return self.dimension if self.plugin is None else len(self.plugin.queries)

    def round_epsilon(self, r: int) -> float:
        return 3 * self.epsilon / (2 * math.pi ** 2 * r * r)

    def _counter(self, r: int, dimension: int) -> InfiniteTreeCounter:
        return InfiniteTreeCounter(epsilon=self.round_epsilon(r), dimension=dimension,
                                   estimator='textbook')

    def gamma(self, steps: int, r: int) -> float:
        """γ_{s,r} = max(bound on the C2 count error after s steps, (1/ε_r)·ln(1/β_r))."""
        if self.debug is not None and self.debug.gamma is not None:
            return self.debug.gamma
        return _gamma(self.epsilon, self.beta, steps, r)

    def _noise(self, rng: RandomSource, labels, scale: float, size: int) -> np.ndarray:
        if self.debug is not None:
            return np.zeros(size, dtype=np.int64)
        return discrete_laplace(rng.derive(*labels), scale, size)

    def _hist(self, records: Dict[Hashable, int]) -> np.ndarray:
        return np.bincount(np.asarray(list(records.values()), dtype=np.int64),
                           minlength=self.dimension)[:self.dimension]

    def _inner_init(self, r: int, dimension: int):
        if self.plugin is not None and dimension == self.dimension:
            return PluginInsertionCounter(self.plugin, self.round_epsilon(r)).init_state()
        if self.debug is not None:
            return (0,) * dimension
        return self._counter(r, dimension).init_state()

    def _inner_step(self, r: int, state, batch: np.ndarray, rng: RandomSource, labels):
        if isinstance(state, PluginCounterState):
            return PluginInsertionCounter(self.plugin, self.round_epsilon(r)).step(
                state, batch, rng.derive(*labels))
        if self.debug is not None:
            total = tuple(int(a + b) for a, b in zip(state, batch))
            return np.asarray(total, dtype=np.float64), total
        estimate, new = self._counter(r, batch.size).step(state, batch, rng.derive(*labels))
        return np.asarray(estimate, dtype=np.float64).reshape(-1), new

    def _start_round(self, index: int, r: int, records: Dict[Hashable, int], spent: float,
                     restarts: int, rng: RandomSource) -> NodeState:
        eps_r = self.round_epsilon(r)
        if ((r > 1 or self.halt_unsamplable) and self.debug is None
                and not _round_samplable(self.epsilon, self.dimension, r)):
            # Round r's scales (∝ r²) are past the exact samplers' range: the node halts, as
            # it would on its threshold (2γ_r ≥ 2 ln(1/β_r)/ε_r, far above any count at that
            # scale). Decided by r alone, a function of released noisy values: no data used.
            return NodeState(static=(0,) * self.answer_dimension, halted=True,
                             answer=(0.0,) * self.answer_dimension, index=index, round=r,
                             records=dict(records), deleted=frozenset(), n_tilde=0, deletions_hist=None,
                             deletions_count=None, steps=0, spent_epsilon=spent,
                             restarts=restarts)
        n_tilde = len(records) + int(self._noise(rng, ('node-n', index, r), 1 / eps_r, 1)[0])
        common = dict(index=index, round=r, records=dict(records), deleted=frozenset(),
                      n_tilde=n_tilde, deletions_hist=self._inner_init(r, self.dimension),
                      deletions_count=self._inner_init(r, 1), steps=0,
                      spent_epsilon=spent + 4 * eps_r, restarts=restarts)
        if r > 1 and n_tilde < 2 * self.gamma(0, r):
            return NodeState(static=(0,) * self.answer_dimension, halted=True,
                             answer=(0.0,) * self.answer_dimension, **common)
        if self.plugin is not None:
            # M_𝒬's static release S on D(v) (ε_r), answers as unnormalised counts.
            static = tuple(float(x) for x in self.plugin.release(
                self._hist(records), eps_r, rng.derive('node-s', index, r)))
        else:
            static = self._hist(records) + self._noise(rng, ('node-s', index, r), 1 / eps_r,
                                                       self.dimension)
            static = tuple(int(x) for x in static)
        return NodeState(static=static, halted=False, answer=tuple(float(x) for x in static),
                         **common)

    def build(self, index: int, records: Dict[Hashable, int], rng: RandomSource) -> NodeState:
        """Node v_index at its build time: round 1 on ``records`` (id → bin)."""
        check_debug(type(self).__name__, self.debug, rng)
        return self._start_round(index, 1, records, 0.0, 0, rng)

    def step(self, state: NodeState, deletions: Dict[Hashable, int],
             rng: RandomSource) -> Tuple[Tuple[float, ...], NodeState]:
        """One closed segment: ``deletions`` (id → bin) of this node's live records."""
        check_debug(type(self).__name__, self.debug, rng)
        if state.halted:
            # Answers 0 forever; the deletions are only recorded so a retiring node hands
            # on exactly its live records.
            return state.answer, dataclasses.replace(
                state, deleted=state.deleted | frozenset(deletions))
        unknown = [rid for rid in deletions if rid not in state.records or rid in state.deleted]
        if unknown:
            raise InvalidParamsError(f'NodeMechanism: deletions of records not live in node '
                                     f'{state.index}: {unknown[:3]!r}.')
        r, steps = state.round, state.steps + 1
        batch = self._hist(deletions) if deletions else np.zeros(self.dimension, dtype=np.int64)
        hist_est, hist_state = self._inner_step(
            r, state.deletions_hist, batch, rng, ('node-qins', state.index, r, steps))
        count_est, count_state = self._inner_step(
            r, state.deletions_count, np.asarray([len(deletions)], dtype=np.int64),
            rng, ('node-lapins', state.index, r, steps))
        deleted = state.deleted | frozenset(deletions)
        if count_est[0] > state.n_tilde / 2 + 2 * self.gamma(steps, r):
            survivors = {rid: it for rid, it in state.records.items() if rid not in deleted}
            new = self._start_round(state.index, r + 1, survivors, state.spent_epsilon,
                                    state.restarts + 1, rng)
            return new.answer, new
        answer = tuple(float(s - h) for s, h in zip(state.static, hist_est))
        new = dataclasses.replace(state, deleted=deleted, deletions_hist=hist_state,
                                  deletions_count=count_state, steps=steps, answer=answer)
        return answer, new
