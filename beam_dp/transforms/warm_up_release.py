"""The warm-up release of ``WarmUpContinualCountPerKey(warm_up_release='default_bounds')``:
the warm-up steps 0..W−1 released on the stream's schedule at public default bounds (the
plan's ``fallback``), from the warm-up's share of the budget. The privacy argument is in
``beam_dp.drivers.warm_up`` (item 4 and the composition).

Wiring (under the composite 'WarmUpRelease'; labels are part of the update contract):

  warm-up records grouped per unit shard (the transform's 'GroupWarmUpByUnit' output)
    | 'BoundContributions'     ``BoundContributions`` at the fallback bounds, on the warm-up's
                               clock (late records and records over the bounds dead-lettered)
    | 'PreAggregate'           bundle-local sums per (shard, step)
    | 'ShardSeeds' + 'MergeSeeds'
    | 'ReleaseNoisyValues'     the public-key release loop of ``plan.warm_up_driver``; noise
                               at (the transform's noise label + '/WarmUpRelease', shard, step)
"""

import dataclasses

import apache_beam as beam

from beam_dp.drivers.warm_up import WARM_UP_RELEASE_LABEL
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.continual_extract import _KeptSums
from beam_dp.transforms.continual_extract import _MergePartialsFn
from beam_dp.transforms.contribution_bounding import BoundContributions
from beam_dp.transforms.shell import DEAD_LETTER

__all__ = ['WarmUpRelease']


class WarmUpRelease(beam.PTransform):
    """Grouped warm-up records → (releases of steps 0..W−1, [dead-letter PCollections])."""

    def __init__(self, plan: WarmUpPlan, unit_fn, label: str, rng, noise_label: str):
        super().__init__()
        self._plan = plan
        self._unit = plan.fallback.user_level(unit_fn)
        self._owner = label
        self._rng = rng
        self._noise_label = f'{noise_label}/{WARM_UP_RELEASE_LABEL}'

    def expand(self, grouped):
        driver = dataclasses.replace(self._plan.warm_up_driver, privacy_unit=self._unit)
        clock = driver.clock
        bounded = grouped | 'BoundContributions' >> BoundContributions(
            self._unit, self._owner, clock=clock, grouped_input=True,
            aggregate=_KeptSums(clock))
        partials = bounded.kept | 'PreAggregate' >> beam.ParDo(_MergePartialsFn(driver))
        seeds = shell.seeds_at_start(grouped.pipeline, range(driver.num_shards),
                                     clock.start_micros)
        released = shell.merge_seeds(partials, seeds) | 'ReleaseNoisyValues' >> beam.ParDo(
            release_loop.single_cell_loop(driver.loop_driver(), self._owner, self._rng,
                                          noise_label=self._noise_label)
        ).with_outputs(DEAD_LETTER, main='releases')
        return released.releases, [bounded.dead_letter, released[DEAD_LETTER]]
