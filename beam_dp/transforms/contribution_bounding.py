"""Contribution bounding per privacy unit (user-level privacy).

``BoundContributions`` keeps, for every privacy unit, at most ``max_keys_per_unit`` keys (the
first ones seen), at most ``max_steps_per_unit`` distinct steps per (unit, key) and at most
``max_contributions_per_step`` records per (unit, key, step), and with ``max_total_contributions``
at most that many records per unit in total. Which records are kept depends only
on the unit's own records (their arrival order) and the public release schedule (a record for a
step already released is late), so the bound holds whatever the other units do: that is all the
sensitivity analysis needs. "Released" here is decided by each shard's own timer chain on the
public schedule, seeded at launch and never armed by records (``_BoundContributionsFn``), so
whether a unit's record is late here — and so whether it uses the unit's S — depends on the
record's step and the arrival order / watermark only, never on other units' records. Records
over a bound go to the dead-letter output with the bound named (they are not errors, but
nothing is dropped silently).

With ``UserLevel(max_units=N)`` (opt-in) each unit shard admits at most ⌈N / UNIT_SHARDS⌉ units,
first come, and dead-letters every record of the units it does not admit: a unit's admission
then depends on the units before it in its shard, so one added unit can displace one other
unit, and the noise is calibrated to two units (the argument is ``UserLevel``'s docstring).

Event-level privacy needs no bounding: each record is its own unit.

State layout: since issue 13 a unit's record is the compact usage record of
``beam_dp.drivers.bounding`` (was: every kept ``(key, step, n)``), plus a 'released_through'
cell and a 'released' timer per shard. A record in the earlier layout is read exactly (converted
on read), but the DoFn gained a state cell and a timer: drain a running job and restart it
rather than updating it in place.

Update note (the lateness fix, issue 13): with a clock and an unbounded input the 'released'
chain is now seeded at launch — new stages 'ShardSeeds', 'SeedAtStart' and 'MergeSeeds' (a
Flatten before 'BoundPerUnit'), a new timer 'end_of_input', and the 'released_through' cell
holds ``(released_through, armed step)`` (was a triple with the newest kept step); a bounded
input runs without the chain. Unit records are unchanged. The graph and the timers changed:
drain a running job and restart it.
"""

import collections
import typing
import zlib
from typing import Any, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.runners.worker.statecache import CacheAware
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp.drivers.bounding import NOTHING_RELEASED
from beam_dp.drivers.bounding import UNIT_SHARDS
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.bounding import held_keys_if_full
from beam_dp.drivers.bounding import keys_reason
from beam_dp.drivers.bounding import shard_capacity
from beam_dp.drivers.bounding import unit_cap_reason
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.warm_up import WarmUpBounds
from beam_dp.drivers.distinct_window import ActiveWindow
from beam_dp.drivers.distinct_window import coverage_deltas
from beam_dp.errors import InvalidParamsError
from beam_dp.io import state_coder
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.lateness import batch_input
from beam_dp.transforms.release_loop import ReleasedChain
from beam_dp.transforms.release_loop import watermark_gate
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import RecordText
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.shell import key_bytes
from beam_dp.transforms.shell import merge_seeds
from beam_dp.transforms.shell import seeds_at_start
from beam_dp.transforms.state_types import STATE_CODER

__all__ = [
    'BoundContributions',
    'BoundContributionsAtRunTime',
    'BoundedOutputs',
]

K = typing.TypeVar('K')

#: ``BoundContributions(distinct_units=ACTIVE_UNITS)``: each unit's first record per (key, step).
ACTIVE_UNITS = 'active'


def _counts_active(distinct) -> bool:
    """``ACTIVE_UNITS`` or ``ActiveWindow(W)``: each unit's first record per (key, step)."""
    return distinct == ACTIVE_UNITS or isinstance(distinct, ActiveWindow)


def _with_units(payload, units):
    """A kept record's payload with its units replaced (``continual_extract``'s shapes:
    ``(shard, slot, units)`` over public keys, ``(shard, key, slot, units, unit)`` else)."""
    if len(payload) == 3:
        return payload[0], payload[1], units
    return payload[:3] + (units,) + payload[4:]


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


#: A shard's bag is compacted (cleared and rewritten as one table) once it holds this many
#: deltas, so a call reads at most this many tables whatever the length of the stream.
MAX_DELTAS = 8


