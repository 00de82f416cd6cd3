"""Online user-level bounds chosen after a warm-up on the stream itself (pure, no Beam): what
``beam_dp.WarmUpContinualCountPerKey`` computes (issue 23, item 1, the online part).

A streaming job often has no batch to choose ``UserLevel`` bounds (K, m, S, C) on ahead of
time. Here the first W steps of the stream (the *warm-up*, public: ``warm_up_steps``) are
spent on choosing them, and the continual count runs from step W on at the chosen bounds:

1. **Warm-up statistics.** Per privacy unit, from its records of steps 0..W−1, the four
   statistics of ``ChooseContributionBounds`` (``beam_dp.drivers.bounds``: keys K_u, largest
   records in one (key, step) m_u, largest steps in one key S_u, records C_u), extrapolated to
   the release's horizon of ``horizon`` steps (``statistics``: S_u and C_u × horizon / W, S_u
   capped at the horizon; K_u and m_u as seen). The extrapolation is a public function applied
   to each unit's own statistics, so each unit is still one count in one bucket of each
   histogram.
2. **Bounds.** At the warm-up's end (the release time of step W−1, a public time) the four
   histograms are released with exact discrete noise at ``bounds_share`` of the budget and the
   bounds of lowest predicted error are chosen from them (``BoundsChooser``, the offline code,
   unchanged: the same noise, buckets and error model). Bounds whose counter cannot be built at
   the release budget are replaced by ``fallback`` (checked at construction).
3. **Release.** From step W on, the records are bounded at the chosen bounds (a unit's usage
   starts empty at step W) and counted by ``ContinualCountPerKey``'s counter, built at run
   time for those bounds (``release_driver``: ``mechanism`` 'auto' fits it to the bounds) at
   the rest of the budget. The warm-up steps are **not released** (their records only choose
   the bounds): the first release is step W and counts the records of steps W.. ; every step
   from W on is released on the public schedule of the stream's clock.
4. **The warm-up steps** (``warm_up_release``, the user's choice): 'none' (default, as above)
   or 'default_bounds': steps 0..W−1 are also released on the stream's schedule, by a
   separate continual count over the warm-up's records only (``warm_up_driver``: its own
   clock, steps 0..W−1 of the stream's) at public conservative default bounds, the
   ``fallback`` (K, m, S, C) (S counted within the warm-up), from ``warm_up_share`` of the
   budget (the release then gets 1 − bounds_share − warm_up_share). Its counts start at
   zero at step 0; the release from step W on counts steps W.. only (the two series are not
   summed: a user who wants totals since the start adds the final warm-up release, whose
   noise is independent).
   Or 'held': the warm-up steps are **held until the warm-up's end** and then released at the
   CHOSEN bounds. One counter counts the whole stream (steps 0.., the stream's clock, horizon
   W + ``horizon``: ``counted_steps``; the statistics are extrapolated to it). Each unit's
   records that reach the bounding stage before the bounds (the warm-up's, and any later ones
   that come before the bounds) are kept there, capped (item 5); when the bounds arrive they
   are bounded at them, in their arrival order, each unit's usage then continuing over its
   later records (K, m, S, C hold over the whole stream, not per period), and counted. The
   release loop gets the bounds and arms ONE timer at the warm-up's end + 1 µs
   (``first_release_micros``), which releases steps 0..W−1 together, each with its own noise
   at (label, shard, step); from step W on every step is released at its own release time.
   The release schedule stays data-independent: the time at which steps 0..W−1 are emitted
   (the release time of step W−1 + 1 µs) and those of the later steps are fixed by W and the
   step clock, whatever the data. The whole budget minus ``bounds_share`` goes to the counter
   (no ``warm_up_share``: the warm-up steps are released by the same counter, whose cost
   covers every step it releases, 0.. included).
5. **The hold cap** ('held'). Until the bounds arrive, a unit's held records are bounded at
   ``hold_cap``: per bound the largest value the chooser can pick (its largest bucket value;
   K at most the public keys, S at most ``counted_steps``) or the fallback's if larger; a
   record over it is dead-lettered ('HoldWarmUp', 'warm-up hold cap: ...'; counted by the
   ``debug_metrics`` dead-letter counter ``dead_letters/HoldWarmUp``), never dropped silently.
   So the held state is at most min(C_cap, K_cap · S_cap · m_cap) records per unit (lower the
   cap with ``max_value``). The cap is a function of the unit's own records in arrival order
   with public bounds, applied before the bounding at the chosen bounds, which still bounds
   what is counted: it changes which of a heavy unit's records are counted (utility), never
   the unit's sensitivity, so the privacy argument below is unchanged.

Privacy (add/remove of all records of one unit; ε-DP or ρ-zCDP as the budget): the histograms
are (bounds_share · budget)-DP (each unit adds 1 to one bucket of each of the four, released
at ``shares`` of it: ``BoundsChooser``); the bounds are post-processing of them and of public
parameters; given the bounds, the release is ((1 − bounds_share) · budget)-DP at those bounds
(its counter is calibrated to them, ``KeyedReleaseDriver``). By adaptive sequential
composition the whole output is budget-DP: ``privacy_costs`` lists both parts, checked against
the accountant at construction (``release_cost`` is the release budget itself, an upper bound
of every counter ``release_driver`` builds, which it checks). With
``warm_up_release='default_bounds'`` a third part: the warm-up release is
(warm_up_share · budget)-DP on its own (a counter calibrated to the fallback bounds over the W
warm-up steps, the unit's warm-up records bounded at them, in arrival order, ``UnitUsage``),
its bounds and schedule are public and fixed before any data, so it composes sequentially
with the histograms (which read the same warm-up records) and the release (which reads only
records of steps ≥ W): the three costs sum to the budget exactly (``privacy_costs``, the
warm-up's cost its budget, an upper bound of its counter's, checked at construction). With
'held' two parts, as with 'none': the histograms (bounds_share · budget) and, given the bounds
(a DP output), the counter over the whole stream at ((1 − bounds_share) · budget), calibrated
to the bounds it gets, on records bounded at them (the cap first, then the chosen bounds: each
unit's counted records over steps 0.. are within (K, m, S, C) whatever it sends). The counter
reads the warm-up's records, which the histograms read too: adaptive sequential composition
(the second mechanism chosen from the first's output, both on the same data) gives
budget-DP for the whole output; the two ledger entries sum to the budget exactly. The
schedule stays
data-independent: the warm-up closes, the bounds are released and every step is released at
public event times; which of a unit's records are kept depends on its own records, the bounds
and the watermark only.

Not guaranteed: that the warm-up is representative (a unit seen first after the warm-up
counts nothing towards the histograms; a stream whose per-unit rates change after it gets
bounds chosen for the warm-up's rates); K_u and m_u are not extrapolated (keys a unit visits
later are not foreseen).
"""

