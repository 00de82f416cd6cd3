"""Continual per-key counts, sums and histograms on a fixed event-time schedule.

Wiring (every label is part of the Dataflow update contract):

  records
    | 'GlobalWindow'         re-window (timestamps kept; releases are driven by event-time timers)
    | 'ExtractAndValidate'   key / value / bin / unit per record; malformed → dead letter
    | 'KeyByUnit' + 'BoundContributions'       (user-level only)
    | 'PreAggregate'         bundle-local sums per (shard, step, key) — combiner lifting by hand,
                             so the stateful DoFn sees one small vector per shard, step and bundle
    + 'ShardSeeds'           one element per shard at ``start``: every shard gets a timer even if
                             no record ever reaches it, so idle keys and empty steps are released
    | 'ReleaseNoisyValues'   stateful DoFn keyed by shard: pending contributions in a Bag, the
                             counter state in one ReadModifyWrite cell, one watermark timer per
                             step boundary; releases every key of the shard for every step

With ``keys=PrivateKeys(...)`` the key universe is unknown: 'ExtractAndValidate' hashes each key
to a shard, 'MarkNewUnits' (user-level only, keyed by (unit, key)) flags a unit's first record
for a key, 'PreAggregate' sums per (shard, step, key), and 'ReleaseNoisyValues' holds the shard's
candidate keys (selection state) and selected keys (their counters) in one dict-valued cell;
every candidate's selection is advanced on every step, with or without data for it.

The release of step s happens when the watermark passes end(s) + allowed_lateness: a public,
data-independent schedule. Contributions for a step that is already released are late: they go
to the dead-letter output (aggregated per key: the pre-aggregation no longer has the records).
"""

import collections
import dataclasses
import operator
import typing
from typing import Any, Callable, Optional, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.coders import BooleanCoder
from apache_beam.coders import PickleCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.transforms.userstate import TimerSpec
from apache_beam.transforms.userstate import on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import Release
from beam_dp.mechanisms.keyed_release import KeyLayout
from beam_dp.mechanisms.keyed_release import KeyedReleaseSpec
from beam_dp.mechanisms.keyed_release import PrivateKeys
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import PrivacyUnit
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms._common import DEAD_LETTER
from beam_dp.transforms._common import ContinualOutputs
from beam_dp.transforms._common import dead_letter
from beam_dp.transforms._common import to_micros
from beam_dp.transforms.contribution_bounding import BoundContributions

__all__ = [
    'ContinualCountPerKey',
    'ContinualHistogramPerKey',
    'ContinualSumPerKey',
    'PrivateKeys',
]

_FIRST = operator.itemgetter(0)
_SECOND = operator.itemgetter(1)


class _ExtractFn(beam.DoFn):
    """record → (unit, (flat key index, step, (shard, flat position, units))) or a dead letter."""

    def __init__(self, spec: KeyedReleaseSpec, label: str, key_fn, value_fn, unit_fn):
        self._spec = spec
        self._label = label
        self._key_fn = key_fn
        self._value_fn = value_fn
        self._unit_fn = unit_fn

    def setup(self):
        self._bin_index = {b: i for i, b in enumerate(self._spec.bins)}
        self._last_step = self._spec.last_step

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        spec = self._spec
        micros = timestamp.micros
        try:
            key = self._key_fn(record)
        except Exception as e:  # pylint: disable=broad-except
            yield dead_letter(self._label, 'ExtractAndValidate', f'key_fn raised {e!r}', record,
                              micros)
            return
        if spec.private_keys is not None:
            if not isinstance(key, str):
                yield dead_letter(self._label, 'ExtractAndValidate',
                                  f'key must be a string, got {key!r}', record, micros)
                return
            location = (spec.private_keys.shard_of(key), None)
        else:
            location = spec.layout.locate(key)
        if location is None:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              f'key {key!r} is not in the public key set', record, micros)
            return
        step = spec.step_of(micros)
        if step < 0:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              'event time is before the release start', record, micros)
            return
        if self._last_step is not None and step > self._last_step:
            yield dead_letter(self._label, 'ExtractAndValidate',
                              f'event time is after the last released step {self._last_step}',
                              record, micros)
            return
        shard, position = location
        bin_index, units = 0, 1
        if spec.metric == 'sum':
            try:
                units = spec.to_units(self._value_fn(record))
            except Exception as e:  # pylint: disable=broad-except
                yield dead_letter(self._label, 'ExtractAndValidate',
                                  f'value is not a number: {e!r}', record, micros)
                return
        elif spec.metric == 'histogram':
            try:
                label = self._value_fn(record)
                bin_index = self._bin_index[label]
            except Exception as e:  # pylint: disable=broad-except
                yield dead_letter(self._label, 'ExtractAndValidate',
                                  f'bin is not one of the public bins: {e!r}', record, micros)
                return
        unit = None
        if self._unit_fn is not None:
            try:
                unit = self._unit_fn(record)
            except Exception as e:  # pylint: disable=broad-except
                yield dead_letter(self._label, 'ExtractAndValidate', f'unit_fn raised {e!r}',
                                  record, micros)
                return
            if unit is None:
                yield dead_letter(self._label, 'ExtractAndValidate', 'privacy unit id is None',
                                  record, micros)
                return
        if spec.private_keys is not None:
            # (shard, key, bin, units, unit): the unit rides along for 'MarkNewUnits'.
            yield unit, (key, step, (shard, key, bin_index, units, unit))
            return
        flat = position * spec.bins_per_key + bin_index
        key_index = position * spec.layout.num_shards + shard
        yield unit, (key_index, step, (shard, flat, units))


