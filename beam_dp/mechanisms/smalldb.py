"""SmallDB (Blum, Ligett, Roth 2008) as a static black box, and SmallDBG (Cummings, Krehbiel, Lai,
Tantipongpipat, "Differential Privacy for Growing Databases", NeurIPS 2018, Theorem 9): BBScheduler
rerunning SmallDB as the database grows (spec 000 §2.6).

``SmallDB`` is the exponential mechanism over every synthetic database of m records
(multisets of the domain {0, ..., N−1}: C(N+m−1, m) candidates) with utility
u(x, y) = −max_{f∈ℱ} |f(x) − f(y)| (sensitivity 1/t on a size-t database, swap-one), so
Pr[y] ∝ exp(−ε t max_f |f(x) − f(y)| / 2): pure ε-DP. It is sampled exactly
(``beam_dp.noise.exponential``: integer losses, a coefficient rounded down). The release is the
synthetic database; every query is answered from it (post-processing).

SmallDB is exponential in the domain: the candidate set is enumerated. ``SmallDB`` and
``smalldbg`` refuse at construction (``InvalidParamsError``) when C(N+m−1, m) exceeds
``max_candidates`` (default ``MAX_CANDIDATES`` = 100,000; at most ``HARD_MAX_CANDIDATES``).

``smalldbg`` builds the ``BBScheduler`` of Theorem 9: p = 1/3, g = (64 ln N ln k)^{1/3}, so
γ = (64 ln N ln k · ln((1+β)/β)/(εn))^{1/5}; α_i = γ(1+γ)^{2/3} is the same in every epoch
(spec §2.5), hence one synthetic size m = ⌈ln k / α²⌉ for the whole stream, known (and checked)
at construction. Guarantee: every answer to a query of ℱ within γ(1+γ)^{2/3} + γ/(1+γ) w.p.
≥ 1 − β (δ = 0; (1+γ)^{1/2} for δ > 0).
"""

import dataclasses
import functools
import itertools
import math
from typing import Any, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import bbscheduler_gamma
from beam_dp.noise import RandomSource
from beam_dp.noise.exponential import exponential_mechanism
from beam_dp.noise.exponential import rational_down
from beam_dp.queries import LinearQuery

__all__ = [
    'HARD_MAX_CANDIDATES',
    'MAX_CANDIDATES',
    'QUERY_GRID_BITS',
    'SmallDB',
    'SyntheticDatabase',
    'smalldb_candidates',
    'smalldb_probabilities',
    'smalldb_size',
    'smalldbg',
    'smalldbg_alpha',
]

#: The default cap on the candidate count C(N+m−1, m) (documented in docs/growing_databases.md).
MAX_CANDIDATES = 100_000
#: The largest cap a caller may set (an epoch run then takes seconds and ~N·8 MB).
HARD_MAX_CANDIDATES = 2_000_000
#: Query weights must be multiples of 2^-QUERY_GRID_BITS (exact integer utilities).
QUERY_GRID_BITS = 16


def smalldb_size(k: int, alpha: float) -> int:
    """m = ⌈ln k / α²⌉ (at least 1): the synthetic database size for k queries and accuracy α
    (spec E9: ln|ℱ|/α², not ln|ℱ|/α)."""
    return max(1, math.ceil(math.log(k) / (alpha * alpha) * (1 - 1e-12)))


def smalldb_candidates(domain_size: int, m: int) -> int:
    """C(N+m−1, m): the number of synthetic databases of m records over N elements."""
    return math.comb(domain_size + m - 1, m)


@functools.lru_cache(maxsize=8)
def _candidates(domain_size: int, m: int) -> np.ndarray:
    """Every multiset of size m as a count vector (rows; read-only, lexicographic order)."""
    rows = np.zeros((smalldb_candidates(domain_size, m), domain_size), dtype=np.int64)
    for r, combo in enumerate(itertools.combinations_with_replacement(range(domain_size), m)):
        for i in combo:
            rows[r, i] += 1
    rows.setflags(write=False)
    return rows


