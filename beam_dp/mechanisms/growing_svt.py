"""Sparse vector for growing databases: ATG, NATG and NSG (Cummings, Krehbiel, Lai, Tantipongpipat,
"Differential Privacy for Growing Databases", NeurIPS 2018, Appendix C, Algorithms 4-6).

The database starts with n records at t = n and grows by one record per time step, so t is both
the time and the (public) size. A query at time t is a linear query f ∈ [0, 1]^N answered on the
fractional histogram x_t = counts/t: sensitivity Δ_t = 1/t. The noise function is
ξ_t = c·t^p (``PowerNoise``), non-decreasing with ξ_tΔ_t = c·t^(p-1) non-increasing for
p ∈ [0, 1], as Theorems 25-31 assume.

One round (ATG, Alg 4) draws the threshold noise η ~ Lap(2) ONCE and uses T̂_t = T + η/ξ_t for
every query of the round, rescaled as ξ_t grows (a fresh draw per time step would
make every step a new sparse-vector instance with divergent total cost). Each query adds a fresh
ν ~ Lap(4/ξ_t); the first query with f(x_t) + ν ≥ T̂_t halts the round (≥ kept exactly, P10).
NATG (Alg 5) releases f(x_t) + Lap(8/ξ_t) on the halting query; NSG (Alg 6) starts a new NATG
round at the next query after each halt.

Exact noise on a grid (docs/privacy_model.md). Statistics are floored onto the public grid
2^-k_t with k_t = ``grid_bits(1/t)`` and compared in integers; ν and the numeric answer are
exact discrete Laplace calibrated to the grid sensitivity (``beam_dp.noise.real_laplace``:
cost exactly as the paper's continuous noise). η lives on the grid 2^-j with
ξ_{t₀}Δ_{t₀}·2^j ≥ 2^10 (t₀ = round start) and has scale ``ETA_SCALE`` = 2·(1 + 2^-7): the
proof shifts η by ξ_{t₀}Δ_{t₀}; on the grids the shift needed is at most
ξ_{t₀}Δ_{t₀}·(1 + 5·2^-10), which the 2^-7 inflation pays for, so every cost below is the
paper's, unchanged.
"""

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.accounting import SWAP_ONE
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.noise import RandomSource
from beam_dp.noise.real_laplace import discrete_laplace_any
from beam_dp.noise.real_laplace import floor_to_grid
from beam_dp.noise.real_laplace import from_grid
from beam_dp.noise.real_laplace import grid_bits
from beam_dp.noise.real_laplace import grid_laplace_scale
from beam_dp.queries import LinearQuery

__all__ = [
    'ETA_SCALE',
    'NUMERIC_SCALE',
    'NU_SCALE',
    'AboveThresholdGrowing',
    'GrowingSVTState',
    'NumericAboveThresholdGrowing',
    'NumericSparseGrowing',
    'PowerNoise',
    'SVTAnswer',
    'SVTRound',
    'add_records',
    'svt_query',
    'threshold_value',
]

#: η ~ Lap(ETA_SCALE) per round: the paper's Lap(2), inflated by 2^-7 to pay for grid rounding.
ETA_SCALE = 2.0 * (1.0 + 2.0 ** -7)
#: ν ~ Lap(NU_SCALE/ξ_t) per query (Alg 4).
NU_SCALE = 4.0
#: The numeric answer of a halting query gets Lap(NUMERIC_SCALE/ξ_t) (Alg 5).
NUMERIC_SCALE = 8.0


@dataclasses.dataclass(frozen=True)
class PowerNoise:
    """The noise function ξ_t = c·t^p (Corollary 30), p ∈ [0, 1] so that ξ_t is non-decreasing
    and ξ_tΔ_t = c·t^(p-1) is non-increasing (the assumptions of Theorems 25-31).

    Raises:
      InvalidParamsError: if c ≤ 0 or p ∉ [0, 1].
    """
    c: float
    p: float = 0.5

    def __post_init__(self):
        owner = 'PowerNoise'
        object.__setattr__(self, 'c', v.check_positive(owner, 'c', self.c))
        p = v.check_real(owner, 'p', self.p)
        if not 0 <= p <= 1:
            raise InvalidParamsError(f'{owner}: p must be in [0, 1], got {p:g}.')
        object.__setattr__(self, 'p', p)

    def xi(self, t: int) -> float:
        return self.c * float(t) ** self.p

    def xi_delta(self, t: int) -> float:
        """ξ_tΔ_t with Δ_t = 1/t."""
        return self.c * float(t) ** (self.p - 1.0)


