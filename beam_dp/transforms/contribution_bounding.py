"""Contribution bounding per privacy unit (user-level privacy).

``BoundContributions`` keeps, for every privacy unit, at most ``max_keys_per_unit`` keys (the
first ones seen), at most ``max_steps_per_unit`` distinct steps per (unit, key) and at most
``max_contributions_per_step`` records per (unit, key, step), and with ``max_total_contributions``
at most that many records per unit in total. Which records are kept depends only
on the unit's own records (and their arrival order), so the bound holds whatever the other units
do: that is all the sensitivity analysis needs. Records over a bound go to the dead-letter output
with the bound named (they are not errors, but nothing is dropped silently).

Event-level privacy needs no bounding: each record is its own unit.
"""

import collections
import typing
import zlib
from typing import Any, NamedTuple, Tuple

import apache_beam as beam
from apache_beam.coders import PickleCoder
from apache_beam.runners.worker.statecache import CacheAware
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import RecordText
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.shell import key_bytes

__all__ = [
    'BoundContributions',
    'BoundedOutputs',
]

K = typing.TypeVar('K')


class BoundedOutputs(NamedTuple):
    """The outputs of ``BoundContributions``: ``kept`` (``(key, step, payload)``, within the
    bounds) and ``dead_letter`` (``DeadLetter`` records for everything over a bound)."""
    kept: beam.PCollection
    dead_letter: beam.PCollection


def _input_record(unit, item):
    """What a dead letter shows: the input record's rendering when the caller carried it as
    the item's 4th element (``shell.render_record``), else the element itself."""
    if len(item) > 3:
        return RecordText(item[3])
    return unit, item


#: How many stateful keys ('BoundPerUnit') the units are hashed into (CRC-32 of the unit's key
#: encoding, stable across workers). Each shard holds the compact records of its units.
UNIT_SHARDS = 64
#: A shard's bag is compacted (cleared and rewritten as one table) once it holds this many
#: deltas, so a call reads at most this many tables whatever the length of the stream.
MAX_DELTAS = 8


def unit_shard(encoded: bytes) -> int:
    """The 'BoundPerUnit' shard of a unit (``encoded``: its ``key_bytes``)."""
    return zlib.crc32(encoded) % UNIT_SHARDS


class _UnitTable(dict, CacheAware):
    """unit key bytes → the unit's compact record: a tuple of ``(key, step, n)`` (n records of
    (key, step) kept so far; at most K·S entries). One table is one element of a shard's bag.

    ``CacheAware``: Beam's state cache measures every cached value's deep size; a table reports
    its size from its length instead of letting the cache walk every record (the walk, not our
    code, dominated the per-unit state design)."""

    def get_referents_for_cache(self):
        return []

    def __sizeof__(self):
        return dict.__sizeof__(self) + 160 * len(self)


class _GroupByUnitInBundleFn(beam.DoFn):
    """Bundle-local: ``(unit, record)`` → ``(shard, ((unit key, unit, ((record, micros), ...)),
    ...))``, one element per unit shard and bundle with each unit's records in arrival order,
    emitted at the end of the bundle (one stateful call per shard and bundle downstream instead
    of one per unit or record). The unit key is the unit's encoding; the shard its CRC-32 mod
    ``UNIT_SHARDS``, so the stateful stage is keyed by an int (a deterministic key coder).

    Units are grouped by their ``FastPrimitivesCoder`` encoding (the bytes Beam keys state by),
    not by Python equality: ``1``, ``1.0`` and ``True`` are equal in Python but are three
    different units, and grouping them would let one unit's records be counted against
    another unit's record in some bundles and not in others. A unit that cannot be encoded goes
    to the dead letter. Each element is timestamped at its earliest record, never earlier than
    the bundle's inputs, so nothing becomes late by being grouped.
    """

    def __init__(self, transform_label: str):
        self._label = transform_label

    def start_bundle(self):
        self._groups = {}

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        unit, record = element
        micros = timestamp.micros
        try:
            encoded = key_bytes(unit)
        except Exception as e:  # pylint: disable=broad-except
            yield dead_letter(self._label, 'BoundContributions',
                              f'privacy unit id cannot be encoded as a key: {e!r}',
                              _input_record(unit, record), micros)
            return
        group = self._groups.get(encoded)
        if group is None:
            self._groups[encoded] = group = (unit, [])
        group[1].append((record, micros))

    def finish_bundle(self):
        shards = collections.defaultdict(list)
        for encoded, (unit, records) in self._groups.items():
            shards[unit_shard(encoded)].append((encoded, unit, tuple(records)))
        for shard, units in shards.items():
            earliest = min(micros for _, _, records in units for _, micros in records)
            yield WindowedValue((shard, tuple(units)), Timestamp(micros=earliest),
                                [GlobalWindow()])
        self._groups = {}


def _latest(tables, encoded):
    """A unit's record in a shard's bag of tables (the newest table that has it wins)."""
    for table in reversed(tables):
        entries = table.get(encoded)
        if entries is not None:
            return entries
    return ()