def unit_shard(encoded: bytes) -> int:
    """The 'BoundPerUnit' shard of a unit (``encoded``: its ``key_bytes``)."""
    return zlib.crc32(encoded) % UNIT_SHARDS


class _UnitTable(dict, CacheAware):
    """unit key bytes → the unit's compact usage record (``beam_dp.drivers.bounding``: an
    exhausted marker, or the total and per key its full marker or released-step count and the
    counts of its steps not yet released). One table is one element of a shard's bag.

    ``CacheAware``: Beam's state cache measures every cached value's deep size; a table reports
    its size from its length instead of letting the cache walk every record (the walk, not our
    code, dominated the per-unit state design)."""

    def get_referents_for_cache(self):
        return []

    def __sizeof__(self):
        return dict.__sizeof__(self) + 160 * len(self)


state_coder.register(_UnitTable, name='bounding.UnitTable', version=1, fields=('items',),
                     values=lambda table: (dict(table),), build=lambda fields: _UnitTable(fields[0]))


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

    #: Records buffered before the groups are emitted early: a runner may make one bundle of the
    #: whole input (Prism catching up, Flink on chunked input), and the buffer must not grow
    #: with it. Emitting within the bundle changes nothing downstream (a unit's records may
    #: already arrive in several bundles), and the watermark cannot pass a record of a bundle
    #: that has not committed, so no record becomes late by it.
    MAX_BUFFERED = 50_000

    def __init__(self, transform_label: str, max_buffered: Optional[int] = None):
        self._label = transform_label
        self._max_buffered = max_buffered or self.MAX_BUFFERED

    def start_bundle(self):
        self._groups = {}
        self._buffered = 0

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
        yield from self.add(encoded, unit, record, micros)

    def add(self, encoded: bytes, unit, record, micros: int):
        """Buffers one record of the unit whose ``key_bytes`` is ``encoded``; returns the
        groups to emit (a list, when the buffer is full) or ``()``."""
        return self.add_fields(encoded, unit, record, None, None, None, micros)

    def add_fields(self, encoded: bytes, unit, a, b, c, d, micros: int):
        """``add`` of the record ``(a, b, c, d)`` (``d`` None: of the record ``a``), whose
        tuple is built only when the group is emitted. For an entry stage that extracts and
        groups in one DoFn (``continual_extract._ExtractAndGroupFn``, which encodes the unit
        once).

        A unit's buffered records are flat in ONE list (``[unit, earliest µs, a, b, c, d, µs,
        ...]``), and the emitted tuples are built shard by shard as each group leaves: the
        records of a buffer that spans tens of thousands of records then cost the garbage
        collector one list per unit, not three tuples per record that survive into its
        oldest generation (the collector's full passes were ~30 % of the user-level
        pipeline's CPU at 1M rows)."""
        group = self._groups.get(encoded)
        if group is None:
            self._groups[encoded] = [unit, micros, a, b, c, d, micros]
        else:
            if micros < group[1]:
                group[1] = micros
            group += (a, b, c, d, micros)
        self._buffered += 1
        if self._buffered >= self._max_buffered:
            return list(self._flush())
        return ()

    def finish_bundle(self):
        yield from self._flush()

    def _flush(self):
        shards, earliest = collections.defaultdict(list), {}
        crc32, n = zlib.crc32, UNIT_SHARDS
        for encoded, group in self._groups.items():
            shard = crc32(encoded) % n      # unit_shard(encoded)
            shards[shard].append(encoded)
            first = group[1]
            if first < earliest.get(shard, first + 1):
                earliest[shard] = first
        groups = self._groups
        self._groups = {}
        self._buffered = 0
        for shard, units in shards.items():
            yield WindowedValue((shard, tuple(
                (encoded, group[0], _records(group)) for encoded, group in
                ((encoded, groups.pop(encoded)) for encoded in units))),
                Timestamp(micros=earliest[shard]), [GlobalWindow()])


def _records(group):
    """The ``((record, µs), ...)`` of a unit's flat buffer (``_GroupByUnitInBundleFn``)."""
    it = iter(group)
    next(it)
    next(it)
    return tuple(((a, b, c, d), m) if d is not None else (a, m)
                 for a, b, c, d, m in zip(it, it, it, it, it))


def _latest(tables, encoded):
    """A unit's record in a shard's bag of tables (the newest table that has it wins)."""
    for table in reversed(tables):
        entries = table.get(encoded)
        if entries is not None:
            return entries
    return ()


