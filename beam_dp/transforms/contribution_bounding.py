"""Contribution bounding per privacy unit (user-level privacy).

``BoundContributions`` keeps, for every privacy unit, at most ``max_keys_per_unit`` keys (the
first ones seen), at most ``max_steps_per_unit`` distinct steps per (unit, key) and at most
``max_contributions_per_step`` records per (unit, key, step). Which records are kept depends only
on the unit's own records (and their arrival order), so the bound holds whatever the other units
do: that is all the sensitivity analysis needs. Records over a bound go to the dead-letter output
with the bound named (they are not errors, but nothing is dropped silently).

Event-level privacy needs no bounding: each record is its own unit.
"""

import typing
from typing import Any, Tuple

import apache_beam as beam
from apache_beam.coders import PickleCoder
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec

from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms._common import DEAD_LETTER
from beam_dp.transforms._common import dead_letter

__all__ = [
    'BoundContributions',
]

K = typing.TypeVar('K')


class _BoundContributionsFn(beam.DoFn):
    """Keyed by unit id; state: {key: {step: records kept}} (at most K·S entries per unit)."""

    BOUNDS_STATE = ReadModifyWriteStateSpec('bounds', PickleCoder())

    def __init__(self, unit: UserLevel, transform_label: str):
        self._unit = unit
        self._label = transform_label

    def process(self, element, bounds_state=beam.DoFn.StateParam(BOUNDS_STATE),
                timestamp=beam.DoFn.TimestampParam):
        unit_id, (key, step, payload) = element
        kept = bounds_state.read() or {}
        steps = kept.get(key)
        reason = None
        if steps is None and len(kept) >= self._unit.max_keys_per_unit:
            reason = f'contribution bound: unit already contributed to max_keys_per_unit=' \
                     f'{self._unit.max_keys_per_unit} keys'
        elif steps is not None and step not in steps and \
                len(steps) >= self._unit.max_steps_per_unit:
            reason = f'contribution bound: unit already contributed to max_steps_per_unit=' \
                     f'{self._unit.max_steps_per_unit} steps of this key'
        elif steps is not None and steps.get(step, 0) >= self._unit.max_contributions_per_step:
            reason = f'contribution bound: max_contributions_per_step=' \
                     f'{self._unit.max_contributions_per_step} reached for this key and step'
        if reason is not None:
            yield dead_letter(self._label, 'BoundContributions', reason, element,
                              timestamp.micros)
            return
        steps = dict(steps or {})
        steps[step] = steps.get(step, 0) + 1
        kept = dict(kept)
        kept[key] = steps
        bounds_state.write(kept)
        yield key, step, payload


@beam.typehints.with_input_types(Tuple[Any, Tuple[Any, int, Any]])
class BoundContributions(beam.PTransform):
    """Bounds each privacy unit's contributions before aggregation (user-level privacy).

    Privacy unit: the unit id of ``privacy_unit`` (user-level; add/remove of all of a unit's
    records). After this transform one unit contributes to ≤ K keys, ≤ S steps per key and
    ≤ m records per (key, step).

    Input: ``(unit_id, (key, step, payload))``. Output: a ``DoOutputsTuple`` with the kept
    ``(key, step, payload)`` as the main output and ``DeadLetter`` records for everything over a
    bound under the tag ``dead_letter``.

    Not guaranteed: which of a unit's records are kept when it exceeds a bound (the first ones
    to arrive, which on a streaming runner is not event-time order).
    """

    def __init__(self, privacy_unit: UserLevel, transform_label: str = 'BoundContributions'):
        super().__init__()
        if not isinstance(privacy_unit, UserLevel):
            raise TypeError(f'BoundContributions: privacy_unit must be UserLevel(...), got '
                            f'{privacy_unit!r}.')
        self._unit = privacy_unit
        self._transform_label = transform_label

    def expand(self, pcoll):
        return pcoll | 'BoundPerUnit' >> beam.ParDo(
            _BoundContributionsFn(self._unit, self._transform_label)).with_outputs(
                DEAD_LETTER, main='kept')
