"""Pure logic of the keyed continual transforms: key layout, value quantisation, schedule and the
per-shard release step. The Beam DoFns in ``beam_dp.transforms.continual`` only hold this state
and set timers; everything that touches privacy lives here and is tested without Beam.

Design (why shards): a stateful DoFn call costs tens of microseconds, so one call per key per
step does not scale to 10^4 keys. Public keys are laid out in ``num_shards`` shards; each shard
runs ONE vector counter (a ``BinaryTreeCounter`` / ``InfiniteTreeCounter`` of dimension
keys_in_shard × bins) whose state is a few numpy arrays, so one timer firing per shard and step
releases every key of the shard with vectorised noise. Keys are parallel (disjoint data) and the
counter's sensitivity already covers a unit's contributions across all its keys, so sharding
changes neither the guarantee nor the noise of any key.

Private keys (``PrivateKeys``, DESIGN rule 2): when the key universe is not public, keys are hashed
into shards (SHA-256, stable across workers) and each shard keeps two dicts: *candidate* keys
(their ``ContinualKeySelection`` state and exact running totals, both private) and *selected*
keys (one counter per key, started at the selection step). A candidate's selection is advanced
on EVERY step from its first contribution (a data-independent schedule), also on steps without
data for it. At the selection step s* the key's counter takes one step whose value is the key's
exact total so far (one unit still moves the counter's input stream by at most its bounded
contribution, so the counter's sensitivity is unchanged), and releases continue every step
after. Nothing before s* is ever released (no back-fill). Cost: the selection's (ε_s, δ) plus
the counter's budget (sequential composition; both are spent on the accountant).
"""

import dataclasses
import hashlib
import math
import functools
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import KeySelectionState
from beam_dp.noise import RandomSource
from beam_dp.privacy_unit import PrivacyUnit

__all__ = [
    'KeyLayout',
    'KeyedReleaseSpec',
    'PrivateKeys',
    'PrivateShardState',
    'ShardState',
    'stable_shard',
]

METRICS = ('count', 'sum', 'histogram')
MICROS = 1_000_000


@dataclasses.dataclass(frozen=True)
class KeyLayout:
    """Public keys laid out in shards: key i of the sorted key list goes to shard i % num_shards,
    position i // num_shards."""
    keys: Tuple[str, ...]
    num_shards: int

    def __post_init__(self):
        owner = 'KeyLayout'
        if not self.keys:
            raise InvalidParamsError(f'{owner}: public_keys must not be empty.')
        bad = [k for k in self.keys if not isinstance(k, str)]
        if bad:
            raise InvalidParamsError(f'{owner}: public keys must be strings, got {bad[0]!r}.')
        if len(set(self.keys)) != len(self.keys):
            raise InvalidParamsError(f'{owner}: public keys must be distinct.')
        v.check_positive_int(owner, 'num_shards', self.num_shards)
        if self.num_shards > len(self.keys):
            raise InvalidParamsError(f'{owner}: num_shards must not exceed the number of keys '
                                     f'({len(self.keys)}), got {self.num_shards}.')
        object.__setattr__(self, '_index', {k: i for i, k in enumerate(self.keys)})

    @classmethod
    def of(cls, keys: Sequence[str], num_shards: Optional[int] = None,
           keys_per_shard: int = 512) -> 'KeyLayout':
        keys = tuple(sorted(keys)) if all(isinstance(k, str) for k in keys) else tuple(keys)
        if num_shards is None:
            num_shards = max(1, min(len(keys), math.ceil(len(keys) / keys_per_shard)))
        return cls(keys, num_shards)

    def locate(self, key) -> Optional[Tuple[int, int]]:
        i = self._index.get(key)
        if i is None:
            return None
        return i % self.num_shards, i // self.num_shards

    def shard_keys(self, shard: int) -> Tuple[str, ...]:
        return self.keys[shard::self.num_shards]


