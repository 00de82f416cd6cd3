"""Driver of the keyed continual transforms (``ContinualCount/Sum/HistogramPerKey``): what their
DoFns call, pure and tested without Beam.

It holds the key layout (``beam_dp.drivers.key_layout``: public keys in shards, or
``PrivateKeys``), the quantisation of values
to integer grid units, the counters and their costs, and the two shard state machines: a public
shard (``release_public_step``) and a private-keys shard (``beam_dp.drivers.private_keys``).
Its loop drivers (``PublicShardLoop``, ``PrivateShardLoop``) are what the release loop runs;
``beam_dp.testing.replay`` drives them exactly as the Beam job does (same releases under a seed).

Design (why shards): a stateful DoFn call costs tens of microseconds, so one call per key per
step does not scale to 10^4 keys. Public keys are laid out in ``num_shards`` shards; each shard
runs ONE vector counter (of dimension keys_in_shard × bins) whose state is a few numpy arrays,
so one timer firing per shard and step
releases every key of the shard with vectorised noise. Keys are parallel (disjoint data) and the
counter's sensitivity already covers a unit's contributions across all its keys, so sharding
changes neither the guarantee nor the noise of any key.

Which counter runs, and how it is calibrated at user level: ``beam_dp.drivers.counter_choice``.
"""

import dataclasses
import math
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.drivers import counter_choice
from beam_dp.drivers import mean as ratio
from beam_dp.drivers import rows
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.counter_choice import MECHANISMS
from beam_dp.drivers.key_layout import CountCodes
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.key_layout import PrivateCountCodes
from beam_dp.drivers.key_layout import text_key
from beam_dp.drivers.private_keys import KeySetInput
from beam_dp.drivers.private_keys import KeySetShard
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.drivers.private_keys import PrivateKeysShard
from beam_dp.drivers.private_keys import ShardKeys
from beam_dp.drivers.protocol import Outcome
from beam_dp.drivers.protocol import late_letter
from beam_dp.drivers.protocol import late_records
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms import exact_int
from beam_dp.mechanisms.final_release import FinalReleaseCounter
from beam_dp.mechanisms.window import MAX_WINDOW
from beam_dp.noise import RandomSource
from beam_dp.privacy_unit import PrivacyUnit

__all__ = [
    'OUTPUTS',
    'parse_output',
    'CountCodes',
    'MECHANISMS',
    'add_units',
    'KeyLayout',
    'KeyedReleaseDriver',
    'PrivatePartial',
    'PrivateShardLoop',
    'PublicShardLoop',
    'PendingSums',
    'PublicShardState',
    'ShardPartial',
    'text_key',
]

METRICS = ('count', 'sum', 'histogram') + ratio.RATIO_METRICS
_STDDEV_CACHE = 4096
_NO_INTS = np.zeros(0, dtype=np.int64)


class PendingSums:
    """A public shard's pre-aggregated contributions waiting for their step (immutable).

    Why not a tuple of partials: the pending contributions of a batch run hold every step's
    data, and a value that grows with the pending steps and is rewritten at every release makes
    the cost per release grow with the horizon (issue 29). Here, partials are appended to a
    short ``tail`` and compacted, now and then, into three flat arrays sorted by step (entries
    of released steps dropped): appending costs O(tail), a step's lookup a binary search, and
    the value pickles as a few arrays. A release does not change it (released steps are
    skipped by their number), so the loop keeps it in its own state cell that a release never
    rewrites. Beam's state cache sizes it by walking three arrays and the short tail.
    """

    __slots__ = ('steps', 'positions', 'values', 'tail')

    def __init__(self, steps=_NO_INTS, positions=_NO_INTS, values=_NO_INTS, tail=()):
        self.steps = steps
        self.positions = positions
        self.values = values
        self.tail = tail

    def __reduce__(self):
        return type(self), (self.steps, self.positions, self.values, self.tail)

    def add(self, item, floor: int) -> 'PendingSums':
        """With the partial ``(step, positions, values)`` appended; a compaction (when the
        tail is long) drops every entry of a step below ``floor`` (released)."""
        tail = self.tail + (item,)
        if len(tail) < 32 + (len(self.steps) >> 6):
            return PendingSums(self.steps, self.positions, self.values, tail)
        return self._compact(tail, floor)

    def _compact(self, tail, floor: int) -> 'PendingSums':
        steps, positions, values = [self.steps], [self.positions], [self.values]
        for step, p, v in tail:
            p = np.asarray(p, dtype=np.int64).reshape(-1)
            steps.append(np.full(p.size, step, dtype=np.int64))
            positions.append(p)
            values.append(np.asarray(v).reshape(-1))
        steps = np.concatenate(steps)
        positions = np.concatenate(positions)
        values = np.concatenate(values)
        keep = steps >= floor
        order = np.argsort(steps[keep], kind='stable')
        return PendingSums(steps[keep][order], positions[keep][order], values[keep][order])

    def due(self, step: int) -> List[Tuple[np.ndarray, np.ndarray]]:
        """The (positions, values) pairs of ``step``."""
        lo, hi = np.searchsorted(self.steps, [step, step + 1])
        out = [(self.positions[lo:hi], self.values[lo:hi])] if hi > lo else []
        out.extend((p, v) for s, p, v in self.tail if s == step)
        return out

    def count_from(self, step: int) -> int:
        """How many partials (compacted entries + tail items) are of ``step`` or later."""
        lo = np.searchsorted(self.steps, step)
        return int(len(self.steps) - lo) + sum(1 for s, _, _ in self.tail if s >= step)