def _integer_queries(owner: str, queries: Sequence[LinearQuery]) -> np.ndarray:
    """The k×N integer matrix 2^QUERY_GRID_BITS · f (exact).

    Raises:
      InvalidParamsError: for a weight that is not a multiple of 2^-QUERY_GRID_BITS.
    """
    scale = float(1 << QUERY_GRID_BITS)
    dense = np.stack([q.dense() for q in queries]) * scale
    ints = np.round(dense)
    if not np.array_equal(ints, dense):
        raise InvalidParamsError(
            f'{owner}: query weights must be multiples of 2^-{QUERY_GRID_BITS} (exact utilities); '
            f'round them: LinearQuery.from_vector(np.round(v * 2**{QUERY_GRID_BITS}) / '
            f'2**{QUERY_GRID_BITS}). Counting, range, point and marginal queries always are.')
    return ints.astype(np.int64)


@dataclasses.dataclass(frozen=True)
class SyntheticDatabase:
    """A SmallDB release: the synthetic counts (sum m). Public."""
    counts: Tuple[int, ...]
    m: int

    def answer(self, query: LinearQuery) -> float:
        return query.evaluate(np.asarray(self.counts, dtype=np.float64)) / self.m


def _losses(ints: np.ndarray, cands: np.ndarray, counts: np.ndarray, t: int, m: int):
    """max_f |m·F·x − t·F·y| for every candidate y: t·m·2^b times the SmallDB error (integers)."""
    if int(m) * int(t) * (1 << QUERY_GRID_BITS) * 2 < (1 << 62):
        fx = ints @ counts                                    # k, each ≤ t·2^b
        fy = cands @ ints.T                                   # C×k, each ≤ m·2^b
        return np.abs(m * fx[None, :] - t * fy).max(axis=1)
    # Huge t: exact Python integers (object arrays).
    fx = (ints.astype(object) @ counts.astype(object)) * int(m)
    fy = (cands.astype(object) @ ints.T.astype(object)) * int(t)
    return np.abs(fx[None, :] - fy).max(axis=1)


