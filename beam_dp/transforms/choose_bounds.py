"""Choosing user-level contribution bounds privately from data the user already has (a batch).

Wiring (labels are part of the update contract):

  records
    | 'ExtractAndValidate'   (unit, key, step) per record; malformed → dead letter
    | 'CountCells'           records per (unit, key, step)          (exact, private, never output)
    | 'GroupByUnit' + 'UnitStatistics'  (K_u, m_u, S_u, C_u) per unit → their buckets
    | 'CountBuckets'         units per (statistic, bucket), gathered into one dict
    | 'ReleaseAndChoose'     noise on every bucket, then the bounds (``BoundsChooser``)
"""

import typing
from typing import Any, Callable, NamedTuple, Optional

import apache_beam as beam
from apache_beam.utils.timestamp import Timestamp

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.drivers.bounds import unit_statistics
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io.bounds import BoundsRecommendation
from beam_dp.transforms import shell
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import dead_letter

__all__ = [
    'BoundsOutputs',
    'ChooseContributionBounds',
]


class BoundsOutputs(NamedTuple):
    """``recommendation``: one ``BoundsRecommendation``; ``dead_letter``: ``DeadLetter``s."""
    recommendation: beam.PCollection
    dead_letter: beam.PCollection


class _ExtractFn(beam.DoFn):

    def __init__(self, label: str, key_fn, unit_fn, time_fn, clock):
        self._label = label
        self._key_fn = key_fn
        self._unit_fn = unit_fn
        self._time_fn = time_fn
        self._clock = clock

    def _micros(self, record, timestamp) -> int:
        if self._time_fn is None:
            if not isinstance(timestamp, Timestamp):
                raise InvalidRecordError('record has no event timestamp (pass time_fn=)')
            return timestamp.micros
        try:
            seconds = self._time_fn(record)
            return shell.to_micros(self._label, 'time_fn(record)', seconds)
        except InvalidParamsError as e:
            raise InvalidRecordError(str(e).split(': ', 1)[-1]) from e
        except Exception as e:  # pylint: disable=broad-except
            raise InvalidRecordError(f'time_fn raised {e!r}') from e

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        try:
            key = shell.extract_key(self._key_fn, record)
            unit = shell.extract_unit(self._unit_fn, record)
            step = self._clock.checked_step(self._micros(record, timestamp))
        except InvalidRecordError as e:
            yield dead_letter(self._label, 'ExtractAndValidate', str(e), record)
            return
        yield shell.key_bytes(unit), (key, step)


class _UnitBucketsFn(beam.DoFn):
    """(unit, [((key, step), n), ...]) → ((statistic, bucket), 1) for each statistic."""

    def __init__(self, chooser: BoundsChooser):
        self._chooser = chooser

    def process(self, element):
        _, cells = element
        stats = unit_statistics(dict(cells))
        for name, bucket in zip(STATISTICS, self._chooser.bucket_indices(stats)):
            yield name, bucket


class _ReleaseFn(beam.DoFn):

    def __init__(self, chooser: BoundsChooser, noise_label: str, rng):
        self._chooser = chooser
        self._label = noise_label
        self._rng = rng

    def process(self, counts):
        import numpy as np  # pylint: disable=import-outside-toplevel
        size = len(self._chooser.edges)
        arrays = {name: np.zeros(size, dtype=np.int64) for name in STATISTICS}
        for (name, bucket), n in counts.items():
            arrays[name][bucket] = n
        rng = None if self._chooser.non_private_histograms else self._rng.derive(
            self._label, 'contribution_histograms')
        yield self._chooser.choose(self._chooser.release(arrays, rng))