def stable_shard(key: str, num_shards: int) -> int:
    """The shard of a private key: SHA-256 of its UTF-8 bytes mod num_shards (Python's ``hash``
    is salted per process, so it would send one key to different shards on different workers)."""
    digest = hashlib.sha256(key.encode('utf-8')).digest()
    return int.from_bytes(digest[:8], 'little') % num_shards


@dataclasses.dataclass(frozen=True)
class PrivateKeys:
    """Private continual key selection: the ``keys=`` option of the continual transforms.

    A key is released only once ``ContinualKeySelection`` (an SVT per key on its distinct-unit
    count, thresholds on the global step clock with a Basel series of failure probabilities)
    selects it. A key contributed to by a single privacy unit is ever selected with probability
    ≤ δ over the unbounded horizon; a selected key stays selected; steps before its selection
    are never released. Guarantee of the selection: (ε, δ)-DP for a unit contributing to at
    most ``max_keys_per_unit`` keys (1 at event level), composed sequentially with the release
    budget of the transform.

    Args:
      budget: the selection budget, ``PrivacyBudget(epsilon=ε, delta=δ)`` with ε > 0, 0 < δ < 1.
      num_shards: how many stateful shards the (unknown) keys are hashed into (step transforms).

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    budget: PrivacyBudget
    num_shards: int = 8

    def __post_init__(self):
        owner = 'PrivateKeys'
        if not isinstance(self.budget, PrivacyBudget):
            raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got '
                                     f'{self.budget!r}.')
        if self.budget.is_zcdp or not self.budget.delta > 0:
            raise InvalidParamsError(f'{owner}: budget must have epsilon > 0 and delta > 0 '
                                     f'(selection is (epsilon, delta)-DP), got {self.budget}.')
        v.check_positive_int(owner, 'num_shards', self.num_shards)

    def selection(self, max_keys_per_unit: int = 1) -> ContinualKeySelection:
        return _selection(self.budget.epsilon, self.budget.delta, max_keys_per_unit)

    def privacy_cost(self) -> PrivacyCost:
        return self.budget.as_cost()

    def shard_of(self, key: str) -> int:
        return stable_shard(key, self.num_shards)


@functools.lru_cache(maxsize=64)
def _selection(epsilon: float, delta: float, k: int) -> '_CachedSelection':
    return _CachedSelection(epsilon, delta, k)


@dataclasses.dataclass(frozen=True)
class _CachedSelection(ContinualKeySelection):
    """``ContinualKeySelection`` with its public thresholds memoised (same decisions)."""

    @functools.lru_cache(maxsize=1 << 16)
    def threshold(self, step: int) -> int:
        return super().threshold(step)


@dataclasses.dataclass(frozen=True)
class PrivateShardState:
    """One private-keys shard. ``candidates``: key → (selection state, exact running totals per
    bin, private); ``selected``: key → (selection step, counter state). Both only grow."""
    next_step: int
    candidates: Dict[str, Tuple[KeySelectionState, Tuple[int, ...]]]
    selected: Dict[str, Tuple[int, object]]


@dataclasses.dataclass(frozen=True)
class ShardState:
    """The state of one shard: the next step to release, the counter state, contributions
    waiting for their step's release, and whether the input has ended.

    One value holds everything so that a DoFn touches a single state cell per call: every state
    cell written costs the SDK a deep-size measurement of the value for its state cache.
    """
    next_step: int
    counter_state: object
    pending: tuple = ()
    finished: bool = False


@dataclasses.dataclass(frozen=True)
class KeyedReleaseSpec:
    """Everything a keyed continual release needs, validated once at pipeline construction.

    Args:
      metric: 'count', 'sum' or 'histogram'.
      budget: this transform's ``PrivacyBudget`` (ε → discrete Laplace; ρ → discrete Gaussian;
        ε with δ > 0 is spent as pure ε, δ unused).
      privacy_unit: ``EventLevel()`` or ``UserLevel(...)``.
      layout: the public keys in shards (None with ``private_keys``).
      start_micros: event time of the start of step 0 (public).
      step_micros: the step length (public).
      allowed_lateness_micros: a step is released once the watermark passes its end plus this.
      horizon_steps: T for the finite binary tree; None for the infinite counter (C2).
      end_step: no release for steps ≥ end_step (a public end of the stream); None = unbounded.
      estimator: 'variance_reduced' (default) or 'textbook'.
      lower, upper: clamp bounds of a sum's per-record value.
      grid_bits: sums are snapped to multiples of 2**-grid_bits before noise.
      bins: histogram bin labels (public).
      private_keys: ``PrivateKeys`` when the keys are selected privately (then layout is None).
    """
    metric: str
    budget: PrivacyBudget
    privacy_unit: PrivacyUnit
    layout: KeyLayout
    start_micros: int
    step_micros: int
    allowed_lateness_micros: int = 0
    horizon_steps: Optional[int] = None
    end_step: Optional[int] = None
    estimator: str = 'variance_reduced'
    lower: float = 0.0
    upper: float = 1.0
    grid_bits: int = 10
    bins: Tuple[str, ...] = ()
    private_keys: Optional[PrivateKeys] = None

    def __post_init__(self):
        owner = 'KeyedReleaseSpec'
        if (self.layout is None) == (self.private_keys is None):
            raise InvalidParamsError(f'{owner}: give exactly one of public keys (layout) or '
                                     f'private_keys.')
        if self.private_keys is not None and not isinstance(self.private_keys, PrivateKeys):
            raise InvalidParamsError(f'{owner}: private_keys must be PrivateKeys(...), got '
                                     f'{self.private_keys!r}.')
        v.check_choice(owner, 'metric', self.metric, METRICS)
        if not isinstance(self.budget, PrivacyBudget):
            raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got {self.budget!r}.')
        if not isinstance(self.privacy_unit, PrivacyUnit):
            raise InvalidParamsError(f'{owner}: privacy_unit must be EventLevel() or UserLevel(...), '
                                     f'got {self.privacy_unit!r}.')
        v.check_non_negative_int(owner, 'start_micros', self.start_micros)
        v.check_positive_int(owner, 'step_micros', self.step_micros)
        v.check_non_negative_int(owner, 'allowed_lateness_micros', self.allowed_lateness_micros)
        v.check_optional_positive_int(owner, 'horizon_steps', self.horizon_steps)
        v.check_optional_positive_int(owner, 'end_step', self.end_step)
        v.check_choice(owner, 'estimator', self.estimator, ('variance_reduced', 'textbook'))
        v.check_non_negative_int(owner, 'grid_bits', self.grid_bits)
        if self.grid_bits > 30:
            raise InvalidParamsError(f'{owner}: grid_bits must be at most 30, got {self.grid_bits}.')
        if self.metric == 'sum':
            v.check_bounds(owner, 'lower', self.lower, 'upper', self.upper)
            if self.upper == self.lower == 0:
                raise InvalidParamsError(f'{owner}: lower and upper must not both be 0.')
        if self.metric == 'histogram':
            if not self.bins or len(set(self.bins)) != len(self.bins):
                raise InvalidParamsError(f'{owner}: bins must be a non-empty list of distinct labels, '
                                         f'got {self.bins!r}.')
        # Build once: this validates the counter parameters at construction too.
        self.counter(1)

    # -- schedule ---------------------------------------------------------------------------------

    @property
    def last_step(self) -> Optional[int]:
        """The last releasable step index (inclusive), or None if unbounded."""
        ends = [s for s in (self.horizon_steps, self.end_step) if s is not None]
        return min(ends) - 1 if ends else None

    def step_of(self, timestamp_micros: int) -> int:
        """The step index of an event time (negative before ``start``)."""
        return (timestamp_micros - self.start_micros) // self.step_micros

    def step_bounds(self, step: int) -> Tuple[int, int]:
        start = self.start_micros + step * self.step_micros
        return start, start + self.step_micros

    def release_time_micros(self, step: int) -> int:
        """When the watermark passes this, ``step`` is released (data-independent)."""
        return self.step_bounds(step)[1] + self.allowed_lateness_micros

    # -- values -----------------------------------------------------------------------------------

    @property
    def bins_per_key(self) -> int:
        return len(self.bins) if self.metric == 'histogram' else 1

    @property
    def value_bound_units(self) -> int:
        """The largest |value| of one record, in grid units (1 for counts and histograms)."""
        if self.metric != 'sum':
            return 1
        return math.ceil(max(abs(self.lower), abs(self.upper)) * (1 << self.grid_bits))

    def to_units(self, value) -> int:
        """Clamps a sum's value to [lower, upper] and snaps it to the 2**-grid_bits grid.

        Raises:
          ValueError: for a non-numeric or NaN value (the transform dead-letters the record).
        """
        x = float(value)
        if math.isnan(x):
            raise ValueError('value is NaN')
        x = min(max(x, self.lower), self.upper)
        units = round(x * (1 << self.grid_bits))
        bound = self.value_bound_units
        return int(min(max(units, -bound), bound))

    def from_units(self, estimate: np.ndarray) -> np.ndarray:
        if self.metric != 'sum':
            return np.asarray(estimate, dtype=np.float64)
        return np.asarray(estimate, dtype=np.float64) / (1 << self.grid_bits)

    # -- mechanism --------------------------------------------------------------------------------

    def sensitivity(self) -> Tuple[float, float]:
        return self.privacy_unit.sensitivity(self.value_bound_units)

    def _noise_kwargs(self) -> dict:
        if self.budget.is_zcdp:
            return {'rho': self.budget.rho}
        return {'epsilon': self.budget.epsilon}

    def counter(self, keys_in_shard: int):
        l1, l2 = self.sensitivity()
        common = dict(l1_sensitivity=l1, l2_sensitivity=l2,
                      dimension=keys_in_shard * self.bins_per_key, estimator=self.estimator,
                      **self._noise_kwargs())
        if self.horizon_steps is not None:
            return BinaryTreeCounter(horizon=self.horizon_steps, **common)
        return InfiniteTreeCounter(**common)

    def release_cost(self) -> PrivacyCost:
        """The cost of the released values (the counters)."""
        return self.counter(1).privacy_cost()

    def selection_cost(self) -> PrivacyCost:
        """The cost of private key selection (zero for public keys)."""
        return PrivacyCost() if self.private_keys is None else self.private_keys.privacy_cost()

    def privacy_cost(self) -> PrivacyCost:
        """Total: selection (if private keys) + release, by sequential composition."""
        if self.private_keys is None:
            return self.release_cost()
        return self.selection_cost() + self.release_cost()

    @property
    def mechanism_name(self) -> str:
        base = 'binary_tree' if self.horizon_steps is not None else 'infinite_tree'
        noise = 'discrete_gaussian' if self.budget.is_zcdp else 'discrete_laplace'
        return f'{base}/{self.estimator}/{noise}'

    def noise_stddev(self, step: int) -> float:
        """Public: the noise standard deviation of the release of ``step`` (per bin, in value units)."""
        sd = math.sqrt(self.counter(1).release_variance(step + 1))
        return sd / (1 << self.grid_bits) if self.metric == 'sum' else sd

    # -- the shard state machine ------------------------------------------------------------------

    def init_shard(self, shard: int) -> ShardState:
        keys = len(self.layout.shard_keys(shard))
        return ShardState(0, self.counter(keys).init_state())

    def release_step(self, shard: int, state: ShardState,
                     contributions: Sequence[Tuple[np.ndarray, np.ndarray]],
                     rng: RandomSource) -> Tuple[np.ndarray, ShardState]:
        """Releases step ``state.next_step`` of a shard.

        Args:
          contributions: (flat positions, integer values) pairs for this step, already bounded;
            flat position = key position × bins + bin.
        Returns:
          (estimates of shape (keys_in_shard, bins) in value units, new state).
        """
        keys = len(self.layout.shard_keys(shard))
        dim = keys * self.bins_per_key
        vector = np.zeros(dim, dtype=np.int64)
        for positions, values in contributions:
            np.add.at(vector, np.asarray(positions, dtype=np.int64),
                      np.asarray(values, dtype=np.int64))
        estimate, counter_state = self.counter(keys).step(state.counter_state, vector, rng)
        released = self.from_units(estimate).reshape(keys, self.bins_per_key)
        return released, ShardState(state.next_step + 1, counter_state)

    def describe(self) -> Dict[str, object]:
        """Data-independent facts for display data and release metadata."""
        return {
            'metric': self.metric,
            'mechanism': self.mechanism_name,
            'budget': str(self.budget),
            'privacy_unit': self.privacy_unit.describe(),
            'num_keys': len(self.layout.keys) if self.layout is not None else 'private',
            'num_shards': (self.layout.num_shards if self.layout is not None
                           else self.private_keys.num_shards),
            'step_seconds': self.step_micros / MICROS,
            'allowed_lateness_seconds': self.allowed_lateness_micros / MICROS,
            'horizon_steps': self.horizon_steps if self.horizon_steps is not None else 'unbounded',
        }

    # -- private keys: the shard state machine ----------------------------------------------------

    @property
    def key_selection(self) -> ContinualKeySelection:
        return self.private_keys.selection(self.privacy_unit.max_keys)

    def init_private_shard(self) -> PrivateShardState:
        return PrivateShardState(0, {}, {})

    def key_noise_stddev(self, counter_steps: int) -> float:
        """Public: noise sd of a private key's release after its counter took this many steps."""
        sd = math.sqrt(self.counter(1).release_variance(counter_steps))
        return sd / (1 << self.grid_bits) if self.metric == 'sum' else sd

    def release_private_step(self, state: PrivateShardState,
                             contributions: Mapping[str, Tuple[Sequence[int], int]],
                             rng: RandomSource) -> Tuple[List[Tuple[str, List[float], int]],
                                                         PrivateShardState]:
        """Releases step ``state.next_step`` of a private-keys shard.

        Args:
          contributions: key → (per-bin integer totals of this step, new distinct units this
            step), already bounded.
          rng: the transform's source; selection draws from ``rng.derive('select', key)`` and a
            key's counter from ``rng.derive('release', key, step)``, so the noise does not
            depend on sharding, bundling or the order of keys.
        Returns:
          ([(key, per-bin estimates in value units, counter steps so far)] for every selected key
          in sorted order, new state).
        """
        step = state.next_step
        global_step = step + 1                          # the selection's 1-based step clock
        selection = self.key_selection
        counter = self.counter(1)
        bins = self.bins_per_key
        candidates = dict(state.candidates)
        selected = dict(state.selected)
        for key in contributions:
            if key not in candidates and key not in selected:
                candidates[key] = (selection.init_state(global_step), (0,) * bins)
        out = []
        for key in sorted(set(candidates) | set(selected)):
            values, new_units = contributions.get(key, ((0,) * bins, 0))
            values = tuple(int(x) for x in values)
            if key in candidates:
                sel_state, totals = candidates[key]
                chosen, sel_state = selection.advance(sel_state, global_step, int(new_units),
                                                      rng.derive('select', key))
                totals = tuple(a + b for a, b in zip(totals, values))
                if not chosen:
                    candidates[key] = (sel_state, totals)
                    continue
                del candidates[key]
                # First counter step: everything so far, released for the first time now.
                start, counter_state, values = step, counter.init_state(), totals
            else:
                start, counter_state = selected[key]
            estimate, counter_state = counter.step(counter_state, np.asarray(values, np.int64),
                                                   rng.derive('release', key, step))
            selected[key] = (start, counter_state)
            row = self.from_units(estimate).reshape(bins).tolist()
            out.append((key, row, step - start + 1))
        return out, PrivateShardState(step + 1, candidates, selected)