def _add_table(bag, tables, delta) -> Optional['_UnitTable']:
    """Appends ``delta`` to a shard's bag of unit tables (``tables``: what it holds); at
    ``MAX_DELTAS`` tables the bag is rewritten as ONE table, every table merged with ``delta``
    (newest wins), which is returned (None: appended)."""
    if len(tables) + 1 < MAX_DELTAS:
        bag.add(delta)
        return None
    merged = _UnitTable()
    for table in tables:
        merged.update(table)
    merged.update(delta)
    bag.clear()
    bag.add(merged)
    return merged


#: The released chain's gate ('released_through', 'released', 'end_of_input'), shared with
#: the lateness gate 'DropLate'.
_ChainGate = watermark_gate()


class _BoundContributionsFn(_ChainGate):
    """Keyed by unit shard. State: a bag of ``_UnitTable`` deltas — each call appends ONE table
    with the new records of the units it changed (writes proportional to the bundle, not to the
    shard); reads take a unit's newest record; at ``MAX_DELTAS`` tables the bag is rewritten as
    one merged table. A unit's record is ``beam_dp.drivers.bounding``'s compact usage record
    (exhausted marker, full keys, released steps as one count per key, counts of the steps
    not yet released): the K / S / m / C bounds stay exact over the unbounded horizon (the
    argument is in that module).

    With a clock, ``released_through`` is the last step this stage knows is released: its
    input watermark passed the step's release time. It advances on the public schedule only,
    as the release stages' clocks do: every shard is seeded at launch (``BoundContributions``
    flattens one ``(shard, None)`` per shard into the input, ``shell.seeds_at_start``), its
    first element (seed or data) starts the 'released' timer chain (step 0's release time, and
    without a last step the 'end_of_input' timer), and each firing marks the armed step
    released and arms the next step's release time, until the clock's last step (or for ever
    without one, O(1) state; 'end_of_input' stops it when the input ends). The chain is the
    shared watermark gate's (``release_loop.watermark_gate`` running ``ReleasedChain``, as the
    lateness gate 'DropLate' does): this DoFn declares no timer of its own.
    No record arms or moves it, so whether a record is late here depends on its own
    step, the schedule and the arrival order / watermark, never on other units' records (the
    DESIGN privacy rules; issue 13). A record for a released step is late here (dead-lettered
    with the release stage's reason, as it would be there), and a unit's released steps are
    folded into its keys' counts whenever its record is rewritten (when it next keeps a
    record): a unit idle since keeps the counts of the few steps that were not yet released
    when it was last seen. The state cell holds ``(released_through, armed step)``; the armed
    step is None once the chain ended (past the last step, or the input ended)."""

    KEPT = BagStateSpec('kept_units', STATE_CODER)

    def __init__(self, unit: UserLevel, transform_label: str, mark_new_keys: bool = False,
                 clock: Optional[StepClock] = None, distinct_units: bool = False,
                 aggregate=None):
        self._unit = unit
        self._label = transform_label
        self._mark = mark_new_keys
        #: ``BoundContributions(aggregate=...)``: a factory of the bundle's sums of kept records.
        self._aggregate = aggregate
        self._sums = None
        self._distinct = distinct_units
        self._clock = clock
        self._schedule = None if clock is None else ReleasedChain(clock)
        self._capacity = shard_capacity(unit)

    def start_bundle(self):
        self._sums = None if self._aggregate is None else self._aggregate()

    def finish_bundle(self):
        if self._sums is not None:
            yield from self._sums.emit()
            self._sums = self._aggregate()

    def process(self, element, kept_state=beam.DoFn.StateParam(KEPT),
                released_state=beam.DoFn.StateParam(_ChainGate.RELEASED),
                released_timer=beam.DoFn.TimerParam(_ChainGate.RELEASED_TIMER),
                end_timer=beam.DoFn.TimerParam(_ChainGate.END_TIMER)):
        yield from self._bound_shard(element, kept_state, released_state, released_timer,
                                     end_timer)

    def _bound_shard(self, element, kept_state, released_state, released_timer, end_timer,
                     admitted_state=None):
        """One call: bounds the units of ``element`` (None: the shard's launch seed); with
        ``admitted_state`` (the unit cap, ``_CappedBoundContributionsFn``) a unit new to the
        shard is admitted only while the shard holds fewer than ``shard_capacity`` units, else
        its records are dead-lettered."""
        _, units = element
        released = NOTHING_RELEASED
        if self._schedule is not None:     # the shard's data-independent clock (``lateness``)
            released = self._gate(released_state, released_timer, end_timer)
        if units is None:
            return
        late = None if self._clock is None else self._clock.late_reason
        before = admitted = None if admitted_state is None else admitted_state.read() or 0
        tables = list(kept_state.read())
        delta = _UnitTable()
        # A unit that holds K keys (not exhausted, one key not full) and whose records are of
        # other keys: each is over K (``held_keys_if_full``), dead-lettered without decoding
        # its record, which stays as it is (nothing kept: it is not rewritten). Most units of
        # a long stream are in this state; the first record of a held key (or a late one)
        # hands the rest of the unit's records to the decoded path, in order.
        fast, reason = not self._distinct, keys_reason(self._unit)
        for encoded, unit_id, records in units:
            record = _latest(tables, encoded)
            held = held_keys_if_full(self._unit, record) if fast and record else None
            if held is not None:
                for i, (item, micros) in enumerate(records):
                    if item[1] <= released or item[0] in held:
                        records = records[i:]
                        break
                    yield dead_letter(self._label, 'BoundContributions', reason,
                                      _input_record(unit_id, item), micros)
                else:
                    continue
            admit = admitted is not None and record == () and encoded not in delta
            if admit and admitted >= self._capacity:
                yield from self._over_cap(unit_id, records)
                continue
            usage = UnitUsage.decode(self._unit, record, released, late,
                                    keep_keys=bool(self._distinct),
                                    keep_steps=_counts_active(self._distinct),
                                    keep_last=isinstance(self._distinct, ActiveWindow))
            kept = yield from self._bound_unit(unit_id, records, usage)
            if kept or admit:
                delta[encoded] = usage.record()
            if admit:
                admitted += 1
        if not delta:
            return
        merged = _add_table(kept_state, tables, delta)
        if merged and admitted is not None:     # the merged table holds every admitted unit
            admitted = len(merged)
        if admitted != before:
            admitted_state.write(admitted)

    def _over_cap(self, unit_id, records):
        """Dead letters for every record of a unit its full shard does not admit."""
        reason = unit_cap_reason(self._unit)
        for item, micros in records:
            yield dead_letter(self._label, 'BoundContributions', reason,
                              _input_record(unit_id, item), micros)

    def _bound_unit(self, unit_id, records, usage):
        """Yields the kept ``(key, step, payload)`` and the dead letters of one unit's records
        (``usage`` is updated); returns the steps of the kept ones."""
        kept = []
        for item, micros in records:
            key, step, payload = item[0], item[1], item[2]
            if _counts_active(self._distinct):
                if usage.counted(key, step):
                    continue    # the unit is already active for this key in this step
            elif self._distinct and usage.holds(key):
                continue        # the unit is already counted for this key: not a new unit
            reason, first = usage.offer(key, step)
            if reason is not None:
                yield dead_letter(self._label, 'BoundContributions', reason,
                                  _input_record(unit_id, item), micros)
                continue
            kept.append(step)
            if isinstance(self._distinct, ActiveWindow):   # its window-membership change
                yield from self._window_deltas(usage, key, step, payload, first)
            elif self._sums is not None:   # summed in the bundle (``aggregate``), emitted at its end
                self._sums.add(key, step, payload)
            elif self._mark:   # the unit's first kept record of this key, over the whole horizon
                yield key, step, payload, int(first)
            else:
                yield key, step, payload
        return kept

    def _window_deltas(self, usage, key, step, payload, first):
        """A kept active step under ``ActiveWindow(W)``: the ±1 change of the unit's
        membership stream of ``key`` (``coverage_deltas``; the first-record flag rides on an
        element at ``step``, of units 0 when that step's change is 0)."""
        deltas = coverage_deltas(usage.active_steps(key), step, self._distinct.window)
        last = None if self._clock is None else self._clock.last_step
        if last is not None:    # a change past the clock's last step is never released
            deltas = [(at, units) for at, units in deltas if at <= last]
        if self._mark and (not deltas or deltas[0][0] != step):
            deltas = [(step, 0)] + deltas
        for at, units in deltas:
            out = _with_units(payload, units)
            if self._sums is not None:
                self._sums.add(key, at, out)
            elif self._mark:
                yield key, at, out, int(first and at == step)
            else:
                yield key, at, out


