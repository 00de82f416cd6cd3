"""Active units over a sliding window of W steps (``ContinualDistinctCountPerKey(count='active',
output=('window', W))``; docs/distinct_count.md): the membership stream and its calibration.
Pure, no Beam.

What is released: for key k and step s, the number of distinct units with a kept record of k
in one of the steps s−W+1 … s. A unit u with kept active steps A (≤ S per key, after
'BoundContributions') covers the steps c_u(s) = 1[some t ∈ A with t ≤ s < t + W]: the union of
the intervals [t, t + W). The window value is Σ_u c_u(s), and c_u is the prefix sum of its
first difference x_u(s) = c_u(s) − c_u(s − 1): +1 where a run of the union starts, −1 where it
ends. The union of ≤ S intervals has ≤ S runs, so x_u has ≤ 2S non-zero steps per key, each
±1: one unit moves the per-key streams Σ_u x_u by L1 ≤ 2·K·S (≤ 2C with
``max_total_contributions=C``), at most 2S steps per key with |Δ| ≤ 1 per step. A continual
prefix counter (the same ``'auto'`` choice as a cumulative count) over that stream releases the
window values; fresh noise per window value on the exact window values (the stream's prefix
sums, ``MembershipFreshCounter``) instead needs L1 = K·S·W (each active step is in W window
values). ``ActiveWindowDriver`` runs the one with the lower worst sd: the prefix counter's
grows with the horizon (polylogarithmically), fresh noise's with W (linearly for ε, as √W for
ρ).

The bounding stage emits x_u incrementally: when it keeps a new active step t of (u, k),
``coverage_deltas`` gives the change of x_u, from the unit's steps that can still overlap
[t, t + W): its live (unreleased) steps of the key and its last released active step
(``UnitUsage(keep_last=True)``). Every earlier released step t' has t' + W ≤ last + W, so it
adds nothing on [t, ∞) that the last one does not; every change is at a step ≥ t, not yet
released. The emitted deltas of (u, k) therefore always sum, step by step, to x_u of its kept
steps (``tests/drivers/test_distinct_window.py`` checks it against the direct union).
"""

import dataclasses
from typing import Iterable, List, Optional, Tuple

import numpy as np

from beam_dp.drivers import counter_choice
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms.exact_int import exact_add
from beam_dp.mechanisms.exact_int import exact_ints
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.participation import capped_l2
from beam_dp.mechanisms.window import WindowCounter
from beam_dp.mechanisms.window import WindowState
from beam_dp.noise import RandomSource
from beam_dp.privacy_unit import UserLevel

__all__ = [
    'ActiveWindow',
    'ActiveWindowDriver',
    'ActiveWindowUnit',
    'MembershipFreshCounter',
    'coverage_deltas',
    'membership_stream',
]


@dataclasses.dataclass(frozen=True)
class ActiveWindow:
    """``BoundContributions(distinct_units=ActiveWindow(W))``: keep each unit's first record
    per (key, step), as ``ACTIVE_UNITS``, and emit the change of its window-membership stream
    (``coverage_deltas``) instead of the record's 1."""
    window: int


def coverage_deltas(steps: Iterable[int], step: int, window: int) -> List[Tuple[int, int]]:
    """The change of x = Δ(coverage) when ``step`` joins the active ``steps`` (those that can
    overlap [step, step + W): other kept steps of the key that are not yet released, and the
    last released one): [(step', ±1)] sorted by step', every step' ≥ ``step``. Empty when
    [step, step + W) was already covered."""
    covered = set()
    end = step + window
    for t in steps:
        if t != step and t + window > step and t < end:
            covered.update(range(max(t, step), min(t + window, end)))
    new = [s for s in range(step, end) if s not in covered]
    deltas = {}
    for s in new:                  # Δc = +1 on ``new``: Δx(s) = Δc(s) − Δc(s − 1)
        deltas[s] = deltas.get(s, 0) + 1
        deltas[s + 1] = deltas.get(s + 1, 0) - 1
    return sorted((s, d) for s, d in deltas.items() if d)


def membership_stream(steps: Iterable[int], window: int) -> List[Tuple[int, int]]:
    """x_u directly: the ±1 first difference of the union of [t, t + W) over ``steps``
    (the reference ``coverage_deltas`` is checked against)."""
    covered = set()
    for t in steps:
        covered.update(range(t, t + window))
    out = []
    for s in sorted(covered | {c + 1 for c in covered}):
        d = (s in covered) - (s - 1 in covered)
        if d:
            out.append((s, d))
    return out


