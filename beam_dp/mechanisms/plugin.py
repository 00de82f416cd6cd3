"""Qiu & Yi's static-mechanism plug-in contract (spec 001 §2.1) and two static mechanisms for a
fixed class 𝒬 of linear queries, plus the insertion-only continual wrapper the per-node
deletion mechanism (Algorithm 3) runs on them.

Contract (``StaticLinearMechanism``): ``release(counts, epsilon, rng)`` is ε-DP (pure) under
add/remove-one record of the histogram ``counts`` (domain {0..N-1}) and returns the answers of
every query of 𝒬 as UNNORMALISED counts f(D) = Σ_{x∈D} f(x) (a tuple of floats, public). Linear
queries are union-preserving, so answers of runs on disjoint multisets add (every construction
of the paper only ever releases on disjoint multisets and adds answers).

* ``LaplaceHistogram``: counts + DLap(1/ε) per bin (L1 sensitivity 1), answers by
  post-processing (f·noisy histogram). Error (1/ε)·ln(N/β) per bin.
* ``StaticPMW``: private multiplicative weights (Hardt & Rothblum 2010, Numeric Sparse form of
  ``beam_dp.mechanisms.pmw``) over 𝒬 in a fixed order. The size is not public under add/remove
  neighbours, so a fraction ``size_fraction`` of ε releases n̂ = |D| + DLap (spec 001 §2.2,
  "PMW/MWEM plug-in note"); t = max(n̂, 1) is then public and every query value f(D)/t has
  sensitivity 1/t, which is all Numeric Sparse's proof uses (the remaining ε is PMW's, with its
  hard-query cap). Answers are t·(PMW answer); after the cap (or for easy queries) they are the
  public estimate t·<f, y>. Error Õ(n^{2/3}) (δ = 0; spec §2.2 PMW row) on top of the
  size error.

``PluginInsertionCounter``: the insertion-only continual mechanism M_{𝒬-Ins} with a static plug-in,
on the dyadic (Fenwick) decomposition of the step axis: step s releases node s, covering steps
(s − lowbit(s), s], at level ℓ = trailing_zeros(s) + 1 with ε_ℓ = 6ε/(π²ℓ²); a step's batch
lies in one node per level (parallel composition within a level, sequential across levels,
Σ_ℓ ε_ℓ = ε for any number of steps). The answer after s steps is the sum of the prefix chain of
s (≤ ⌊log₂ s⌋ + 1 summaries). This is the Basel-split variant of C2 (Chan–Shi–Song): it pays
log s instead of √log s in the noise of each piece, and needs no horizon.
"""

import dataclasses
from typing import Any, Dict, Protocol, Sequence, Tuple, runtime_checkable

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import basel_weight
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import fenwick
from beam_dp.mechanisms.growing_svt import SVTRound
from beam_dp.mechanisms.pmw import PrivateMultiplicativeWeights
from beam_dp.mechanisms.pmw import mw_update
from beam_dp.mechanisms.pmw import pmw_classify
from beam_dp.mechanisms.pmw import public_estimate
from beam_dp.mechanisms.pmw import uniform_log_histogram
from beam_dp.noise import RandomSource
from beam_dp.noise import discrete_laplace
from beam_dp.noise import noise_scale_problem
from beam_dp.queries import LinearQuery

__all__ = [
    'LaplaceHistogram',
    'PluginCounterState',
    'PluginInsertionCounter',
    'StaticLinearMechanism',
    'StaticPMW',
    'check_queries',
    'exact_answers',
]


@runtime_checkable
class StaticLinearMechanism(Protocol):
    """Spec 001 §2.1: ε-DP (add/remove one record) static release of the answers to a fixed
    query class as unnormalised counts."""
    domain_size: int
    queries: Tuple[LinearQuery, ...]
    name: str

    def release(self, counts: np.ndarray, epsilon: float,
                rng: RandomSource) -> Tuple[float, ...]:
        ...