@dataclasses.dataclass(frozen=True)
class SVTRound:
    """The state of the current (N)ATG round. ``eta_units`` is SECRET (η = eta_units·2^-eta_bits):
    it must never be logged or released, and it is dropped when the round ends."""
    active: bool = False
    eta_units: int = 0
    eta_bits: int = 0
    round_start: int = 0
    rounds: int = 0
    halts: int = 0


def _start_round(rnd: SVTRound, t: int, xi_delta_t: float, rng: RandomSource) -> SVTRound:
    bits = grid_bits(xi_delta_t)
    # Spec P1: η is drawn once here and kept until the round halts.
    eta = discrete_laplace_any(rng, ETA_SCALE * 2 ** bits)
    return dataclasses.replace(rnd, active=True, eta_units=int(eta), eta_bits=bits,
                               round_start=t, rounds=rnd.rounds + 1)


def _threshold_units(threshold: float, rnd: SVTRound, xi_t: float, bits: int) -> int:
    # ceil((T + η/ξ_t)·2^k) in floating point: every IEEE operation here is monotone in η, so the
    # integer threshold is monotone in η (what the coupling argument needs).
    x = math.ldexp(threshold, bits) + math.ldexp(float(rnd.eta_units), bits - rnd.eta_bits) / xi_t
    return math.ceil(x)


def threshold_value(threshold: float, rnd: SVTRound, xi_t: float) -> float:
    """T̂_t = T + η/ξ_t of the active round (for audits/tests only: it reveals η)."""
    return threshold + math.ldexp(float(rnd.eta_units), -rnd.eta_bits) / xi_t


def svt_query(rnd: SVTRound, value: float, t: int, xi_t: float, xi_delta_t: float,
              threshold: float, numeric: bool,
              rng: RandomSource) -> Tuple[bool, Optional[float], SVTRound]:
    """One (N)ATG query on a statistic ``value`` of sensitivity Δ_t = 1/t.

    Starts a round (drawing η) if none is active. Returns (above, numeric_value, new_round):
    ``above`` is the ATG outcome; on ``above`` the round ends and, if ``numeric``, the value is
    released with Lap(8/ξ_t) noise (NATG), else ``numeric_value`` is None.
    """
    if not rnd.active:
        rnd = _start_round(rnd, t, xi_delta_t, rng)
    delta_t = 1.0 / t
    bits = grid_bits(delta_t)
    stat = floor_to_grid(value, bits)
    nu = discrete_laplace_any(rng, grid_laplace_scale(NU_SCALE / xi_t, delta_t, bits))
    if stat + nu >= _threshold_units(threshold, rnd, xi_t, bits):
        released = None
        if numeric:
            noise = discrete_laplace_any(rng, grid_laplace_scale(NUMERIC_SCALE / xi_t, delta_t,
                                                                 bits))
            released = from_grid(stat + noise, bits)
        done = dataclasses.replace(rnd, active=False, eta_units=0, eta_bits=0,
                                   halts=rnd.halts + 1)
        return True, released, done
    return False, None, rnd


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def add_records(counts: np.ndarray, t: int, data, domain_size: int,
                owner: str) -> Tuple[np.ndarray, int]:
    """New (counts, t) after appending records (element indices in [0, N)); never mutates.

    Raises:
      InvalidRecordError: if an index is not an integer in [0, N) (nothing is added then).
    """
    arr = np.atleast_1d(np.asarray(data))
    if arr.size == 0:
        return counts, t
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise InvalidRecordError(f'{owner}: records must be integer element indices, got '
                                 f'{data!r:.80}.')
    if arr.min() < 0 or arr.max() >= domain_size:
        raise InvalidRecordError(f'{owner}: records must be in [0, {domain_size}), got min '
                                 f'{arr.min()} and max {arr.max()}.')
    new = counts + np.bincount(arr, minlength=domain_size).astype(np.int64)
    return _readonly(new), t + int(arr.size)


