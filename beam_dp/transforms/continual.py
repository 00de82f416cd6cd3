"""Continual per-key counts, sums and histograms on a fixed event-time schedule.

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
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.io.records import Release
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import PrivacyUnit
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import arguments
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.continual_extract import _MergePartialsFn
from beam_dp.transforms.continual_extract import extract_and_bound
from beam_dp.transforms.continual_private_keys import release_private_keys
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import ContinualOutputs

__all__ = [
    'ContinualCountPerKey',
    'ContinualHistogramPerKey',
    'ContinualMeanPerKey',
    'ContinualSumPerKey',
    'ContinualVariancePerKey',
    'PrivateKeys',
]

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


_SUM_ONLY = 'only ContinualSumPerKey takes value bounds (it clamps each value to them)'
_NOT_FOR_COUNTS = {
    'value_fn': 'a count counts records; to add up a value use ContinualSumPerKey(value_fn=..., '
                'lower=..., upper=...), for bins ContinualHistogramPerKey(value_fn=..., bins=...)',
    'lower': _SUM_ONLY, 'upper': _SUM_ONLY, 'grid_bits': _SUM_ONLY,
    'bins': 'bins are for ContinualHistogramPerKey(bins=...)',
}
_NOT_FOR_SUMS = {'bins': _NOT_FOR_COUNTS['bins']}
_NOT_FOR_HISTOGRAMS = {'lower': _SUM_ONLY, 'upper': _SUM_ONLY, 'grid_bits': _SUM_ONLY}
#: The end of every keyed continual transform's docstring.
_RETURNS = """
    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad or missing parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """


@arguments.public(docs=arguments.KEYED_DOCS, drop=('value_fn', 'lower', 'upper', 'grid_bits',
                                                   'bins', 'count_share'), hints=_NOT_FOR_COUNTS)
class ContinualCountPerKey(_ContinualPerKey):
    """Continual counts per public key on a fixed event-time schedule.

    Releases, for every public key and every step (a fixed event-time period from ``start``), a
    noisy count of the records with that key from ``start`` up to the end of the step — including
    keys and steps with no records (zeros are counted like any other step). Step s is released
    when the watermark passes end(s) + ``allowed_lateness``.

    Privacy unit and neighbours: ``privacy_unit=EventLevel()`` (default) protects one record;
    ``UserLevel(unit_fn, max_keys_per_unit, max_contributions_per_step, max_steps_per_unit)``
    protects all records of a unit, which ``BoundContributions`` bounds first. Add/remove
    neighbours. The key set is public (``public_keys``): records of other keys are dead-lettered,
    never released.

    Guarantee: the whole (unbounded) sequence of releases is ε-DP with ``budget=PrivacyBudget(
    epsilon=ε)`` (discrete Laplace) or ρ-zCDP with ``PrivacyBudget(rho=ρ)`` (discrete Gaussian).
    The counter (``mechanism='auto'``) is the one with the lowest expected error for the known
    horizon (steps from ``start`` to ``end``) and budget: BLT (Dvijotham et al. 2024) for ρ;
    per-step noise summed, the k-ary tree with the variance-reduced estimator, or the
    infinite-horizon tree (Chan, Shi, Song 2011) for ε — ``python -m beam_dp.analysis`` shows
    the choice and every alternative before running; ``Release.mechanism`` and
    ``Release.noise_stddev`` say what ran. ``mechanism=`` forces one; ``estimator=`` alone
    selects the old trees. Noise is drawn once per tree node / step and kept in Beam state.

    Bounded input (batch) needs ``end``: the releases must not stop at a time set by the data,
    so a bounded input without a public end is refused when the pipeline is built. An unbounded
    stream without ``end`` releases until it is drained.

    Not guaranteed: records arriving after their step was released are not counted (each goes
    to the dead-letter output as the record it was, with its event time); records without an event timestamp,
    or before ``start``, are dead-lettered with their time and the start.

    Private keys: ``keys=PrivateKeys(budget=PrivacyBudget(epsilon=ε_s, delta=δ))`` instead of
    ``public_keys`` releases a key only from the step at which continual private key selection
    (``ContinualKeySelection``) selects it; a key with one unit appears with probability ≤ δ over
    the unbounded horizon; a selected key stays selected; its first release counts everything
    since ``start`` and earlier steps are never back-filled. With ``end`` most of the selection
    budget goes to one batch-quality test at the last step (``PrivateKeys(final_share=0.9)``;
    docs/continual_counts.md). The total cost is the selection's (ε_s, δ) plus ``budget``; both
    are spent on ``accountant``. Release.epsilon/delta then carry the total.

    ``public_keys`` may also be a ``PCollection`` of key strings (e.g. ``SelectKeys(...).keys``):
    read as a side input, its keys are released at every step like listed public keys.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """
    _metric = 'count'


@arguments.public(docs=arguments.KEYED_DOCS, drop=('bins', 'count_share'),
                  required=('lower', 'upper'), defaults={'value_fn': _SECOND},
                  hints=_NOT_FOR_SUMS)
class ContinualSumPerKey(_ContinualPerKey):
    __doc__ = """Continual sums per public key of a clamped value.

    As ``ContinualCountPerKey``, with each record's value (``value_fn``, default ``record[1]``)
    clamped to [``lower``, ``upper``] and snapped to the grid 2**-``grid_bits``: the sums are
    integer in grid units, the noise is exact discrete noise in grid units, and every released
    value is a multiple of 2**-grid_bits (no floating-point Laplace). One record's sensitivity is
    max(|lower|, |upper|) (rounded up to the grid). ``lower`` and ``upper`` have no defaults:
    they set the noise (wider bounds, more noise) and the bias (values outside are clamped).

