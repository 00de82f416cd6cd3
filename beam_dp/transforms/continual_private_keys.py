"""The private-keys half of the keyed continual transforms (``keys=PrivateKeys(...)``).

Wiring, after 'ExtractAndValidate' (+ 'BoundContributions') of ``continual`` (labels are part of
the update contract):

  valid
    | 'MarkNewUnits'        (user-level only) the flag of a unit's first kept record for a key,
                            set by 'BoundContributions' (mark_new_keys=True; stateless here)
    | 'DropUnit'            event level: 'ExtractAndValidate' already summed its bundle per
                            (shard, step, key) (``continual_extract``), this drops the unit
    | 'PreAggregate'        bundle-local sums per (shard, step, key): per-bin units, new units
                            (event level: the partials of one (shard, step) merged into one)
    + 'ShardSeeds'          one element per shard at ``start``
    | 'ReleaseNoisyValues'  keyed by shard: candidate keys (selection state) and selected keys
                            (their counters, one vector counter per selection step) in one cell;
                            every candidate's selection has the law of a test on every step, but
                            a candidate is visited only at its data steps, the EAGER_STEPS after
                            one and its drawn-ahead test (``PrivateKeysShard._advance``)

The state machine is ``beam_dp.drivers.private_keys.PrivateKeysShard``.
"""

import collections
import operator
from typing import Optional

import apache_beam as beam
from apache_beam.coders import BooleanCoder
from apache_beam.coders import PickleCoder
from apache_beam.runners.worker.statecache import CacheAware
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.transforms.userstate import TimerSpec
from apache_beam.transforms.userstate import on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp import noise
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import PrivateKeysShard
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import shell
from beam_dp.transforms.shell import DEAD_LETTER

__all__ = [
    'release_private_keys',
]


def _mark_new_units(element):
    """'MarkNewUnits': ``BoundContributions(mark_new_keys=True)`` flagged each unit's first kept
    record of a key; that flag replaces the unit in the payload (the unit is dropped here)."""
    key, step, (shard, _, bin_index, units, _), first = element
    return key, step, (shard, key, bin_index, units, first)


class _PreAggregateFn(beam.DoFn):
    """Bundle-local sums per (shard, step, key): per-bin units and new distinct units."""

    def __init__(self, driver: KeyedReleaseDriver):
        self._clock = driver.clock
        self._bins = driver.bins_per_key

    def start_bundle(self):
        self._sums = collections.defaultdict(dict)

    def process(self, element):
        _, step, (shard, key, bin_index, units, new_units) = element
        per_key = self._sums[(shard, step)]
        entry = per_key.get(key)
        if entry is None:
            entry = per_key[key] = [[0] * self._bins, 0]
        entry[0][bin_index] += units
        entry[1] += new_units

    def finish_bundle(self):
        for (shard, step), per_key in self._sums.items():
            payload = {k: (tuple(v[0]), v[1]) for k, v in per_key.items()}
            yield WindowedValue((shard, (step, payload)),
                                Timestamp(micros=self._clock.step_end(step) - 1),
                                [GlobalWindow()])
        self._sums.clear()


class _MergePrivatePartialsFn(beam.DoFn):
    """'PreAggregate' at event level: the bundle's partials ``(shard, (step, {key: (per-bin
    units, new units)}))`` of one (shard, step) as one (usually there is one already)."""

    def __init__(self, driver: KeyedReleaseDriver):
        self._clock = driver.clock

    def start_bundle(self):
        self._parts = collections.defaultdict(list)

    def process(self, element):
        shard, (step, payload) = element
        self._parts[(shard, step)].append(payload)

    def finish_bundle(self):
        for (shard, step), parts in self._parts.items():
            payload = parts[0] if len(parts) == 1 else PrivateKeysShard.merge(parts)
            yield WindowedValue((shard, (step, payload)),
                                Timestamp(micros=self._clock.step_end(step) - 1),
                                [GlobalWindow()])
        self._parts.clear()


class _CachedState(CacheAware):
    """The ``PrivateKeysShardState`` as held in the state cell: Beam's state cache measures the
    deep size of every value it caches by walking all its objects (every candidate key's
    selection state and totals: most of the stage's time); this reports an estimate from the
    number of keys instead. Cells written before it hold the bare state (read both)."""

    __slots__ = ('state',)

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return type(self), (self.state,)

    def get_referents_for_cache(self):
        return []

    def __sizeof__(self):
        return 256 + 400 * (len(self.state.candidates) + len(self.state.selected))


class _CachedPayload(_CachedState):
    """A pending ``(step, {key: contribution})`` in the bag, sized from its number of keys
    (walking every pending dict was most of the cache's sizing time). Bags written before it
    hold bare payloads (read both)."""

    __slots__ = ()

    def __sizeof__(self):
        return 128 + 200 * len(self.state[1])


def _read_state(cell):
    value = cell.read()
    return value.state if isinstance(value, _CachedState) else value