class _PreAggregateFn(beam.DoFn):
    """Bundle-local sums per (shard, step, flat position), emitted at the end of the bundle.

    Each output is timestamped at the end of its step, which is never earlier than any input it
    sums, so it cannot be late where its inputs were not.
    """

    def __init__(self, spec: KeyedReleaseSpec):
        self._spec = spec

    def start_bundle(self):
        self._sums = collections.defaultdict(lambda: collections.defaultdict(int))

    def process(self, element):
        _, step, (shard, flat, units) = element
        self._sums[(shard, step)][flat] += units

    def finish_bundle(self):
        for (shard, step), sums in self._sums.items():
            positions = np.fromiter(sums.keys(), dtype=np.int64, count=len(sums))
            values = np.fromiter(sums.values(), dtype=np.int64, count=len(sums))
            end = self._spec.step_bounds(step)[1]
            yield WindowedValue((shard, (step, positions, values)),
                                Timestamp(micros=end - 1), [GlobalWindow()])
        self._sums.clear()


class _ReleaseFn(beam.DoFn):
    """Keyed by shard: holds the shard's ``ShardState`` (counter state, pending contributions,
    end-of-input flag) in ONE state cell, and the release timer."""

    SHARD_STATE = ReadModifyWriteStateSpec('shard_state', PickleCoder())
    RELEASE_TIMER = TimerSpec('release', TimeDomain.WATERMARK)
    END_TIMER = TimerSpec('end_of_input', TimeDomain.WATERMARK)

    def __init__(self, spec: KeyedReleaseSpec, label: str, rng: noise.RandomSource):
        self._spec = spec
        self._label = label
        self._rng = rng

    def setup(self):
        spec = self._spec
        self._metadata = dict(
            metric=spec.metric, mechanism=spec.mechanism_name,
            epsilon=float(spec.budget.epsilon or 0.0), delta=float(spec.budget.delta),
            rho=float(spec.budget.rho or 0.0), privacy_unit=spec.privacy_unit.describe())
        self._last_step = spec.last_step

    def process(self, element, shard_state=beam.DoFn.StateParam(SHARD_STATE),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER),
                end_timer=beam.DoFn.TimerParam(END_TIMER)):
        shard, payload = element
        state = shard_state.read()
        if state is None:
            state = self._spec.init_shard(shard)
            release_timer.set(Timestamp(micros=self._spec.release_time_micros(0)))
            if self._spec.last_step is None:
                # With no public end, fires only when the input ends (bounded input, drain) and
                # stops the release loop, which would otherwise run forever at watermark +inf.
                end_timer.set(GlobalWindow().max_timestamp())
            if payload is None:
                shard_state.write(state)
        if payload is None:
            return
        step, positions, values = payload
        if step < state.next_step:
            for key_index, value in self._describe(shard, positions, values):
                yield dead_letter(
                    self._label, 'ReleaseNoisyValues',
                    f'late: step {step} was already released (allowed lateness '
                    f'{self._spec.allowed_lateness_micros / 1e6:g}s)',
                    {'key': key_index, 'step': step, 'value': value},
                    self._spec.step_bounds(step)[1] - 1)
            return
        shard_state.write(dataclasses.replace(state, pending=state.pending + (payload,)))

    def _describe(self, shard, positions, values):
        keys = self._spec.layout.shard_keys(shard)
        bins = self._spec.bins_per_key
        for flat, value in zip(positions.tolist(), values.tolist()):
            yield keys[flat // bins], value

    @on_timer(RELEASE_TIMER)
    def release(self, key=beam.DoFn.KeyParam, shard_state=beam.DoFn.StateParam(SHARD_STATE),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        state = shard_state.read()
        if state.finished:
            return
        step = state.next_step
        if self._last_step is not None and step > self._last_step:
            return
        due, rest = [], []
        for item in state.pending:
            (due if item[0] == step else rest).append(item)
        rng = self._rng.derive(self._label, key, step)
        released, new_state = self._spec.release_step(key, state, [(p[1], p[2]) for p in due],
                                                      rng)
        shard_state.write(dataclasses.replace(new_state, pending=tuple(rest)))
        if self._last_step is None or step + 1 <= self._last_step:
            release_timer.set(Timestamp(micros=self._spec.release_time_micros(step + 1)))
        yield from self._releases(key, step, released)

    def _releases(self, shard, step, released):
        spec = self._spec
        start, end = spec.step_bounds(step)
        stddev = spec.noise_stddev(step)
        histogram = spec.metric == 'histogram'
        for name, row in zip(spec.layout.shard_keys(shard), released.tolist()):
            yield Release(key=name, step=step, step_start_micros=start, step_end_micros=end,
                          value=float(sum(row)), values=row if histogram else [],
                          noise_stddev=stddev, **self._metadata)

    @on_timer(END_TIMER)
    def end_of_input(self, shard_state=beam.DoFn.StateParam(SHARD_STATE),
                     release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        shard_state.write(dataclasses.replace(shard_state.read(), finished=True))
        release_timer.clear()


class _MarkNewUnitsFn(beam.DoFn):
    """Keyed by (unit, key): flags the first kept record of a unit for a key, so the key
    selection counts distinct units (one unit moves a key's selection count by at most 1)."""

    SEEN = ReadModifyWriteStateSpec('seen', BooleanCoder())

    def process(self, element, seen=beam.DoFn.StateParam(SEEN)):
        _, (key, step, (shard, _, bin_index, units, _)) = element
        first = not seen.read()
        if first:
            seen.write(True)
        yield key, step, (shard, key, bin_index, units, int(first))


class _PrivatePreAggregateFn(beam.DoFn):
    """Bundle-local sums per (shard, step, key): per-bin units and new distinct units."""

    def __init__(self, spec: KeyedReleaseSpec):
        self._spec = spec

    def start_bundle(self):
        self._sums = collections.defaultdict(dict)

    def process(self, element):
        _, step, (shard, key, bin_index, units, new_units) = element
        per_key = self._sums[(shard, step)]
        entry = per_key.get(key)
        if entry is None:
            entry = per_key[key] = [[0] * self._spec.bins_per_key, 0]
        entry[0][bin_index] += units
        entry[1] += new_units

    def finish_bundle(self):
        for (shard, step), per_key in self._sums.items():
            end = self._spec.step_bounds(step)[1]
            payload = {k: (tuple(v[0]), v[1]) for k, v in per_key.items()}
            yield WindowedValue((shard, (step, payload)), Timestamp(micros=end - 1),
                                [GlobalWindow()])
        self._sums.clear()


class _PrivateReleaseFn(beam.DoFn):
    """Keyed by shard (private keys): candidate and selected keys of the shard in one cell."""

    SHARD_STATE = ReadModifyWriteStateSpec('shard_state', PickleCoder())
    PENDING = BagStateSpec('pending', PickleCoder())
    FINISHED = ReadModifyWriteStateSpec('finished', BooleanCoder())
    RELEASE_TIMER = TimerSpec('release', TimeDomain.WATERMARK)
    END_TIMER = TimerSpec('end_of_input', TimeDomain.WATERMARK)

    def __init__(self, spec: KeyedReleaseSpec, label: str, rng: noise.RandomSource):
        self._spec = spec
        self._label = label
        self._rng = rng

    def setup(self):
        spec = self._spec
        cost = spec.privacy_cost() if not spec.budget.is_zcdp else None
        self._metadata = dict(
            metric=spec.metric, mechanism=f'{spec.mechanism_name}+continual_key_selection',
            epsilon=float(cost.epsilon if cost else spec.private_keys.budget.epsilon),
            delta=float(spec.private_keys.budget.delta),
            rho=float(spec.budget.rho or 0.0), privacy_unit=spec.privacy_unit.describe())
        self._last_step = spec.last_step

    def process(self, element, shard_state=beam.DoFn.StateParam(SHARD_STATE),
                pending=beam.DoFn.StateParam(PENDING),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER),
                end_timer=beam.DoFn.TimerParam(END_TIMER)):
        _, payload = element
        state = shard_state.read()
        if state is None:
            state = self._spec.init_private_shard()
            shard_state.write(state)
            release_timer.set(Timestamp(micros=self._spec.release_time_micros(0)))
            if self._spec.last_step is None:
                end_timer.set(GlobalWindow().max_timestamp())
        if payload is None:
            return
        step, per_key = payload
        if step < state.next_step:
            for key, (values, _) in sorted(per_key.items()):
                yield dead_letter(
                    self._label, 'ReleaseNoisyValues',
                    f'late: step {step} was already released (allowed lateness '
                    f'{self._spec.allowed_lateness_micros / 1e6:g}s)',
                    {'key': key, 'step': step, 'value': sum(values)},
                    self._spec.step_bounds(step)[1] - 1)
            return
        pending.add(payload)

    @on_timer(RELEASE_TIMER)
    def release(self, shard_state=beam.DoFn.StateParam(SHARD_STATE),
                pending=beam.DoFn.StateParam(PENDING), finished=beam.DoFn.StateParam(FINISHED),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        if finished.read():
            return
        state = shard_state.read()
        step = state.next_step
        if self._last_step is not None and step > self._last_step:
            return
        due, rest = [], []
        for item in pending.read():
            (due if item[0] == step else rest).append(item)
        if due:
            pending.clear()
            for item in rest:
                pending.add(item)
        merged = {}
        for _, per_key in due:
            for key, (values, new_units) in per_key.items():
                old = merged.get(key)
                merged[key] = (values, new_units) if old is None else (
                    tuple(a + b for a, b in zip(old[0], values)), old[1] + new_units)
        released, new_state = self._spec.release_private_step(
            state, merged, self._rng.derive(self._label))
        shard_state.write(new_state)
        if self._last_step is None or step + 1 <= self._last_step:
            release_timer.set(Timestamp(micros=self._spec.release_time_micros(step + 1)))
        spec = self._spec
        start, end = spec.step_bounds(step)
        histogram = spec.metric == 'histogram'
        for key, row, counter_steps in released:
            yield Release(key=key, step=step, step_start_micros=start, step_end_micros=end,
                          value=float(sum(row)), values=row if histogram else [],
                          noise_stddev=spec.key_noise_stddev(counter_steps), **self._metadata)

    @on_timer(END_TIMER)
    def end_of_input(self, finished=beam.DoFn.StateParam(FINISHED),
                     release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        finished.write(True)
        release_timer.clear()


class _ContinualPerKey(beam.PTransform):
    """Shared implementation of the keyed continual transforms."""

    _metric = ''

    def __init__(self, *, public_keys: Optional[Sequence[str]] = None, start, step,
                 budget: PrivacyBudget, keys=None,
                 privacy_unit: Optional[PrivacyUnit] = None,
                 key_fn: Callable[[Any], Any] = _FIRST,
                 value_fn: Optional[Callable[[Any], Any]] = None,
                 accountant: Optional[BudgetAccountant] = None,
                 allowed_lateness=0, horizon_steps: Optional[int] = None, end=None,
                 estimator: str = 'variance_reduced', num_shards: Optional[int] = None,
                 lower: float = 0.0, upper: float = 1.0, grid_bits: int = 10,
                 bins: Sequence[str] = (), testing_seed: Optional[int] = None,
                 label: Optional[str] = None):
        super().__init__(label)
        owner = type(self).__name__
        private_keys = None
        if keys is not None:
            if public_keys is not None:
                raise InvalidParamsError(f'{owner}: give either public_keys or keys, not both.')
            if isinstance(keys, PrivateKeys):
                private_keys = keys
            else:
                public_keys = keys
        if private_keys is None and (isinstance(public_keys, (str, bytes))
                                     or public_keys is None):
            raise InvalidParamsError(f'{owner}: public_keys must be a collection of strings, got '
                                     f'{public_keys!r}.')
        if not callable(key_fn):
            raise InvalidParamsError(f'{owner}: key_fn must be callable, got {key_fn!r}.')
        if value_fn is not None and not callable(value_fn):
            raise InvalidParamsError(f'{owner}: value_fn must be callable, got {value_fn!r}.')
        if accountant is not None and not isinstance(accountant, BudgetAccountant):
            raise InvalidParamsError(f'{owner}: accountant must be a BudgetAccountant, got '
                                     f'{accountant!r}.')
        if testing_seed is not None and not isinstance(testing_seed, int):
            raise InvalidParamsError(f'{owner}: testing_seed must be an int or None, got '
                                     f'{testing_seed!r}.')
        privacy_unit = EventLevel() if privacy_unit is None else privacy_unit
        start_micros = to_micros(owner, 'start', start)
        step_micros = to_micros(owner, 'step', step, allow_zero=False, duration=True)
        end_step = None
        if end is not None:
            end_micros = to_micros(owner, 'end', end)
            if end_micros <= start_micros:
                raise InvalidParamsError(f'{owner}: end must be after start, got {end!r}.')
            end_step = -(-(end_micros - start_micros) // step_micros)
        try:
            if private_keys is not None:
                if num_shards is not None:
                    raise InvalidParamsError(f'{owner}: with private keys set '
                                             f'PrivateKeys(num_shards=...), not num_shards.')
                layout = None
            else:
                layout = KeyLayout.of(list(public_keys), num_shards)
            self._spec = KeyedReleaseSpec(
                metric=self._metric, budget=budget, privacy_unit=privacy_unit, layout=layout,
                start_micros=start_micros, step_micros=step_micros,
                allowed_lateness_micros=to_micros(owner, 'allowed_lateness', allowed_lateness,
                                                  duration=True),
                horizon_steps=horizon_steps, end_step=end_step, estimator=estimator,
                lower=lower, upper=upper, grid_bits=grid_bits, bins=tuple(bins),
                private_keys=private_keys)
        except InvalidParamsError as e:
            raise InvalidParamsError(f'{owner}: {str(e).split(": ", 1)[-1]}') from e
        if accountant is not None and private_keys is not None:
            # Selection + release, checked together on a scratch copy of the ledger.
            scratch = BudgetAccountant(accountant.budget)
            for entry in accountant.ledger:
                scratch.spend(entry.label, entry.cost)
            scratch.spend(f'{owner}/SelectKeys', self._spec.selection_cost())
            scratch.spend(owner, self._spec.release_cost())
        elif accountant is not None and not accountant.fits(self._spec.privacy_cost()):
            # Fail at construction already; expand() records the spend.
            accountant.spend(owner, self._spec.privacy_cost())
        self._key_fn = key_fn
        self._value_fn = value_fn
        self._unit_fn = privacy_unit.unit_fn if isinstance(privacy_unit, UserLevel) else None
        self._accountant = accountant
        self._rng = noise.seeded(testing_seed) if testing_seed is not None else noise.secure_rng()

    @property
    def spec(self) -> KeyedReleaseSpec:
        return self._spec

    def privacy_cost(self):
        """The cost this transform spends (composed by the accountant at construction)."""
        return self._spec.privacy_cost()

    def display_data(self):
        return {name: str(value) for name, value in self._spec.describe().items()}

    def expand(self, records):
        spec = self._spec
        label = self.label
        if self._accountant is not None:
            if spec.private_keys is not None:
                self._accountant.spend(f'{label}/SelectKeys', spec.selection_cost())
                self._accountant.spend(label, spec.release_cost())
            else:
                self._accountant.spend(label, spec.privacy_cost())
        if spec.private_keys is not None:
            return self._expand_private(records)
        valid, dead = self._extract_and_bound(records)
        if not isinstance(spec.privacy_unit, UserLevel):
            valid = valid | 'DropUnit' >> beam.Map(_SECOND)
        partials = valid | 'PreAggregate' >> beam.ParDo(_PreAggregateFn(spec))
        return self._release(records, partials, spec.layout.num_shards,
                             _ReleaseFn(spec, label, self._rng), dead)

    def _expand_private(self, records):
        spec = self._spec
        valid, dead = self._extract_and_bound(records)
        if isinstance(spec.privacy_unit, UserLevel):
            valid = (
                valid
                | 'KeyByUnitAndKey' >> beam.Map(lambda e: ((e[2][4], e[0]), e))
                | 'MarkNewUnits' >> beam.ParDo(_MarkNewUnitsFn()))
        else:
            # Event level: every record is its own unit, so every record is a new unit.
            valid = valid | 'DropUnit' >> beam.Map(
                lambda e: (e[1][0], e[1][1], e[1][2][:4] + (1,)))
        partials = valid | 'PreAggregate' >> beam.ParDo(_PrivatePreAggregateFn(spec))
        return self._release(records, partials, spec.private_keys.num_shards,
                             _PrivateReleaseFn(spec, self.label, self._rng), dead)

    def _extract_and_bound(self, records):
        """'GlobalWindow' + 'ExtractAndValidate' (+ 'KeyByUnit' / 'BoundContributions' at user
        level). Returns the valid elements and the list of dead-letter PCollections so far."""
        spec = self._spec
        extracted = (
            records
            | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
            | 'ExtractAndValidate' >> beam.ParDo(
                _ExtractFn(spec, self.label, self._key_fn, self._value_fn,
                           self._unit_fn)).with_outputs(DEAD_LETTER, main='valid'))
        dead = [extracted[DEAD_LETTER]]
        valid = extracted.valid
        if isinstance(spec.privacy_unit, UserLevel):
            bounded = (
                valid
                | 'KeyByUnit' >> beam.Map(lambda e: (e[0], e[1]))
                | 'BoundContributions' >> BoundContributions(spec.privacy_unit, self.label))
            dead.append(bounded.dead_letter)
            valid = bounded.kept
        return valid, dead

    def _release(self, records, partials, num_shards, release_fn, dead):
        """'ShardSeeds' + 'MergeSeeds' + 'ReleaseNoisyValues' + 'MergeDeadLetters'."""
        start_micros = self._spec.start_micros
        seeds = (
            records.pipeline
            | 'ShardSeeds' >> beam.Create(list(range(num_shards)))
            | 'SeedAtStart' >> beam.Map(
                lambda shard: beam.window.TimestampedValue((shard, None),
                                                           Timestamp(micros=start_micros))))
        released = (
            (partials, seeds)
            | 'MergeSeeds' >> beam.Flatten()
            | 'ReleaseNoisyValues' >> beam.ParDo(release_fn).with_outputs(DEAD_LETTER,
                                                                         main='releases'))
        dead_letters = tuple(dead + [released[DEAD_LETTER]]) | 'MergeDeadLetters' >> \
            beam.Flatten().with_output_types(DeadLetter)
        releases = released.releases
        releases.element_type = Release
        return ContinualOutputs(releases, dead_letters)


class ContinualCountPerKey(_ContinualPerKey):
    """Continual counts per public key on a fixed event-time schedule.

    Releases, for every public key and every step (a fixed event-time period from ``start``), a
    noisy count of the records with that key from ``start`` up to the end of the step — including
    keys and steps with no records (zeros are counted like any other step). Step s is released
    when the watermark passes end(s) + ``allowed_lateness``.

    Privacy unit and neighbours: ``privacy_unit=EventLevel()`` (default) protects one record;
    ``UserLevel(unit_fn, max_keys_per_unit, max_contributions_per_step, max_steps_per_unit)``
    protects all records of a unit, which ``BoundContributions`` bounds first. Add/remove
    neighbours. The key set is public (``public_keys``): records of other keys are dead-lettered,
    never released.

    Guarantee: the whole (unbounded) sequence of releases is ε-DP with ``budget=PrivacyBudget(
    epsilon=ε)`` (discrete Laplace) or ρ-zCDP with ``PrivacyBudget(rho=ρ)`` (discrete Gaussian),
    via the infinite-horizon tree counter (Chan, Shi, Song 2011), or the binary tree when
    ``horizon_steps`` is given; ``estimator='variance_reduced'`` (Honaker 2015, default) or
    'textbook'. The noise of every tree node is drawn once and kept in Beam state.

    Not guaranteed: records arriving after their step was released are not counted (they go to
    the dead-letter output, aggregated per key and step); with bounded input (or a drain) the
    releases stop when the input ends.

    Private keys: ``keys=PrivateKeys(budget=PrivacyBudget(epsilon=ε_s, delta=δ))`` instead of
    ``public_keys`` releases a key only from the step at which continual private key selection
    (``ContinualKeySelection``) selects it; a key with one unit appears with probability ≤ δ over
    the unbounded horizon; a selected key stays selected; its first release counts everything
    since ``start`` and earlier steps are never back-filled. The total cost is the selection's
    (ε_s, δ) plus ``budget``; both are spent on ``accountant``. Release.epsilon/delta then carry
    the total.

    Args:
      public_keys: the keys to release (strings).
      keys: a public key list (same as ``public_keys``) or ``PrivateKeys(...)``.
      start: event time of the start of step 0 (seconds since the epoch, Timestamp or datetime).
      step: the step length (seconds, Duration or timedelta).
      budget: this transform's ``PrivacyBudget``.
      privacy_unit: ``EventLevel()`` (default) or ``UserLevel(...)``.
      key_fn: record → key (default: ``record[0]``).
      accountant: a ``BudgetAccountant`` to spend ``budget`` from (raises at construction).
      allowed_lateness: seconds a step waits for late records after its end.
      horizon_steps: a known number of steps T (binary tree); None for an unbounded stream.
      end: a public end time: no step starting at or after it is released.
      estimator: 'variance_reduced' or 'textbook'.
      num_shards: how many stateful shards hold the keys (default: 512 keys per shard).
      testing_seed: seeds the noise for tests only; never set it in production.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """
    _metric = 'count'

    def __init__(self, **kwargs):
        if 'value_fn' in kwargs:
            raise InvalidParamsError('ContinualCountPerKey: value_fn is not used by counts.')
        super().__init__(**kwargs)


class ContinualSumPerKey(_ContinualPerKey):
    """Continual sums per public key of a clamped value.

    As ``ContinualCountPerKey``, with each record's value (``value_fn``, default ``record[1]``)
    clamped to [``lower``, ``upper``] and snapped to the grid 2**-``grid_bits``: the sums are
    integer in grid units, the noise is exact discrete noise in grid units, and every released
    value is a multiple of 2**-grid_bits (no floating-point Laplace). One record's sensitivity is
    max(|lower|, |upper|) (rounded up to the grid).
    """
    _metric = 'sum'

    def __init__(self, *, value_fn: Callable[[Any], Any] = _SECOND, **kwargs):
        super().__init__(value_fn=value_fn, **kwargs)


class ContinualHistogramPerKey(_ContinualPerKey):
    """Continual histograms per public key over public bins.

    As ``ContinualCountPerKey``, with each record counted in the bin ``value_fn(record)``
    (default ``record[1]``), which must be one of ``bins`` (else dead-lettered). One tree per
    shard runs over the vector keys × bins; ``Release.values`` holds the per-bin estimates.
    One record changes one bin by one (L1 = L2 = 1 at event level).
    """
    _metric = 'histogram'

    def __init__(self, *, bins: Sequence[str], value_fn: Callable[[Any], Any] = _SECOND,
                 **kwargs):
        super().__init__(value_fn=value_fn, bins=bins, **kwargs)


del typing