@dataclasses.dataclass(frozen=True)
class SVTAnswer:
    """One answer: ``status`` is 'below' (⊥), 'above' (⊤ / numeric), or a refusal 'halted' /
    'not_started'; ``value`` is the numeric answer (NATG/NSG), 1.0 for ATG's ⊤, else None."""
    status: str
    value: Optional[float]
    t: int
    epsilon_spent: float

    @property
    def hard(self) -> Optional[bool]:
        return None if self.status in ('halted', 'not_started') else self.status == 'above'


@dataclasses.dataclass(frozen=True)
class GrowingSVTState:
    """Immutable state: size t and true counts (secret), the round (η secret), halts so far,
    whether the instance is halted, and the realised privacy ledger (public)."""
    t: int
    counts: np.ndarray
    round: SVTRound
    halted: bool = False
    epsilon_spent: float = 0.0


@dataclasses.dataclass(frozen=True)
class _GrowingSVTBase:
    threshold: float
    noise: PowerNoise
    n: int
    domain_size: int

    _NUMERIC = False
    _RESTART = False

    def __post_init__(self):
        owner = type(self).__name__
        v.check_real(owner, 'threshold', self.threshold)
        if not isinstance(self.noise, PowerNoise):
            raise InvalidParamsError(f'{owner}: noise must be a PowerNoise, got {self.noise!r}.')
        v.check_positive_int(owner, 'n', self.n)
        v.check_positive_int(owner, 'domain_size', self.domain_size)

    def init_state(self) -> GrowingSVTState:
        return GrowingSVTState(0, _readonly(np.zeros(self.domain_size, dtype=np.int64)),
                               SVTRound())

    def add_data(self, state: GrowingSVTState, data, rng: RandomSource) -> GrowingSVTState:
        """Appends records (element indices); the database size t grows by their number."""
        del rng
        counts, t = add_records(state.counts, state.t, data, self.domain_size, type(self).__name__)
        return dataclasses.replace(state, counts=counts, t=t)

    def _halt_cost(self, t: int) -> float:
        raise NotImplementedError

    def _max_halts(self) -> Optional[int]:
        return 1

    def answer(self, state: GrowingSVTState, query: LinearQuery,
               rng: RandomSource) -> Tuple[SVTAnswer, GrowingSVTState]:
        """Answers f(x_t) against the threshold; see the class docstring.

        Raises:
          InvalidRecordError: if the query is not a LinearQuery over this domain (state unchanged).
        """
        owner = type(self).__name__
        if not isinstance(query, LinearQuery):
            raise InvalidRecordError(f'{owner}: query must be a LinearQuery, got {query!r:.80}.')
        query.check_domain(self.domain_size, owner)
        t = state.t
        if state.halted:
            return SVTAnswer('halted', None, t, state.epsilon_spent), state
        if t < self.n:
            return SVTAnswer('not_started', None, t, state.epsilon_spent), state
        spent = state.epsilon_spent or self.noise.xi_delta(self.n)   # first round: ξ_nΔ_n
        value = query.evaluate(state.counts) / t
        above, numeric, rnd = svt_query(state.round, value, t, self.noise.xi(t),
                                        self.noise.xi_delta(t), self.threshold, self._NUMERIC, rng)
        if not above:
            new = dataclasses.replace(state, round=rnd, epsilon_spent=spent)
            return SVTAnswer('below', None, t, spent), new
        spent += self._halt_cost(t)
        cap = self._max_halts()
        halted = cap is not None and rnd.halts >= cap
        new = dataclasses.replace(state, round=rnd, halted=halted, epsilon_spent=spent)
        return SVTAnswer('above', 1.0 if numeric is None else numeric, t, spent), new


