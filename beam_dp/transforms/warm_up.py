"""User-level continual counts whose bounds are chosen privately on the stream itself, after a
warm-up (issue 23, item 1, online). The privacy argument and the choice are in
``beam_dp.drivers.warm_up``.

Wiring (labels are part of the update contract):

  records
    | 'GlobalWindow' (if not already) | 'ExtractAndValidate'   (unit, (key id, step, ...))
    | 'SplitWarmUp'            steps < W → warm-up; steps ≥ W → the release (step − W)
  warm-up:
    | 'GroupWarmUpByUnit' + 'WarmUpShardSeeds'
    | 'WarmUpStatistics'       per unit shard: the units' warm-up records per (key, step)
                               (exact, private, never output); at the warm-up's end (a timer at
                               the release time of step W−1) the shard's bucket counts
    | 'ChooseBounds'           one key: once every shard's counts are in, the noisy histograms
                               and the bounds → the recommendation (output), the bounds to
                               every unit shard and every release shard
  release:
    | 'BoundContributions'     ``BoundContributionsAtRunTime`` at the chosen bounds (a shard
                               holds its records until they arrive, then starts its chain)
    | 'PreAggregate' + 'MergeBounds'
    | 'ReleaseNoisyValues'     the release loop running ``WarmUpShardLoop`` (its first timer
                               is armed when its bounds arrive)
    | 'StreamSteps'            the releases' step index on the stream's clock (+ W)
  warm-up release (``warm_up_release='default_bounds'`` only; ``warm_up_release.py``):
    'GroupWarmUpByUnit' | 'WarmUpRelease'   steps 0..W−1 at the fallback bounds, flattened
                               into the releases by 'MergeWarmUpReleases'
"""

import typing
from typing import Any, Callable, NamedTuple, Optional, Sequence

import apache_beam as beam
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.transforms.userstate import TimerSpec
from apache_beam.transforms.userstate import on_timer
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.timestamp import Timestamp

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounding import UNIT_SHARDS
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.clock import require_public_end
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.drivers.warm_up import WarmUpShardLoop
from beam_dp.errors import InvalidParamsError
from beam_dp.io.bounds import BoundsRecommendation
from beam_dp.io.records import Release
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.continual_extract import _ExtractFn
from beam_dp.transforms.continual_extract import _PreAggregateFn
from beam_dp.transforms.contribution_bounding import BoundContributionsAtRunTime
from beam_dp.transforms.contribution_bounding import _GroupByUnitInBundleFn
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import RecordText
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.state_types import STATE_CODER
from beam_dp.transforms.warm_up_release import WarmUpRelease

__all__ = [
    'WarmUpContinualCountPerKey',
    'WarmUpOutputs',
]

_UNIT_BOUNDS = 'unit_bounds'
_RELEASE_BOUNDS = 'release_bounds'
_WARM_UP = 'warm_up'


class WarmUpOutputs(NamedTuple):
    """``releases``: ``Release`` records from step W on; ``bounds``: one
    ``BoundsRecommendation`` (the chosen bounds, their predicted bias and noise and the noisy
    histograms: all DP); ``dead_letter``: ``DeadLetter`` records."""
    releases: beam.PCollection
    bounds: beam.PCollection
    dead_letter: beam.PCollection


def _seeds(pipeline, keys: Sequence[int], micros: int, name: str):
    """'<name>Seeds' + '<name>SeedAt': one ``(key, None)`` per key at ``micros``."""
    return (pipeline
            | f'{name}Seeds' >> beam.Create(list(keys))
            | f'{name}SeedAt' >> beam.Map(
                lambda key: beam.window.TimestampedValue((key, None), Timestamp(micros=micros))
            ).with_output_types(typing.Tuple[int, typing.Any]))


class _SplitWarmUpFn(beam.DoFn):
    """(unit, (key id, step, payload, text)): steps < W to the warm-up output, the others to
    the release with their step on the release clock (step − W)."""

    def __init__(self, warm_up_steps: int):
        self._w = warm_up_steps

    def process(self, element):
        unit, item = element
        step = item[1]
        if step < self._w:
            yield beam.pvalue.TaggedOutput(_WARM_UP, element)
        else:
            yield unit, (item[0], step - self._w) + tuple(item[2:])