import dataclasses
import functools
import math
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.drivers.bounds import ChooserOptions
from beam_dp.drivers.bounds import unit_statistics
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.keyed import PublicShardLoop
from beam_dp.drivers.keyed import PublicShardState
from beam_dp.drivers.keyed import ShardPartial
from beam_dp.drivers.protocol import UNCHANGED
from beam_dp.drivers.protocol import Outcome
from beam_dp.errors import InvalidParamsError
from beam_dp.io.bounds import BoundsRecommendation
from beam_dp.noise import RandomSource
from beam_dp.privacy_unit import UserLevel

__all__ = [
    'WarmUpBounds',
    'WarmUpPlan',
    'WarmUpShardLoop',
    'run_warm_up',
]

_OWNER = 'WarmUpContinualCountPerKey'
#: ``warm_up_release`` values (module docstring, item 4).
WARM_UP_RELEASES = ('none', 'default_bounds', 'held')
#: The warm-up release's ledger label suffix, stage and noise label suffix.
WARM_UP_RELEASE_LABEL = 'WarmUpRelease'


class WarmUpBounds(NamedTuple):
    """The bounds chosen at the end of the warm-up (public: a DP output), as delivered to the
    bounding and release stages; ``c`` 0 means no total cap."""
    k: int
    m: int
    s: int
    c: int

    def user_level(self, unit_fn) -> UserLevel:
        return UserLevel(unit_fn=unit_fn, max_keys_per_unit=self.k,
                         max_contributions_per_step=self.m, max_steps_per_unit=self.s,
                         max_total_contributions=self.c or None)