""" + _RETURNS
    _metric = 'sum'


@arguments.public(docs={**arguments.KEYED_DOCS, 'value_fn': arguments.BIN_FN_DOC},
                  drop=('lower', 'upper', 'grid_bits', 'count_share'), required=('bins',),
                  defaults={'value_fn': _SECOND}, hints=_NOT_FOR_HISTOGRAMS)
class ContinualHistogramPerKey(_ContinualPerKey):
    __doc__ = """Continual histograms per public key over public bins.

    As ``ContinualCountPerKey``, with each record counted in the bin ``value_fn(record)``
    (default ``record[1]``), which must be one of ``bins`` (else dead-lettered). One tree per
    shard runs over the vector keys × bins; ``Release.values`` holds the per-bin estimates.
    One record changes one bin by one (L1 = L2 = 1 at event level).

""" + _RETURNS

    FIELD_ALIASES = {'value_fn': 'bin_field'}   # the bin is read by value_fn
    _metric = 'histogram'


_NOT_FOR_RATIOS = {'bins': _NOT_FOR_COUNTS['bins']}
_COUNT_SHARE_DOC = ('the share of the budget for the count, the rest split equally between the '
                    'sums (None, default: an equal split, the minimax choice). A public prior: '
                    'when the mean is expected near the midpoint of [lower, upper] the count '
                    'matters less (docs/mean.md).')


@arguments.public(docs={**arguments.KEYED_DOCS, 'value_fn': 'record → the value to average '
                        '(default ``record[1]``).',
                        'grid_bits': 'each clamped value is snapped to 2**-grid_bits of the '
                                     'half-range (upper − lower)/2 around the midpoint (default '
                                     '10).', 'count_share': _COUNT_SHARE_DOC},
                  drop=('bins',), required=('lower', 'upper'), defaults={'value_fn': _SECOND},
                  hints=_NOT_FOR_RATIOS)
class ContinualMeanPerKey(_ContinualPerKey):
    __doc__ = """Continual means per key of a value clamped to [``lower``, ``upper``].

    As ``ContinualSumPerKey`` (same keys, schedule, privacy units, private keys, counters and
    dead letters), releasing for every key and step the mean of the values of the key's records
    from ``start`` to the end of the step. Each key holds one 2-vector in the shard's vector
    counter: the count and the sum of the values centred on the midpoint of [lower, upper]
    (``beam_dp.drivers.mean``: the accounting of PipelineDP's MEAN, one budget split equally
    between the two, as one joint counter). A value outside the bounds is clamped; a value that
    is not a number (or NaN) is dead-lettered ('value is not a number: ...').

    Release: ``value`` the mean (always within [lower, upper]); ``values`` = [noisy count,
    noisy sum, mean_stddev] (``beam_dp.drivers.mean.MEAN_VALUES``); ``noise_stddev`` the exact
    sd of the count's noise (public). ``mean_stddev`` is the delta-method estimate of the mean's
    noise sd at the noisy values, capped at upper − lower; it is honest when the count is large
    against ``noise_stddev`` (docs/mean.md: behaviour at tiny counts).

""" + _RETURNS
    _metric = 'mean'


@arguments.public(docs={**arguments.KEYED_DOCS, 'value_fn': 'record → the value whose variance '
                        'is released (default ``record[1]``).',
                        'grid_bits': 'each clamped value is snapped to 2**-grid_bits of the half-range '
                        '(upper − lower)/2 around the midpoint (default 10).',
                        'count_share': _COUNT_SHARE_DOC},
                  drop=('bins',), required=('lower', 'upper'), defaults={'value_fn': _SECOND},
                  hints=_NOT_FOR_RATIOS)
class ContinualVariancePerKey(_ContinualPerKey):
    __doc__ = """Continual variances (and means) per key of a value clamped to [``lower``, ``upper``].

    As ``ContinualMeanPerKey``, with a 3-vector per key: the count, the centred sum and the
    centred sum of squares (PipelineDP's VARIANCE accounting: the budget split in three equal
    parts, as one joint counter). Release: ``value`` the population variance of the clamped
    values (always within [0, ((upper − lower)/2)²]); ``values`` = [noisy count, noisy sum,
    mean, mean_stddev, variance_stddev] (``beam_dp.drivers.mean.VARIANCE_VALUES``);
    ``noise_stddev`` the exact sd of the count's noise. The sds are delta-method estimates
    (docs/mean.md).

""" + _RETURNS
    _metric = 'variance'
