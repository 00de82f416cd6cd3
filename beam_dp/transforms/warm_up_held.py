"""The bounding stage of ``WarmUpContinualCountPerKey(warm_up_release='held')``: records held
until the bounds are chosen, capped per unit, then bounded at the chosen bounds. The privacy
argument (the cap, the composition) is in ``beam_dp.drivers.warm_up`` (items 4 and 5).

Wiring (under the transform's 'BoundContributions'; labels as ``BoundContributionsAtRunTime``'s,
part of the update contract):

  every record (unit, (key id, stream step, payload, text))
    | 'GroupByUnitInBundle'
    | 'MergeBounds'            + the chosen bounds, one ``(shard, WarmUpBounds)`` per unit shard
    | 'BoundPerUnit'           ``_HeldBoundsFn``: before the bounds, each unit's records capped
                               at ``WarmUpPlan.hold_cap`` (usage in 'hold_usage') and held in
                               'held_units' (over the cap: dead letter, stage 'HoldWarmUp');
                               at the bounds, the held records bounded at them in arrival order
                               and emitted; after, as ``BoundContributionsAtRunTime``
    | 'MergeBoundingDeadLetters'
"""

from typing import Any, Optional, Tuple

import apache_beam as beam
from apache_beam.transforms.userstate import BagStateSpec

from beam_dp.drivers.bounding import UnitUsage
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.warm_up import WarmUpBounds
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.contribution_bounding import BoundContributionsAtRunTime
from beam_dp.transforms.contribution_bounding import _add_table
from beam_dp.transforms.contribution_bounding import _BoundContributionsFn
from beam_dp.transforms.contribution_bounding import _input_record
from beam_dp.transforms.contribution_bounding import _latest
from beam_dp.transforms.contribution_bounding import _RunTimeBoundsFn
from beam_dp.transforms.contribution_bounding import _UnitTable
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.state_types import STATE_CODER

__all__ = ['HeldBoundContributions', 'HOLD_STAGE']

#: The dead-letter stage of a record over the hold cap.
HOLD_STAGE = 'HoldWarmUp'


class _HeldBoundsFn(_RunTimeBoundsFn):
    """``_RunTimeBoundsFn`` whose held records are capped per unit: before the shard's bounds
    arrive each unit's records are offered to its usage at ``cap`` (the compact usage record
    of ``beam_dp.drivers.bounding``, in the bag 'hold_usage' as deltas of ``_UnitTable``s,
    compacted at ``MAX_DELTAS``); the kept ones join 'held_units', the others are
    dead-lettered (stage 'HoldWarmUp'). When the bounds arrive 'hold_usage' is cleared and the
    held records are bounded at the bounds from an empty usage (``_RunTimeBoundsFn``), which
    is what is counted. State: at most min(C, K·S·m) of ``cap`` held records per unit plus its
    usage record, until the bounds arrive; then ``BoundContributions``' state."""

    HOLD = BagStateSpec('hold_usage', STATE_CODER)

    def __init__(self, default: UserLevel, transform_label: str, clock: Optional[StepClock],
                 cap: WarmUpBounds):
        super().__init__(default, transform_label, clock)
        self._cap = WarmUpBounds(*cap).user_level(default.unit_fn)

    def process(self, element, kept_state=beam.DoFn.StateParam(_BoundContributionsFn.KEPT),
                released_state=beam.DoFn.StateParam(_BoundContributionsFn.RELEASED),
                released_timer=beam.DoFn.TimerParam(_BoundContributionsFn.RELEASED_TIMER),
                end_timer=beam.DoFn.TimerParam(_BoundContributionsFn.END_TIMER),
                bounds_state=beam.DoFn.StateParam(_RunTimeBoundsFn.BOUNDS),
                held_state=beam.DoFn.StateParam(_RunTimeBoundsFn.HELD),
                hold_state=beam.DoFn.StateParam(HOLD)):
        _, units = element
        waiting = bounds_state.read() is None
        if waiting and isinstance(units, WarmUpBounds):
            hold_state.clear()          # the cap's usage: the bounds' usage starts empty
        elif waiting and units:
            held = yield from self._cap_units(units, hold_state)
            if held:
                held_state.add(held)
            return
        yield from super().process(element, kept_state, released_state, released_timer,
                                   end_timer, bounds_state, held_state)

    def _cap_units(self, units, hold_state):
        """Offers each unit's records to its usage at the cap; yields the dead letters of the
        records over it; returns the groups held, as 'held_units' stores them."""
        tables = list(hold_state.read())
        delta = _UnitTable()
        held = []
        for encoded, unit_id, records in units:
            record = delta.get(encoded)
            usage = UnitUsage.decode(self._cap, _latest(tables, encoded) if record is None
                                     else record)
            kept = []
            for item, micros in records:
                reason, _ = usage.offer(item[0], item[1])
                if reason is None:
                    kept.append((item, micros))
                else:
                    yield dead_letter(self._label, HOLD_STAGE, f'warm-up hold cap: {reason}',
                                      _input_record(unit_id, item), micros)
            if kept:
                delta[encoded] = usage.record()
                held.append((encoded, None, tuple(kept)))
        if delta:
            _add_table(hold_state, tables, delta)
        return tuple(held)


@beam.typehints.with_input_types(Tuple[Any, Tuple[Any, ...]])
class HeldBoundContributions(BoundContributionsAtRunTime):
    """``BoundContributionsAtRunTime`` with the hold cap (``_HeldBoundsFn``): ``bounds`` is a
    PCollection of ``(unit shard, WarmUpBounds)``, one per shard; ``cap`` the public
    ``WarmUpPlan.hold_cap``; input, output and ``clock`` as ``BoundContributions``."""

    def __init__(self, default: UserLevel, bounds: beam.PCollection, cap: WarmUpBounds,
                 transform_label: str, clock: Optional[StepClock] = None):
        super().__init__(default, bounds, transform_label, clock)
        self._cap = cap

    def _bounds_fn(self, clock: Optional[StepClock]) -> beam.DoFn:
        return _HeldBoundsFn(self._default, self._transform_label, clock, self._cap)
