"""The wiring of the keyed continual transforms (``beam_dp.transforms.continual``: counts,
sums, histograms, means, variances per key; ``quantiles``, ``distinct``): ``_ContinualPerKey``.

Wiring (every label is part of the Dataflow update contract):

  records
    | 'GlobalWindow'         re-window (timestamps kept; releases are driven by event-time timers);
                             only when the input is not already in the default global windowing
                             (there it would be a per-record no-op)
    | 'ExtractAndValidate'   key / value / bin / unit per record; malformed → dead letter
                             (``continual_extract``; at event level, public or private keys, it
                             sums the bundle's valid records: 'DropUnit' and 'PreAggregate' then
                             see a few partial sums per bundle, not one element per record)
                             (at user level it also groups the bundle's valid records per unit
                             shard, ``continual_extract._ExtractAndGroupFn``, which was
                             'KeyByUnit' + 'BoundContributions/GroupByUnitInBundle')
    | 'BoundContributions'   (user-level only; ``grouped_input=True``: 'BoundPerUnit' and, over
                             public keys, the bundle's kept records summed per (shard, step),
                             ``aggregate=continual_extract._KeptSums``)
    | 'PreAggregate'         bundle-local sums per (shard, step, key) — combiner lifting by hand,
                             so the stateful DoFn sees one small vector per shard, step and bundle
    + 'ShardSeeds'           one element per shard at ``start``: every shard gets a timer even if
                             no record ever reaches it, so idle keys and empty steps are released
    | 'ReleaseNoisyValues'   the release loop (``release_loop.single_cell_loop``) keyed by shard,
                             running ``drivers.keyed.PublicShardLoop``: the shard's
                             ``PublicShardState`` in one cell, one watermark timer per step
                             boundary; releases every key of the shard for every step

With ``keys=PrivateKeys(...)`` the key universe is unknown (``continual_private_keys``): keys are
hashed to shards and each shard holds its candidate and selected keys.

The release of step s happens when the watermark passes end(s) + allowed_lateness: a public,
data-independent schedule. Contributions for a step that is already released are late: they go
to the dead-letter output as the records they were. At event level (a streaming pipeline or an
unbounded input) each partial carries the rendered records it sums with their event times
(``continual_extract._CodedEntryFn``: bounded by the bundle; 'ReleaseNoisyValues' drops them on
arrival and never keeps them in state), so a late partial becomes one ``DeadLetter`` per record.
At user level the chain in 'BoundContributions' dead-letters a late record itself, one by one;
what reaches 'ReleaseNoisyValues' is never late there, and its check (aggregated per key and
step, the records are not carried past the bound) is a backstop.
All privacy arithmetic is in ``beam_dp.drivers.keyed``; the shared work in ``shell``.
"""

import operator
from typing import Any, Callable, Optional, Sequence

import apache_beam as beam

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import require_public_end
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import KeySetInput
from beam_dp.io.records import Release
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import PrivacyUnit
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.continual_extract import _MergePartialsFn
from beam_dp.transforms.continual_extract import extract_and_bound
from beam_dp.transforms.continual_private_keys import release_private_keys
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import ContinualOutputs

__all__ = []      # the base of the public transforms (``continual``), no public name

_FIRST = operator.itemgetter(0)
_SECOND = operator.itemgetter(1)