def _unit_fn_placeholder(record):  # pragma: no cover - never called (the bounds' unit_fn)
    return record


@dataclasses.dataclass(frozen=True)
class WarmUpPlan(ChooserOptions):
    """The warm-up, the bound choice and the release (module docstring), validated at
    construction.

    Args:
      budget: the whole transform's budget (ε or ρ).
      clock: the stream's step clock (step 0 at ``start``); the warm-up is its steps 0..W−1.
      warm_up_steps: W (≥ 1; before the clock's last step when it has one).
      layout: the public keys in shards.
      bounds_share: the share of ``budget`` the histograms spend (in (0, 1)).
      horizon: the release's steps after the warm-up that the bounds are chosen for (default
        and maximum: the clock's steps after W; required without a last step).
      mechanism: the release counter (``ContinualCountPerKey``'s ``mechanism=``, 'auto').
      key_share, max_value, per_octave, shares: ``BoundsChooser``'s.
      extrapolate: scale S_u and C_u by horizon / W (module docstring); False: as seen.
      fallback: (K, m, S, C) used if the chosen bounds cannot run (C 0: none); with
        ``warm_up_release='default_bounds'`` also the warm-up release's bounds.
      warm_up_release: 'none' (the warm-up steps are not released), 'default_bounds'
        (released on schedule at ``fallback``) or 'held' (held until the warm-up's end, then
        released at the chosen bounds by the one counter: module docstring).
      warm_up_share: the warm-up release's share of ``budget`` with 'default_bounds' (0.1;
        bounds_share + warm_up_share < 1); ignored with 'none' and 'held'.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
    """
    budget: PrivacyBudget
    clock: StepClock
    warm_up_steps: int
    layout: KeyLayout
    bounds_share: float = 0.1
    horizon: Optional[int] = None
    extrapolate: bool = True
    fallback: Tuple[int, int, int, int] = (1, 1, 1, 0)
    warm_up_release: str = 'none'
    warm_up_share: float = 0.1

    def __post_init__(self):
        if not isinstance(self.budget, PrivacyBudget):
            raise InvalidParamsError(f'{_OWNER}: budget must be a PrivacyBudget, got '
                                     f'{self.budget!r}.')
        if not isinstance(self.clock, StepClock):
            raise InvalidParamsError(f'{_OWNER}: clock must be a StepClock.')
        v.check_positive_int(_OWNER, 'warm_up_steps', self.warm_up_steps)
        last = self.clock.last_step
        if last is not None and self.warm_up_steps > last:
            raise InvalidParamsError(
                f'{_OWNER}: warm_up_steps must leave at least one step to release: the clock '
                f'has {last + 1} steps, got warm_up_steps={self.warm_up_steps}.')
        share = v.check_real(_OWNER, 'bounds_share', self.bounds_share)
        if not 0 < share < 1:
            raise InvalidParamsError(f'{_OWNER}: bounds_share must be in (0, 1), got {share!r}.')
        remaining = None if last is None else last + 1 - self.warm_up_steps
        horizon = self.horizon
        if horizon is None:
            if remaining is None:
                raise InvalidParamsError(
                    f'{_OWNER}: without end, give horizon=<the steps after the warm-up the '
                    f'bounds are chosen for> (their noise is predicted at that step).')
            horizon = remaining
        v.check_positive_int(_OWNER, 'horizon', horizon)
        if remaining is not None and horizon > remaining:
            raise InvalidParamsError(f'{_OWNER}: horizon must be at most the {remaining} steps '
                                     f'after the warm-up, got {horizon}.')
        object.__setattr__(self, 'horizon', int(horizon))
        if not isinstance(self.extrapolate, bool):
            raise InvalidParamsError(f'{_OWNER}: extrapolate must be True or False.')
        fb = tuple(self.fallback) if isinstance(self.fallback, (tuple, list)) else ()
        if len(fb) != 4 or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                   for x in fb) or min(fb[:3]) < 1:
            raise InvalidParamsError(f'{_OWNER}: fallback must be (K, m, S, C) with K, m, S ≥ 1 '
                                     f'and C ≥ 0 (0: no cap), got {self.fallback!r}.')
        object.__setattr__(self, 'fallback', WarmUpBounds(*fb))
        object.__setattr__(self, '_drivers', {})
        if self.warm_up_release not in WARM_UP_RELEASES:
            raise InvalidParamsError(f'{_OWNER}: warm_up_release must be one of '
                                     f'{WARM_UP_RELEASES}, got {self.warm_up_release!r}.')
        warm_budget = None
        if self.warm_up_release in ('none', 'held'):
            hist_budget, release_budget = self.budget.split(share, 1 - share)
        else:
            warm = v.check_real(_OWNER, 'warm_up_share', self.warm_up_share)
            if not 0 < warm < 1 - share:
                raise InvalidParamsError(
                    f'{_OWNER}: warm_up_share must be in (0, 1 − bounds_share) = (0, '
                    f'{1 - share:g}), got {warm!r}.')
            hist_budget, warm_budget, release_budget = self.budget.split(
                share, warm, 1 - share - warm)
        object.__setattr__(self, 'warm_up_budget', warm_budget)
        object.__setattr__(self, 'release_budget', release_budget)
        try:
            chooser = BoundsChooser(hist_budget, release_budget, self.counted_steps,
                                    **self.chooser_options())
        except (ArithmeticError, ValueError) as e:
            raise InvalidParamsError(f'{_OWNER}: no histogram runs at bounds_share={share!r} '
                                     f'of the budget ({e}).') from e
        except InvalidParamsError as e:
            if 'rho' in str(e) or 'epsilon' in str(e):   # the share's budget, not an option
                raise InvalidParamsError(f'{_OWNER}: no histogram runs at bounds_share='
                                         f'{share!r} of the budget ({e}).') from e
            raise
        object.__setattr__(self, 'chooser', chooser)
        # The fallback must run (it is what the job uses if the chosen bounds cannot).
        self.release_driver(self.fallback)
        object.__setattr__(self, 'warm_up_driver', None if warm_budget is None
                           else self._warm_up_driver(warm_budget))

    def _warm_up_driver(self, warm_budget: PrivacyBudget) -> KeyedReleaseDriver:
        """The warm-up release's driver: a count at the fallback bounds on the warm-up's clock
        (steps 0..W−1), its cost checked against ``warm_budget``."""
        c = self.clock
        try:
            driver = KeyedReleaseDriver(
                metric='count', budget=warm_budget,
                privacy_unit=self.fallback.user_level(_unit_fn_placeholder),
                clock=StepClock(c.start_micros, c.step_micros, c.allowed_lateness_micros,
                                self.warm_up_steps - 1),
                layout=self.layout, mechanism=self.mechanism)
        except (ArithmeticError, ValueError) as e:     # e.g. a budget so small noise overflows
            raise InvalidParamsError(
                f'{_OWNER}: no warm-up release runs at fallback={tuple(self.fallback)} with '
                f'warm_up_share={self.warm_up_share!r} of the budget ({e}).') from e
        cost, limit = driver.release_cost(), warm_budget.as_cost()
        if (cost.rho > limit.rho * (1 + 1e-9) if limit.is_zcdp else
                cost.epsilon > limit.epsilon * (1 + 1e-9) or cost.delta > limit.delta * (1 + 1e-9)):
            raise InvalidParamsError(f'{_OWNER}: the warm-up release at fallback={self.fallback}'
                                     f' costs {cost}, more than its budget {warm_budget}.')
        return driver

    # -- the clocks ------------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        """``warm_up_release='held'``: one counter over the whole stream (module docstring)."""
        return self.warm_up_release == 'held'

    @property
    def counted_steps(self) -> int:
        """The steps the release's counter counts and the bounds are chosen for: ``horizon``
        (steps W..), with 'held' W + ``horizon`` (steps 0..)."""
        return self.horizon + (self.warm_up_steps if self.held else 0)

    @functools.cached_property
    def release_clock(self) -> StepClock:
        """The release's clock: step 0 is the stream's step W (``step_offset``); with 'held'
        the stream's clock."""
        c = self.clock
        if self.held:
            return c
        return StepClock(c.start_micros + self.warm_up_steps * c.step_micros, c.step_micros,
                         c.allowed_lateness_micros,
                         None if c.last_step is None else c.last_step - self.warm_up_steps)

    @property
    def step_offset(self) -> int:
        """Add to a release clock step to get the stream's step index."""
        return 0 if self.held else self.warm_up_steps

    @property
    def warm_up_end_micros(self) -> int:
        """When the warm-up closes: the release time of step W−1 (public). The bounds are
        chosen once every unit shard's statistics arrived; the bounding and release stages
        hold step W's records (and their timers) until the bounds reach them."""
        return self.clock.release_time_micros(self.warm_up_steps - 1)

    @property
    def first_release_micros(self) -> int:
        """The release loop's first timer, armed when its bounds arrive: the release time of
        the release clock's step 0 (the stream's step W); with 'held' the warm-up's end + 1 µs,
        when the held steps 0..W−1 are released together (after the bounds' own time, the
        warm-up's end, so their held records are in)."""
        if self.held:
            return self.warm_up_end_micros + 1
        return self.release_clock.release_time_micros(0)

    @functools.cached_property
    def hold_cap(self) -> WarmUpBounds:
        """With 'held': the bounds each unit's records held before the bounds arrive are
        capped at (module docstring, item 5): per bound the largest value the chooser can pick
        (its largest bucket value; K at most the public keys, S at most ``counted_steps``) or
        the fallback's, whichever is larger."""
        top = self.chooser.edges[-1]
        fb = self.fallback
        return WarmUpBounds(max(min(top, len(self.layout.keys)), fb.k), max(top, fb.m),
                            max(min(top, self.counted_steps), fb.s), max(top, fb.c))

    # -- costs -------------------------------------------------------------------------------------

    def release_cost(self) -> PrivacyCost:
        """The release's cost: its budget (an upper bound of every counter built for it)."""
        b = self.release_budget
        if b.is_zcdp:
            return PrivacyCost(rho=b.rho)
        return PrivacyCost(epsilon=b.epsilon, delta=b.delta)

    def privacy_costs(self, label: str) -> List[Tuple[str, PrivacyCost]]:
        """(ledger label, cost): the histograms first, then the warm-up release (with
        'default_bounds'), then the release."""
        costs = [(f'{label}/ChooseBounds', self.chooser.privacy_cost())]
        if self.warm_up_budget is not None:
            costs.append((f'{label}/{WARM_UP_RELEASE_LABEL}', self.warm_up_budget.as_cost()))
        return costs + [(label, self.release_cost())]

    # -- the warm-up -------------------------------------------------------------------------------

    def statistics(self, cells: Mapping[Tuple[object, int], int]) -> Tuple[int, int, int, int]:
        """A unit's (K_u, m_u, S_u, C_u) for the release's horizon from its warm-up records
        per (key, step) (extrapolated: module docstring)."""
        k, m, s, c = unit_statistics(cells)
        if self.extrapolate:
            counted = self.counted_steps
            ratio = counted / self.warm_up_steps
            s = min(counted, math.ceil(s * ratio))
            c = math.ceil(c * ratio)
        return k, m, s, c

    def bucket_counts(self, per_unit: Sequence[Tuple[int, int, int, int]]
                      ) -> Dict[str, np.ndarray]:
        """Units per bucket of each statistic (exact; private: never output)."""
        return self.chooser.exact_counts(per_unit)

    @staticmethod
    def add_counts(total: Optional[Dict[str, np.ndarray]], more: Mapping[str, Any]
                   ) -> Dict[str, np.ndarray]:
        """Sums two shards' bucket counts."""
        if total is None:
            return {n: np.asarray(more[n], dtype=np.int64).copy() for n in STATISTICS}
        return {n: total[n] + np.asarray(more[n], dtype=np.int64) for n in STATISTICS}

    def choose(self, counts: Optional[Mapping[str, np.ndarray]], rng: RandomSource
               ) -> Tuple[BoundsRecommendation, WarmUpBounds]:
        """Releases the histograms (noise from ``rng.derive(statistic)``) and chooses the
        bounds: (the recommendation record, the bounds the release runs at)."""
        if counts is None:
            counts = {n: np.zeros(len(self.chooser.edges), dtype=np.int64) for n in STATISTICS}
        rec = self.chooser.choose(self.chooser.release(counts, rng))
        bounds = WarmUpBounds(rec.max_keys_per_unit, rec.max_contributions_per_step,
                              rec.max_steps_per_unit, rec.max_total_contributions or 0)
        if self.release_driver(bounds) is None:
            bounds = self.fallback
        return rec, bounds

    # -- the release -------------------------------------------------------------------------------

    def release_driver(self, bounds: WarmUpBounds) -> Optional[KeyedReleaseDriver]:
        """The release's driver at ``bounds`` (cached); None if no counter runs there or its
        cost would exceed ``release_cost`` (then the fallback runs)."""
        bounds = WarmUpBounds(*bounds)
        drivers = self._drivers
        if bounds not in drivers:
            try:
                driver = KeyedReleaseDriver(
                    metric='count', budget=self.release_budget,
                    privacy_unit=bounds.user_level(_unit_fn_placeholder),
                    clock=self.release_clock, layout=self.layout, mechanism=self.mechanism)
                cost = driver.release_cost()
                limit = self.release_cost()
                over = (cost.rho > limit.rho * (1 + 1e-9) if limit.is_zcdp
                        else cost.epsilon > limit.epsilon * (1 + 1e-9)
                        or cost.delta > limit.delta * (1 + 1e-9))
                drivers[bounds] = None if over else driver
            except (InvalidParamsError, ArithmeticError, ValueError) as e:
                if bounds == self.fallback:
                    if isinstance(e, InvalidParamsError):
                        raise
                    raise InvalidParamsError(
                        f'{_OWNER}: no release counter runs at fallback={tuple(bounds)} with '
                        f'the release budget {self.release_budget} (1 − bounds_share − '
                        f'warm_up_share of the budget): {e}') from e
                drivers[bounds] = None
        return drivers[bounds]

    def template_driver(self, clock: Optional[StepClock] = None) -> KeyedReleaseDriver:
        """A driver at the fallback bounds on ``clock`` (default the release clock): what the
        entry stages use to extract and pre-aggregate (key layout, steps; no noise)."""
        return dataclasses.replace(self.release_driver(self.fallback),
                                   clock=clock or self.release_clock)


