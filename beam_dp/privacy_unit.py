"""Privacy units: what one neighbouring change is, and the sensitivities that follow.

* ``EventLevel()``: every record is its own privacy unit. Neighbouring streams differ by one
  record (add/remove). Nothing is bounded beyond clamping a record's value.
* ``UserLevel(unit_fn, max_keys_per_unit=K, max_contributions_per_step=m, max_steps_per_unit=S)``:
  all records of one unit id (a rider, a user, a device) form the unit; neighbouring streams
  differ by all records of one unit. Before aggregation ``BoundContributions`` keeps at most K
  keys per unit, at most S steps per (unit, key) and at most m records per (unit, key, step), so
  over an unbounded horizon one unit changes one key's stream by at most m·S records. An
  unbounded horizon needs the finite S: without it a user-level guarantee cannot hold.
  Optionally ``max_total_contributions=C`` also bounds a unit's records across all keys and
  steps (exactly, over the unbounded horizon), and ``max_units=N`` caps the number of units the
  bounding state holds: then one neighbouring change moves the kept records of up to TWO units
  (the unit itself and one unit it displaces), and every calibration below uses twice one
  unit's bounds (``UserLevel`` explains why, ``neighbour_units``).

``sensitivity(kind, value_bound)`` turns the bounds into the L1 and L2 sensitivities of the whole
per-key input stream that the tree counters are calibrated to (see ``BinaryTreeCounter``):
per key a unit moves the stream by at most c = m·S·B in L1 (B = 1 for counts, the clamp bound in
grid units for sums); over its ≤ K keys that is K·c in L1 and √K·c in L2. With C the L1 is
min(K·c, C·B) and the L2 the largest norm of ≤ K per-key totals, each ≤ c, summing to ≤ C·B
(``capped_l2``: ⌊C·B/c⌋ keys at c and the rest in one more) — the tighter of the two bounds.
With ``max_units`` both are doubled (the triangle inequality over the two units' changes).
"""

import dataclasses
from typing import Any, Callable, Optional, Tuple

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError
from beam_dp.fields import Field
from beam_dp.fields import check_field_name
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.participation import capped_l2

__all__ = [
    'EventLevel',
    'PrivacyUnit',
    'UserLevel',
]


