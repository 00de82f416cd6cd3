"""Static black boxes for ``BBScheduler`` / ``BBImprover`` (Cummings et al., "Differential
Privacy for Growing Databases", NeurIPS 2018, Definitions 4-5): pure ε-DP mechanisms run on a
database snapshot that return an *epoch object* answering every query of the epoch by
post-processing.

``LaplaceQueryVector`` (Lap(k/(εt)) on k fixed linear queries), ``StaticPMWBox`` (static PMW run
on the snapshot) and ``CallableBlackBox`` (any user function that promises pure ε-DP), all of
the ``StaticMechanism`` protocol.
"""

import dataclasses
import math
from typing import Any, Callable, Protocol, Tuple, runtime_checkable

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.pmw import PrivateMultiplicativeWeights
from beam_dp.noise import RandomSource
from beam_dp.noise.real_laplace import grid_laplace
from beam_dp.queries import LinearQuery

__all__ = [
    'CallableBlackBox',
    'LaplaceQueryVector',
    'StaticMechanism',
    'StaticPMWBox',
    'check_black_box',
]


@runtime_checkable
class StaticMechanism(Protocol):
    """A (p, g)-black box (Def 4/5): pure ε-DP on a snapshot; w.p. ≥ 1−β every answer is within
    α ≥ g(ln(1/β)/(εn))^p. ``run`` returns an immutable epoch object; ``answer`` post-processes
    it (it may return an updated epoch object, e.g. PMW's public histogram); ``cost(ε)`` must be
    a pure cost of at most ε."""
    name: str
    p: float
    g: float

    def run(self, counts: np.ndarray, t: int, epsilon: float, alpha: float, ln_inv_beta: float,
            rng: RandomSource) -> Any:
        ...

    def answer(self, epoch: Any, query: LinearQuery, rng: RandomSource) -> Tuple[Any, Any]:
        ...

    def cost(self, epsilon: float) -> PrivacyCost:
        ...


@dataclasses.dataclass(frozen=True)
class _VectorRelease:
    values: Tuple[float, ...]
    index: Any   # dict: query (without id) -> position


@dataclasses.dataclass(frozen=True)
class LaplaceQueryVector:
    """The Laplace mechanism on k fixed linear queries: each answer + Lap(k/(εt)) (L1 sensitivity
    k/t), released on the exact grid. A (1, k(1+ln k))-black box for β ≤ 1/e (g = 1 for k = 1;
    from its exact failure bound α = k ln(k/β)/(εt)). Queries outside the fixed set get
    'unknown_query'."""
    queries: Tuple[LinearQuery, ...]
    name: str = 'laplace_query_vector'

    def __post_init__(self):
        owner = 'LaplaceQueryVector'
        qs = tuple(self.queries)
        if not qs or not all(isinstance(q, LinearQuery) for q in qs):
            raise InvalidParamsError(f'{owner}: queries must be a non-empty sequence of '
                                     f'LinearQuery, got {self.queries!r:.80}.')
        if len({q.domain_size for q in qs}) != 1:
            raise InvalidParamsError(f'{owner}: queries must share one domain size.')
        object.__setattr__(self, 'queries', tuple(q.with_id(None) for q in qs))

    @property
    def p(self) -> float:
        return 1.0

    @property
    def g(self) -> float:
        k = len(self.queries)
        return 1.0 if k == 1 else k * (1 + math.log(k))

    def cost(self, epsilon: float) -> PrivacyCost:
        return PrivacyCost(epsilon=epsilon, relation=SWAP_ONE)

    def noise_scale(self, epsilon: float, t: int) -> float:
        return len(self.queries) / (epsilon * t)

    def run(self, counts, t, epsilon, alpha, ln_inv_beta, rng) -> _VectorRelease:
        del alpha, ln_inv_beta
        exact = np.array([q.evaluate(counts) for q in self.queries]) / t
        # Each coordinate has sensitivity 1/t and costs ε/k: k coordinates cost ε.
        noisy, _ = grid_laplace(rng, exact, self.noise_scale(epsilon, t), 1.0 / t)
        return _VectorRelease(tuple(float(x) for x in noisy),
                              {q: j for j, q in enumerate(self.queries)})

    def answer(self, epoch: _VectorRelease, query: LinearQuery, rng) -> Tuple[Any, Any]:
        del rng
        j = epoch.index.get(query.with_id(None))
        return (None if j is None else epoch.values[j]), epoch


@dataclasses.dataclass(frozen=True)
class StaticPMWBox:
    """Static PMW (``PrivateMultiplicativeWeights``, pure ε) run on the epoch's snapshot with the
    scheduler's ε_i and α_i (capped at 1). ``g`` is the constant of Theorem 8's
    α ≥ g(ln N ln(k/β)/(εn))^{1/3}, which the paper leaves implicit: the caller supplies it.
    Queries are answered by the epoch's PMW instance (which may halt: then None)."""
    domain_size: int
    g: float
    p: float = 1.0 / 3.0
    name: str = 'static_pmw'

    def __post_init__(self):
        owner = 'StaticPMWBox'
        v.check_positive_int(owner, 'domain_size', self.domain_size)
        v.check_positive(owner, 'g', self.g)
        v.check_positive(owner, 'p', self.p)

    def cost(self, epsilon: float) -> PrivacyCost:
        return PrivacyCost(epsilon=epsilon, relation=SWAP_ONE)

    def run(self, counts, t, epsilon, alpha, ln_inv_beta, rng):
        del ln_inv_beta, rng
        pmw = PrivateMultiplicativeWeights(epsilon=epsilon, alpha=min(1.0, alpha), n=t,
                                           domain_size=self.domain_size)
        return pmw, pmw.init_state(counts)

    def answer(self, epoch, query, rng):
        pmw, state = epoch
        ans, state = pmw.answer(state, query, rng)
        return (ans.value if ans.status in ('easy', 'hard') else None), (pmw, state)


@dataclasses.dataclass(frozen=True)
class CallableBlackBox:
    """A user-supplied pure ε-DP box: ``run_fn(counts, t, epsilon, alpha, ln_inv_beta, rng)``
    returns an epoch object, ``answer_fn(epoch, query)`` post-processes it (no data access).
    The user declares (p, g) and is responsible for ``run_fn`` being ε-DP with Δ = 1/t."""
    run_fn: Callable
    answer_fn: Callable
    p: float
    g: float
    name: str = 'user_black_box'

    def __post_init__(self):
        owner = 'CallableBlackBox'
        if not callable(self.run_fn) or not callable(self.answer_fn):
            raise InvalidParamsError(f'{owner}: run_fn and answer_fn must be callable.')
        v.check_positive(owner, 'p', self.p)
        v.check_positive(owner, 'g', self.g)

    def cost(self, epsilon: float) -> PrivacyCost:
        return PrivacyCost(epsilon=epsilon, relation=SWAP_ONE)

    def run(self, counts, t, epsilon, alpha, ln_inv_beta, rng):
        return self.run_fn(counts, t, epsilon, alpha, ln_inv_beta, rng)

    def answer(self, epoch, query, rng):
        del rng
        return self.answer_fn(epoch, query), epoch


def check_black_box(owner: str, box) -> None:
    """Raises ``InvalidParamsError`` unless ``box`` implements ``StaticMechanism``."""
    if not isinstance(box, StaticMechanism):
        raise InvalidParamsError(f'{owner}: mechanism must implement StaticMechanism (name, p, g, '
                                 f'run, answer, cost), got {box!r:.80}.')