@dataclasses.dataclass(frozen=True)
class SmallDB:
    """SmallDB: the exponential mechanism over synthetic databases of ``m`` records (a
    (1/3, (64 ln N ln k)^{1/3})-black box, ``StaticMechanism``).

    Privacy unit and relation: one record, swap-one (t public): u has sensitivity 1/t.

    Sensitivity and guarantee: pure ε-DP (exponential mechanism, coefficient ε t/2 rounded
    down, exact sampling); the release is the synthetic database, queries are post-processing.

    Not guaranteed: accuracy, which BLR08 gives for the k queries of ``queries`` only:
    α ≥ C((ln N ln k + ln(1/β))/(εn))^{1/3} w.p. 1 − β when m = ⌈ln k/α²⌉. Other queries over
    the domain are answered from the synthetic database too, without a bound.

    Cite: Blum, Ligett, Roth 2008; Cummings et al. 2018, Thm 7 and Thm 9.

    Args:
      queries: the class ℱ (k ≥ 1 ``LinearQuery`` over one domain; weights multiples of
        2^-16). m: the synthetic size. max_candidates: the cap on C(N+m−1, m).

    Raises:
      InvalidParamsError: on a bad parameter, or C(N+m−1, m) > max_candidates (SmallDB is
        exponential in the domain).
    """
    queries: Tuple[LinearQuery, ...]
    m: int
    max_candidates: int = MAX_CANDIDATES
    name: str = 'smalldb'

    def __post_init__(self):
        owner = 'SmallDB'
        qs = tuple(self.queries) if isinstance(self.queries, (list, tuple)) else None
        if not qs or not all(isinstance(q, LinearQuery) for q in qs):
            raise InvalidParamsError(f'{owner}: queries must be a non-empty sequence of '
                                     f'LinearQuery, got {self.queries!r:.80}.')
        if len({q.domain_size for q in qs}) != 1:
            raise InvalidParamsError(f'{owner}: queries must share one domain size.')
        qs = tuple(dict.fromkeys(q.with_id(None) for q in qs))
        object.__setattr__(self, 'queries', qs)
        m = v.check_positive_int(owner, 'm', self.m)
        cap = v.check_positive_int(owner, 'max_candidates', self.max_candidates)
        if cap > HARD_MAX_CANDIDATES:
            raise InvalidParamsError(f'{owner}: max_candidates must be at most '
                                     f'{HARD_MAX_CANDIDATES:,}, got {cap:,}.')
        count = smalldb_candidates(self.domain_size, m)
        if count > cap:
            raise InvalidParamsError(_too_large(owner, self.domain_size, m, count, cap))
        object.__setattr__(self, '_ints', _integer_queries(owner, qs))

    @property
    def domain_size(self) -> int:
        return self.queries[0].domain_size

    @property
    def k(self) -> int:
        return len(self.queries)

    @property
    def p(self) -> float:
        return 1.0 / 3.0

    @property
    def g(self) -> float:
        """(64 ln N ln k)^{1/3} (Section 3.1.1); 0 when N or k is 1 (then use another box)."""
        return (64 * math.log(self.domain_size) * math.log(self.k)) ** (1.0 / 3.0)

    def cost(self, epsilon: float) -> PrivacyCost:
        return PrivacyCost(epsilon=epsilon, relation=SWAP_ONE)

    def coefficient(self, epsilon: float) -> Tuple[int, int]:
        """(num, den): the exponent per unit of integer loss, ε/(2·m·2^b) rounded down.

        The loss of candidate y is L = max_f |m·2^b f·x − t·2^b f·y| = t·m·2^b·err(y), and
        exp(−ε t err/2) = exp(−ε L/(2 m 2^b))."""
        num, den = rational_down(epsilon)
        return num, den * 2 * self.m * (1 << QUERY_GRID_BITS)

    def losses(self, counts, t: int) -> np.ndarray:
        """The integer loss of every candidate (``candidates()`` order)."""
        counts = np.asarray(counts, dtype=np.int64)
        return _losses(self._ints, self.candidates(), counts, int(t), self.m)

    def candidates(self) -> np.ndarray:
        return _candidates(self.domain_size, self.m)

    def run(self, counts, t, epsilon, alpha, ln_inv_beta, rng: RandomSource) -> SyntheticDatabase:
        del alpha, ln_inv_beta
        num, den = self.coefficient(epsilon)
        r = exponential_mechanism(rng, self.losses(counts, t), num, den)
        row = self.candidates()[r]
        return SyntheticDatabase(tuple(int(c) for c in row), self.m)

    def answer(self, epoch: SyntheticDatabase, query: LinearQuery, rng) -> Tuple[Any, Any]:
        del rng
        return epoch.answer(query), epoch


def smalldb_probabilities(box: SmallDB, counts, t: int, epsilon: float) -> np.ndarray:
    """The exact law of ``box.run`` (float64, ``candidates()`` order): for tests and docs."""
    num, den = box.coefficient(epsilon)
    losses = np.array([int(x) for x in box.losses(counts, t)], dtype=np.float64)
    logw = -(losses - losses.min()) * (num / den)
    w = np.exp(logw)
    return w / w.sum()


def _too_large(owner: str, n_dom: int, m: int, count: int, cap: int) -> str:
    return (f'{owner}: SmallDB is exponential in the domain: N={n_dom} and a synthetic size '
            f'm={m} give C(N+m-1, m)={count:,} candidate databases, above max_candidates='
            f'{cap:,}. Use a smaller domain or fewer/looser queries (m = ceil(ln k / alpha^2)), '
            f'or a polynomial black box (StaticPMWBox with BBSchedulerQueries, or WindowedPMWG).')