def check_queries(owner: str, queries, domain_size: int) -> Tuple[LinearQuery, ...]:
    """A non-empty tuple of LinearQuery over ``domain_size``, else InvalidParamsError."""
    if isinstance(queries, (str, bytes)):
        raise InvalidParamsError(f'{owner}: queries must be a sequence of LinearQuery.')
    try:
        qs = tuple(queries)
    except TypeError:
        raise InvalidParamsError(f'{owner}: queries must be a sequence of LinearQuery, '
                                 f'got {queries!r:.80}.') from None
    if not qs or not all(isinstance(q, LinearQuery) for q in qs):
        raise InvalidParamsError(f'{owner}: queries must be a non-empty sequence of '
                                 f'LinearQuery, got {queries!r:.80}.')
    for q in qs:
        if q.domain_size != domain_size:
            raise InvalidParamsError(f'{owner}: every query must be over a domain of size '
                                     f'{domain_size}, got {q.domain_size}.')
    return qs


def _counts(counts, domain_size: int) -> np.ndarray:
    c = np.asarray(counts, dtype=np.int64).reshape(-1)
    if c.shape != (domain_size,):
        raise InvalidParamsError(f'static release: counts must have {domain_size} bins, '
                                 f'got shape {c.shape}.')
    return c


@dataclasses.dataclass(frozen=True)
class LaplaceHistogram:
    """The Laplace histogram over a known domain (spec 001 §2.2, last row): pure ε-DP under
    add/remove one record; answers f·(counts + DLap(1/ε)). A scale past the exact samplers'
    range (a function of ε only, so of public values) releases zeros."""
    domain_size: int
    queries: Tuple[LinearQuery, ...]
    name: str = 'laplace_histogram'

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive_int(owner, 'domain_size', self.domain_size)
        object.__setattr__(self, 'queries', check_queries(owner, self.queries,
                                                          self.domain_size))

    def cost(self, epsilon: float) -> PrivacyCost:
        return PrivacyCost(epsilon=epsilon)

    def release(self, counts, epsilon: float, rng: RandomSource) -> Tuple[float, ...]:
        c = _counts(counts, self.domain_size)
        if noise_scale_problem(1 / epsilon) is not None:
            return (0.0,) * len(self.queries)
        noisy = c + discrete_laplace(rng.derive('hist'), 1 / epsilon, self.domain_size)
        return tuple(float(q.evaluate(noisy)) for q in self.queries)


