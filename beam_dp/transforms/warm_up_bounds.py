"""The warm-up stages of ``WarmUpContinualCountPerKey`` (``beam_dp.transforms.warm_up`` has the
wiring; ``beam_dp.drivers.warm_up`` the privacy argument): the split of the stream at the
warm-up, the warm-up's per-unit statistics and the choice of the bounds. State and timer names
('warm_up_cells', 'warm_up_closed', 'warm_up_end', 'warm_up_counts', 'bounds_chosen') are part
of the Dataflow update contract."""

import typing
from typing import Sequence

import apache_beam as beam
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.utils.timestamp import Timestamp

from beam_dp.drivers.bounding import UNIT_SHARDS
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.io.bounds import BoundsRecommendation
from beam_dp.transforms import release_loop
from beam_dp.transforms.contribution_bounding import _GroupByUnitInBundleFn
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import RecordText
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.state_types import STATE_CODER

UNIT_BOUNDS = 'unit_bounds'
RELEASE_BOUNDS = 'release_bounds'
WARM_UP = 'warm_up'



def seeds(pipeline, keys: Sequence[int], micros: int, name: str):
    """'<name>Seeds' + '<name>SeedAt': one ``(key, None)`` per key at ``micros``."""
    return (pipeline
            | f'{name}Seeds' >> beam.Create(list(keys))
            | f'{name}SeedAt' >> beam.Map(
                lambda key: beam.window.TimestampedValue((key, None), Timestamp(micros=micros))
            ).with_output_types(typing.Tuple[int, typing.Any]))


class SplitWarmUpFn(beam.DoFn):
    """(unit, (key id, step, payload, text)): steps < W to the warm-up output, the others to
    the release with their step on the release clock (step − W). With ``held`` (the release
    clock is the stream's) every record goes to the release unchanged, and the warm-up's also
    to the warm-up output."""

    def __init__(self, warm_up_steps: int, held: bool = False):
        self._w = warm_up_steps
        self._held = held

    def process(self, element):
        unit, item = element
        step = item[1]
        if step < self._w:
            yield beam.pvalue.TaggedOutput(WARM_UP, element)
            if self._held:
                yield element
        elif self._held:
            yield element
        else:
            yield unit, (item[0], step - self._w) + tuple(item[2:])


_CELLS = BagStateSpec('warm_up_cells', STATE_CODER)
#: The warm-up's close: the shared watermark gate (``release_loop.watermark_gate``) with the
#: cell 'warm_up_closed' (False: open, True: closed), the timer 'warm_up_end' and no
#: end-of-input timer; its firing works on the bag 'warm_up_cells'.
_WarmUpGate = release_loop.watermark_gate('warm_up_closed', 'warm_up_end', None,
                                          fired_state=_CELLS)


class WarmUpStatisticsFn(_WarmUpGate):
    """Keyed by unit shard; elements ``(shard, ((unit key, unit, ((item, micros), ...)),
    ...))`` (``_GroupByUnitInBundleFn``) or the shard's seed. State: a bag of tables
    {unit key: {(key id, step): records}} (one per call; exact, never output) and the gate's
    cell 'warm_up_closed' (None: not started, False: open, True: closed) and timer
    'warm_up_end' at the warm-up's end (``release_loop.CloseAt(WarmUpPlan.warm_up_end_micros)``,
    armed at the shard's first element: never by a record's content). At the firing: per unit
    its statistics (``WarmUpPlan.statistics``), their bucket counts emitted as ``(0, counts)``
    at the timer's time, the tables cleared. A warm-up record that arrives after its shard
    closed is dead-lettered as late (the release time of step W−1 passed): a function of its
    own arrival and the public schedule."""

    CELLS = _CELLS
    CLOSED = _WarmUpGate.RELEASED
    TIMER = _WarmUpGate.RELEASED_TIMER

    def __init__(self, plan: WarmUpPlan, label: str):
        self._plan = plan
        self._label = label
        self._schedule = release_loop.CloseAt(plan.warm_up_end_micros)

    def process(self, element, cells=beam.DoFn.StateParam(_CELLS),
                closed=beam.DoFn.StateParam(_WarmUpGate.RELEASED),
                timer=beam.DoFn.TimerParam(_WarmUpGate.RELEASED_TIMER)):
        _, units = element
        if self._gate(closed, timer, None):     # closed: the warm-up's end passed
            clock = self._plan.clock
            for _, _, records in units or ():
                for item, micros in records:
                    yield dead_letter(self._label, 'WarmUpStatistics',
                                      clock.late_reason(item[1]), RecordText(item[3]), micros)
            return
        if not units:
            return
        table = {}
        for encoded, _, records in units:
            unit_cells = table.setdefault(encoded, {})
            for item, _ in records:
                cell = (item[0], item[1])
                unit_cells[cell] = unit_cells.get(cell, 0) + 1
        cells.add(table)

    def _fired(self, key, cells):
        """The warm-up's end (the gate's one firing): the shard's bucket counts."""
        merged = {}
        for table in cells.read():
            for encoded, unit_cells in table.items():
                into = merged.setdefault(encoded, {})
                for cell, n in unit_cells.items():
                    into[cell] = into.get(cell, 0) + n
        cells.clear()
        plan = self._plan
        counts = plan.bucket_counts([plan.statistics(c) for c in merged.values()])
        return [(0, (key, {name: counts[name] for name in STATISTICS}))]