class WarmUpShardLoop:
    """``SingleCellDriver`` of a public shard whose bounds arrive at run time: state
    ``(bounds or None, PublicShardState)``; the payloads are the shard's ``ShardPartial``s
    and, once, its ``WarmUpBounds`` (a DP output of the warm-up). Partials that arrive before
    the bounds wait in the state's pending sums; the counter is created when the bounds
    arrive (``WarmUpPlan.release_driver``), and from then on everything is
    ``PublicShardLoop``'s. The first release timer is the release time of the release clock's
    step 0 (the stream's step W), after the bounds' time: a release timer that fires without
    bounds (only if a runner delivered the bounds after a later watermark, which Beam's
    watermark holds exclude) re-arms 1 µs later and releases nothing yet."""

    LOOP = 'single_cell'

    def __init__(self, plan: WarmUpPlan):
        self.plan = plan
        self.clock = plan.release_clock
        self._loops: Dict[WarmUpBounds, PublicShardLoop] = {}

    def loop(self, bounds) -> PublicShardLoop:
        bounds = WarmUpBounds(*bounds)
        loop = self._loops.get(bounds)
        if loop is None:
            loop = self._loops[bounds] = PublicShardLoop(self.plan.release_driver(bounds))
        return loop

    def start(self, shard: int, noise) -> Outcome:
        return Outcome((None, PublicShardState(0, None)))

    def fold(self, state, shard: int, payload) -> Outcome:
        bounds, inner = state
        if isinstance(payload, WarmUpBounds):
            if bounds is not None:
                return Outcome()
            driver = self.plan.release_driver(payload)
            counter = driver.counter(len(driver.layout.shard_keys(shard)))
            return Outcome((tuple(payload), dataclasses.replace(
                inner, counter_state=counter.init_state())),
                timer_micros=self.plan.first_release_micros)
        if bounds is None:      # before the bounds: held (no step is released before them)
            template = self.plan.template_driver()
            new_inner = template.add_pending(inner, ShardPartial(*payload[:3]))
            return Outcome((None, new_inner)) if new_inner is not None else Outcome()
        out = self.loop(bounds).fold(inner, shard, payload)
        return out._replace(state=(bounds, out.state)) if out.state is not UNCHANGED else out

    def close(self, state, shard: int, fired_micros: int, pending, noise) -> Outcome:
        bounds, inner = state
        if bounds is None:      # not armed before the bounds (kept for safety: no release)
            return Outcome()
        loop = self.loop(bounds)
        out = loop.close(inner, shard, fired_micros, pending, noise)
        if out.state is UNCHANGED:
            return out
        releases = list(out.releases)
        # 'held': the first firing (the warm-up's end + 1 µs) releases every step whose release
        # time it passed (0..W−1), each at its own noise address; later firings release one.
        while (self.plan.held and out.timer_micros is not None
               and out.timer_micros <= fired_micros):
            more = loop.close(out.state, shard, fired_micros, pending, noise)
            if more.state is UNCHANGED:
                break
            releases += more.releases
            out = more
        return out._replace(state=(bounds, out.state), releases=tuple(releases))

    @staticmethod
    def end_of_input(state):
        bounds, inner = state
        return (bounds, dataclasses.replace(inner, input_ended=True))