class _WarmUpStatisticsFn(beam.DoFn):
    """Keyed by unit shard; elements ``(shard, ((unit key, unit, ((item, micros), ...)),
    ...))`` (``_GroupByUnitInBundleFn``) or the shard's seed. State: a bag of tables
    {unit key: {(key id, step): records}} (one per call; exact, never output); a cell
    'warm_up_closed' (None: not started, False: open, True: closed); the timer 'warm_up_end'
    at the warm-up's end (``WarmUpPlan.warm_up_end_micros``, armed at the shard's first
    element). At the timer: per unit its statistics (``WarmUpPlan.statistics``), their bucket
    counts emitted as ``(0, counts)`` at the timer's time, the tables cleared. A warm-up record
    that arrives after its shard closed is dead-lettered as late (the release time of step
    W−1 passed): a function of its own arrival and the public schedule."""

    CELLS = BagStateSpec('warm_up_cells', STATE_CODER)
    CLOSED = ReadModifyWriteStateSpec('warm_up_closed', STATE_CODER)
    TIMER = TimerSpec('warm_up_end', TimeDomain.WATERMARK)

    def __init__(self, plan: WarmUpPlan, label: str):
        self._plan = plan
        self._label = label

    def process(self, element, cells=beam.DoFn.StateParam(CELLS),
                closed=beam.DoFn.StateParam(CLOSED), timer=beam.DoFn.TimerParam(TIMER)):
        _, units = element
        state = closed.read()
        if state is None:
            closed.write(False)
            timer.set(Timestamp(micros=self._plan.warm_up_end_micros))
        if not units:
            return
        if state:
            clock = self._plan.clock
            for _, _, records in units:
                for item, micros in records:
                    yield dead_letter(self._label, 'WarmUpStatistics',
                                      clock.late_reason(item[1]), RecordText(item[3]), micros)
            return
        table = {}
        for encoded, _, records in units:
            unit_cells = table.setdefault(encoded, {})
            for item, _ in records:
                cell = (item[0], item[1])
                unit_cells[cell] = unit_cells.get(cell, 0) + 1
        cells.add(table)

    @on_timer(TIMER)
    def warm_up_end(self, key=beam.DoFn.KeyParam, cells=beam.DoFn.StateParam(CELLS),
                    closed=beam.DoFn.StateParam(CLOSED)):
        merged = {}
        for table in cells.read():
            for encoded, unit_cells in table.items():
                into = merged.setdefault(encoded, {})
                for cell, n in unit_cells.items():
                    into[cell] = into.get(cell, 0) + n
        cells.clear()
        closed.write(True)
        plan = self._plan
        counts = plan.bucket_counts([plan.statistics(c) for c in merged.values()])
        yield 0, (key, {name: counts[name] for name in STATISTICS})


class _ChooseBoundsFn(beam.DoFn):
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
            yield beam.pvalue.TaggedOutput(_UNIT_BOUNDS, (shard, bounds))
        for shard in range(self._release_shards):
            yield beam.pvalue.TaggedOutput(_RELEASE_BOUNDS, (shard, bounds))


def _stream_step(offset: int):
    def restore(release):
        return release._replace(step=release.step + offset)
    return restore