@dataclasses.dataclass(frozen=True)
class ActiveWindowUnit(UserLevel):
    """The ``UserLevel`` of the window-membership stream: bounding as the user's (K keys,
    S active steps per key, m = 1, C records), calibration to the stream it produces: per key
    ≤ 2S non-zero steps of ±1 (``per_key_total`` = 2·m·S), in all ≤ 2·min(K·S, C) (one unit;
    twice that with ``max_units``, as ``UserLevel``). ``participation`` is the factorization
    counters' pattern of that stream: ≤ K keys, ≤ 2S steps each, |Δ| ≤ m per step (their
    bound takes |u|, so the signs do not matter)."""
    window: Optional[int] = None

    def __post_init__(self):
        super().__post_init__()
        w = self.window
        if not isinstance(w, int) or isinstance(w, bool) or w < 2:
            raise InvalidParamsError(f'ActiveWindowUnit: window must be an int ≥ 2, got {w!r}.')

    @property
    def bounding(self) -> UserLevel:
        """The plain ``UserLevel`` the bounding stage enforces (S steps per key)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(UserLevel)}
        return UserLevel(**fields)

    def per_key_total(self, value_bound: float) -> float:
        return 2 * self.max_contributions_per_step * self.max_steps_per_unit * value_bound

    def _unit_total(self, value_bound: float) -> float:
        total = self.max_keys_per_unit * self.per_key_total(value_bound)
        if self.max_total_contributions is None:
            return total
        return min(total, 2 * self.max_total_contributions * value_bound)

    def participation(self, value_bound: float) -> Participation:
        n = self.neighbour_units
        return Participation(self.max_keys_per_unit, 2 * self.max_steps_per_unit,
                             n * self.max_contributions_per_step * value_bound,
                             n * self._unit_total(value_bound))

    def describe(self) -> str:
        return (super().describe()[:-1] + f'; active in a window of W={self.window} steps: '
                f'calibrated to its ±1 membership stream, ≤ 2S steps per key)')


# -- the counter: a prefix counter over the membership stream, or fresh noise per window value --

class MembershipFreshCounter(WindowCounter):
    """Fresh noise per window value: the exact prefix sums of the membership stream (the
    window values c(s), kept exactly in the state, one int per key) plus fresh noise at the
    whole budget each step, calibrated to the window values' own sensitivity: one unit is in
    ≤ S·W window values per key (``participation`` = (1, S·W, K·S·W) for one unit), L1 =
    K·S·W. A ``WindowCounter`` with W = 1 (its noise, its costs) run on c instead of x."""

    def step(self, state: WindowState, value, rng: RandomSource
             ) -> Tuple[np.ndarray, WindowState]:
        total = exact_add(state.open[0], exact_ints(value, self.dimension))
        release = exact_add(total, self.node_noise.sample(rng, self.dimension))
        return release, WindowState(state.t + 1, (_dyadic.readonly(total),), ((),))


#: Steps at which an unbounded horizon's prefix counter is compared (its sd keeps growing).
_SAMPLED = 64


class ActiveWindowDriver(KeyedReleaseDriver):
    """The keyed driver of the active units in a window (``output='cumulative'`` over the
    membership stream, ``privacy_unit`` an ``ActiveWindowUnit``). With ``mechanism='auto'``
    it runs whichever of the two calibrations has the lower worst noise sd over the known
    horizon (public parameters only): the prefix counter over the ±1 stream (L1 = 2·K·S,
    chosen as a cumulative count's) or fresh noise per window value
    (``MembershipFreshCounter``, L1 = K·S·W). Without a known horizon the prefix counter's sd
    grows without bound: fresh noise per window value. A forced ``mechanism`` runs that
    prefix counter."""

    def __post_init__(self):
        super().__post_init__()
        unit = self.privacy_unit
        if not isinstance(unit, ActiveWindowUnit):
            raise InvalidParamsError(f'ActiveWindowDriver: privacy_unit must be an '
                                     f'ActiveWindowUnit, got {unit!r}.')
        if self.mechanism != 'auto' or self.estimator is not None:
            return
        fresh = self.fresh_counter()
        prefix = self.counter(1)
        horizon = self.horizon
        if horizon is not None:
            steps = sorted({1, horizon} | {max(1, horizon * i // _SAMPLED)
                                           for i in range(1, _SAMPLED)})
            worst = max(prefix.release_variance(t) for t in steps)
            if worst <= fresh.release_variance(1):
                return
        object.__setattr__(self, '_base_counter', fresh)
        object.__setattr__(self, '_counters', {})
        object.__setattr__(self, '_stddevs', {})
        self.counter(1)

    def fresh_counter(self) -> MembershipFreshCounter:
        """Fresh noise per window value, calibrated to the window values' sensitivity."""
        unit = self.privacy_unit
        plain = unit.bounding
        w = unit.window
        n = unit.neighbour_units
        per_key = plain.max_steps_per_unit * w                      # window values per key
        total = plain.max_keys_per_unit * per_key
        if plain.max_total_contributions is not None:
            total = min(total, plain.max_total_contributions * w)
        l2 = capped_l2(total, per_key, plain.max_keys_per_unit)
        chosen = counter_choice.window_counter(1, self.budget, n * total, n * l2, 1,
                                               (float(n), int(per_key), float(n * total)))
        fields = {f.name: getattr(chosen, f.name) for f in dataclasses.fields(chosen)}
        return MembershipFreshCounter(**fields)

    @property
    def mechanism_name(self) -> str:
        w = self.privacy_unit.window
        if isinstance(self._base_counter, MembershipFreshCounter):
            noise = 'discrete_gaussian' if self._base_counter.rho else 'discrete_laplace'
            return f'active_window[W={w}]/fresh_per_window/{noise}'
        return f'active_window[W={w}]/membership_prefix/{super().mechanism_name}'
