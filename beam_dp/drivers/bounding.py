"""User-level contribution bounding: the rule and each unit's compact usage record (pure, no
Beam). ``beam_dp.transforms.contribution_bounding`` ('BoundPerUnit') stores one record per unit
and calls ``UnitUsage.offer`` for each of the unit's records.

The bound (``UserLevel(K, m, S, C)``), exact over the unbounded horizon: a unit's kept records
touch ≤ K keys, ≤ S distinct steps per key, ≤ m records per (key, step) and ≤ C records in all.

What the record keeps, and why that is all the bound needs
-----------------------------------------------------------
A unit's record is one of:

* ``EXHAUSTED_TOTAL`` (an int): the unit kept C records. Every further record is over C, so
  nothing else can change a decision: its keys and steps are forgotten.
* ``EXHAUSTED_KEYS`` (an int): the unit holds K keys and every one is full (below). A record
  of a new key is over K, one of a held key is over S or m (or late): nothing else is needed.
* ``(total, entry, ...)``, one entry per key it kept (≤ K entries):
  ``(key,)`` for a FULL key — the key used S steps and every step of it that can still be
  released holds m records, so any record of it is over S, over m or late; or
  ``(key, dead, step1, n1, step2, n2, ...)``: ``dead`` distinct steps of the key that are
  already released (≤ ``released_through``) and the count n of each LIVE step (not yet
  released) it kept. ``total`` is only read when C is set.

Released steps (``released_through``): a step s is released once the watermark passes
end(s) + allowed lateness (``StepClock.release_time_micros``, a public schedule), and a record
for a released step is late: it is dead-lettered (``StepClock.late_reason``) and never kept.
So after step s is released, no record of it can be kept again: its count n can never again
decide anything (m is only checked for records that could be kept), and only the fact that
the key used one more step matters for S — that is the ``dead`` count. Nothing is lost: the
number of distinct steps (dead + live) and the total never decrease, each live count is exact,
and no released step is ever counted anew (records for it are late). The bound therefore stays
exact over the whole horizon while a unit's record holds at most K keys, K integers, and the
counts of the steps not yet released (a few, set by the allowed lateness), instead of K·S
(key, step, n) entries.

What still grows: one record per unit that ever kept a record (it must be remembered for ever
to enforce S and C over the whole horizon; forgetting it would let it contribute again) —
unless ``UserLevel(max_units=N)`` caps the units: each of the ``UNIT_SHARDS`` shards then
admits at most ``shard_capacity(bound)`` = ⌈N / UNIT_SHARDS⌉ units, first come (a unit is
admitted at its first record the shard processes), and every record of a unit not admitted
is dead-lettered with ``unit_cap_reason``. Adding a unit to the stream then changes the kept
records of at most two units (it and the one it displaces): the calibration doubles, and the
argument is written in ``UserLevel``'s docstring.
"""

import math
from typing import Callable, Dict, Optional, Tuple

from beam_dp.privacy_unit import UserLevel

__all__ = [
    'EXHAUSTED_KEYS',
    'EXHAUSTED_TOTAL',
    'NOTHING_RELEASED',
    'UNIT_SHARDS',
    'UnitUsage',
    'compact_record',
    'held_keys_if_full',
    'keys_reason',
    'shard_capacity',
    'unit_cap_reason',
]

#: How many stateful keys ('BoundPerUnit') the units are hashed into (CRC-32 of the unit's key
#: encoding, stable across workers). Each shard holds the compact records of its units.
UNIT_SHARDS = 64

#: Record of a unit that kept C records (``max_total_contributions``).
EXHAUSTED_TOTAL = 0
#: Record of a unit that holds K keys, each full (S steps with m records each, or released).
EXHAUSTED_KEYS = 1
#: ``released_through`` before any step is released (steps start at 0).
NOTHING_RELEASED = -1


class _Key:
    """One key of a unit: ``dead`` released steps used, ``live`` step → records kept; or full
    (``live`` is None). ``last``: the latest released step it kept (−1: none; kept in the
    record only with ``keep_last``)."""
    __slots__ = ('dead', 'live', 'last')

    def __init__(self, dead: int = 0, live: Optional[Dict[int, int]] = None, last: int = -1):
        self.dead = dead
        self.live = live
        self.last = last

    def used(self) -> int:
        return self.dead + len(self.live)