def run_warm_up(plan: WarmUpPlan, unit_cells: Mapping[Any, Mapping[Tuple[object, int], int]],
                rng: RandomSource) -> Tuple[BoundsRecommendation, WarmUpBounds]:
    """The warm-up without Beam: units' warm-up records per (key, step) → the bounds (what
    'WarmUpStatistics' + 'ChooseBounds' compute; benchmarks and tests)."""
    stats = [plan.statistics(cells) for cells in unit_cells.values() if cells]
    return plan.choose(plan.bucket_counts(stats), rng)


def hold(plan: WarmUpPlan, records: Sequence[Tuple[Any, str, int]]
         ) -> Tuple[List[Tuple[Any, str, int]], int]:
    """'held': ``records`` (unit, key, step) held before the bounds, in arrival order, capped per
    unit at ``plan.hold_cap`` (each unit's usage on its own records only, as 'BoundPerUnit'
    caps them): (the records held, how many the cap dropped)."""
    from beam_dp.drivers.bounding import UnitUsage  # pylint: disable=import-outside-toplevel
    level = plan.hold_cap.user_level(_unit_fn_placeholder)
    usages: Dict[Any, UnitUsage] = {}
    kept, dropped = [], 0
    for unit, key, step in records:
        usage = usages.setdefault(unit, UnitUsage(level))
        if usage.offer(key, step)[0] is None:
            kept.append((unit, key, step))
        else:
            dropped += 1
    return kept, dropped