@dataclasses.dataclass(frozen=True)
class AboveThresholdGrowing(_GrowingSVTBase):
    """ATG: AboveThreshold on a growing database; one round, halts at the first ⊤ (Alg 4).

    Privacy unit: one record, under the paper's swap-one relation (neighbouring streams differ in
    one record from its insertion time on, with equal sizes at every time): the size t is public
    (docs/growing_databases.md; feed t from a private estimate for add/remove neighbours).
    Event-level unless each user contributes one record.

    Sensitivity and guarantee: linear queries f ∈ [0, 1]^N have Δ_t = 1/t; the round is
    ξ_{t₀}Δ_{t₀} ≤ ξ_nΔ_n-DP (Theorem 25).

    Releases: per query, ⊥ ('below') or ⊤ ('above', value 1.0), then only 'halted'. Queries while
    t < n are refused ('not_started'; the size is public).

    Not guaranteed: accuracy only as Theorem 26 (β = Σ ℓ_t e^{-αξ_t/8} + e^{-αξ_{t₀}/8}).

    Cite: Cummings et al. 2018, Alg 4, Theorems 25-26 (η drawn once per round, see above).

    Args:
      threshold: T. noise: the ξ function. n: initial size. domain_size: N.

    Returns / Raises: see ``answer``; InvalidParamsError on construction.
    """

    def _halt_cost(self, t: int) -> float:
        return 0.0

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.noise.xi_delta(self.n), relation=SWAP_ONE)


@dataclasses.dataclass(frozen=True)
class NumericAboveThresholdGrowing(_GrowingSVTBase):
    """NATG: as ATG, but the halting query releases f(x_t) + Lap(8/ξ_t) (Alg 5).

    Privacy unit and relation: as ``AboveThresholdGrowing`` (swap-one; t public).

    Guarantee: ξ_{t₀}Δ_{t₀} + ξ_{t'}Δ_{t'}/8 ≤ (9/8)ξ_nΔ_n-DP (Theorem 27; the proof's
    "sensitivity at most 1/Δ_{t'}" is a typo for Δ_{t'}).

    Releases: ⊥ per query, then one numeric answer, then only 'halted'.

    Not guaranteed: accuracy only as Theorem 28.

    Cite: Cummings et al. 2018, Alg 5, Theorems 27-28.
    """
    _NUMERIC = True

    def _halt_cost(self, t: int) -> float:
        return self.noise.xi_delta(t) / 8

    def privacy_cost(self) -> PrivacyCost:
        return PrivacyCost(epsilon=self.noise.xi_delta(self.n) * 9 / 8, relation=SWAP_ONE)


@dataclasses.dataclass(frozen=True)
class NumericSparseGrowing(_GrowingSVTBase):
    """NSG: Numeric Sparse on a growing database: NATG restarted after every halt (Alg 6).

    Privacy unit and relation: as ``AboveThresholdGrowing`` (swap-one; t public).

    Guarantee: ξ_nΔ_n + (9/8)Σ_t h_t ξ_tΔ_t (Theorem 29; each round's start is charged to the
    previous halt), h_t = numeric answers at time t. The cost is only bounded if the halts are:
    with ``max_halts`` = h the instance halts for good after h numeric answers and is
    ξ_nΔ_n(1 + 9h/8)-DP; ``state.epsilon_spent`` is the realised bound for the transcript so far.

    Releases: ⊥ or a number per query; after ``max_halts`` numbers only 'halted'.

    Not guaranteed: accuracy only as Theorem 31.

    Cite: Cummings et al. 2018, Alg 6, Theorems 29-31, Corollary 30.

    Args:
      max_halts: the cap h on numeric answers (None: uncapped, and ``privacy_cost`` refuses).
    """
    max_halts: Optional[int] = None
    _NUMERIC = True

    def __post_init__(self):
        super().__post_init__()
        v.check_optional_positive_int(type(self).__name__, 'max_halts', self.max_halts)

    def _max_halts(self) -> Optional[int]:
        return self.max_halts

    def _halt_cost(self, t: int) -> float:
        return self.noise.xi_delta(t) * 9 / 8

    def privacy_cost(self) -> PrivacyCost:
        """ξ_nΔ_n(1 + 9h/8) for ``max_halts`` = h.

        Raises:
          UnsupportedMechanismError: without ``max_halts`` (the cost is unbounded).
        """
        if self.max_halts is None:
            raise UnsupportedMechanismError('NumericSparseGrowing: the privacy cost is unbounded '
                                            'without max_halts (Theorem 29).')
        return PrivacyCost(epsilon=self.noise.xi_delta(self.n) * (1 + 9 * self.max_halts / 8),
                           relation=SWAP_ONE)