class UnitUsage:
    """A unit's usage while its records of one call are bounded: decode a stored record,
    ``offer`` records one by one, ``record()`` the compact record to store."""

    def __init__(self, bound: UserLevel, released_through: int = NOTHING_RELEASED,
                 late_reason: Optional[Callable[[int], str]] = None, keep_keys: bool = False,
                 keep_steps: bool = False, keep_last: bool = False):
        self._bound = bound
        self._keep_last = keep_last
        self._released = released_through
        self._late_reason = late_reason
        self._keep_keys = keep_keys
        self._keep_steps = keep_steps
        self.exhausted: Optional[int] = None
        self.total = 0
        self.keys: Dict[object, _Key] = {}

    @classmethod
    def decode(cls, bound: UserLevel, record, released_through: int = NOTHING_RELEASED,
               late_reason: Optional[Callable[[int], str]] = None,
               keep_keys: bool = False, keep_steps: bool = False,
               keep_last: bool = False) -> 'UnitUsage':
        """The usage of a stored record (``()`` for a new unit). ``keep_keys``: the record
        never collapses to ``EXHAUSTED_KEYS`` / ``EXHAUSTED_TOTAL`` (it keeps its ≤ K keys, so
        ``holds(key)`` stays exact: what the distinct-unit count needs). ``keep_steps``: a key
        is not marked full while it holds a step not yet released (≤ S of them), so
        ``counted(key, step)`` stays exact (the active-units count). ``keep_last``: a key's
        entry also holds its latest released step (``(key, dead, last, step1, n1, ...)``;
        ``active_steps``: the active units of a window, ``beam_dp.drivers.distinct_window``)."""
        usage = cls(bound, released_through, late_reason, keep_keys, keep_steps, keep_last)
        if isinstance(record, int):
            usage.exhausted = record
            return usage
        if not record:      # a new unit: nothing to settle
            return usage
        usage.total = record[0]
        for entry in record[1:]:
            if len(entry) == 1:
                usage.keys[entry[0]] = _Key(bound.max_steps_per_unit, None)
                continue
            if keep_last:
                usage.keys[entry[0]] = _Key(entry[1], dict(zip(entry[3::2], entry[4::2])),
                                            entry[2])
                continue
            usage.keys[entry[0]] = _Key(entry[1], dict(zip(entry[2::2], entry[3::2])))
        usage._settle()
        return usage

    def offer(self, key, step: int) -> Tuple[Optional[str], bool]:
        """Decides one record: ``(None, first)`` if kept (``first``: the unit's first kept
        record of ``key`` over the whole horizon), else ``(reason, False)``."""
        reason = self._reason(key, step)
        if reason is not None:
            return reason, False
        entry = self.keys.get(key)
        first = entry is None
        if first:
            self.keys[key] = entry = _Key(0, {})
        entry.live[step] = entry.live.get(step, 0) + 1
        self.total += 1
        self._settle_key(entry)
        self._settle_unit()
        return None, first

    def _reason(self, key, step: int) -> Optional[str]:
        bound = self._bound
        if self.exhausted == EXHAUSTED_TOTAL:
            return _total_reason(bound)
        if self.exhausted == EXHAUSTED_KEYS:
            return (f'contribution bound: unit already used all max_keys_per_unit='
                    f'{bound.max_keys_per_unit} keys, each for max_steps_per_unit='
                    f'{bound.max_steps_per_unit} steps with max_contributions_per_step='
                    f'{bound.max_contributions_per_step} records')
        if step <= self._released:
            return (self._late_reason(step) if self._late_reason is not None else
                    f'late: step {step} was already released')
        entry = self.keys.get(key)
        if entry is None:
            if len(self.keys) >= bound.max_keys_per_unit:
                return keys_reason(bound)
        elif entry.live is None:
            return (f'contribution bound: unit already contributed to max_steps_per_unit='
                    f'{bound.max_steps_per_unit} steps of this key, each with '
                    f'max_contributions_per_step={bound.max_contributions_per_step} records')
        elif step not in entry.live and entry.used() >= bound.max_steps_per_unit:
            return (f'contribution bound: unit already contributed to max_steps_per_unit='
                    f'{bound.max_steps_per_unit} steps of this key')
        elif entry.live.get(step, 0) >= bound.max_contributions_per_step:
            return (f'contribution bound: max_contributions_per_step='
                    f'{bound.max_contributions_per_step} reached for this key and step')
        if bound.max_total_contributions is not None and \
                self.total >= bound.max_total_contributions:
            return _total_reason(bound)
        return None

    def _settle_key(self, entry: _Key) -> None:
        """Moves released steps to ``dead`` and marks the key full when no record of it can
        be kept any more (S steps used, each live one at m)."""
        live = entry.live
        if live is None:
            return
        if self._released >= 0:     # steps start at 0: nothing to fold before one is released
            for step in [s for s in live if s <= self._released]:
                del live[step]
                entry.dead += 1
                entry.last = max(entry.last, step)
        bound = self._bound
        if self._keep_steps and live:
            return      # its live steps stay known (``counted``); full once they are released
        if entry.dead + len(live) >= bound.max_steps_per_unit and \
                min(live.values(), default=bound.max_contributions_per_step) >= \
                bound.max_contributions_per_step:
            entry.dead, entry.live = bound.max_steps_per_unit, None

    def holds(self, key) -> bool:
        """Whether the unit already kept a record of ``key`` (exact with ``keep_keys``)."""
        return key in self.keys

    def counted(self, key, step: int) -> bool:
        """Whether the unit already kept a record of ``key`` in ``step`` (a step not yet
        released; exact with ``keep_steps``)."""
        entry = self.keys.get(key)
        return entry is not None and entry.live is not None and step in entry.live

    def active_steps(self, key) -> Tuple[int, ...]:
        """The kept steps of ``key`` a new step can overlap in a window: its live steps and
        its latest released one (with ``keep_last``; none once the key is full)."""
        entry = self.keys.get(key)
        if entry is None or entry.live is None:
            return ()
        return tuple(entry.live) + ((entry.last,) if entry.last >= 0 else ())

    def _settle_unit(self) -> None:
        bound = self._bound
        if self.exhausted is not None or self._keep_keys:
            return
        if bound.max_total_contributions is not None and \
                self.total >= bound.max_total_contributions:
            self.exhausted = EXHAUSTED_TOTAL
        elif len(self.keys) >= bound.max_keys_per_unit and \
                all(e.live is None for e in self.keys.values()):
            self.exhausted = EXHAUSTED_KEYS

    def _settle(self) -> None:
        for entry in self.keys.values():
            self._settle_key(entry)
        self._settle_unit()

    def record(self):
        """The compact record to store (see the module docstring)."""
        if self.exhausted is not None:
            return self.exhausted
        entries = []
        for key, entry in self.keys.items():
            if entry.live is None:
                entries.append((key,))
            else:
                flat = [key, entry.dead] + ([entry.last] if self._keep_last else [])
                for step, n in entry.live.items():
                    flat += (step, n)
                entries.append(tuple(flat))
        return (self.total,) + tuple(entries)