def _drive(driver: KeyedReleaseDriver, bounds: WarmUpBounds,
           records: Sequence[Tuple[Any, str, int]], loop, first_payload, root, offset: int,
           last: int) -> List[Tuple[str, int, float, float]]:
    """``records`` (unit, key, step on ``driver``'s clock) bounded at ``bounds`` in arrival
    order, pre-aggregated and released by ``loop`` per shard for steps 0..``last`` (the
    shard's first fold ``first_payload`` when not None): [(key, step + offset, value, sd)]."""
    from beam_dp.drivers.bounding import UnitUsage  # pylint: disable=import-outside-toplevel
    level = bounds.user_level(_unit_fn_placeholder)
    usages: Dict[Any, UnitUsage] = {}
    sums: Dict[Tuple[int, int], Dict[int, int]] = {}
    for unit, key, step in records:
        usage = usages.setdefault(unit, UnitUsage(level))
        if usage.offer(key, step)[0] is not None:
            continue
        _, shard, position = driver.locate(key)
        per = sums.setdefault((shard, step), {})
        per[position] = per.get(position, 0) + 1
    clock = driver.clock
    out = []
    for shard in range(driver.layout.num_shards):
        state = loop.start(shard, root).state
        if first_payload is not None:
            state = loop.fold(state, shard, first_payload).state
        for step in range(last + 1):
            per = sums.get((shard, step))
            if per:
                payload = ShardPartial(step, np.fromiter(per.keys(), dtype=np.int64),
                                       np.fromiter(per.values(), dtype=np.int64))
                state = loop.fold(state, shard, payload).state
            result = loop.close(state, shard, clock.release_time_micros(step), (), root)
            state = result.state
            for r in result.releases:
                out.append((r.key, r.step + offset, r.value, r.noise_stddev))
    return out


