"""Shared wiring of the per-key segment transforms (``SparseContinualCountPerKey``,
``SparseContinualHistogramPerKey``, ``DynamicCountPerKey``): state, timers and labels only; every
decision is the segmented driver's (``beam_dp.drivers.segmented``).

Wiring (labels are part of the update contract):

  records
    | 'GlobalWindow'        re-window (timestamps kept; releases are driven by event-time timers)
    | 'ExtractAndValidate'  (key, (step, payload)); malformed / before start / after end → dead letter
                            (``segmented_extract``)
    | 'GateLateRecords'     unbounded input only: ``lateness.LatenessGate`` dead-letters a record
                            whose step is released on the public schedule (a timer chain per
                            shard, seeded at launch), at stage 'ReleaseSegments' with its reason
    + 'KeySeeds'            public keys only: one element per key at ``start``, so every public
                            key's partitioner runs from step 0 whether or not it has data
    | 'ReleaseSegments'     the release loop (``release_loop.buffered_loop``) per key, running
                            ``drivers.segmented.SegmentLoop`` (sparse streams: one per key):
                            a Bag of pending (step, payload), the key's ``KeyState`` in one
                            ReadModifyWrite cell, ONE watermark timer re-armed at
                            min(next buffered step, the partitioner's next halt step (exact
                            skip-ahead), its forced close); its own late check (a step ≤ the
                            key's last processed step) is a backstop that never fires for a
                            record the gate passed (the argument: ``lateness._DropLateFn``)

Lateness: the key's timer wakes at its data steps, so its own late check depends on the key's
other records (a record for step 5 arriving after step 7's release was counted without, and
dead-lettered with, a record of the key at step 6). The gate decides it first, from the record's
step and the public schedule only (docs/privacy_model.md, "Lateness"). A bounded (batch) input
runs without the gate: no release time passes before the input is bounded.

Steps: step s ≥ 0 covers event times [start + s·Δ, start + (s+1)·Δ); the mechanisms count ticks
from 1 (tick = step + 1, the papers' clock). The SVT is evaluated on EVERY step, including empty
ones, through the mechanism's exact geometric skip-ahead: the timer wakes only at data steps and
at sampled halting/forced steps, and the noisy threshold θ̂_j is drawn once per segment and
persisted in the state cell.

What is released and when: one ``Release`` per key at each segment close step (and only then),
timestamped at that step's end, ``value`` the post-processed answer (unchanged until the next
close; a consumer that needs a value per step fills forward). Nothing is emitted at data steps:
an emission there would reveal an arrival (docs/privacy_model.md).

Private keys (``keys=PrivateKeys(...)``): a key's instance starts at its first record as a
candidate; its ``ContinualKeySelection`` is evaluated with the law of a test on every step, but
lazily (``advance_lazy``): the timer wakes only at the candidate's data steps and at the next
step whose test its skip-ahead schedule draws (for a key with few units, astronomically far:
no timer is armed past the clock's end), so a never-selected candidate no longer fires a timer
every tick. Its state (~300 bytes pickled: selection state, exact input since its first record)
is kept: a candidate can still be selected later, and dropping it would change that law. At
the selection step the key's mechanism starts on a local clock whose first tick carries
everything since the key's first record; nothing before it is released.
"""

import operator
from typing import Any, Callable, Optional, Sequence

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.clock import require_public_end
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.segmented import KeyDriver
from beam_dp.drivers.segmented import SegmentLoop
from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import Release
from beam_dp.privacy_unit import EventLevel
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.lateness import LatenessGate
from beam_dp.transforms.lateness import batch_input
from beam_dp.transforms.segmented_extract import _ExtractFn
from beam_dp.transforms.segmented_extract import _strip_record
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import ContinualOutputs

__all__ = [
    'SegmentedPerKey',
]


