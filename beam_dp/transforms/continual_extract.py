"""The entry stages of the keyed continual transforms (``beam_dp.transforms.continual``):
'ExtractAndValidate' (records → valid elements or dead letters) and 'PreAggregate' (bundle-local
sums per shard, step and flat position, so the stateful 'ReleaseNoisyValues' sees one small
vector per shard, step and bundle instead of one element per record).

Two shapes, chosen by ``ContinualPerKey.expand``:

* **per record** (``_ExtractFn`` + ``_PreAggregateFn``, or the private-keys
  ``continual_private_keys._PreAggregateFn``): user level (each record must pass
  'BoundContributions' first).
* **aggregating** (``_ExtractAndAggregateFn`` + ``_MergePartialsFn``): event level over public
  keys; ``_ExtractAndAggregatePrivateFn`` + ``continual_private_keys._MergePrivatePartialsFn``
  the same over private keys (partials ``{key: (per-bin units, records)}`` per shard and step,
  the payload the private 'ReleaseNoisyValues' always took; counts take
  ``key_layout.PrivateCountCodes``, the keys the validator accepted so far). Nothing between
  extraction and pre-aggregation needs the single record, so 'ExtractAndValidate' sums a bundle's valid records itself and emits only the partial sums
  at the end of the bundle; 'DropUnit' and 'PreAggregate' then see a handful of partials per
  bundle. Counts take a fast path (``beam_dp.drivers.key_layout.CountCodes``: a well-formed
  record is one ``dict.get`` and one integer appended, a bundle's integers are counted
  vectorised); any other record takes the full validator (``KeyedReleaseDriver.extract``), so
  a bad record is dead-lettered with exactly the reason it had before. The sums are exact and
  the late rule is unchanged: it is applied in 'ReleaseNoisyValues' to the partial sums, as
  before.
"""

import collections

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp.drivers.key_layout import _ID_BITS
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.keyed import PrivatePartial
from beam_dp.drivers.keyed import ShardPartial
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms import exact_int
from beam_dp.transforms import shell

_STAGE = 'ExtractAndValidate'
#: Codes kept as a Python list before they are packed into an int64 array (bounds memory).
_FLUSH_CODES = 1 << 16
#: Private keys: packed codes are reduced to distinct codes with counts beyond this many.
_COMPACT_CODES = 1 << 22


class _ExtractFn(beam.DoFn):
    """record → (unit, (key id, step, (shard, slot, units))) or a dead letter; with private
    keys (unit, (key, step, (shard, key, bin, units, unit))) ('MarkNewUnits' replaces the unit
    by the new-unit flag). At user level a 4th item, the record's rendering, rides along to
    'BoundContributions', whose dead letters hold it (it drops it from what it keeps)."""

    def __init__(self, driver: KeyedReleaseDriver, label: str, key_fn, value_fn, unit_fn):
        self._driver = driver
        self._label = label
        self._key_fn = key_fn
        self._value_fn = value_fn
        self._unit_fn = unit_fn

    def setup(self):
        self._private = self._driver.private_keys is not None

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        try:
            key = shell.extract_key(self._key_fn, record)
            key_id, step, shard, slot, units = self._driver.extract(key, micros, record,
                                                                    self._value_fn)
            unit = shell.extract_unit(self._unit_fn, record)
        except InvalidRecordError as e:
            yield shell.dead_letter(self._label, _STAGE, str(e), record, micros)
            return
        payload = ((shard, key_id, slot, units, unit) if self._private
                   else (shard, slot, units))
        if self._unit_fn is None:
            yield unit, (key_id, step, payload)
        else:   # the input record's rendering, for BoundContributions' dead letters
            yield unit, (key_id, step, payload, shell.render_record(record))


def _partial(clock, shard, step, positions, values, unit=False):
    """A partial sum ``(shard, (step, positions, values))`` (``(None, ...)`` with ``unit``),
    in the global window at the end of its step: never earlier than any input it sums, so it
    cannot be late where its inputs were not."""
    value = (shard, ShardPartial(step, positions, values))
    return WindowedValue((None, value) if unit else value,
                         Timestamp(micros=clock.step_end(step) - 1), [GlobalWindow()])


