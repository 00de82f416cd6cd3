"""User-level continual counts whose bounds are chosen privately on the stream itself, after a
warm-up (issue 23, item 1, online). The privacy argument and the choice are in
``beam_dp.drivers.warm_up``.

Wiring (labels are part of the update contract):

  records
    | 'GlobalWindow' (if not already) | 'ExtractAndValidate'   (unit, (key id, step, ...))
    | 'SplitWarmUp'            steps < W → warm-up; steps ≥ W → the release (step − W);
                               with 'held' every record to the release (stream steps), the
                               warm-up's also to the warm-up
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
                               holds its records until they arrive, then starts its chain);
                               with 'held' ``HeldBoundContributions`` (the held records
                               capped per unit, ``warm_up_held.py``)
    | 'PreAggregate' + 'MergeBounds'
    | 'ReleaseNoisyValues'     the release loop running ``WarmUpShardLoop`` (its first timer
                               is armed when its bounds arrive)
    | 'StreamSteps'            the releases' step index on the stream's clock (+ W; + 0 with
                               'held', whose loop releases steps 0..W−1 at the warm-up's end)
  warm-up release (``warm_up_release='default_bounds'`` only; ``warm_up_release.py``):
    'GroupWarmUpByUnit' | 'WarmUpRelease'   steps 0..W−1 at the fallback bounds, flattened
                               into the releases by 'MergeWarmUpReleases'
"""

import typing
from typing import Any, Callable, NamedTuple, Optional, Sequence

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import require_public_end
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.drivers.warm_up import WarmUpShardLoop
from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import Release
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.continual_extract import _ExtractFn
from beam_dp.transforms.continual_extract import _PreAggregateFn
from beam_dp.transforms.contribution_bounding import BoundContributionsAtRunTime
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.warm_up_bounds import RELEASE_BOUNDS
from beam_dp.transforms.warm_up_bounds import UNIT_BOUNDS
from beam_dp.transforms.warm_up_bounds import WARM_UP
from beam_dp.transforms.warm_up_bounds import SplitWarmUpFn
from beam_dp.transforms.warm_up_bounds import choose_bounds
from beam_dp.transforms.warm_up_bounds import stream_step
from beam_dp.transforms.warm_up_held import HeldBoundContributions
from beam_dp.transforms.warm_up_release import WarmUpRelease

__all__ = [
    'WarmUpContinualCountPerKey',
    'WarmUpOutputs',
]


class WarmUpOutputs(NamedTuple):
    """``releases``: ``Release`` records from step W on (every step with 'default_bounds' and
    'held'); ``bounds``: one
    ``BoundsRecommendation`` (the chosen bounds, their predicted bias and noise and the noisy
    histograms: all DP); ``dead_letter``: ``DeadLetter`` records."""
    releases: beam.PCollection
    bounds: beam.PCollection
    dead_letter: beam.PCollection


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

    With ``warm_up_release='held'`` the warm-up steps are **held until the warm-up's end**:
    one counter at the chosen bounds counts steps 0.. (each unit's held records capped at
    ``WarmUpPlan.hold_cap``, over it: dead letter 'HoldWarmUp'; then bounded with one usage over
    the whole stream) at 1 − bounds_share of ``budget``; steps 0..W−1 are released together at
    the warm-up's end + 1 µs, step W.. at their release times: a schedule fixed by W and the
    step clock, data-independent (``beam_dp.drivers.warm_up``, items 4–5).

    Privacy unit and neighbours: add/remove all records of one unit (``unit_fn``).

    Guarantee: the whole output (recommendation and releases) is ε-DP for
    ``budget=PrivacyBudget(epsilon=ε)`` or ρ-zCDP for ``PrivacyBudget(rho=ρ)``: the histograms
    at bounds_share·budget, the bounds their post-processing, the release at
    (1 − bounds_share)·budget calibrated to the bounds it gets, composed adaptively and
    sequentially; with 'default_bounds' the warm-up release, (warm_up_share · budget)-DP at
    bounds and a schedule fixed before any data, is a third sequential part (the release then
    gets 1 − bounds_share − warm_up_share): ε-DP/ρ-zCDP in total, the parts summing to the
    budget exactly ('held': the counter over steps 0.. is the second part). All costs are checked against ``accountant`` at construction and recorded
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
      warm_up_release: 'none' (default: the warm-up steps are not released),
        'default_bounds' (released on schedule at ``fallback``) or 'held' (released at the
        warm-up's end at the chosen bounds, by the one counter).
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
                **({} if plan.warm_up_release == 'none' else
                   {'warm_up_release': plan.warm_up_release}),
                **({} if plan.warm_up_driver is None
                   else {'warm_up_share': plan.warm_up_share})}

    def expand(self, records):
        plan = self._plan
        require_public_end(self.owner, records.is_bounded, plan.clock)
        noise_label = self.spend_budget(records)
        if not records.windowing.is_default():
            records = records | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
        extracted = records | 'ExtractAndValidate' >> beam.ParDo(
            _ExtractFn(plan.template_driver(plan.clock), self.label, self._key_fn, None,
                       self._unit.unit_fn)).with_outputs(DEAD_LETTER, main='valid')
        split = extracted.valid | 'SplitWarmUp' >> beam.ParDo(
            SplitWarmUpFn(plan.warm_up_steps, plan.held)).with_output_types(
                typing.Tuple[typing.Any, typing.Tuple[typing.Any, ...]]).with_outputs(
                    WARM_UP, main='release')
        # -- warm-up: statistics per unit shard, then the bounds --------------------------------
        warm, stats, chosen = choose_bounds(split[WARM_UP], plan, self.label, self.rng,
                                            noise_label)
        recommendation = chosen.recommendation
        # -- release: bounded at the chosen bounds, counted by the counter built for them -------
        bounded = split.release | 'BoundContributions' >> (
            HeldBoundContributions(self._unit, chosen[UNIT_BOUNDS], plan.hold_cap, self.label,
                                   clock=plan.release_clock) if plan.held else
            BoundContributionsAtRunTime(self._unit, chosen[UNIT_BOUNDS], self.label,
                                        clock=plan.release_clock))
        partials = bounded.kept | 'PreAggregate' >> beam.ParDo(
            _PreAggregateFn(plan.template_driver()))
        loop_input = ((partials, chosen[RELEASE_BOUNDS])
                      | 'MergeBounds' >> beam.Flatten().with_output_types(
                          typing.Tuple[int, typing.Any]))
        released = loop_input | 'ReleaseNoisyValues' >> beam.ParDo(
            release_loop.single_cell_loop(WarmUpShardLoop(plan), self.label, self.rng,
                                          noise_label=noise_label)
        ).with_outputs(DEAD_LETTER, main='releases')
        releases = released.releases | 'StreamSteps' >> beam.Map(
            stream_step(plan.step_offset)).with_output_types(Release)
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