def _read_pending(bag):
    return [item.state if isinstance(item, _CachedState) else item for item in bag.read()]


class _ReleaseFn(shell.DriverFn):
    """Keyed by shard: the ``PrivateKeysShardState`` in one cell, pending contributions in a
    bag (the candidate dicts are too large to rewrite per element; payloads of released steps
    may stay in it until it is rewritten, and are skipped), the end-of-input flag."""

    SHARD_STATE = ReadModifyWriteStateSpec('shard_state', PickleCoder())
    PENDING = BagStateSpec('pending', PickleCoder())
    FINISHED = ReadModifyWriteStateSpec('finished', BooleanCoder())
    RELEASE_TIMER = TimerSpec('release', TimeDomain.WATERMARK)
    END_TIMER = TimerSpec('end_of_input', TimeDomain.WATERMARK)

    def setup(self):
        super().setup()
        self._shard = self._driver.private_shard
        self._metadata = self._driver.release_metadata()
        self._histogram = self._driver.metric == 'histogram'

    def process(self, element, shard_state=beam.DoFn.StateParam(SHARD_STATE),
                pending=beam.DoFn.StateParam(PENDING),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER),
                end_timer=beam.DoFn.TimerParam(END_TIMER)):
        _, payload = element
        state = _read_state(shard_state)
        if state is None:
            state = self._shard.init_state()
            shard_state.write(_CachedState(state))
            shell.start_timers(self._clock, release_timer, end_timer)
        if payload is None:
            return
        step, per_key = payload
        if step < state.next_step:
            for key, (values, _) in sorted(per_key.items()):
                yield shell.late_dead_letter(self._label, 'ReleaseNoisyValues', self._clock, step,
                                             {'key': key, 'step': step, 'value': sum(values)})
            return
        pending.add(_CachedPayload(payload))

    @on_timer(RELEASE_TIMER)
    def release(self, shard_state=beam.DoFn.StateParam(SHARD_STATE),
                pending=beam.DoFn.StateParam(PENDING), finished=beam.DoFn.StateParam(FINISHED),
                release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        if finished.read():
            return
        state = _read_state(shard_state)
        step = state.next_step
        if not self._clock.is_released(step):
            return
        due, rest, dropped = [], [], 0
        for item in _read_pending(pending):
            if item[0] > step:
                rest.append(item)
            else:               # this step's, or a released step's left in the bag (below)
                dropped += 1
                if item[0] == step:
                    due.append(item)
        if dropped > len(rest):
            # Rewriting the bag re-encodes every later payload: done only when more items
            # leave it than stay, so each payload is written O(1) times amortised (rewriting
            # at every step was quadratic in the pending steps). Items of released steps stay
            # until then and are skipped: nothing of a released step is ever added (late).
            pending.clear()
            for item in rest:
                pending.add(_CachedPayload(item))
        rows, new_state = self._shard.release_step(
            state, self._shard.merge(per_key for _, per_key in due), self._rng.derive(self._noise_label))
        shard_state.write(_CachedState(new_state))
        shell.next_release_time(self._clock, step, release_timer)
        yield from shell.releases(self._clock, step, rows, self._metadata, self._histogram)

    @on_timer(END_TIMER)
    def end_of_input(self, finished=beam.DoFn.StateParam(FINISHED),
                     release_timer=beam.DoFn.TimerParam(RELEASE_TIMER)):
        finished.write(True)
        release_timer.clear()


def release_private_keys(valid: beam.PCollection, driver: KeyedReleaseDriver, label: str,
                         rng: noise.RandomSource, noise_label: Optional[str] = None):
    """Applies the private-keys stages to the extracted (and bounded) records of the transform
    ``label`` (noise addressed by ``noise_label``, its full path); returns the 'ReleaseNoisyValues' outputs (``releases`` and ``DEAD_LETTER``)."""
    if isinstance(driver.privacy_unit, UserLevel):
        # The first kept record of a unit for a key, flagged by 'BoundContributions' (which
        # holds every key a unit kept): the selection counts distinct units.
        valid = valid | 'MarkNewUnits' >> beam.Map(_mark_new_units)
        partials = valid | 'PreAggregate' >> beam.ParDo(_PreAggregateFn(driver))
    else:
        # Event level: 'ExtractAndValidate' summed its bundle (every record is a new unit).
        partials = (valid
                    | 'DropUnit' >> beam.Map(operator.itemgetter(1))
                    | 'PreAggregate' >> beam.ParDo(_MergePrivatePartialsFn(driver)))
    seeds = shell.seeds_at_start(valid.pipeline, range(driver.num_shards),
                                 driver.clock.start_micros)
    return shell.merge_seeds(partials, seeds) | 'ReleaseNoisyValues' >> beam.ParDo(
        _ReleaseFn(driver, label, rng, noise_label)).with_outputs(DEAD_LETTER, main='releases')