def replay(plan: WarmUpPlan, records: Sequence[Tuple[Any, str, int]], rng: RandomSource,
           noise_label: str) -> Tuple[BoundsRecommendation, WarmUpBounds, List[Tuple[str, int,
                                                                                   float, float]]]:
    """What ``WarmUpContinualCountPerKey`` outputs for ``records`` = (unit, key, stream step)
    in arrival order when nothing is late (the transform's noise label and random source):
    (recommendation, bounds, [(key, stream step, value, noise sd)] for every key and released
    step: with ``warm_up_release='default_bounds'`` the warm-up release's steps 0..W−1 first;
    with 'held' steps 0.. of the one counter, the warm-up's records capped by ``hold`` and
    bounded before the later ones, as when every warm-up record arrives before the bounds and
    every later record after them).
    Records of keys outside the public set are skipped (the transform dead-letters them
    first). The reference of the pipeline tests and the benchmark."""
    from beam_dp.drivers.protocol import NoiseRoot  # pylint: disable=import-outside-toplevel
    w = plan.warm_up_steps
    warm: Dict[Any, Dict[Tuple[object, int], int]] = {}
    warm_records = []
    post = []
    public = set(plan.layout.keys)
    for unit, key, step in records:
        if key not in public:       # dead-lettered at extraction, before everything else
            continue
        if step < w:
            cells = warm.setdefault(unit, {})
            cells[(key, step)] = cells.get((key, step), 0) + 1
            warm_records.append((unit, key, step))
        else:
            post.append((unit, key, step - w))
    rec, bounds = run_warm_up(plan, warm, rng.derive(noise_label, 'warm_up_histograms'))
    out = []
    if plan.held:       # the warm-up's records, capped, then the later ones: one counter
        post = hold(plan, warm_records)[0] + [(u, k, s + w) for u, k, s in post]
    if plan.warm_up_driver is not None:
        driver = plan.warm_up_driver
        out += _drive(driver, plan.fallback, warm_records, driver.loop_driver(), None,
                      NoiseRoot(rng, f'{noise_label}/{WARM_UP_RELEASE_LABEL}'), 0, w - 1)
    clock = plan.release_clock
    last = clock.last_step if clock.last_step is not None else plan.counted_steps - 1
    out += _drive(plan.template_driver(), bounds, post, WarmUpShardLoop(plan), bounds,
                  NoiseRoot(rng, noise_label), plan.step_offset, last)
    return rec, bounds, out