OUTPUTS = ('cumulative', 'per_step', "('window', W)")


def parse_output(owner: str, output):
    """'cumulative', 'per_step' or ('window', W) with an int 1 ≤ W ≤ 65536 (a list is taken as
    a tuple; ('window', 1) is 'per_step').

    Raises:
      InvalidParamsError: for anything else, naming the choices.
    """
    if output in ('cumulative', 'per_step'):
        return output
    if isinstance(output, (tuple, list)) and len(output) == 2 and output[0] == 'window':
        w = output[1]
        if isinstance(w, (int, np.integer)) and not isinstance(w, bool) and 1 <= w <= MAX_WINDOW:
            return 'per_step' if w == 1 else ('window', int(w))
    raise InvalidParamsError(f"{owner}: output must be 'cumulative', 'per_step' or ('window', W) "
                             f"with an int W in [1, {MAX_WINDOW}], got {output!r}.")


@dataclasses.dataclass(frozen=True)
class PublicShardState:
    """One public shard: the next step to release, its vector counter's state, the (already
    pre-aggregated) contributions waiting for their step, and whether the input has ended.

    One value holds everything so that a DoFn touches a single state cell per call: every state
    cell written costs the SDK a deep-size measurement of the value for its state cache.
    """
    next_step: int
    counter_state: object
    pending_contributions: PendingSums = PendingSums()
    input_ended: bool = False

    @property
    def pending_count(self) -> int:
        """Partials (compacted entries + appended items) waiting for a step not released."""
        return _pending_sums(self.pending_contributions).count_from(self.next_step)


def _pending_sums(pending) -> PendingSums:
    """A ``PendingSums`` (a state written before issue 29 held a tuple of partials)."""
    if type(pending) is PendingSums:  # pylint: disable=unidiomatic-typecheck
        return pending
    return PendingSums(tail=tuple(pending))