class _BoundContributionsFn(beam.DoFn):
    """Keyed by unit shard. State: a bag of ``_UnitTable`` deltas — each call appends ONE table
    with the new records of the units it changed (writes proportional to the bundle, not to the
    shard); reads take a unit's newest record; at ``MAX_DELTAS`` tables the bag is rewritten as
    one merged table. A unit's record holds every (key, step, n) it kept, so the K / S / m / C
    bounds are exact over the unbounded horizon."""

    KEPT = BagStateSpec('kept_units', PickleCoder())

    def __init__(self, unit: UserLevel, transform_label: str, mark_new_keys: bool = False):
        self._unit = unit
        self._label = transform_label
        self._mark = mark_new_keys

    def process(self, element, kept_state=beam.DoFn.StateParam(KEPT)):
        _, units = element
        tables = list(kept_state.read())
        delta = _UnitTable()
        for encoded, unit_id, records in units:
            entries = _latest(tables, encoded)
            new_entries = yield from self._bound_unit(unit_id, records, entries)
            if new_entries is not None:
                delta[encoded] = new_entries
        if not delta:
            return
        if len(tables) + 1 >= MAX_DELTAS:
            merged = _UnitTable()
            for table in tables:
                merged.update(table)
            merged.update(delta)
            kept_state.clear()
            delta = merged
        kept_state.add(delta)

    def _bound_unit(self, unit_id, records, entries):
        """Yields the kept ``(key, step, payload)`` and the dead letters of one unit's records;
        returns its new record (None if nothing was kept)."""
        bound = self._unit
        counts = collections.Counter()
        steps_of = collections.defaultdict(set)
        total = 0
        for key, step, n in entries:
            counts[(key, step)] += n
            steps_of[key].add(step)
            total += n
        cap = bound.max_total_contributions
        kept_any = False
        for item, micros in records:
            key, step, payload = item[0], item[1], item[2]
            steps = steps_of.get(key)
            reason = None
            if steps is None and len(steps_of) >= bound.max_keys_per_unit:
                reason = f'contribution bound: unit already contributed to max_keys_per_unit=' \
                         f'{bound.max_keys_per_unit} keys'
            elif steps is not None and step not in steps and \
                    len(steps) >= bound.max_steps_per_unit:
                reason = f'contribution bound: unit already contributed to max_steps_per_unit=' \
                         f'{bound.max_steps_per_unit} steps of this key'
            elif counts[(key, step)] >= bound.max_contributions_per_step:
                reason = f'contribution bound: max_contributions_per_step=' \
                         f'{bound.max_contributions_per_step} reached for this key and step'
            elif cap is not None and total >= cap:
                reason = f'contribution bound: unit already contributed ' \
                         f'max_total_contributions={cap} records'
            if reason is not None:
                yield dead_letter(self._label, 'BoundContributions', reason,
                                  _input_record(unit_id, item), micros)
                continue
            steps_of[key].add(step)
            counts[(key, step)] += 1
            total += 1
            kept_any = True
            if self._mark:   # the unit's first kept record of this key, over the whole horizon
                yield key, step, payload, int(steps is None)
            else:
                yield key, step, payload
        if not kept_any:
            return None
        return tuple((key, step, n) for (key, step), n in counts.items())


@beam.typehints.with_input_types(Tuple[Any, Tuple[Any, ...]])
class BoundContributions(beam.PTransform):
    """Bounds each privacy unit's contributions before aggregation (user-level privacy).

    Privacy unit: the unit id of ``privacy_unit`` (user-level; add/remove of all of a unit's
    records). After this transform one unit contributes to ≤ K keys, ≤ S steps per key and
    ≤ m records per (key, step).

    Input: ``(unit_id, (key, step, payload))`` or ``(unit_id, (key, step, payload,
    record_text))``, where ``record_text`` is the input record's rendering
    (``shell.render_record(record)``): a dead letter then holds it (``DeadLetter.record``), as
    every dead letter holds the input record; without it, the element. Output:
    ``BoundedOutputs(kept, dead_letter)``: the kept ``(key, step, payload)`` and ``DeadLetter``
    records for everything over a bound (and for unit ids that cannot be encoded as a state
    key). With ``max_total_contributions=C`` at most C records per unit are kept in total,
    exactly over the unbounded horizon (the state holds every kept count).

    Cost: records are grouped per unit within a bundle first, and units are hashed into
    ``UNIT_SHARDS`` stateful keys, so the stateful stage is called once per (shard, bundle): it
    reads the shard's bag of compact unit tables (at most ``MAX_DELTAS``) and appends one table
    with the records of the units it changed (no per-unit state cell, no read-modify-write of
    the whole shard).

    With ``mark_new_keys=True`` the kept elements are ``(key, step, payload, first)``, where
    ``first`` is 1 on the unit's first kept record of the key (over the whole horizon: the
    unit's record holds every key it kept), else 0 — what private key selection counts.

    Not guaranteed: which of a unit's records are kept when it exceeds a bound (the first ones
    to arrive, which on a streaming runner is not event-time order).

    Args:
      privacy_unit: the ``UserLevel(...)`` whose bounds K, S and m apply.
      transform_label: the ``DeadLetter.transform`` of its dead letters (the enclosing
        transform's label).
      mark_new_keys: also flag each unit's first kept record of a key (above).
    """

    def __init__(self, privacy_unit: UserLevel, transform_label: str = 'BoundContributions',
                 mark_new_keys: bool = False):
        super().__init__()
        if not isinstance(privacy_unit, UserLevel):
            raise TypeError(f'BoundContributions: privacy_unit must be UserLevel(...), got '
                            f'{privacy_unit!r}.')
        self._unit = privacy_unit
        self._transform_label = transform_label
        self._mark_new_keys = mark_new_keys

    def expand(self, pcoll):
        grouped = pcoll | 'GroupByUnitInBundle' >> beam.ParDo(
            _GroupByUnitInBundleFn(self._transform_label)).with_output_types(
                typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='grouped')
        bounded = grouped.grouped | 'BoundPerUnit' >> beam.ParDo(
            _BoundContributionsFn(self._unit, self._transform_label,
                                  self._mark_new_keys)).with_outputs(
                DEAD_LETTER, main='kept')
        dead = ((grouped[DEAD_LETTER], bounded[DEAD_LETTER])
                | 'MergeBoundingDeadLetters' >> beam.Flatten())
        return BoundedOutputs(bounded.kept, dead)