class ChooseBoundsFn(beam.DoFn):
    """One key (0): each unit shard's bucket counts ``(shard, counts)``, emitted once by its
    'warm_up_end' timer, in the bag 'warm_up_counts'; when the counts of all
    ``UNIT_SHARDS`` shards are in (a public number: every shard is seeded, and its timer
    fires once) the noisy histograms at (noise label, 'warm_up_histograms', statistic, ...)
    and the bounds (``WarmUpPlan.choose``): the recommendation on the main output,
    ``(shard, bounds)`` to every unit shard and every release shard, then 'bounds_chosen'.
    Waiting for all shards rather than for a watermark: the choice never misses a shard's
    counts, whatever the runner's watermark holds of timer outputs (the DirectRunner holds
    none)."""

    COUNTS = BagStateSpec('warm_up_counts', STATE_CODER)
    CHOSEN = ReadModifyWriteStateSpec('bounds_chosen', STATE_CODER)

    def __init__(self, plan: WarmUpPlan, rng, noise_label: str, release_shards: int):
        self._plan = plan
        self._rng = rng
        self._noise_label = noise_label
        self._release_shards = release_shards

    def process(self, element, counts=beam.DoFn.StateParam(COUNTS),
                chosen=beam.DoFn.StateParam(CHOSEN)):
        _, payload = element
        if chosen.read():
            return
        counts.add(payload)
        parts = {shard: part for shard, part in counts.read()}
        if len(parts) < UNIT_SHARDS:
            return
        plan = self._plan
        total = None
        for part in parts.values():
            total = plan.add_counts(total, part)
        counts.clear()
        chosen.write(True)
        rec, bounds = plan.choose(total, self._rng.derive(self._noise_label,
                                                          'warm_up_histograms'))
        yield rec
        for shard in range(UNIT_SHARDS):
            yield beam.pvalue.TaggedOutput(UNIT_BOUNDS, (shard, bounds))
        for shard in range(self._release_shards):
            yield beam.pvalue.TaggedOutput(RELEASE_BOUNDS, (shard, bounds))


def stream_step(offset: int):
    def restore(release):
        return release._replace(step=release.step + offset)
    return restore


def choose_bounds(warm_up, plan: WarmUpPlan, label: str, rng, noise_label: str):
    """The warm-up's stages on the transform's warm-up records (labels at the transform's
    level): 'GroupWarmUpByUnit', 'WarmUpShardSeeds' + 'WarmUpShardSeedAt', 'MergeWarmUpSeeds',
    'WarmUpStatistics', 'ChooseBounds'. Returns their outputs (grouped warm-up records and
    their dead letters, the statistics' dead letters, the recommendation and the bounds)."""
    warm = warm_up | 'GroupWarmUpByUnit' >> beam.ParDo(
        _GroupByUnitInBundleFn(label)).with_output_types(
            typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='grouped')
    start = plan.clock.start_micros
    shard_input = ((warm.grouped, seeds(warm_up.pipeline, range(UNIT_SHARDS), start,
                                        'WarmUpShard'))
                   | 'MergeWarmUpSeeds' >> beam.Flatten().with_output_types(
                       typing.Tuple[int, typing.Any]))
    stats = shard_input | 'WarmUpStatistics' >> beam.ParDo(
        WarmUpStatisticsFn(plan, label)).with_output_types(
            typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='counts')
    chosen = stats.counts | 'ChooseBounds' >> beam.ParDo(
        ChooseBoundsFn(plan, rng, noise_label, plan.layout.num_shards)).with_outputs(
            UNIT_BOUNDS, RELEASE_BOUNDS, main='recommendation')
    chosen.recommendation.element_type = BoundsRecommendation
    return warm, stats, chosen