@dataclasses.dataclass(frozen=True)
class KeyedReleaseDriver:
    """A keyed continual release, validated once at pipeline construction.

    Args:
      metric: 'count', 'sum', 'histogram', 'mean' or 'variance' (a 2- or 3-vector per key:
        ``beam_dp.drivers.mean``).
      budget: the counters' ``PrivacyBudget`` (ε → discrete Laplace; ρ → discrete Gaussian;
        ε with δ > 0: a pure counter at ε or a Gaussian one at the converted ρ, see
        ``counter_choice``).
      privacy_unit: ``EventLevel()`` or ``UserLevel(...)``.
      clock: the public step clock; a finite ``horizon_steps`` caps its last step.
      layout: the public keys in shards (None with ``private_keys``).
      private_keys: ``PrivateKeys`` when the keys are selected privately (then layout is None).
      horizon_steps: caps the number of steps (the clock's last step); with ``estimator`` and
        ``mechanism='auto'`` the old binary tree's T.
      estimator: None (default: 'variance_reduced' for the trees), 'variance_reduced' or
        'textbook'; with ``mechanism='auto'`` the old tree counters (module docstring).
      mechanism: 'auto' (default: the lowest expected error, module docstring), 'blt',
        'balanced_tree', 'kary_tree', 'binary_tree', 'infinite_tree', 'unbounded_tree' or
        'per_step'.
      lower, upper: clamp bounds of a sum's per-record value.
      grid_bits: sums are snapped to multiples of 2**-grid_bits before noise.
      bins: histogram bin labels (public).
      output: what every release is (``parse_output``): 'cumulative' (default: the total since
        start, the counter ``mechanism`` picks), 'per_step' (the value of the step alone) or
        ('window', W) (the total over the last W steps, fewer at the start): the last two run a
        ``WindowCounter`` (range decomposition of a dyadic/k-ary tree cut at ⌈log_k W⌉ levels,
        error independent of the horizon; ``mechanism`` and ``estimator`` must then stay at
        their defaults).
      count_share: a mean's or variance's share of the budget for the count (None: the equal
        split; ``beam_dp.drivers.mean.weights``).
      final_share: f in [0, 1): with a known end and cumulative output, the share of the budget
        spent on ONE release of every key's total at the last step, combined there with the
        continual counter's release by inverse variance (``beam_dp.mechanisms.final_release``;
        the counter runs at the rest). None or 0 (default): off, the whole budget on the
        continual counter.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
    """
    metric: str
    budget: PrivacyBudget
    privacy_unit: PrivacyUnit
    clock: StepClock
    layout: Optional[KeyLayout] = None
    private_keys: Optional[PrivateKeys] = None
    horizon_steps: Optional[int] = None
    estimator: Optional[str] = None
    lower: float = 0.0
    upper: float = 1.0
    grid_bits: int = 10
    bins: Tuple[str, ...] = ()
    mechanism: str = 'auto'
    output: object = 'cumulative'
    count_share: Optional[float] = None
    final_share: Optional[float] = None

    @classmethod
    def of_arguments(cls, owner: str, metric: str, *, public_keys, private_keys, num_shards,
                     lower, upper, grid_bits, **fields) -> 'KeyedReleaseDriver':
        """The driver of a keyed transform's arguments: the key layout of ``public_keys`` in
        ``num_shards`` (or ``private_keys``: then ``num_shards`` is refused), a sum's, mean's
        or variance's required bounds; ``fields`` as the constructor's."""
        if private_keys is not None and num_shards is not None:
            raise InvalidParamsError(f'{owner}: with private keys set '
                                     f'PrivateKeys(num_shards=...), not num_shards.')
        layout = None if private_keys is not None else KeyLayout.of(list(public_keys), num_shards)
        bounds = {}
        if metric == 'sum' or metric in ratio.RATIO_METRICS:
            if lower is None or upper is None:
                raise InvalidParamsError(f'{owner}: lower and upper are required.')
            bounds = dict(lower=lower, upper=upper, grid_bits=grid_bits)
        return cls(metric=metric, layout=layout, private_keys=private_keys, **fields, **bounds)

    def __post_init__(self):
        owner = 'KeyedReleaseDriver'
        if (self.layout is None) == (self.private_keys is None):
            raise InvalidParamsError(f'{owner}: give exactly one of public keys (layout) or '
                                     f'private_keys.')
        if self.private_keys is not None and not isinstance(self.private_keys,
                                                            (PrivateKeys, KeySetInput)):
            raise InvalidParamsError(f'{owner}: private_keys must be PrivateKeys(...), got '
                                     f'{self.private_keys!r}.')
        v.check_choice(owner, 'metric', self.metric, METRICS)
        if not isinstance(self.budget, PrivacyBudget):
            raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got {self.budget!r}.')
        if not isinstance(self.privacy_unit, PrivacyUnit):
            raise InvalidParamsError(f'{owner}: privacy_unit must be EventLevel() or UserLevel(...), '
                                     f'got {self.privacy_unit!r}.')
        if not isinstance(self.clock, StepClock):
            raise InvalidParamsError(f'{owner}: clock must be a StepClock, got {self.clock!r}.')
        v.check_optional_positive_int(owner, 'horizon_steps', self.horizon_steps)
        if self.estimator is not None:
            v.check_choice(owner, 'estimator', self.estimator, ('variance_reduced', 'textbook'))
        v.check_choice(owner, 'mechanism', self.mechanism, MECHANISMS)
        v.check_non_negative_int(owner, 'grid_bits', self.grid_bits)
        if self.grid_bits > 30:
            raise InvalidParamsError(f'{owner}: grid_bits must be at most 30, got {self.grid_bits}.')
        if self.metric == 'sum':
            v.check_bounds(owner, 'lower', self.lower, 'upper', self.upper)
            if self.upper == self.lower == 0:
                raise InvalidParamsError(f'{owner}: lower and upper must not both be 0.')
        if self.metric in ratio.RATIO_METRICS:
            v.check_bounds(owner, 'lower', self.lower, 'upper', self.upper)
            if not self.upper > self.lower:
                raise InvalidParamsError(f'{owner}: a {self.metric} needs lower < upper, got '
                                         f'[{self.lower:g}, {self.upper:g}].')
        if self.count_share is not None:
            if not self.is_ratio:
                raise InvalidParamsError(f'{owner}: count_share is for a mean or a variance, '
                                         f'not a {self.metric}.')
            share = v.check_real(owner, 'count_share', self.count_share)
            if not 0 < share < 1:
                raise InvalidParamsError(f'{owner}: count_share must be in (0, 1), got '
                                         f'{share!r}.')
        object.__setattr__(self, '_weights', ratio.weights(
            self.metric, self.grid_bits, self.count_share, gaussian=self.budget.is_zcdp)
            if self.is_ratio else ())
        if self.metric == 'histogram':
            if not self.bins or len(set(self.bins)) != len(self.bins):
                raise InvalidParamsError(f'{owner}: bins must be a non-empty list of distinct labels, '
                                         f'got {self.bins!r}.')
        object.__setattr__(self, 'output', parse_output(owner, self.output))
        if self.output != 'cumulative' and (self.mechanism != 'auto' or self.estimator):
            raise InvalidParamsError(
                f"{owner}: output={self.output!r} runs its own window counter: leave mechanism "
                f"and estimator at their defaults (got mechanism={self.mechanism!r}, "
                f"estimator={self.estimator!r}).")
        object.__setattr__(self, 'clock', self.clock.limited_to(self.horizon_steps))
        if self.final_share is not None:
            share = v.check_real(owner, 'final_share', self.final_share)
            if not 0 <= share < 1:
                raise InvalidParamsError(f'{owner}: final_share must be in [0, 1), got '
                                         f'{share!r}.')
            object.__setattr__(self, 'final_share', float(share))
        object.__setattr__(self, '_bin_index', {b: i for i, b in enumerate(self.bins)})
        object.__setattr__(self, '_counters', {})
        object.__setattr__(self, '_stddevs', {})
        l1, l2 = self.sensitivity()
        unit = self.privacy_unit
        participation = (unit.participation(self.record_norms[1] if self.is_ratio
                                            else self.value_bound_units)
                         if unit.name == 'user' and self.private_keys is None else None)
        if self.final_share:
            if self.output != 'cumulative':
                raise InvalidParamsError(f"{owner}: final_share releases the total at the last "
                                         f"step: it needs output='cumulative', got "
                                         f"output={self.output!r}.")
            base = counter_choice.choose_final_release(
                self.mechanism, self.estimator, self.budget, self.horizon, self.horizon_steps,
                l1, l2, self.bins_per_key, participation, self.final_share)
        elif self.output == 'cumulative':
            base = counter_choice.choose_counter(
                self.mechanism, self.estimator, self.budget, self.horizon, self.horizon_steps,
                l1, l2, self.bins_per_key, participation)
        else:
            window_participation = None
            if unit.name == 'user':
                # One change: ≤ n·m·B per (key, step, bin), ≤ S steps per key, L1 ≤ l1 in all
                # (n = neighbour_units; |Δu − Δv| ≤ |Δu| + |Δv| cell by cell).
                window_participation = (
                    float(unit.neighbour_units * unit.max_contributions_per_step
                          * self.value_bound_units), int(unit.max_steps_per_unit), float(l1))
            base = counter_choice.window_counter(self.window, self.budget, l1, l2,
                                                 self.bins_per_key, window_participation)
        object.__setattr__(self, '_base_counter', base)
        # Build once: this validates the counter parameters at construction too, and the
        # selection's noise scale for this unit's k keys.
        self.counter(1)
        if self.selects_keys:
            self.private_keys.selection(self.privacy_unit.max_keys)
            self.private_keys.horizon_selection(self.privacy_unit.max_keys, True)

    @property
    def window(self) -> Optional[int]:
        """W of a per-step (1) or window output; None for cumulative releases."""
        if self.output == 'cumulative':
            return None
        return 1 if self.output == 'per_step' else self.output[1]

    @property
    def selects_keys(self) -> bool:
        """Whether keys are selected privately (``PrivateKeys``; not a ``KeySetInput``)."""
        return isinstance(self.private_keys, PrivateKeys)

    # -- records ----------------------------------------------------------------------------------

    def locate(self, key) -> Tuple[str, int, Optional[int]]:
        """(the key as text, its shard, its position in the shard: None for private keys).

        Raises:
          InvalidRecordError: for a key outside the public key set.
        """
        key = text_key(key)
        if self.private_keys is not None:
            return key, self.private_keys.shard_of(key), None
        location = self.layout.locate(key)
        if location is None:
            raise InvalidRecordError(f'key {key!r} is not in the public key set')
        return (key, *location)

    def extract(self, key, micros: int, record, value_fn) -> Tuple[object, int, int, object, int]:
        """One record → ``(key id, step, shard, slot, units)``.

        The key id is what ``BoundContributions`` bounds per unit (the flat key index of a public
        key, the key itself for private keys); slot is the flat position key × bins + bin in the
        shard (public keys) or the bin index (private keys); units is the record's value in grid
        units (1 for counts and histograms). ``value_fn(record)`` is called only for sums and
        histograms, after the key and the step are checked.

        Raises:
          InvalidRecordError: with the dead-letter reason.
        """
        key, shard, position = self.locate(key)
        step = self.clock.checked_step(micros)
        bin_index, units = 0, 1
        if self.metric == 'sum':
            try:
                units = self.to_units(value_fn(record))
            except Exception as e:  # pylint: disable=broad-except
                raise InvalidRecordError(f'value is not a number: {e!r}') from e
        elif self.is_ratio:     # a tuple: one integer per coordinate of the key (add_units)
            try:
                units = ratio.coordinates(self.metric, self.lower, self.upper, self.grid_bits,
                                          float(value_fn(record)), self._weights)
            except Exception as e:  # pylint: disable=broad-except
                raise InvalidRecordError(f'value is not a number: {e!r}') from e
        elif self.metric == 'histogram':
            try:
                label = value_fn(record)
            except Exception as e:  # pylint: disable=broad-except
                raise InvalidRecordError(f'value_fn raised {e!r}') from e
            try:
                bin_index = self._bin_index[label]
            except (KeyError, TypeError):
                raise InvalidRecordError(
                    f'bin {label!r:.80} is not in the public bin set') from None
        if position is None:
            return key, step, shard, bin_index, units
        key_index = position * self.layout.num_shards + shard
        return key_index, step, shard, position * self.bins_per_key + bin_index, units

    def count_codes(self) -> Optional[CountCodes]:
        """The extraction fast path of an event-level count over public keys (``CountCodes``:
        same accepted records, keys and steps as ``extract``), or None for any other release."""
        if self.metric != 'count' or self.layout is None or self.privacy_unit.name == 'user':
            return None
        return CountCodes(self.layout, self.clock)

    def private_count_codes(self) -> Optional[PrivateCountCodes]:
        """The extraction fast path of an event-level count over private keys
        (``PrivateCountCodes``: a new, empty one), or None for any other release."""
        if self.metric != 'count' or self.private_keys is None or self.privacy_unit.name == 'user':
            return None
        return PrivateCountCodes(self.clock)

    @property
    def bins_per_key(self) -> int:
        if self.is_ratio:
            return ratio.dimension(self.metric)
        return len(self.bins) if self.metric == 'histogram' else 1

    @property
    def is_ratio(self) -> bool:
        """A mean or a variance: a vector of coordinates per key (``beam_dp.drivers.mean``)."""
        return self.metric in ratio.RATIO_METRICS

    @property
    def record_norms(self) -> Tuple[float, float]:
        """(L1, L2) norm bound of one record's contribution, in grid units."""
        if self.is_ratio:
            return ratio.record_norms(self.metric, self.grid_bits, self._weights)
        return self.value_bound_units, self.value_bound_units

    @property
    def value_bound_units(self) -> int:
        """The largest |value| of one record's coordinate, in grid units (1 for counts and
        histograms; D = 2**grid_bits for every coordinate of a mean or variance)."""
        if self.is_ratio:
            return 1 << self.grid_bits
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
        """Grid units → value units (a ratio metric: records and normalised units: n̂, Σu,
        Σ(2u² − 1), each coordinate divided by its weight)."""
        if self.is_ratio:
            estimate = np.asarray(estimate, dtype=np.float64)
            w = np.asarray(self._weights, dtype=np.float64)
            return estimate / np.tile(w, estimate.size // w.size).reshape(estimate.shape)
        if self.metric != 'sum':
            return np.asarray(estimate, dtype=np.float64)
        return np.asarray(estimate, dtype=np.float64) / (1 << self.grid_bits)

    def finish_ratio(self, step: int, keys: Sequence[str], estimates: np.ndarray, sigma: float,
                     fields: tuple) -> List:
        """The ``Release`` records of a mean or variance (``beam_dp.drivers.mean.releases``)
        from decoded estimates of shape (keys, coordinates) with the count's noise sd
        ``sigma`` (the other coordinates': sigma·w_count/w_i)."""
        return ratio.releases(self.metric, self.lower, self.upper, self.clock, step, keys,
                              estimates, self.coordinate_stddevs(sigma), fields)

    def coordinate_stddevs(self, count_sigma: float) -> Tuple[float, ...]:
        """A ratio's per-coordinate noise sds (decoded units) from the count's."""
        w = self._weights
        return tuple(count_sigma * w[0] / x for x in w)

    # -- mechanism and costs ----------------------------------------------------------------------

    def sensitivity(self) -> Tuple[float, float]:
        """(L1, L2) of the whole vector stream: the unit's bounds times one record's norms."""
        l1_record, l2_record = self.record_norms
        if l1_record == l2_record:
            return self.privacy_unit.sensitivity(l1_record)
        return (self.privacy_unit.sensitivity(l1_record)[0],
                self.privacy_unit.sensitivity(l2_record)[1])

    @property
    def horizon(self) -> Optional[int]:
        """The known horizon: steps from start to the clock's last step (end / horizon_steps)."""
        last = self.clock.last_step
        return None if last is None else last + 1

    def counter(self, keys_in_shard: int):
        """The vector counter of a shard with this many keys (dimension keys × bins); built
        once per shard size."""
        counter = self._counters.get(keys_in_shard)
        if counter is None:
            counter = dataclasses.replace(self._base_counter,
                                          dimension=keys_in_shard * self.bins_per_key)
            self._counters[keys_in_shard] = counter
        return counter

    def release_cost(self) -> PrivacyCost:
        """The cost of the released values (the counters), in the budget's notion (a pure
        counter run at ε = √(2ρ) for a ρ budget is ρ-zCDP)."""
        cost = self.counter(1).privacy_cost()
        if self.budget.is_zcdp and not cost.is_zcdp:
            if cost.to_rho() > self.budget.rho * (1 + 1e-9):
                raise InvalidParamsError(f'KeyedReleaseDriver: the counter costs {cost}, more '
                                         f'than {self.budget}.')
            return PrivacyCost(rho=self.budget.rho)
        return cost

    def privacy_costs(self, label: str) -> List[Tuple[str, PrivacyCost]]:
        """Every cost of the transform called ``label``, as (ledger label, cost): the private key
        selection first (sequential composition), then the release."""
        release = [(label, self.release_cost())]
        final = self.final_counter
        if final is not None:   # the split, entry by entry: the continual counter, the one-shot
            release = [(label, final.continual.privacy_cost()),
                       (f'{label}/FinalRelease', final.final.privacy_cost())]
        if not self.selects_keys:
            return release
        return [(f'{label}/SelectKeys', self.private_keys.privacy_cost())] + release

    def privacy_cost(self) -> PrivacyCost:
        """Total: selection (if private keys) + release, by sequential composition."""
        total = PrivacyCost()
        for _, cost in self.privacy_costs(''):
            total = total + cost
        return total

    @property
    def mechanism_name(self) -> str:
        """What runs: '<counter>/<estimator or variant>/<noise>' (public)."""
        return counter_choice.mechanism_name(self._base_counter)

    @property
    def final_counter(self):
        """The ``FinalReleaseCounter`` of a ``final_share`` release (None without)."""
        base = self._base_counter
        node = getattr(base, 'inner', base)      # a quantile tree's node counter
        return node if isinstance(node, FinalReleaseCounter) else None

    def counter_noise_stddev(self, counter_steps: int, final_steps: Optional[int] = None
                             ) -> float:
        """Public: the noise sd (per bin, in value units) of a counter's release after it took
        this many steps (``final_steps``: the counter step of a ``final_share`` one-shot when
        the counter started after step 0, a private key's)."""
        cache = counter_steps if final_steps is None else (counter_steps, final_steps)
        sd = self._stddevs.get(cache)
        if sd is None:
            counter = self.counter(1)
            sd = math.sqrt(counter.release_variance(counter_steps) if final_steps is None
                           else counter.release_variance(counter_steps, final_steps))
            if self.is_ratio:                     # a ratio's: the count's sd in records
                sd /= self._weights[0]
            elif self.metric == 'sum':
                sd /= (1 << self.grid_bits)
            if len(self._stddevs) >= _STDDEV_CACHE:
                self._stddevs.clear()
            self._stddevs[cache] = sd
        return sd

    def noise_stddev(self, step: int) -> float:
        """Public: the noise sd of a public key's release of ``step`` (per bin, value units)."""
        return self.counter_noise_stddev(step + 1)

    def release_metadata(self) -> Dict[str, object]:
        """The privacy fields of every ``Release`` of this transform (public)."""
        if not self.selects_keys:
            cost = self.release_cost()
            if cost.is_zcdp:    # ρ, checked as the budget's (ε, δ) through the CKS conversion
                epsilon, delta = self.budget.epsilon or 0.0, self.budget.delta
            else:               # exactly what the accountant records (a pure counter: δ = 0)
                epsilon, delta = cost.epsilon, cost.delta
            return dict(metric=self.metric, mechanism=self.mechanism_name,
                        epsilon=float(epsilon), delta=float(delta), rho=self._release_rho(),
                        privacy_unit=self.privacy_unit.describe())
        selection = self.private_keys.budget
        if self.budget.is_zcdp:                 # selection's (ε, δ) and the release's ρ
            epsilon, delta = selection.epsilon, selection.delta
        elif self.release_cost().is_zcdp:       # a Gaussian counter under an (ε, δ) budget,
            epsilon = selection.epsilon + self.budget.epsilon   # spent as (ε, δ) (CKS): basic
            delta = selection.delta + self.budget.delta         # composition with selection
        else:
            epsilon, delta = self.privacy_cost().epsilon, selection.delta
        return dict(metric=self.metric, mechanism=f'{self.mechanism_name}+continual_key_selection',
                    epsilon=float(epsilon), delta=float(delta),
                    rho=self._release_rho(), privacy_unit=self.privacy_unit.describe())

    def _release_rho(self) -> float:
        """ρ of a zCDP budget, or the ρ a Gaussian counter spends under an (ε, δ) budget (its
        zCDP cost, checked as (ε, δ) through the CKS conversion); 0 for pure counters."""
        if self.budget.is_zcdp:
            return float(self.budget.rho)
        cost = self.release_cost()
        return float(cost.rho) if cost.is_zcdp else 0.0

    def describe(self) -> Dict[str, object]:
        """Data-independent facts for display data."""
        return {
            'metric': self.metric,
            'mechanism': self.mechanism_name,
            'budget': str(self.budget),
            'privacy_unit': self.privacy_unit.describe(),
            'num_keys': len(self.layout.keys) if self.layout is not None else 'private',
            'num_shards': self.num_shards,
            **self.clock.describe(),
            'horizon_steps': self.horizon if self.horizon is not None else 'unbounded',
        }

    @property
    def num_shards(self) -> int:
        if self.layout is not None:
            return self.layout.num_shards
        return self.private_keys.num_shards

    # -- public shards ----------------------------------------------------------------------------

    def init_shard(self, shard: int) -> PublicShardState:
        keys = len(self.layout.shard_keys(shard))
        return PublicShardState(0, self.counter(keys).init_state())

    def add_pending(self, state: PublicShardState, contribution: Tuple[int, np.ndarray, np.ndarray]
                    ) -> Optional[PublicShardState]:
        """Keeps a pre-aggregated ``(step, positions, values)`` until its step is released;
        None if that step was already released (the contribution is late)."""
        if contribution[0] < state.next_step:
            return None
        return dataclasses.replace(state, pending_contributions=_pending_sums(
            state.pending_contributions).add(tuple(contribution[:3]), state.next_step))

    def late_contributions(self, shard: int, positions, values) -> Iterator[Tuple[str, int]]:
        """(key, units) of a pre-aggregated contribution that came after its step's release
        (for the dead letter: the records themselves are gone)."""
        keys = self.layout.shard_keys(shard)
        bins = self.bins_per_key
        for flat, value in zip(np.asarray(positions).tolist(), np.asarray(values).tolist()):
            yield keys[flat // bins], value

    def release_public_step(self, shard: int, state: PublicShardState, rng: RandomSource
                            ) -> Tuple[List[Tuple[str, list, float]], PublicShardState]:
        """Releases step ``state.next_step`` of a public shard from its pending contributions
        of that step (pre-aggregated ``(step, positions, values)``; the others stay pending).

        Returns:
          ([(key, per-bin estimates in value units, noise sd)] for every key of the shard, the
          new state).
        """
        keys, released, stddev, new_state = self.release_public_arrays(shard, state, rng)
        return [(key, row, stddev) for key, row in zip(keys, released.tolist())], new_state

    def release_public_arrays(self, shard: int, state: PublicShardState, rng: RandomSource
                              ) -> Tuple[Tuple[str, ...], np.ndarray, float, PublicShardState]:
        """``release_public_step`` without the per-key rows: (the shard's keys, their
        estimates of shape (keys, bins) in value units, the noise sd, the new state)."""
        step = state.next_step
        # The pending sums stay as they are (the same object): entries of released steps are
        # skipped by step and dropped at the next compaction, so a release never rewrites them.
        pending = state.pending_contributions
        released, new_state = self.release_step(shard, state, _pending_sums(pending).due(step),
                                                rng)
        return (self.layout.shard_keys(shard), released, self.noise_stddev(step),
                dataclasses.replace(new_state, pending_contributions=pending))

    def release_step(self, shard: int, state: PublicShardState,
                     contributions: Sequence[Tuple[np.ndarray, np.ndarray]],
                     rng: RandomSource) -> Tuple[np.ndarray, PublicShardState]:
        """Advances a public shard's counter by one step.

        Args:
          contributions: (flat positions, integer values) pairs for this step, already bounded;
            flat position = key position × bins + bin.
        Returns:
          (estimates of shape (keys_in_shard, bins) in value units, new state without pending
          contributions).
        """
        keys = len(self.layout.shard_keys(shard))
        # Exact: int64 under a proven bound, Python ints beyond (no silent wrap).
        vector = exact_int.scatter_add(keys * self.bins_per_key, contributions)
        estimate, counter_state = self.counter(keys).step(state.counter_state, vector, rng)
        released = self.from_units(estimate).reshape(keys, self.bins_per_key)
        return released, PublicShardState(state.next_step + 1, counter_state)

    # -- private-keys shards ----------------------------------------------------------------------

    def loop_driver(self):
        """What the release loop runs: ``PublicShardLoop`` or ``PrivateShardLoop``."""
        if self.private_keys is None:
            return PublicShardLoop(self)
        return PrivateShardLoop(self) if self.selects_keys else KeySetShardLoop(self)

    @property
    def private_shard(self) -> PrivateKeysShard:
        """The private-keys shard state machine of this release."""
        if not self.selects_keys:
            return KeySetShard(None, self.counter(1), self.bins_per_key, self.from_units,
                               self.counter_noise_stddev)
        last = self.clock.last_step
        selection, final = self.private_keys.horizon_selection(self.privacy_unit.max_keys,
                                                               last is not None)
        return PrivateKeysShard(selection, self.counter(1), self.bins_per_key, self.from_units,
                                self.counter_noise_stddev,
                                backfill=self.output == 'cumulative', final=final,
                                final_step=None if last is None else last + 1)



# -- the release loop's drivers (``beam_dp.drivers.protocol``) ----------------------------------

_RELEASE_STAGE = 'ReleaseNoisyValues'


class ShardPartial(NamedTuple):
    """A public shard's payload: exact sums of one step, pre-aggregated per flat position
    (key position × bins + bin) in the shard."""
    step: int
    positions: np.ndarray
    values: np.ndarray


class PrivatePartial(NamedTuple):
    """A private-keys shard's payload: per key of one step, (per-bin units, new units)."""
    step: int
    per_key: Dict[str, Tuple[Tuple[int, ...], int]]


class PublicShardLoop:
    """``SingleCellDriver`` of a public shard (the keyed fast path): the shard's
    ``PublicShardState`` (pending partials included) in one cell, one release per step, noise
    at (label, shard, step)."""

    LOOP = 'single_cell'

    def __init__(self, keyed: KeyedReleaseDriver):
        self.keyed = keyed
        self.clock = keyed.clock
        self._fields = rows.release_fields(keyed.release_metadata())
        self._histogram = keyed.metric == 'histogram'
        self._ratio = keyed.is_ratio

    def start(self, shard: int, noise) -> Outcome:
        return Outcome(self.keyed.init_shard(shard),
                       timer_micros=self.clock.release_time_micros(0))

    def fold(self, state: PublicShardState, shard: int, payload: ShardPartial) -> Outcome:
        records = None
        if len(payload) > 3:     # the records it sums: dropped here, never kept in state
            records, payload = payload[3], ShardPartial(*payload[:3])
        new_state = self.keyed.add_pending(state, payload)
        if new_state is not None:
            return Outcome(new_state)
        step, positions, values = payload
        if records is not None:  # late: one dead letter per record folded into the partial
            return Outcome(dead_letters=late_records(self.clock, _RELEASE_STAGE, step, records))
        # No records (user level, whose chain in 'BoundContributions' dead-letters late
        # records one by one before this backstop): the aggregate per key and step.
        return Outcome(dead_letters=[
            late_letter(self.clock, _RELEASE_STAGE, step, {'key': key, 'step': step,
                                                           'value': value})
            for key, value in self.keyed.late_contributions(shard, positions, values)])

    def close(self, state: PublicShardState, shard: int, fired_micros: int, pending,
              noise) -> Outcome:
        step = state.next_step
        clock = self.clock
        if state.input_ended or not clock.is_released(step):
            return _NOTHING
        keys, estimates, stddev, new_state = self.keyed.release_public_arrays(
            shard, state, noise.derive(shard, step))
        if self._ratio:
            out = self.keyed.finish_ratio(step, keys, estimates, stddev, self._fields)
        else:
            out = rows.array_releases(clock, step, keys, estimates, stddev, self._fields,
                                      self._histogram)
        return Outcome(new_state, out, timer_micros=clock.next_release_time_micros(step))

    @staticmethod
    def end_of_input(state: PublicShardState) -> PublicShardState:
        return dataclasses.replace(state, input_ended=True)

    # The loop keeps the pending sums in their own cell ('pending'), rewritten only by a fold
    # (a release keeps the same object): ``_SingleCellFn``.
    @staticmethod
    def split(state: PublicShardState) -> Tuple[PublicShardState, PendingSums]:
        return (dataclasses.replace(state, pending_contributions=_NO_PENDING),
                state.pending_contributions)

    @staticmethod
    def join(hot: PublicShardState, cold: Optional[PendingSums]) -> PublicShardState:
        if cold is None:    # nothing folded yet (or a state written before the split)
            return hot
        return dataclasses.replace(hot, pending_contributions=cold)


class PrivateShardLoop:
    """``BufferedDriver`` of a private-keys shard (``PrivateKeysShard``): the shard state in
    the cell, ``PrivatePartial``s in the pending bag, noise at (label)."""

    LOOP = 'buffered'

    def __init__(self, keyed: KeyedReleaseDriver):
        self.keyed = keyed
        self.clock = keyed.clock
        self._shard = keyed.private_shard
        self._fields = rows.release_fields(keyed.release_metadata())
        self._histogram = keyed.metric == 'histogram'
        self._ratio = keyed.is_ratio

    def start(self, shard: int, noise) -> Outcome:
        return Outcome(self._shard.init_state(), timer_micros=self.clock.release_time_micros(0))

    def fold(self, state, shard: int, payload: PrivatePartial) -> Outcome:
        records = None
        if len(payload) > 2:     # the records it sums: never stored in the bag
            records, payload = payload[2], PrivatePartial(payload[0], payload[1])
        step, per_key = payload
        if step >= state.next_step:
            return _KEEP if records is None else Outcome(keep=True, stored=payload)
        if records is not None:  # late: one dead letter per record
            return Outcome(dead_letters=late_records(self.clock, _RELEASE_STAGE, step, records))
        return Outcome(dead_letters=[
            late_letter(self.clock, _RELEASE_STAGE, step, {'key': key, 'step': step,
                                                           'value': sum(values)})
            for key, (values, _) in sorted(per_key.items())])

    def close(self, state, shard: int, fired_micros: int, pending, noise) -> Outcome:
        step = state.next_step
        clock = self.clock
        if not clock.is_released(step):
            return _NOTHING
        due, rest, dropped = [], [], 0
        for item in pending:
            if item[0] > step:
                rest.append(item)
            else:               # this step's, or a released step's left in the bag (below)
                dropped += 1
                if item[0] == step:
                    due.append(item)
        # Rewriting the bag re-encodes every later payload: done only when more items leave it
        # than stay, so each payload is written O(1) times amortised. Items of released steps
        # stay until then and are skipped: nothing of a released step is ever added (late).
        released, new_state = self._shard.release_step(
            state, self._shard.merge(per_key for _, per_key in due), noise.derive())
        if self._ratio:
            out = []
            for sd in sorted({row[2] for row in released}):     # one per selection step
                group = [row for row in released if row[2] == sd]
                out.extend(self.keyed.finish_ratio(
                    step, [row[0] for row in group], np.array([row[1] for row in group]), sd,
                    self._fields))
            out.sort(key=lambda release: release[0])
        else:
            out = rows.releases(clock, step, released, self._fields, self._histogram)
        return Outcome(new_state, out,
                       timer_micros=clock.next_release_time_micros(step),
                       pending=rest if dropped > len(rest) else None)

    @staticmethod
    def state_size(state) -> int:
        """Beam's state cache size estimate: from the number of keys."""
        return 256 + 400 * (len(state.candidates) + len(state.selected))

    @staticmethod
    def payload_size(payload: PrivatePartial) -> int:
        return 128 + 200 * len(payload[1])


class KeySetShardLoop(PrivateShardLoop):
    """``PrivateShardLoop`` of a ``KeySetInput`` shard: a ``ShardKeys`` payload (at start)
    gives the shard its keys; partials and releases as a private-keys shard's."""

    def fold(self, state, shard: int, payload) -> Outcome:
        if isinstance(payload, ShardKeys):
            return Outcome(self._shard.with_keys(state, payload.keys))
        return super().fold(state, shard, payload)


_NOTHING = Outcome()
_KEEP = Outcome(keep=True)
_NO_PENDING = PendingSums()


def add_units(sums, slot: int, units) -> None:
    """Adds one record's ``units`` (``extract``) at ``slot`` of ``sums`` (a dict or list):
    an integer, or a ratio's tuple of coordinates at slot, slot + 1, ..."""
    if type(units) is tuple:    # pylint: disable=unidiomatic-typecheck
        for j, u in enumerate(units):
            sums[slot + j] += u
    else:
        sums[slot] += units
