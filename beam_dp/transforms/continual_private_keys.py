"""The private-keys half of the keyed continual transforms (``keys=PrivateKeys(...)``).

Wiring, after 'ExtractAndValidate' (+ 'BoundContributions') of ``continual`` (labels are part of
the update contract):

  valid
    | 'MarkNewUnits'        (user-level only) the flag of a unit's first kept record for a key,
                            set by 'BoundContributions' (mark_new_keys=True; stateless here)
    | 'DropUnit'            event level: 'ExtractAndValidate' already summed its bundle per
                            (shard, step, key) (``continual_extract``), this drops the unit
    | 'PreAggregate'        bundle-local sums per (shard, step, key): per-bin units, new units
                            (event level: the partials of one (shard, step) merged into one,
                            with the rendered records they sum when a partial may be late:
                            a late one is dead-lettered record by record, ``continual``)
    + 'ShardSeeds'          one element per shard at ``start``
    | 'ReleaseNoisyValues'  the release loop (``release_loop.buffered_loop``) keyed by shard,
                            running ``drivers.keyed.PrivateShardLoop``: candidate keys (selection state) and selected keys
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
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp import noise
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.keyed import PrivatePartial
from beam_dp.drivers.keyed import add_units
from beam_dp.drivers.private_keys import PrivateKeysShard
from beam_dp.drivers.private_keys import ShardKeys
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.continual_extract import BundleMergeFn
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
        add_units(entry[0], bin_index, units)
        entry[1] += new_units

    def finish_bundle(self):
        for (shard, step), per_key in self._sums.items():
            payload = {k: (tuple(v[0]), v[1]) for k, v in per_key.items()}
            yield WindowedValue((shard, PrivatePartial(step, payload)),
                                Timestamp(micros=self._clock.step_end(step) - 1),
                                [GlobalWindow()])
        self._sums.clear()


class _MergePrivatePartialsFn(BundleMergeFn):
    """'PreAggregate' at event level: the bundle's partials ``(shard, (step, {key: (per-bin
    units, new units)}))`` of one (shard, step) as one."""

    def merged(self, shard, step, parts):
        payload = parts[0][0] if len(parts) == 1 else PrivateKeysShard.merge(
            part[0] for part in parts)
        value = PrivatePartial(step, payload)
        if len(parts[0]) > 1:       # the records they sum (``continual_extract``)
            value = (step, payload, shell.concat_records([part[1] for part in parts]))
        yield WindowedValue((shard, value), Timestamp(micros=self._clock.step_end(step) - 1),
                            [GlobalWindow()])


def _shard_keys(seed, keys, key_set):
    """'ShardKeys': a shard's seed, then its keys from the side input (``KeySetInput``)."""
    shard, _ = seed
    yield seed
    mine = key_set.shards(keys).get(shard)
    if mine:
        yield shard, ShardKeys(mine)


def release_private_keys(valid: beam.PCollection, driver: KeyedReleaseDriver, label: str,
                         rng: noise.RandomSource, noise_label: Optional[str] = None,
                         key_input: Optional[beam.PCollection] = None):
    """Applies the private-keys stages to the extracted (and bounded) records of the transform
    ``label`` (noise addressed by ``noise_label``, its full path); returns the
    'ReleaseNoisyValues' outputs (``releases`` and ``DEAD_LETTER``)."""
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
    if key_input is not None:     # public keys from a PCollection: each shard gets its keys
        seeds = seeds | 'ShardKeys' >> beam.FlatMap(
            _shard_keys, keys=beam.pvalue.AsList(key_input), key_set=driver.private_keys)
    return shell.merge_seeds(partials, seeds) | 'ReleaseNoisyValues' >> beam.ParDo(
        release_loop.buffered_loop(driver.loop_driver(), label, rng, cell='shard_state',
                                   noise_label=noise_label)
    ).with_outputs(DEAD_LETTER, main='releases')