def keys_reason(bound: UserLevel) -> str:
    """The dead-letter reason of a record of a new key when the unit holds K keys."""
    return (f'contribution bound: unit already contributed to max_keys_per_unit='
            f'{bound.max_keys_per_unit} keys')


def held_keys_if_full(bound: UserLevel, record) -> Optional[Tuple]:
    """The keys of a stored ``record`` when, without decoding it, ``UnitUsage.decode(bound,
    record, released_through)`` (for ANY ``released_through``, without ``keep_keys`` /
    ``keep_steps``) is known to answer every record of a key NOT in them, for a step after
    ``released_through``, with ``keys_reason`` and no change to the usage; else None.

    Why that is exact: such a record is over K whenever the decoded usage is not exhausted and
    holds ≥ K keys (``UnitUsage._reason``: the exhausted checks, then the late check, then the
    K check; nothing is changed for a record with a reason). The record holds ≥ K key entries
    (one per key); C is not reached (its ``total`` is below C: ``_settle_unit`` then does not
    mark ``EXHAUSTED_TOTAL``); and one key entry that is not full has used fewer than S steps
    (``dead`` + live steps, a number that folding released steps into ``dead`` keeps), so
    ``_settle_key`` cannot mark it full whatever is released, and ``_settle_unit`` cannot mark
    ``EXHAUSTED_KEYS`` (it needs every key full). The late check (``step <=
    released_through``) is the caller's."""
    if isinstance(record, int) or len(record) <= bound.max_keys_per_unit:
        return None     # exhausted, new, or fewer than K keys
    total = bound.max_total_contributions
    if total is not None and record[0] >= total:
        return None
    s = bound.max_steps_per_unit
    for entry in record[1:]:
        if len(entry) > 1 and entry[1] + (len(entry) - 2) // 2 < s:
            return tuple(entry[0] for entry in record[1:])
    return None


def _total_reason(bound: UserLevel) -> str:
    return (f'contribution bound: unit already contributed '
            f'max_total_contributions={bound.max_total_contributions} records')


def compact_record(bound: UserLevel, record, released_through: int):
    """What a stored record becomes once ``released_through`` is known, when it is next
    rewritten: every step ≤ ``released_through`` moved to its key's ``dead`` count, full keys
    and used-up units marked."""
    return UnitUsage.decode(bound, record, released_through).record()


def shard_capacity(bound: UserLevel) -> Optional[int]:
    """Units one shard admits: ⌈max_units / UNIT_SHARDS⌉, or None without a cap."""
    if bound.max_units is None:
        return None
    return math.ceil(bound.max_units / UNIT_SHARDS)


def unit_cap_reason(bound: UserLevel) -> str:
    """The dead-letter reason of a record of a unit its full shard did not admit."""
    return (f'unit cap: shard full (max_units={bound.max_units}: at most '
            f'{shard_capacity(bound)} units in each of the {UNIT_SHARDS} unit shards; '
            f'this unit arrived after its shard was full)')