class WarmUpContinualCountPerKey(shell.ShellTransform):
    """Continual counts per public key at user level, with the bounds (K, m, S, C) chosen
    privately on the stream's first ``warm_up_steps`` steps (no batch needed ahead of time).

    Steps 0..W−1 (W = ``warm_up_steps``, public) are the warm-up: their records choose the
    bounds and, with ``warm_up_release='none'`` (default), are **not released** (they are not
    counted); with ``warm_up_release='default_bounds'`` the warm-up steps are also released on
    schedule, each at its own release time, by a continual count of the warm-up's records at
    the public ``fallback`` bounds (S counted within the warm-up) from ``warm_up_share`` of
    ``budget`` (its steps 0..W−1; the release from W on counts steps W.. only). At the warm-up's end (the release
    time of step W−1) four DP histograms of per-unit statistics of the warm-up (keys,
    largest records in one key and step, largest steps in one key, records; S and C scaled
    to the release's horizon) are released at ``bounds_share`` of ``budget`` and the bounds of
    lowest predicted error are chosen from them (``ChooseContributionBounds``' chooser). From
    step W on every step is released on the public schedule, counting the records of steps
    W.. bounded at the chosen bounds (``BoundContributions``' rule), by the counter that
    ``mechanism`` fits to those bounds at the rest of the budget. ``Release.step`` is the
    stream's step (W, W+1, ...); ``Release.noise_stddev`` is exact for the bounds chosen;
    ``Release.epsilon/rho`` are the release's part of the budget.

    Privacy unit and neighbours: add/remove all records of one unit (``unit_fn``).

    Guarantee: the whole output (recommendation and releases) is ε-DP for
    ``budget=PrivacyBudget(epsilon=ε)`` or ρ-zCDP for ``PrivacyBudget(rho=ρ)``: the histograms
    at bounds_share·budget, the bounds their post-processing, the release at
    (1 − bounds_share)·budget calibrated to the bounds it gets, composed adaptively and
    sequentially; with 'default_bounds' the warm-up release, (warm_up_share · budget)-DP at
    bounds and a schedule fixed before any data, is a third sequential part (the release then
    gets 1 − bounds_share − warm_up_share): ε-DP/ρ-zCDP in total, the parts summing to the
    budget exactly. All costs are checked against ``accountant`` at construction and recorded
    when the transform is applied (``beam_dp.drivers.warm_up`` has the argument). The bounds
    reach every stage at a public time (the warm-up's end + 1 µs) before the first release;
    records of steps ≥ W that arrive earlier wait for them.

    Not guaranteed: that the warm-up is representative of the stream (a unit first seen after
    it, or rates that change, get bounds chosen for the warm-up); optimality of the bounds
    (``ChooseContributionBounds``); records of warm-up steps arriving after the warm-up's end
    are dead-lettered as late.

    Args:
      public_keys: the keys released (public).
      start, step, end, allowed_lateness: the stream's clock (as ``ContinualCountPerKey``).
      budget: the whole budget (histograms + release).
      unit_fn: record → privacy unit id; key_fn: record → key (default ``record[0]``).
      key_field, privacy_unit_field, timestamp_field: instead of ``key_fn``, ``unit_fn`` and the
        element timestamp, the names of fields of schema'd records (docs/configuration.md).
      warm_up_steps: W ≥ 1.
      bounds_share: the histograms' share of ``budget`` (0.1).
      horizon: the steps after the warm-up the bounds are chosen for (default: to ``end``;
        required without ``end``).
      mechanism: the release counter ('auto': fitted to the chosen bounds).
      key_share, max_value, per_octave, shares: as ``ChooseContributionBounds``.
      extrapolate: scale each unit's steps and records seen in the warm-up to the horizon
        (True).
      fallback: (K, m, S, C) if the chosen bounds cannot run (C 0: no cap); with
        'default_bounds' also the warm-up release's bounds (public, conservative).
      warm_up_release: 'none' (default: the warm-up steps are not released) or
        'default_bounds' (released on schedule at ``fallback``).
      warm_up_share: the warm-up release's share of ``budget`` with 'default_bounds' (0.1).
      num_shards, accountant, noise_key, debug_metrics, testing_seed, label: as
        ``ContinualCountPerKey``.

    Returns:
      ``WarmUpOutputs(releases, bounds, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """

    def __init__(self, *, public_keys: Sequence[str], start, step, budget: PrivacyBudget,
                 unit_fn: Callable[[Any], Any], warm_up_steps: int, end=None,
                 key_fn: Callable[[Any], Any] = lambda r: r[0], bounds_share: float = 0.1,
                 horizon: Optional[int] = None, mechanism: str = 'auto',
                 key_share: float = 0.1, max_value: int = 1 << 20, per_octave: int = 2,
                 shares=(0.2, 0.2, 0.2, 0.4), extrapolate: bool = True,
                 fallback=(1, 1, 1, 0), warm_up_release: str = 'none',
                 warm_up_share: float = 0.1, allowed_lateness=0, num_shards: Optional[int] = None,
                 accountant: Optional[BudgetAccountant] = None,
                 noise_key: Optional[str] = None, debug_metrics: bool = False,
                 testing_seed: Optional[int] = None, label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        owner = self.owner
        shell.check_callables(owner, key_fn=key_fn, unit_fn=unit_fn)
        if isinstance(public_keys, (str, bytes)) or not isinstance(public_keys, (list, tuple)):
            raise InvalidParamsError(f'{owner}: public_keys must be a list of keys, got '
                                     f'{public_keys!r}.')
        clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                  allowed_lateness=allowed_lateness)
        with self.params():
            self._plan = WarmUpPlan(
                budget, clock, warm_up_steps, KeyLayout.of(list(public_keys), num_shards),
                bounds_share=bounds_share, horizon=horizon, mechanism=mechanism,
                key_share=key_share, max_value=max_value, per_octave=per_octave,
                shares=tuple(shares) if isinstance(shares, list) else shares,
                extrapolate=extrapolate, fallback=tuple(fallback)
                if isinstance(fallback, list) else fallback,
                warm_up_release=warm_up_release, warm_up_share=warm_up_share)
        self._key_fn = key_fn
        self._unit = UserLevel(unit_fn=unit_fn, max_keys_per_unit=1,
                               max_contributions_per_step=1, max_steps_per_unit=1)
        self.check_budget()

    @property
    def plan(self) -> WarmUpPlan:
        """The pure driver (``beam_dp.drivers.warm_up.WarmUpPlan``)."""
        return self._plan

    def privacy_costs(self):
        return self._plan.privacy_costs(self.label)

    def display_data(self):
        plan = self._plan
        return {'budget': str(plan.budget), 'warm_up_steps': plan.warm_up_steps,
                'bounds_share': plan.bounds_share, 'horizon': plan.horizon,
                **({} if plan.warm_up_driver is None
                   else {'warm_up_release': plan.warm_up_release,
                         'warm_up_share': plan.warm_up_share})}

    def expand(self, records):
        plan = self._plan
        require_public_end(self.owner, records.is_bounded, plan.clock)
        noise_label = self.spend_budget(records)
        pipeline = records.pipeline
        if not records.windowing.is_default():
            records = records | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
        extracted = records | 'ExtractAndValidate' >> beam.ParDo(
            _ExtractFn(plan.template_driver(plan.clock), self.label, self._key_fn, None,
                       self._unit.unit_fn)).with_outputs(DEAD_LETTER, main='valid')
        split = extracted.valid | 'SplitWarmUp' >> beam.ParDo(
            _SplitWarmUpFn(plan.warm_up_steps)).with_output_types(
                typing.Tuple[typing.Any, typing.Tuple[typing.Any, ...]]).with_outputs(
                    _WARM_UP, main='release')
        # -- warm-up: statistics per unit shard, then the bounds --------------------------------
        warm = split[_WARM_UP] | 'GroupWarmUpByUnit' >> beam.ParDo(
            _GroupByUnitInBundleFn(self.label)).with_output_types(
                typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='grouped')
        start = plan.clock.start_micros
        shard_input = ((warm.grouped, _seeds(pipeline, range(UNIT_SHARDS), start, 'WarmUpShard'))
                       | 'MergeWarmUpSeeds' >> beam.Flatten().with_output_types(
                           typing.Tuple[int, typing.Any]))
        stats = shard_input | 'WarmUpStatistics' >> beam.ParDo(
            _WarmUpStatisticsFn(plan, self.label)).with_output_types(
                typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='counts')
        num_shards = plan.layout.num_shards
        chosen = stats.counts | 'ChooseBounds' >> beam.ParDo(
            _ChooseBoundsFn(plan, self.rng, noise_label, num_shards)).with_outputs(
                _UNIT_BOUNDS, _RELEASE_BOUNDS, main='recommendation')
        recommendation = chosen.recommendation
        recommendation.element_type = BoundsRecommendation
        # -- release: bounded at the chosen bounds, counted by the counter built for them -------
        bounded = split.release | 'BoundContributions' >> BoundContributionsAtRunTime(
            self._unit, chosen[_UNIT_BOUNDS], self.label, clock=plan.release_clock)
        partials = bounded.kept | 'PreAggregate' >> beam.ParDo(
            _PreAggregateFn(plan.template_driver()))
        loop_input = ((partials, chosen[_RELEASE_BOUNDS])
                      | 'MergeBounds' >> beam.Flatten().with_output_types(
                          typing.Tuple[int, typing.Any]))
        released = loop_input | 'ReleaseNoisyValues' >> beam.ParDo(
            release_loop.single_cell_loop(WarmUpShardLoop(plan), self.label, self.rng,
                                          noise_label=noise_label)
        ).with_outputs(DEAD_LETTER, main='releases')
        releases = released.releases | 'StreamSteps' >> beam.Map(
            _stream_step(plan.step_offset)).with_output_types(Release)
        dead = [extracted[DEAD_LETTER], warm[DEAD_LETTER], stats[DEAD_LETTER],
                bounded.dead_letter, released[DEAD_LETTER]]
        if plan.warm_up_driver is not None:
            warm_releases, warm_dead = warm.grouped | 'WarmUpRelease' >> WarmUpRelease(
                plan, self._unit.unit_fn, self.label, self.rng, noise_label)
            warm_releases.element_type = Release
            releases = (warm_releases, releases) | 'MergeWarmUpReleases' >> beam.Flatten(
            ).with_output_types(Release)
            dead += warm_dead
        return WarmUpOutputs(releases, recommendation,
                             shell.merge_dead_letters(dead, self.debug_metrics, self.label))