class PrivacyUnit:
    """Base class of the privacy-unit descriptions."""

    name: str = ''

    def per_key_total(self, value_bound: float) -> float:
        raise NotImplementedError

    @property
    def max_keys(self) -> int:
        """Keys whose input stream one neighbouring change can move (what private key
        selection is calibrated to)."""
        raise NotImplementedError

    def total_bound(self, value_bound: float) -> float:
        """L1 of everything one unit contributes (all keys and steps)."""
        return self.max_keys * self.per_key_total(value_bound)

    def sensitivity(self, value_bound: float = 1.0) -> Tuple[float, float]:
        """(L1, L2) sensitivity of the per-key input streams, across all keys."""
        c = self.per_key_total(value_bound)
        total = self.total_bound(value_bound)
        return total, capped_l2(total, c, self.max_keys)

    def participation(self, value_bound: float) -> Participation:
        """One unit's contribution pattern for the multi-participation calibration of the
        factorization counters: ≤ K keys, ≤ S steps per key, ≤ m·B per key and step."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class EventLevel(PrivacyUnit):
    """Event-level privacy: neighbouring streams differ in one record."""
    name = 'event'

    def per_key_total(self, value_bound: float) -> float:
        return value_bound

    @property
    def max_keys(self) -> int:
        return 1

    def participation(self, value_bound: float) -> Participation:
        return Participation(1, 1, value_bound, value_bound)

    def describe(self) -> str:
        return 'event-level (one record)'


@v.keyword_checked(hints={
    'privacy_id_fn': 'write unit_fn=<record → unit id>',
    'privacy_id_extractor': "write unit_fn=<record → unit id> (privacy_id_extractor is "
                            "PipelineDP's name)",
    'max_partitions_contributed': "write max_keys_per_unit=K (max_partitions_contributed is "
                                  "PipelineDP's name)",
    'max_contributions_per_partition': "write max_contributions_per_step=m (records per key "
                                       "and step; max_contributions_per_partition is "
                                       "PipelineDP's name)",
    'max_contributions': "write max_total_contributions=C (max_contributions is PipelineDP's "
                         'name)',
    'K': 'write max_keys_per_unit=K', 'm': 'write max_contributions_per_step=m',
    'S': 'write max_steps_per_unit=S', 'C': 'write max_total_contributions=C',
    'N': 'write max_units=N'})
@dataclasses.dataclass(frozen=True)
class UserLevel(PrivacyUnit):
    """User-level privacy: neighbouring streams differ in all records of one unit id.

    Args:
      unit_fn: record -> unit id (hashable; typically a string).
      privacy_unit_field: instead of ``unit_fn``: the name of the field (Beam Row /
        NamedTuple attribute, dict key) holding the unit id (``beam_dp.fields.Field``).
      max_keys_per_unit: K, keys one unit may contribute to (first K seen are kept).
      max_contributions_per_step: m, records per (unit, key, step) kept.
      max_steps_per_unit: S, distinct steps per (unit, key) kept over the whole horizon.
      max_total_contributions: C (optional), records per unit kept across all keys and steps
        over the whole horizon; the sensitivity is the tighter of K·m·S and C.
      max_units: N (optional, default None: no cap), the units the bounding state admits:
        each of the ``UNIT_SHARDS`` = 64 unit shards of 'BoundPerUnit' admits at most
        ⌈N/64⌉ distinct units (so at most 64·⌈N/64⌉ < N + 64 in all), first come in the
        shard's processing order; every record of a unit the shard has not admitted once it
        is full goes to the dead-letter output (``unit cap: shard full (max_units=N ...)``).
        The noise is then calibrated to TWO units (below): twice the noise, for a state of at
        most ⌈N/64⌉ unit records per shard.

    The unit cap and its privacy argument. A shard admits a unit at the first record of it
    that the shard processes (kept or not), while it holds fewer than ⌈N/64⌉ units; an
    admitted unit stays admitted (its record is what enforces S and C over the horizon), and
    a unit not admitted then is never admitted (a full shard stays full). So a shard's
    admitted set is its first ⌈N/64⌉ units in the order of their first records, and the
    records kept of an admitted unit are exactly those kept without a cap (they depend on
    its own records only). Take two streams that differ by one unit u's records, the relative
    order of every other record unchanged: only u's shard can differ; there, the order of
    the other units' first records is the same, with u inserted somewhere. If u is among the
    first ⌈N/64⌉ it is admitted and displaces at most one unit v — the last unit admitted
    without u — whose kept records are all dropped (dead-lettered); every other unit is
    admitted in both streams or in neither, with the same kept records. Neighbouring
    outputs therefore differ by u's kept records AND v's: two units, each within K, S, m, C.
    By the triangle inequality (‖Δu − Δv‖ ≤ ‖Δu‖ + ‖Δv‖ in every norm the calibrations use)
    the sensitivities are twice one unit's: ``neighbour_units`` = 2 doubles the L1 and L2
    (``sensitivity``), the per-step and total bounds of the multi-participation pattern
    (``participation``: BLT's bound is positively homogeneous in them, so exactly ×2) and
    the keys one change touches (``max_keys`` = 2K: the distinct-unit count of ≤ 2K keys
    moves by 1, for each key in one direction over the whole horizon, which is what private
    key selection is calibrated to).

    What the cap gives up: admission depends on the processing order, so once a shard is full
    a replay after a restore (a different order) may admit different units, and then the
    releases may differ from an uninterrupted run's; a displaced unit's records are all
    dead-lettered. With a clock, as for K, S, m and C, a record being late is a function of
    the record, the public schedule and the arrival order / watermark, never of other units'
    records: 'BoundPerUnit' learns that a step is released from its shard's own timer chain,
    seeded at launch and never armed by records (tested in
    ``tests/transforms/test_unit_cap.py`` and ``tests/transforms/test_bounding_lateness.py``).
    """
    unit_fn: Optional[Callable[[Any], Any]] = None
    max_keys_per_unit: int = 1
    max_contributions_per_step: int = 1
    max_steps_per_unit: Optional[int] = None
    max_total_contributions: Optional[int] = None
    max_units: Optional[int] = None
    privacy_unit_field: Optional[str] = None
    name = 'user'

    def __post_init__(self):
        owner = 'UserLevel'
        if self.privacy_unit_field is not None:
            already = (isinstance(self.unit_fn, Field)
                       and self.unit_fn == Field(self.privacy_unit_field))  # dataclasses.replace
            if self.unit_fn is not None and not already:
                raise InvalidParamsError(f'{owner}: give either unit_fn or privacy_unit_field, '
                                         f'not both.')
            check_field_name(owner, 'privacy_unit_field', self.privacy_unit_field)
            object.__setattr__(self, 'unit_fn', Field(self.privacy_unit_field))
        elif self.unit_fn is None:
            raise InvalidParamsError(f'{owner}: give unit_fn=<record → unit id> or '
                                     f'privacy_unit_field=<the field holding the unit id>.')
        if not callable(self.unit_fn):
            raise InvalidParamsError(f'{owner}: unit_fn must be callable, got {self.unit_fn!r}.')
        v.check_positive_int(owner, 'max_keys_per_unit', self.max_keys_per_unit)
        v.check_positive_int(owner, 'max_contributions_per_step', self.max_contributions_per_step)
        if self.max_steps_per_unit is None:
            raise InvalidParamsError(
                f'{owner}: max_steps_per_unit must be set: over an unbounded horizon a user-level '
                f'guarantee needs a bound on how many steps one unit contributes to, got None.')
        v.check_positive_int(owner, 'max_steps_per_unit', self.max_steps_per_unit)
        if self.max_total_contributions is not None:
            v.check_positive_int(owner, 'max_total_contributions', self.max_total_contributions)
        if self.max_units is not None:
            v.check_positive_int(owner, 'max_units', self.max_units)

    @property
    def neighbour_units(self) -> int:
        """Units whose kept records one neighbouring change moves: 1, or 2 with ``max_units``
        (the unit and the one it displaces, class docstring)."""
        return 1 if self.max_units is None else 2

    def per_key_total(self, value_bound: float) -> float:
        return self.max_contributions_per_step * self.max_steps_per_unit * value_bound

    @property
    def max_keys(self) -> int:
        return self.neighbour_units * self.max_keys_per_unit

    def _unit_total(self, value_bound: float) -> float:
        """L1 of one unit's kept records: min(K·m·S, C)·B."""
        total = self.max_keys_per_unit * self.per_key_total(value_bound)
        if self.max_total_contributions is None:
            return total
        return min(total, self.max_total_contributions * value_bound)

    def total_bound(self, value_bound: float) -> float:
        return self.neighbour_units * self._unit_total(value_bound)

    def sensitivity(self, value_bound: float = 1.0) -> Tuple[float, float]:
        total = self._unit_total(value_bound)
        l2 = capped_l2(total, self.per_key_total(value_bound), self.max_keys_per_unit)
        return self.neighbour_units * total, self.neighbour_units * l2

    def participation(self, value_bound: float) -> Participation:
        n = self.neighbour_units
        return Participation(self.max_keys_per_unit, self.max_steps_per_unit,
                             n * self.max_contributions_per_step * value_bound,
                             n * self._unit_total(value_bound))

    def describe(self) -> str:
        total = ('' if self.max_total_contributions is None
                 else f', C={self.max_total_contributions} in total')
        cap = ('' if self.max_units is None
               else f', at most N={self.max_units} units, calibrated to 2 units per change')
        return (f'user-level (K={self.max_keys_per_unit} keys, m={self.max_contributions_per_step}'
                f' per step, S={self.max_steps_per_unit} steps{total}{cap})')