class ChooseContributionBounds(shell.ShellTransform):
    """Recommends ``UserLevel`` bounds (K, m, S, C) for a counter, from DP histograms of the
    per-unit contributions of a batch the user already has (e.g. yesterday's stream).

    Per privacy unit it computes its keys K_u, its largest records in one (key, step) m_u, its
    largest steps in one key S_u and its records C_u; it releases a histogram of each over
    public geometric buckets with exact discrete noise, and returns the bounds minimising the
    predicted error (bounding bias + noise) of the final total of a key holding ``key_share``
    of the records, released by ``ContinualCountPerKey`` at ``release_budget`` over
    ``horizon`` steps with ``mechanism`` (``beam_dp.drivers.bounds``).

    Privacy unit and neighbours: add/remove all records of one unit (``unit_fn``).

    Guarantee: the recommendation (bounds, predictions and the released histograms) is
    (ε, 0)-DP for ``budget=PrivacyBudget(epsilon=ε)`` (discrete Laplace; a δ is not used) or
    ρ-zCDP for ``PrivacyBudget(rho=ρ)`` (discrete Gaussian): each unit is one count in one
    bucket of each of the four histograms, each released at a share of the budget
    (``shares``), composed sequentially. The cost is checked against ``accountant`` at
    construction and recorded on it when the transform is applied. The release that later
    runs at the chosen bounds spends ``release_budget`` separately (give the accountant
    both: ``budget`` + ``release_budget`` must fit the total, e.g. 10% and 90%).

    ``non_private_histograms=True`` (NOT PRIVATE): the histograms are EXACT, no noise and no
    budget; the recommendation and its histograms reveal exactly how many units have each
    number of keys, records per step, steps and records (the largest values included, which
    may single out one unit). Use it only on data you may already see in the clear (a public
    or consented sample), never on the data you will protect; nothing about it is DP and the
    accountant records nothing.

    Not guaranteed: optimality — the bias model treats the four statistics as independent and
    uses each unit's largest cell and key (conservative for m and S), and a bucket with fewer
    units than the noise threshold counts as empty; bounds for data whose distribution changes.

    Cite: PipelineDP's contribution histograms and parameter tuning (log buckets of per-unit
    counts); Canonne, Kamath, Steinke 2020 (exact discrete noise).

    Args:
      budget: what the histograms spend (``PrivacyBudget``); None with
        ``non_private_histograms``.
      release_budget: the budget of the counter that will run at the chosen bounds.
      horizon: its number of steps.
      start, step: the step clock of the records (times in seconds since the epoch, a
        ``Timestamp`` or aware datetime; ``step`` a duration): a record's step is
        ⌊(time − start)/step⌋; records before ``start`` or from step ``horizon`` on (``end``
        if given instead) are dead-lettered.
      key_fn: record → key (default ``record[0]``); unit_fn: record → privacy unit id.
      key_field, privacy_unit_field, time_field, timestamp_field: instead of ``key_fn``,
        ``unit_fn`` and
        ``time_fn``: the names of the fields holding them (Rows, NamedTuples or dicts).
      time_fn: record → event time in seconds (default: the element's event timestamp).
      end: optional end of the records' clock (default: ``start + horizon·step``).
      mechanism: the release's ``mechanism=`` ('auto').
      key_share: the share of all records held by a key whose error matters (0.1).
      max_value, per_octave, shares: the buckets and the budget split (``BoundsChooser``).
      non_private_histograms: exact histograms, NOT PRIVATE (above).
      accountant, noise_key, debug_metrics, testing_seed, label: as ``SelectKeys``.

    Returns:
      ``BoundsOutputs(recommendation, dead_letter)``: one ``BoundsRecommendation`` (its
      ``to_user_level(unit_fn)`` is the ``UserLevel`` to pass on).

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """

    def __init__(self, *, budget: Optional[PrivacyBudget], release_budget: PrivacyBudget,
                 horizon: int, start, step, unit_fn: Callable[[Any], Any],
                 key_fn: Callable[[Any], Any] = lambda r: r[0],
                 time_fn: Optional[Callable[[Any], Any]] = None, end=None,
                 mechanism: str = 'auto', key_share: float = 0.1, max_value: int = 1 << 20,
                 per_octave: int = 2, shares=(0.2, 0.2, 0.2, 0.4),
                 non_private_histograms: bool = False,
                 accountant: Optional[BudgetAccountant] = None,
                 noise_key: Optional[str] = None, debug_metrics: bool = False,
                 testing_seed: Optional[int] = None, label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        owner = self.owner
        shell.check_callables(owner, key_fn=key_fn, unit_fn=unit_fn, time_fn=time_fn,
                              optional=('time_fn',))
        with self.params():
            self._chooser = BoundsChooser(budget, release_budget, horizon, mechanism=mechanism,
                                          key_share=key_share, max_value=max_value,
                                          per_octave=per_octave, shares=shares,
                                          non_private_histograms=non_private_histograms)
        if end is None and isinstance(horizon, int):
            clock = shell.parse_clock(owner, start=start, step=step)
            clock = clock.limited_to(horizon)
        else:
            clock = shell.parse_clock(owner, start=start, step=step, end=end)
        self._clock = clock
        self._fns = (key_fn, unit_fn, time_fn)
        self.check_budget()

    @property
    def chooser(self) -> BoundsChooser:
        """The pure driver (``beam_dp.drivers.bounds.BoundsChooser``)."""
        return self._chooser

    def privacy_costs(self):
        if self._chooser.non_private_histograms:
            return []
        return [(self.label, self._chooser.privacy_cost())]

    def display_data(self):
        return {'non_private_histograms': self._chooser.non_private_histograms,
                'budget': str(self._chooser.budget),
                'release_budget': str(self._chooser.release_budget),
                'horizon': self._chooser.horizon}

    def expand(self, records):
        noise_label = self.spend_budget(records)
        extracted = records | 'ExtractAndValidate' >> beam.ParDo(
            _ExtractFn(self.label, *self._fns, self._clock)).with_outputs(DEAD_LETTER,
                                                                           main='valid')
        cells = (
            extracted.valid
            | 'CountCells' >> beam.combiners.Count.PerElement()
            | 'ToUnit' >> beam.Map(lambda e: (e[0][0], (e[0][1], e[1]))).with_output_types(
                typing.Tuple[bytes, typing.Any]))
        buckets = (
            cells
            | 'GroupByUnit' >> beam.GroupByKey()
            | 'UnitStatistics' >> beam.ParDo(_UnitBucketsFn(self._chooser))
            | 'CountBuckets' >> beam.combiners.Count.PerElement()
            | 'Gather' >> beam.combiners.ToDict())
        recommendation = buckets | 'ReleaseAndChoose' >> beam.ParDo(
            _ReleaseFn(self._chooser, noise_label, self.rng)).with_output_types(
                BoundsRecommendation)
        return BoundsOutputs(recommendation, shell.merge_dead_letters(
            [extracted[DEAD_LETTER]], self.debug_metrics, self.label))