class _ContinualPerKey(shell.ShellTransform):
    """Shared implementation of the keyed continual transforms (see ``ContinualCountPerKey``)."""

    _metric = ''
    _release_type = Release
    #: 'BoundContributions' keeps only each unit's first record of each key (distinct units).
    _distinct_units = False
    #: public keys given as a PCollection (a side input), else None
    _key_input = None
    #: value_fn=None is refused (the metric reads a value)
    _value_required = False

    def __init__(self, *, public_keys: Optional[Sequence[str]] = None, keys=None, start, step,
                 end=None, budget: PrivacyBudget, privacy_unit: Optional[PrivacyUnit] = None,
                 accountant: Optional[BudgetAccountant] = None,
                 key_fn: Callable[[Any], Any] = _FIRST,
                 value_fn: Optional[Callable[[Any], Any]] = None,
                 lower: Optional[float] = None, upper: Optional[float] = None,
                 grid_bits: int = 10, bins: Sequence[str] = (),
                 count_share: Optional[float] = None, final_share: Optional[float] = None,
                 allowed_lateness=0,
                 horizon_steps: Optional[int] = None, mechanism: str = 'auto',
                 estimator: Optional[str] = None, output='cumulative', num_shards: Optional[int] = None, noise_key: Optional[str] = None,
                 debug_metrics: bool = False, testing_seed: Optional[int] = None,
                 label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)

        self._key_input = None
        self._setup(public_keys=public_keys, keys=keys, start=start, step=step, end=end,
                    allowed_lateness=allowed_lateness, privacy_unit=privacy_unit, key_fn=key_fn,
                    value_fn=value_fn, driver_args=dict(
                        budget=budget, num_shards=num_shards, lower=lower, upper=upper,
                        grid_bits=grid_bits, bins=bins, count_share=count_share,
                        horizon_steps=horizon_steps, estimator=estimator, mechanism=mechanism,
                        output=output, final_share=final_share))

    def _make_driver(self, owner, public_keys, private_keys, clock, privacy_unit, *, budget,
                     num_shards, lower, upper, grid_bits, bins, count_share, horizon_steps,
                     estimator, mechanism, output, final_share):
        """The family's pure driver (a subclass with another driver overrides this)."""
        if isinstance(public_keys, beam.pvalue.PCollection):
            # a key set known when the pipeline runs: a side input (``KeySetInput``)
            self._key_input = public_keys
            private_keys = KeySetInput(8 if num_shards is None else num_shards)
            public_keys, num_shards = None, None
        extra = {'count_share': count_share} if self._metric in ('mean', 'variance') else {}
        return KeyedReleaseDriver.of_arguments(
            owner, self._metric, public_keys=public_keys, private_keys=private_keys,
            num_shards=num_shards, lower=lower, upper=upper, grid_bits=grid_bits,
            budget=budget, privacy_unit=privacy_unit, clock=clock,
            horizon_steps=horizon_steps, estimator=estimator, mechanism=mechanism,
            bins=tuple(bins), output=output, final_share=final_share, **extra)

    def _setup(self, *, public_keys, keys, start, step, end, allowed_lateness, privacy_unit,
               key_fn, value_fn, driver_args) -> None:
        """Checks the key set, the callables and the clock, builds the driver
        (``_make_driver``, its errors under the public name), keeps the record functions and
        checks the budget."""
        owner = self.owner
        public_keys, private_keys = shell.parse_key_set(owner, public_keys, keys)
        shell.check_callable(owner, 'key_fn', key_fn)
        if value_fn is not None or self._value_required:
            shell.check_callable(owner, 'value_fn', value_fn)
        clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                  allowed_lateness=allowed_lateness)
        privacy_unit = EventLevel() if privacy_unit is None else privacy_unit
        with self.params():
            self._driver = self._make_driver(owner, public_keys, private_keys, clock,
                                             privacy_unit, **driver_args)
        self._key_fn = key_fn
        self._value_fn = value_fn
        self._unit_fn = privacy_unit.unit_fn if isinstance(privacy_unit, UserLevel) else None
        self.check_budget()

    @property
    def driver(self):
        """The pure driver this transform runs (drive it by hand for a reference)."""
        return self._driver

    def privacy_costs(self):
        return self._driver.privacy_costs(self.label)

    def display_data(self):
        return {name: str(value) for name, value in self._driver.describe().items()}

    def expand(self, records):
        require_public_end(self.owner, records.is_bounded, self._driver.clock)
        noise_label = self.spend_budget(records)
        driver = self._driver
        dead = []
        if self._key_input is not None:
            kept = records | 'KeepPublicKeys' >> beam.ParDo(
                shell.KeepKeysFn(self.label, self._key_fn),
                beam.pvalue.AsList(self._key_input)).with_outputs(DEAD_LETTER, main='kept')
            records, dead = kept.kept, [kept[DEAD_LETTER]]
        valid, more_dead = extract_and_bound(records, driver, self.label, self._key_fn,
                                             self._value_fn, self._unit_fn,
                                             distinct_units=self._distinct_units)
        dead += more_dead
        if driver.private_keys is not None:
            released = release_private_keys(valid, driver, self.label, self.rng, noise_label,
                                            key_input=self._key_input)
        else:
            if self._unit_fn is None:   # event level, valid: (None, partial sums) per bundle
                partials = (valid
                            | 'DropUnit' >> beam.Map(_SECOND)
                            | 'PreAggregate' >> beam.ParDo(_MergePartialsFn(driver)))
            else:    # user level, valid: (shard, partial sums) per 'BoundPerUnit' call
                partials = valid | 'PreAggregate' >> beam.ParDo(_MergePartialsFn(driver))
            seeds = shell.seeds_at_start(records.pipeline, range(driver.num_shards),
                                         driver.clock.start_micros)
            released = shell.merge_seeds(partials, seeds) | 'ReleaseNoisyValues' >> beam.ParDo(
                release_loop.single_cell_loop(driver.loop_driver(), self.label, self.rng,
                                              noise_label=noise_label)
            ).with_outputs(DEAD_LETTER, main='releases')
        releases = released.releases
        releases.element_type = self._release_type
        return ContinualOutputs(releases, shell.merge_dead_letters(
            dead + [released[DEAD_LETTER]], self.debug_metrics, self.label))