def smalldbg_alpha(gamma: float, delta: float) -> float:
    """α_i = γ(1+γ)^{2p} (δ = 0) or γ(1+γ)^{1.5p} (δ > 0), p = 1/3: the same in every epoch."""
    p = 1.0 / 3.0
    return gamma * (1 + gamma) ** ((2 if delta == 0 else 1.5) * p)


def smalldbg(*, queries: Sequence[LinearQuery], epsilon: float, beta: float, n: int,
             delta: float = 0.0, lazy: bool = False,
             max_candidates: int = MAX_CANDIDATES) -> BBScheduler:
    """SmallDBG (Theorem 9): a ``BBScheduler`` running ``SmallDB`` with m = ⌈ln k/α²⌉,
    α = ``smalldbg_alpha(γ, δ)``.

    Privacy unit and relation: one record, swap-one; the size t is PUBLIC (the schedule).

    Sensitivity and guarantee: ε-DP (δ = 0: Σ ε_i ≤ ε) or (ε, δ)-DP (CDP composition).

    Not guaranteed: accuracy, which is γ(1+γ)^{2/3} + γ/(1+γ) for every query of ℱ at every
    time w.p. ≥ 1 − β (``BBScheduler.guaranteed_error()``).

    Cite: Cummings et al. 2018, Theorem 9 (with the proof's γ, spec E2-E3).

    Raises:
      InvalidParamsError: k < 2 or N < 2 (g = 0), γ ∉ (0, 1) (increase n or ε), or more than
        ``max_candidates`` synthetic databases (SmallDB is exponential in the domain).
    """
    owner = 'SmallDBG'
    qs = tuple(queries) if isinstance(queries, (list, tuple)) else ()
    if not qs or not all(isinstance(q, LinearQuery) for q in qs):
        raise InvalidParamsError(f'{owner}: queries must be a non-empty sequence of LinearQuery, '
                                 f'got {queries!r:.80}.')
    k = len(dict.fromkeys(q.with_id(None) for q in qs))
    n_dom = qs[0].domain_size
    if k < 2 or n_dom < 2:
        raise InvalidParamsError(f'{owner}: needs at least 2 distinct queries over a domain of at '
                                 f'least 2 elements (g = (64 ln N ln k)^(1/3) is 0 otherwise), '
                                 f'got k={k}, N={n_dom}; for one query use LaplaceQueryVector '
                                 f'with BBSchedulerQueries.')
    eps = v.check_positive(owner, 'epsilon', epsilon)
    v.check_probability(owner, 'beta', beta, allow_zero=False)
    v.check_probability(owner, 'delta', delta)
    n = v.check_positive_int(owner, 'n', n)
    g = (64 * math.log(n_dom) * math.log(k)) ** (1.0 / 3.0)
    gamma = bbscheduler_gamma(eps, delta, beta, n, 1.0 / 3.0, g)
    if not 0 < gamma < 1:
        raise InvalidParamsError(f'{owner}: gamma = (64 ln N ln k ln((1+beta)/beta)/(epsilon n))'
                                 f'^(1/5) must be in (0, 1) (spec P13), got {gamma:g}; increase '
                                 f'n or epsilon.')
    m = smalldb_size(k, smalldbg_alpha(gamma, delta))
    cap = v.check_positive_int(owner, 'max_candidates', max_candidates)
    count = smalldb_candidates(n_dom, m)
    if count > min(cap, HARD_MAX_CANDIDATES):
        raise InvalidParamsError(_too_large(owner, n_dom, m, count, min(cap, HARD_MAX_CANDIDATES)))
    box = SmallDB(qs, m, max_candidates=cap)
    return BBScheduler(mechanism=box, epsilon=eps, beta=beta, n=n, domain_size=n_dom,
                       delta=delta, lazy=lazy)