@dataclasses.dataclass(frozen=True)
class StaticPMW:
    """Static PMW over a fixed query class, pure ε-DP under add/remove one record (module doc).

    Args:
      domain_size: N ≥ 2. queries: 𝒬 (answered in this order, ``passes`` times; the hard-query
        cap, not the number of queries, sets the privacy cost, so extra passes are free).
      alpha: PMW's target accuracy as a fraction of the size, in (0, 1].
      size_fraction: share of each release's ε spent on n̂ (default ¼).
    """
    domain_size: int
    queries: Tuple[LinearQuery, ...]
    alpha: float = 0.2
    size_fraction: float = 0.25
    passes: int = 1
    name: str = 'static_pmw'

    def __post_init__(self):
        owner = type(self).__name__
        if v.check_positive_int(owner, 'domain_size', self.domain_size) < 2:
            raise InvalidParamsError(f'{owner}: domain_size must be at least 2, '
                                     f'got {self.domain_size}.')
        object.__setattr__(self, 'queries', check_queries(owner, self.queries,
                                                          self.domain_size))
        a = v.check_positive(owner, 'alpha', self.alpha)
        if a > 1:
            raise InvalidParamsError(f'{owner}: alpha must be in (0, 1], got {a:g}.')
        v.check_probability(owner, 'size_fraction', self.size_fraction, allow_zero=False)
        if self.size_fraction >= 1:
            raise InvalidParamsError(f'{owner}: size_fraction must be < 1.')
        v.check_positive_int(owner, 'passes', self.passes)

    def cost(self, epsilon: float) -> PrivacyCost:
        return PrivacyCost(epsilon=epsilon)

    def release(self, counts, epsilon: float, rng: RandomSource) -> Tuple[float, ...]:
        c = _counts(counts, self.domain_size)
        eps_n = self.size_fraction * epsilon
        if noise_scale_problem(1 / eps_n) is not None:
            return (0.0,) * len(self.queries)
        n_hat = int(c.sum()) + int(discrete_laplace(rng.derive('size'), 1 / eps_n))
        t = max(n_hat, 1)
        pmw = PrivateMultiplicativeWeights(epsilon=epsilon - eps_n, alpha=self.alpha, n=t,
                                           domain_size=self.domain_size)
        xi, xi_delta, cap = pmw.xi, pmw.xi_delta, pmw.hard_cap
        log_y = uniform_log_histogram(self.domain_size)
        rnd, hard, halted = SVTRound(), 0, False
        answers = [0.0] * len(self.queries)
        for p in range(self.passes):
            for j, q in enumerate(self.queries):
                estimate = public_estimate(log_y, q)
                answers[j] = estimate
                if halted:
                    continue
                noisy, rnd = pmw_classify(rnd, q.evaluate(c) / t, estimate, t, xi, xi_delta,
                                          2 * self.alpha / 3, rng.derive('query', p, j))
                if noisy is None:
                    continue
                hard += 1
                if hard > cap:
                    halted = True      # the capped hard answer is not released
                    continue
                log_y = mw_update(log_y, q, self.alpha / 6, noisy, estimate)
                answers[j] = noisy
        # Clipping each fraction to [0, 1] is post-processing (f ∈ [0, 1]^N).
        return tuple(float(t * min(1.0, max(0.0, a))) for a in answers)


@dataclasses.dataclass(frozen=True)
class PluginCounterState:
    """``steps`` taken, ``acc`` the open interval's accumulated histogram per level (private),
    ``released`` node → answers for the current prefix chain (public), ``total`` (private)."""
    steps: int
    acc: Dict[int, np.ndarray]
    total: np.ndarray
    released: Dict[int, Tuple[float, ...]]


@dataclasses.dataclass(frozen=True)
class PluginInsertionCounter:
    """M_{𝒬-Ins}: continual answers of 𝒬 over an insertion-only stream of histogram batches, ε-DP
    (pure) under one record more or less in one batch (module doc)."""
    plugin: Any
    epsilon: float

    def level_epsilon(self, level: int) -> float:
        return self.epsilon * basel_weight(level)

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.epsilon)

    def init_state(self) -> PluginCounterState:
        return PluginCounterState(0, {}, np.zeros(self.plugin.domain_size, dtype=np.int64), {})

    def step(self, state: PluginCounterState, batch: Sequence[int],
             rng: RandomSource) -> Tuple[np.ndarray, PluginCounterState]:
        """Adds one step's batch (a histogram); returns the answers after it."""
        b = np.asarray(batch, dtype=np.int64).reshape(-1)
        s = state.steps + 1
        acc = {}
        for level in range(s.bit_length() + 1):
            # The level's open interval is the aligned block of 2**level steps holding s; a
            # level not seen before started at step 1, so it holds the running total.
            prev = None if (s - 1) % (1 << level) == 0 else state.acc.get(level, state.total)
            acc[level] = b if prev is None else prev + b
        level = fenwick.node_level(s)
        summary = self.plugin.release(acc[level - 1], self.level_epsilon(level),
                                      rng.derive('dyadic', s))
        chain = fenwick.prefix_chain(s)
        released = {a: ans for a, ans in state.released.items() if a in chain}
        released[s] = tuple(summary)
        answer = np.zeros(len(self.plugin.queries))
        for a in chain:
            answer += np.asarray(released[a])
        return answer, PluginCounterState(s, acc, state.total + b, released)


def exact_answers(queries: Sequence[LinearQuery], counts) -> Tuple[float, ...]:
    """f(D) for every query (tests and benchmarks)."""
    return tuple(float(q.evaluate(np.asarray(counts))) for q in queries)