class _CappedBoundContributionsFn(_BoundContributionsFn):
    """``_BoundContributionsFn`` with the unit cap (``UserLevel(max_units=N)``): a shard admits
    at most ``shard_capacity`` = ⌈N / UNIT_SHARDS⌉ units, first come in its processing order
    (at a unit's first record it processes, kept or not); every record of a unit not admitted
    goes to the dead letter with ``unit_cap_reason``. The extra cell 'admitted_units' holds
    the number of units the shard admitted (each has a record in the bag; re-counted from the
    merged table at every compaction). The privacy argument (a neighbouring change moves the
    kept records of ≤ 2 units, so the calibration doubles) is ``UserLevel``'s docstring. A
    separate class so that without a cap the DoFn, its state cells and its state reads are
    exactly those of ``_BoundContributionsFn``."""

    ADMITTED = ReadModifyWriteStateSpec('admitted_units', STATE_CODER)

    def process(self, element, kept_state=beam.DoFn.StateParam(_BoundContributionsFn.KEPT),
                released_state=beam.DoFn.StateParam(_BoundContributionsFn.RELEASED),
                released_timer=beam.DoFn.TimerParam(_BoundContributionsFn.RELEASED_TIMER),
                end_timer=beam.DoFn.TimerParam(_BoundContributionsFn.END_TIMER),
                admitted_state=beam.DoFn.StateParam(ADMITTED)):
        yield from self._bound_shard(element, kept_state, released_state, released_timer,
                                     end_timer, admitted_state)


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
    exactly over the unbounded horizon.

    State per unit (``beam_dp.drivers.bounding``; measured in ``benchmarks/state_size``,
    documented in ``docs/state.md``): an exhausted unit keeps one small int; otherwise its
    total, its ≤ K keys and per key the count of its released steps and the counts of its steps
    not yet released. Every unit that ever kept a record keeps a record for ever (that is what
    makes S and C exact over the horizon) — unless ``max_units=N`` caps the units: then a shard
    holds at most ⌈N / UNIT_SHARDS⌉ unit records (the first units it processed) and every record
    of a unit it did not admit is dead-lettered (``unit cap: shard full (max_units=N ...)``),
    which costs twice the noise (``UserLevel``). With ``clock`` a record for a step whose release
    time the stage's watermark passed is dead-lettered as late here (``StepClock.late_reason``,
    as the release stage does), and a unit's released steps are folded into counts when its
    record is next rewritten. The stage learns that a step is released from a timer chain per
    shard on the public schedule, seeded at launch ('ShardSeeds' / 'SeedAtStart' /
    'MergeSeeds', one seed per shard) and never armed by records: a unit's kept records
    depend on its own records, the schedule and the arrival order / watermark, not on other
    units' records. It costs ``UNIT_SHARDS`` timer firings per step (O(1) state per shard),
    until the clock's last step or, without one, until the input ends. A bounded input (batch)
    runs without the chain: a batch runner passes no release time before the whole input is
    processed, so no record is late here and late ones are left to the release stage.

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
      privacy_unit: the ``UserLevel(...)`` whose bounds K, S, m, C and unit cap N apply.
      transform_label: the ``DeadLetter.transform`` of its dead letters (the enclosing
        transform's label).
      mark_new_keys: also flag each unit's first kept record of a key (above).
      clock: the release schedule (``StepClock``) of the steps in the input; without it (or
        with a bounded input) no step is treated as released here (late records are left to
        the release stage) and per-step counts are never folded.
      distinct_units: keep only each unit's FIRST record of each of its ≤ K keys (what
        ``ContinualDistinctCountPerKey`` counts): a later record of a key the unit already
        holds is dropped silently (it is not a new unit, not an error), a record of a new key
        beyond K (or C) or late is dead-lettered as usual. The unit's record then never
        collapses to the exhausted marker: it holds at most K keys (``min(K, C)``) for ever.
        Use it with m = S = 1. ``distinct_units=ACTIVE_UNITS`` ('active') keeps each unit's
        first record of each (key, step) instead, within K keys and S steps per key (the
        active-units count; use it with m = 1): a later record of the same key and step is
        dropped silently, a record of a (S+1)-th step of a key or of a (K+1)-th key is
        dead-lettered. A key keeps its ≤ S unreleased steps until they are released.
      grouped_input: the input is already grouped per unit shard and bundle, in the shape
        'GroupByUnitInBundle' emits (``(shard, ((unit key bytes, unit, ((item, event time
        µs), ...)), ...))``, e.g. by ``continual_extract._ExtractAndGroupFn``, which extracts
        and groups in one per-record stage): 'GroupByUnitInBundle' is then left out.
      aggregate: a picklable factory of sums (``add(key, step, payload)``, ``emit()``: the
        output elements, e.g. ``continual_extract._KeptSums``); 'BoundPerUnit' then adds each
        kept record to the sums of its bundle and emits ``sums.emit()`` at the end of the bundle
        instead of one ``kept`` element per record (``continual`` passes it only without
        ``mark_new_keys``, whose flag is per record). Which records are kept, the dead letters
        and the state are unchanged.
    """

    def __init__(self, privacy_unit: UserLevel, transform_label: str = 'BoundContributions',
                 mark_new_keys: bool = False, clock: Optional[StepClock] = None,
                 distinct_units: bool = False, grouped_input: bool = False, aggregate=None):
        super().__init__()
        if not isinstance(privacy_unit, UserLevel):
            raise InvalidParamsError(f'BoundContributions: privacy_unit must be UserLevel(...), '
                                     f'got {privacy_unit!r}.')
        self._unit = privacy_unit
        self._transform_label = transform_label
        self._mark_new_keys = mark_new_keys
        self._clock = clock
        self._distinct_units = distinct_units
        self._grouped_input = grouped_input
        self._aggregate = aggregate

    def expand(self, pcoll):
        if self._grouped_input:     # the entry stage grouped the records already
            shards, dead = pcoll, ()
        else:
            grouped = pcoll | 'GroupByUnitInBundle' >> beam.ParDo(
                _GroupByUnitInBundleFn(self._transform_label)).with_output_types(
                    typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='grouped')
            shards, dead = grouped.grouped, (grouped[DEAD_LETTER],)
        fn = (_BoundContributionsFn if self._unit.max_units is None
              else _CappedBoundContributionsFn)
        clock = self._clock
        if batch_input(pcoll):
            # A bounded input in a batch pipeline: no release time passes before the whole input
            # is read, so the chain would only cost UNIT_SHARDS firings per step; no step is
            # released here (late records are left to the release stage), data-independently.
            clock = None
        if clock is not None:    # every shard's clock starts at launch, whatever the data
            shards = merge_seeds(shards, seeds_at_start(
                pcoll.pipeline, range(UNIT_SHARDS), clock.start_micros))
        bounded = shards | 'BoundPerUnit' >> beam.ParDo(
            fn(self._unit, self._transform_label, self._mark_new_keys,
               clock, self._distinct_units, self._aggregate)).with_outputs(DEAD_LETTER,
                                                                           main='kept')
        dead = (dead + (bounded[DEAD_LETTER],)) | 'MergeBoundingDeadLetters' >> beam.Flatten()
        return BoundedOutputs(bounded.kept, dead)


# -- bounds known at run time (issue 23: online warm-up bounds) ----------------------------------
# A separate code path: the per-record path above is unchanged (``_bound_shard``, ``UnitUsage``).


class _RunTimeBoundsFn(_BoundContributionsFn):
    """'BoundPerUnit' whose ``UserLevel`` bounds arrive at run time, once per shard, as a
    ``(shard, WarmUpBounds)`` element (``beam_dp.drivers.warm_up``: a DP output, public).
    Until they arrive the shard's unit groups wait in the bag 'held_units' (the units' ids are
    not stored: every held item carries its record's rendering for the dead letters); when
    they arrive they are kept in 'run_time_bounds' and the held groups are bounded, in their
    arrival order, exactly as ``_BoundContributionsFn`` bounds them at those bounds. The timer
    chain ('released') is the same, started when the bounds arrive (every shard gets them
    once: a public event), so no step counts as released here before the shard has its
    bounds, whatever order the runner delivers the bounds and the watermark in; the records
    held are those that arrive before the bounds (in a streaming job, about the records of
    the interval between the warm-up's end and the bounds' arrival)."""

    BOUNDS = ReadModifyWriteStateSpec('run_time_bounds', STATE_CODER)
    HELD = BagStateSpec('held_units', STATE_CODER)

    def __init__(self, default: UserLevel, transform_label: str,
                 clock: Optional[StepClock] = None):
        super().__init__(default, transform_label, clock=clock)
        self._default = default
        self._units = {}

    def _at(self, bounds) -> None:
        """Sets the bounds this call bounds at (``UserLevel`` cached per bounds)."""
        bounds = tuple(bounds)
        unit = self._units.get(bounds)
        if unit is None:
            k, m, s, c = bounds
            unit = self._units[bounds] = UserLevel(
                unit_fn=self._default.unit_fn, max_keys_per_unit=k,
                max_contributions_per_step=m, max_steps_per_unit=s,
                max_total_contributions=c or None)
        self._unit = unit

    def process(self, element, kept_state=beam.DoFn.StateParam(_BoundContributionsFn.KEPT),
                released_state=beam.DoFn.StateParam(_BoundContributionsFn.RELEASED),
                released_timer=beam.DoFn.TimerParam(_BoundContributionsFn.RELEASED_TIMER),
                end_timer=beam.DoFn.TimerParam(_BoundContributionsFn.END_TIMER),
                bounds_state=beam.DoFn.StateParam(BOUNDS),
                held_state=beam.DoFn.StateParam(HELD)):
        shard, units = element
        cells = (kept_state, released_state, released_timer, end_timer)
        if isinstance(units, WarmUpBounds):
            if bounds_state.read() is not None:
                return
            bounds_state.write(tuple(int(x) for x in units))
            self._at(units)
            # One group per unit, its records in arrival order: a unit held in several calls
            # must be bounded with ONE usage (``_bound_shard`` decodes each group's usage from
            # the stored tables, not from this call's delta).
            held = {}
            for batch in held_state.read():
                for encoded, _, records in batch:
                    held.setdefault(encoded, []).extend(records)
            held_state.clear()
            groups = tuple((encoded, None, tuple(records)) for encoded, records in held.items())
            yield from self._bound_shard((shard, groups or None), *cells)
            return
        stored = bounds_state.read()
        if stored is None:      # the chain starts with the bounds (``_bound_shard``)
            if units:
                held_state.add(tuple((encoded, None, records) for encoded, _, records in units))
            return
        self._at(stored)
        yield from self._bound_shard(element, *cells)


@beam.typehints.with_input_types(Tuple[Any, Tuple[Any, ...]])
class BoundContributionsAtRunTime(beam.PTransform):
    """``BoundContributions`` whose bounds (K, m, S, C) are chosen while the job runs (the
    warm-up of ``WarmUpContinualCountPerKey``) and delivered as ``bounds``: a PCollection of
    ``(unit shard, WarmUpBounds)``, one per shard in ``range(UNIT_SHARDS)``. Records wait in
    their shard until its bounds arrive, then are bounded at them as ``BoundContributions``
    bounds (same rule, same dead letters, same per-unit state); ``default`` gives the unit
    function (its bounds are not used). Input, output and the ``clock``: as
    ``BoundContributions``."""

    def __init__(self, default: UserLevel, bounds: beam.PCollection,
                 transform_label: str = 'BoundContributions',
                 clock: Optional[StepClock] = None):
        super().__init__()
        if not isinstance(default, UserLevel) or default.max_units is not None:
            raise InvalidParamsError('BoundContributionsAtRunTime: default must be '
                                     'UserLevel(...) without max_units.')
        self._default = default
        self._bounds = bounds
        self._transform_label = transform_label
        self._clock = clock

    def _bounds_fn(self, clock: Optional[StepClock]) -> beam.DoFn:
        """The 'BoundPerUnit' DoFn (a subclass may bound differently, with the same wiring)."""
        return _RunTimeBoundsFn(self._default, self._transform_label, clock)

    def expand(self, pcoll):
        grouped = pcoll | 'GroupByUnitInBundle' >> beam.ParDo(
            _GroupByUnitInBundleFn(self._transform_label)).with_output_types(
                typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='grouped')
        clock = None if batch_input(pcoll) else self._clock
        shards = (grouped.grouped, self._bounds) | 'MergeBounds' >> beam.Flatten(
        ).with_output_types(typing.Tuple[int, typing.Any])
        bounded = shards | 'BoundPerUnit' >> beam.ParDo(self._bounds_fn(clock)).with_outputs(
            DEAD_LETTER, main='kept')
        dead = ((grouped[DEAD_LETTER], bounded[DEAD_LETTER])
                | 'MergeBoundingDeadLetters' >> beam.Flatten())
        return BoundedOutputs(bounded.kept, dead)