class SegmentedPerKey(shell.ShellTransform):
    """Shared wiring of the per-key segment transforms (sparse and dynamic), on the shell.

    Subclasses build ``self._mechanism`` inside ``with self.params():``, set
    ``_driver_class`` (or override ``driver``), ``_parse`` and ``_mechanism_name``, and end
    their ``__init__`` with ``self.check_budget()``."""

    _metric = ''
    _driver_class = KeyDriver

    def __init__(self, *, start, step, budget: PrivacyBudget,
                 public_keys: Optional[Sequence[str]] = None, keys=None,
                 key_fn: Callable[[Any], Any] = operator.itemgetter(0),
                 accountant: Optional[BudgetAccountant] = None, allowed_lateness=0, end=None,
                 privacy_unit=None, noise_key: Optional[str] = None, debug_metrics: bool = False,
                 testing_seed: Optional[int] = None, label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        owner = self.owner
        public_keys, private = shell.parse_key_set(owner, public_keys, keys)
        if private is None:
            with self.params():
                public_keys = list(KeyLayout.of(list(public_keys)).keys)
        if not isinstance(budget, PrivacyBudget):
            raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got {budget!r}.')
        if budget.is_zcdp or budget.delta:
            raise InvalidParamsError(f'{owner}: budget must be a pure epsilon budget '
                                     f'PrivacyBudget(epsilon=...) (the SVT partitioner and the '
                                     f'counters are epsilon-DP: a delta would not be spent), got '
                                     f'{budget}. Private keys take their own (epsilon, delta) in '
                                     f'PrivateKeys(budget=...).')
        if privacy_unit is not None and not isinstance(privacy_unit, EventLevel):
            raise InvalidParamsError(f'{owner}: only privacy_unit=EventLevel() is supported '
                                     f'(bound users and apply group privacy to epsilon first), '
                                     f'got {privacy_unit!r}.')
        shell.check_callable(owner, 'key_fn', key_fn)
        self._clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                        allowed_lateness=allowed_lateness)
        self._budget = budget
        self._public_keys = public_keys
        self._private = private
        self._key_fn = key_fn

    def privacy_costs(self):
        costs = []
        if self._private is not None:
            costs.append((f'{self.label}/SelectKeys', self._private.privacy_cost()))
        costs.append((self.label, self.release_cost()))
        return costs

    def release_cost(self) -> PrivacyCost:
        return self._mechanism.privacy_cost()

    @property
    def mechanism(self):
        return self._mechanism

    @property
    def driver(self) -> KeyDriver:
        """The pure per-key driver this transform runs (drive it by hand for a reference)."""
        selection = None if self._private is None else self._private.selection(1)
        return self._driver_class(self._mechanism, selection, self._clock)

    def loop_driver(self) -> SegmentLoop:
        """What the release loop runs per key (``beam_dp.testing.replay`` drives it too)."""
        return SegmentLoop(self.driver, self._metadata(), self._metric == 'histogram')

    @property
    def clock(self) -> StepClock:
        return self._clock

    def _parse(self, record):
        raise NotImplementedError

    def _mechanism_name(self) -> str:
        raise NotImplementedError

    def display_data(self):
        return {'mechanism': self._mechanism_name(), 'budget': str(self._budget),
                'step_seconds': self._clock.step_micros / 1e6,
                'keys': 'private' if self._private is not None else len(self._public_keys)}

    def _metadata(self):
        cost = self.privacy_cost()
        return dict(metric=self._metric, mechanism=self._mechanism_name(),
                    epsilon=float(cost.epsilon), delta=float(cost.delta), rho=0.0,
                    privacy_unit=EventLevel().describe())

    def expand(self, records):
        require_public_end(self.owner, records.is_bounded, self._clock)
        noise_label = self.spend_budget(records)
        label, clock = self.label, self._clock
        gate = not batch_input(records)
        extracted = (
            records
            | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
            | 'ExtractAndValidate' >> beam.ParDo(
                _ExtractFn(label, clock, self._key_fn, self._parse, self._public_keys,
                           keep_records=gate)).with_outputs(DEAD_LETTER, main='valid'))
        valid, dead = extracted.valid, [extracted[DEAD_LETTER]]
        if gate:
            # The key's late check depends on its other records (it wakes at their steps): the
            # gate decides lateness on the public schedule first (``LatenessGate``); a late
            # record's dead letter holds the input record at its own time (carried to the gate,
            # stripped from what passes: 'ReleaseSegments' never stores it).
            gated = valid | 'GateLateRecords' >> LatenessGate(clock, label, 'ReleaseSegments',
                                                              pass_fn=_strip_record)
            valid = gated.passed
            dead.append(gated.dead_letter)
        seeds = None
        if self._public_keys is not None:
            seeds = shell.seeds_at_start(records.pipeline, self._public_keys,
                                         clock.start_micros, create_label='KeySeeds',
                                         key_type=str)
        inputs = shell.merge_seeds(valid, seeds, key_type=str)
        released = inputs | 'ReleaseSegments' >> beam.ParDo(release_loop.buffered_loop(
            self.loop_driver(), label, self.rng, cell='key_state', noise_label=noise_label)
        ).with_outputs(DEAD_LETTER, main='releases')
        releases = released.releases
        releases.element_type = Release
        return ContinualOutputs(releases, shell.merge_dead_letters(
            dead + [released[DEAD_LETTER]], self.debug_metrics, label))
