"""The entry stages of the keyed continual transforms (``beam_dp.transforms.continual``):
'ExtractAndValidate' (records → valid elements or dead letters) and 'PreAggregate' (bundle-local
sums per shard, step and flat position, so the stateful 'ReleaseNoisyValues' sees one small
vector per shard, step and bundle instead of one element per record).

Two shapes, chosen by ``ContinualPerKey.expand``:

* **grouping** (``_ExtractAndGroupFn``): user level. Each record must pass
  'BoundContributions' first, so the entry groups the bundle's valid records per unit shard
  (what 'GroupByUnitInBundle' did); over public keys 'BoundPerUnit' sums the records it keeps
  per bundle (``_KeptSums``) and 'PreAggregate' merges those partials (``_MergePartialsFn``);
  over private keys the kept records stay per record (``continual_private_keys``'
  'PreAggregate'). ``_ExtractFn`` + ``_PreAggregateFn`` are the per-record reference.
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
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp.drivers.key_layout import _ID_BITS
from beam_dp.drivers.key_layout import CountCodes
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.keyed import PrivatePartial
from beam_dp.drivers.keyed import ShardPartial
from beam_dp.drivers.keyed import add_units
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms import exact_int
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import shell
from beam_dp.transforms.contribution_bounding import BoundContributions
from beam_dp.transforms.contribution_bounding import _GroupByUnitInBundleFn
from beam_dp.transforms.lateness import batch_input

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

    def __init__(self, driver: KeyedReleaseDriver, label: str, key_fn, value_fn, unit_fn,
                 keep_records: bool = False):
        self._driver = driver
        self._label = label
        self._key_fn = key_fn
        self._value_fn = value_fn
        self._unit_fn = unit_fn
        #: The aggregating entries: carry the folded records (``_keep`` docstring).
        self._keep = keep_records

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


class _ExtractAndGroupFn(_ExtractFn):
    """User level: 'ExtractAndValidate', 'KeyByUnit' and 'BoundContributions'' bundle-local
    grouping ('GroupByUnitInBundle') in ONE per-record stage. A valid record is extracted
    exactly as ``_ExtractFn`` does (same dead letters, same item ``(key id, step, payload,
    rendering)``) and buffered with its unit, whose encoding (``shell.extract_unit_key``) is
    computed once, for the unit check and the grouping; the groups leave as
    ``_GroupByUnitInBundleFn`` emits them (one element per unit shard, at the end of the bundle
    or when its buffer is full), for ``BoundContributions(grouped_input=True)``. Saves two
    runner stages and one unit encoding per record; what 'BoundPerUnit' sees is unchanged."""

    def setup(self):
        super().setup()
        self._group = _GroupByUnitInBundleFn(self._label)
        driver = self._driver
        # Counts over public keys: ``CountCodes``' fast path (a subset of what ``extract``
        # accepts, with the same key index and step: tests/drivers/test_key_layout.py).
        codes = (CountCodes(driver.layout, driver.clock)
                 if driver.metric == 'count' and driver.layout is not None else None)
        self._index = {} if codes is None or self._private else codes.index
        self._lo, self._hi = (0, 0) if codes is None else (codes.start_micros, codes.end_micros)
        self._step_micros = driver.clock.step_micros
        self._num_shards = 1 if codes is None else driver.layout.num_shards
        self._bins = driver.bins_per_key
        #: The fast path's payload ``(shard, slot, 1)`` per key id (a count over public keys).
        self._payloads = {}

    def start_bundle(self):
        self._group.start_bundle()

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        try:
            key = shell.extract_key(self._key_fn, record)
            # pylint: disable-next=unidiomatic-typecheck
            i = self._index.get(key) if type(key) is str else None
            if i is not None and self._lo <= micros < self._hi:     # ``extract``, fast
                key_id, step = i, (micros - self._lo) // self._step_micros
                payload = self._payloads.get(i)     # ``(shard, slot, 1)``, built once per key
                if payload is None:
                    payload = self._payloads[i] = (i % self._num_shards,
                                                   i // self._num_shards * self._bins, 1)
            else:
                key_id, step, shard, slot, units = self._driver.extract(key, micros, record,
                                                                        self._value_fn)
                payload = None
            unit, encoded = shell.extract_unit_key(self._unit_fn, record)
        except InvalidRecordError as e:
            return [shell.dead_letter(self._label, _STAGE, str(e), record, micros)]
        if payload is None:
            payload = ((shard, key_id, slot, units, unit) if self._private
                       else (shard, slot, units))
        return self._group.add_fields(encoded, unit, key_id, step, payload,
                                      shell.render_record(record), micros)

    def finish_bundle(self):
        yield from self._group.finish_bundle()


class _KeptSums:
    """``BoundContributions(aggregate=...)`` at user level over public keys: a factory of the
    sums per (shard, step, flat position) of the records one 'BoundPerUnit' bundle keeps,
    emitted at the end of the bundle as ``(shard, ShardPartial)`` partials (what 'PreAggregate'
    emitted), so the kept records do not leave the stateful stage one element each;
    'PreAggregate' (``_MergePartialsFn``) then merges a bundle's partials per (shard, step).
    Exact sums."""

    def __init__(self, clock):
        self._clock = clock

    def __call__(self):
        return _KeptSums.Sums(self._clock)

    class Sums:
        """The sums of one bundle."""

        def __init__(self, clock):
            self._clock = clock
            self._sums = _new_sums()

        def add(self, key, step, payload):     # pylint: disable=unused-argument
            shard, flat, units = payload
            add_units(self._sums[(shard, step)], flat, units)

        def emit(self):
            return _emit_sums(self._clock, self._sums)


def _partial(clock, shard, step, positions, values, unit=False, records=None):
    """A partial sum ``(shard, (step, positions, values))`` (``(None, ...)`` with ``unit``),
    in the global window at the end of its step: never earlier than any input it sums, so it
    cannot be late where its inputs were not. With ``records`` (the renderings and event
    times packed as ``shell.PackedRecords``: the records it sums) ``(shard, (step,
    positions, values, records))``."""
    value = (shard, ShardPartial(step, positions, values) if records is None else
             (step, positions, values, records))
    return WindowedValue((None, value) if unit else value,
                         Timestamp(micros=clock.step_end(step) - 1), [GlobalWindow()])


def _emit_sums(clock, sums, unit=False, kept=None):
    """Partials of ``{(shard, step): {flat position: units}}`` (exact: no int64 wrap); with
    ``kept`` (``{(shard, step): shell.PackedRecords}``) each carries the records it sums."""
    for (shard, step), per_slot in sums.items():
        positions = np.fromiter(per_slot.keys(), dtype=np.int64, count=len(per_slot))
        values = exact_int.exact_ints(list(per_slot.values()), len(per_slot))
        records = None if kept is None else kept.pop((shard, step), shell.NO_RECORDS)
        yield _partial(clock, shard, step, positions, values, unit, records)


class _Kept:
    """The records a bundle's partials sum, rendered, with their event times: added in chunks
    aligned with their (shard, step) (``add``), split per (shard, step) once at the end of the
    bundle (``split``) into ``shell.PackedRecords``. Vectorised: no per-record Python work
    beyond the rendering."""

    def __init__(self):
        self._chunks = []
        self._one = ([], [], [], [])         # single records (the validator's), as lists

    def add(self, shards, steps, records, micros):
        """Records (raw) with their shards, steps and event times (aligned sequences)."""
        self._chunks.append((np.asarray(shards, dtype=np.int64),
                             np.asarray(steps, dtype=np.int64), shell.render_texts(records),
                             np.asarray(micros, dtype=np.int64)))

    def add_one(self, shard, step, record, micros):
        """One record (the validator's path: no arrays per record)."""
        for column, value in zip(self._one, (shard, step, record, micros)):
            column.append(value)
        if len(self._one[0]) >= _FLUSH_CODES:
            self.add(*self._one)
            self._one = ([], [], [], [])

    def split(self):
        """``{(shard, step): PackedRecords}`` of everything added; empties the store."""
        if self._one[0]:
            self.add(*self._one)
            self._one = ([], [], [], [])
        if not self._chunks:
            return {}
        shards = np.concatenate([c[0] for c in self._chunks])
        steps = np.concatenate([c[1] for c in self._chunks])
        micros = np.concatenate([c[3] for c in self._chunks])
        texts = [t for c in self._chunks for t in c[2]]
        self._chunks = []
        order = np.lexsort((shards, steps))
        shards, steps, micros = shards[order], steps[order], micros[order]
        texts = [texts[i] for i in order.tolist()]
        new = np.r_[True, (steps[1:] != steps[:-1]) | (shards[1:] != shards[:-1])]
        starts = np.flatnonzero(new).tolist()
        ends = starts[1:] + [len(texts)]
        shards, steps = shards.tolist(), steps.tolist()
        return {(shards[a], steps[a]): shell.pack_records(texts[a:b], micros[a:b])
                for a, b in zip(starts, ends)}


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
        add_units(self._sums[(shard, step)], flat, units)

    def finish_bundle(self):
        yield from _emit_sums(self._clock, self._sums)
        self._sums.clear()


class _CodedEntryFn(_ExtractFn):
    """The aggregating entries' per-record fast path: a record whose key is in
    ``codes.index`` (exactly a ``str``) and whose time is in the coded range becomes one integer
    code (what ``codes.code`` returns, inlined: one ``dict.get``, one range check, one
    ``append``); any other record takes the full validator (``_validate``). Subclasses set the
    codes up (``_setup_codes``), pack pending codes (``_pack``) and sum them at the end of the
    bundle.

    With ``keep_records`` (an unbounded input or a streaming pipeline: ``lateness.batch_input``
    is False, so a partial may arrive after its step's release) the entry also keeps every
    record it folds with its event time, aligned with the pending codes, and at each pack moves
    them, rendered (``shell.render_texts``), to ``_kept`` / ``_kept_slow`` (``_Kept``): each
    partial carries the records it sums (``shell.PackedRecords``), so 'ReleaseNoisyValues'
    dead-letters a late partial record by record. They live only in the bundle and the
    in-flight partial (memory bounded by the bundle); the stateful DoFn drops them on arrival,
    never stores them. In a batch pipeline over a bounded input nothing can be late, and
    nothing is kept."""

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
            if self._keep:
                self._records.append(record)
                self._micros.append(micros)
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
        self._num_shards = self._driver.num_shards

    def start_bundle(self):
        self._pending = []
        self._packed = []
        self._sums = _new_sums()
        self._records, self._micros = [], []                 # aligned with _pending
        self._kept = _Kept()                                 # the fast path's
        self._kept_slow = _Kept()                            # the validator's (_sums)

    def _pack(self):
        codes = np.asarray(self._pending, dtype=np.int64)
        self._packed.append(codes)
        self._pending = []
        if self._keep:
            steps, keys = np.divmod(codes, self._scale)
            self._kept.add(keys % self._num_shards, steps, self._records, self._micros)
            self._records, self._micros = [], []

    def _validate(self, key, record, micros):
        """The full validator: a dead letter with its reason, or the record added to the sums."""
        try:
            _, step, shard, slot, units = self._driver.extract(key, micros, record,
                                                               self._value_fn)
        except InvalidRecordError as e:
            return [shell.dead_letter(self._label, _STAGE, str(e), record, micros)]
        add_units(self._sums[(shard, step)], slot, units)
        if self._keep:
            self._kept_slow.add_one(shard, step, record, micros)
        return ()

    def finish_bundle(self):
        keep = self._keep
        if self._pending:
            self._pack()
        if self._packed:
            codes = np.concatenate(self._packed)
            kept = self._kept.split() if keep else None
            for shard, step, positions, values in self._codes.partials(codes):
                records = kept.pop((shard, step), shell.NO_RECORDS) if keep else None
                yield _partial(self._clock, shard, step, positions, values, True, records)
        yield from _emit_sums(self._clock, self._sums, unit=True,
                              kept=self._kept_slow.split() if keep else None)
        self.start_bundle()


class BundleMergeFn(beam.DoFn):
    """'PreAggregate' after an aggregating extraction: the bundle's partials ``(shard, (step,
    *part))`` of one (shard, step) merged into one (``merged``; usually there is one already)."""

    def __init__(self, driver: KeyedReleaseDriver):
        self._clock = driver.clock

    def start_bundle(self):
        self._parts = collections.defaultdict(list)

    def process(self, element):
        shard, (step, *part) = element
        self._parts[(shard, step)].append(part)

    def finish_bundle(self):
        for (shard, step), parts in self._parts.items():
            yield from self.merged(shard, step, parts)
        self._parts.clear()

    def merged(self, shard: int, step: int, parts: list):
        """The windowed partial(s) of (shard, step) from its bundle's ``parts``."""
        raise NotImplementedError


class _MergePartialsFn(BundleMergeFn):
    """'PreAggregate' after ``_ExtractAndAggregateFn`` (public keys: per-slot sums)."""

    def merged(self, shard, step, parts):
        if len(parts) == 1:
            part = parts[0]
            yield _partial(self._clock, shard, step, part[0], part[1],
                           records=part[2] if len(part) > 2 else None)
            return
        per_slot = collections.defaultdict(int)
        records = None
        for part in parts:
            positions, values = part[0], part[1]
            for flat, value in zip(np.asarray(positions).tolist(),
                                   np.asarray(values).tolist()):
                per_slot[flat] += int(value)
            if len(part) > 2:        # the records it sums (``_CodedEntryFn``)
                records = (records or []) + [part[2]]
        kept = None if records is None else {(shard, step): shell.concat_records(records)}
        yield from _emit_sums(self._clock, {(shard, step): per_slot}, kept=kept)


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
        self._records, self._micros = [], []                 # aligned with _pending
        self._kept = _Kept()

    def _pack(self):
        """Pending codes → an int64 array; many arrays → their distinct codes with counts
        (memory bounded by the distinct (step, key) cells of the bundle)."""
        codes = np.asarray(self._pending, dtype=np.int64)
        self._packed.append((codes, None))
        self._packed_size += len(self._pending)
        self._pending = []
        if self._keep:
            shards = np.asarray(self._codes.shards, dtype=np.int64)[
                codes & ((1 << _ID_BITS) - 1)]
            self._kept.add(shards, codes >> _ID_BITS, self._records, self._micros)
            self._records, self._micros = [], []
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
        add_units(entry[0], bin_index, units)
        entry[1] += 1
        if self._keep:
            self._kept.add_one(shard, step, record, micros)
        return ()

    def finish_bundle(self):
        sums = self._sums
        if self._pending:
            self._pack()
        self._kept_split = self._kept.split() if self._keep else None
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
        """``(None, (shard, PrivatePartial(step, payload)))``, with ``keep_records`` ``(None,
        (shard, (step, payload, records)))``: the rendered records it sums (``_CodedEntryFn``)."""
        value = (step, payload, self._kept_split.pop((shard, step), shell.NO_RECORDS)) \
            if self._keep else PrivatePartial(step, payload)
        return WindowedValue((None, (shard, value)),
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


def extract_and_bound(records, driver: KeyedReleaseDriver, label: str, key_fn, value_fn,
                      unit_fn, distinct_units: bool = False):
    """'GlobalWindow' + 'ExtractAndValidate' (+ 'BoundContributions' at user level: the
    entry groups per unit shard) of the keyed transform ``label``: the valid elements and the
    list of dead-letter PCollections so far. At event level (no ``unit_fn``) 'ExtractAndValidate' also sums the
    bundle's records, as nothing before 'PreAggregate' needs the single record.
    ``distinct_units``: 'BoundContributions' keeps each unit's first record per key only
    (``ContinualDistinctCountPerKey``)."""
    if unit_fn is not None:
        extract_fn = _ExtractAndGroupFn
    elif driver.private_keys is None:
        extract_fn = _ExtractAndAggregateFn
    else:
        extract_fn = _ExtractAndAggregatePrivateFn
    if not records.windowing.is_default():   # already global: the re-window is a no-op
        records = records | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
    extracted = (
        records
        | 'ExtractAndValidate' >> beam.ParDo(
            extract_fn(driver, label, key_fn, value_fn, unit_fn,
                       keep_records=not batch_input(records))
        ).with_outputs(shell.DEAD_LETTER, main='valid'))
    dead = [extracted[shell.DEAD_LETTER]]
    valid = extracted.valid
    unit = driver.privacy_unit
    if isinstance(unit, UserLevel):     # valid: records grouped per unit shard and bundle
        valid.element_type = beam.typehints.Tuple[int, beam.typehints.Any]
        bounded = (
            valid
            | 'BoundContributions' >> BoundContributions(
                unit, label, mark_new_keys=driver.private_keys is not None, clock=driver.clock,
                distinct_units=distinct_units, grouped_input=True,
                aggregate=None if driver.private_keys is not None else _KeptSums(driver.clock)))
        dead.append(bounded.dead_letter)
        valid = bounded.kept
    return valid, dead