def _emit_sums(clock, sums, unit=False):
    """Partials of ``{(shard, step): {flat position: units}}`` (exact: no int64 wrap)."""
    for (shard, step), per_slot in sums.items():
        positions = np.fromiter(per_slot.keys(), dtype=np.int64, count=len(per_slot))
        values = exact_int.exact_ints(list(per_slot.values()), len(per_slot))
        yield _partial(clock, shard, step, positions, values, unit)


def _new_sums():
    return collections.defaultdict(lambda: collections.defaultdict(int))


class _PreAggregateFn(beam.DoFn):
    """Bundle-local sums per (shard, step, flat position) of per-record elements, emitted at
    the end of the bundle."""

    def __init__(self, driver: KeyedReleaseDriver):
        self._clock = driver.clock

    def start_bundle(self):
        self._sums = _new_sums()

    def process(self, element):
        _, step, (shard, flat, units) = element
        self._sums[(shard, step)][flat] += units

    def finish_bundle(self):
        yield from _emit_sums(self._clock, self._sums)
        self._sums.clear()


class _CodedEntryFn(_ExtractFn):
    """The aggregating entries' per-record fast path: a record whose key is in
    ``codes.index`` (exactly a ``str``) and whose time is in the coded range becomes one integer
    code (what ``codes.code`` returns, inlined: one ``dict.get``, one range check, one
    ``append``); any other record takes the full validator (``_validate``). Subclasses set the
    codes up (``_setup_codes``), pack pending codes (``_pack``) and sum them at the end of the
    bundle."""

    def _setup_codes(self, codes, scale: int):
        self._clock = self._driver.clock
        self._codes = codes
        self._index = codes.index if codes is not None else {}
        self._lo = codes.start_micros if codes is not None else 0
        self._hi = codes.end_micros if codes is not None else 0
        self._step_micros = self._clock.step_micros
        self._scale = scale                      # code = step × scale + key index

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        try:
            key = shell.extract_key(self._key_fn, record)
        except InvalidRecordError as e:
            return [shell.dead_letter(self._label, _STAGE, str(e), record, micros)]
        i = self._index.get(key) if type(key) is str else None  # pylint: disable=unidiomatic-typecheck
        if i is not None and self._lo <= micros < self._hi:
            pending = self._pending
            pending.append((micros - self._lo) // self._step_micros * self._scale + i)
            if len(pending) >= _FLUSH_CODES:
                self._pack()
            return ()
        return self._validate(key, record, micros)


class _ExtractAndAggregateFn(_CodedEntryFn):
    """'ExtractAndValidate' at event level over public keys: dead letters per record, valid
    records summed per (shard, step, flat position) within the bundle and emitted at its end
    as ``(None, (shard, (step, positions, values)))`` (the unit, None at event level, is what
    'DropUnit' drops)."""

    def setup(self):
        super().setup()
        codes = self._driver.count_codes()
        self._setup_codes(codes, codes.num_keys if codes is not None else 1)

    def start_bundle(self):
        self._pending = []
        self._packed = []
        self._sums = _new_sums()

    def _pack(self):
        self._packed.append(np.asarray(self._pending, dtype=np.int64))
        self._pending = []

    def _validate(self, key, record, micros):
        """The full validator: a dead letter with its reason, or the record added to the sums."""
        try:
            _, step, shard, slot, units = self._driver.extract(key, micros, record,
                                                               self._value_fn)
        except InvalidRecordError as e:
            return [shell.dead_letter(self._label, _STAGE, str(e), record, micros)]
        self._sums[(shard, step)][slot] += units
        return ()

    def finish_bundle(self):
        if self._pending or self._packed:
            codes = np.concatenate(self._packed + [np.asarray(self._pending, dtype=np.int64)])
            for shard, step, positions, values in self._codes.partials(codes):
                yield _partial(self._clock, shard, step, positions, values, unit=True)
        yield from _emit_sums(self._clock, self._sums, unit=True)
        self.start_bundle()


class _MergePartialsFn(beam.DoFn):
    """'PreAggregate' after ``_ExtractAndAggregateFn``: the bundle's partials of one (shard,
    step) as one (usually there is one already: passed through as it is)."""

    def __init__(self, driver: KeyedReleaseDriver):
        self._clock = driver.clock

    def start_bundle(self):
        self._parts = collections.defaultdict(list)

    def process(self, element):
        shard, (step, positions, values) = element
        self._parts[(shard, step)].append((positions, values))

    def finish_bundle(self):
        for (shard, step), parts in self._parts.items():
            if len(parts) == 1:
                yield _partial(self._clock, shard, step, *parts[0])
                continue
            per_slot = collections.defaultdict(int)
            for positions, values in parts:
                for flat, value in zip(np.asarray(positions).tolist(),
                                       np.asarray(values).tolist()):
                    per_slot[flat] += int(value)
            yield from _emit_sums(self._clock, {(shard, step): per_slot})
        self._parts.clear()


class _ExtractAndAggregatePrivateFn(_CodedEntryFn):
    """'ExtractAndValidate' at event level over private keys: dead letters per record, valid
    records summed per (shard, step, key) within the bundle and emitted at its end as
    ``(None, (shard, (step, {key: (per-bin units, records)})))``, the payload the per-record
    'DropUnit' + 'PreAggregate' built (at event level every record is a new unit). Counts take
    the fast path of ``PrivateCountCodes`` once the validator has accepted a key."""

    def setup(self):
        super().setup()
        self._bins = self._driver.bins_per_key
        self._setup_codes(self._driver.private_count_codes(), 1 << _ID_BITS)

    def start_bundle(self):
        if self._codes is not None:
            self._codes.room()
        self._pending = []
        self._packed = []
        self._packed_size = 0
        self._sums = collections.defaultdict(dict)

    def _pack(self):
        """Pending codes → an int64 array; many arrays → their distinct codes with counts
        (memory bounded by the distinct (step, key) cells of the bundle)."""
        self._packed.append((np.asarray(self._pending, dtype=np.int64), None))
        self._packed_size += len(self._pending)
        self._pending = []
        if self._packed_size >= _COMPACT_CODES:
            codes, counts = _concat(self._packed)
            self._packed = [self._codes.compact(codes, counts)]
            self._packed_size = self._packed[0][0].size

    def _validate(self, key, record, micros):
        """The full validator: a dead letter with its reason, or the record added to the sums
        (and its key learnt by the fast path of counts)."""
        try:
            key, step, shard, bin_index, units = self._driver.extract(key, micros, record,
                                                                      self._value_fn)
        except InvalidRecordError as e:
            return [shell.dead_letter(self._label, _STAGE, str(e), record, micros)]
        if self._codes is not None:
            self._codes.learn(key, shard)
        per_key = self._sums[(shard, step)]
        entry = per_key.get(key)
        if entry is None:
            entry = per_key[key] = [[0] * self._bins, 0]
        entry[0][bin_index] += units
        entry[1] += 1
        return ()

    def finish_bundle(self):
        sums = self._sums
        if self._pending:
            self._pack()
        partials = self._codes.partials(*_concat(self._packed)) if self._packed else []
        for shard, step, keys, counts in partials:       # counts: one bin
            payload = {k: ((n,), n) for k, n in zip(keys, counts)}
            for key, (units, records) in sums.pop((shard, step), {}).items():
                old = payload.get(key)
                payload[key] = (tuple(units), records) if old is None else (
                    (old[0][0] + units[0],), old[1] + records)
            yield self._partial(shard, step, payload)
        for (shard, step), per_key in sums.items():
            yield self._partial(shard, step, {k: (tuple(v[0]), v[1]) for k, v in per_key.items()})
        self.start_bundle()

    def _partial(self, shard, step, payload):
        return WindowedValue((None, (shard, PrivatePartial(step, payload))),
                             Timestamp(micros=self._clock.step_end(step) - 1), [GlobalWindow()])


def _concat(packed):
    """One (codes, counts or None) pair of several."""
    if len(packed) == 1:
        return packed[0]
    codes = np.concatenate([c for c, _ in packed])
    if all(n is None for _, n in packed):
        return codes, None
    counts = np.concatenate([np.ones(c.size, dtype=np.int64) if n is None else n
                             for c, n in packed])
    return codes, counts
