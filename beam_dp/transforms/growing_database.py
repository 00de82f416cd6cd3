"""Shared wiring of the growing-database transforms (``WindowedPMWG``, ``BBSchedulerQueries``,
``BBImproverQueries``): two tagged inputs on the public step clock (``start``/``step``/``end``),
one instance per key on the one release loop (``release_loop.buffered_loop`` running
``beam_dp.drivers.growing.GrowingDriver``).

Wiring (labels are part of the Dataflow update contract; the entry stages are in
``growing_entry.py``, the argument descriptions in ``growing_options.py``):

  data    | 'TagData'      key_fn, domain_fn, the record's step → (key bytes, GrowingItem);
                           malformed, before start or after end → dead letter
  queries | 'TagQueries'   (query_id, LinearQuery), a LinearQuery with an id, or an Avro dict →
                           (key bytes, GrowingItem); invalid or outside the clock → dead letter
                           + an INVALID_QUERY refusal
  data    | 'GateLateRecords'  unbounded input only: ``lateness.LatenessGate`` on the public
                           step clock dead-letters a record whose step is released, whatever
                           the other records
  queries | 'GateLateQueries'  the same: a late query is refused 'LATE' (``refusals``)
  (both)  | 'MergeInputs'  Flatten
          | 'AnswerQueries'  the buffered release loop keyed by the instance key: items wait in
                           the 'pending' bag; at the release time of a step (its end plus
                           ``allowed_lateness``) every pending item of the steps up to it is
                           processed in event-time order (records before queries at equal
                           times, then by domain element / query id)

So a query stamped τ is answered on exactly the records stamped ≤ τ (none is late: a late record
is dead-lettered), and its answer is released at the end of its step. The schedule is public:
the step clock, never the data, decides when a step is released and what is late
(docs/privacy_model.md, "Lateness"); the database size t used by the mechanisms is public under
the swap-one relation the transforms declare. Beam windows are not read: the inputs must be in
the global window. ``period=`` gives an independent database per key and fixed event-time
period: the instance key is (key, period index), and the instance's state (its cell, pending bag
and timers) is cleared by the release loop once the last step of its period is released
(``GrowingDriver``), so a long job holds the state of the periods in flight only.
"""

from typing import Any, Callable, NamedTuple, Optional

import apache_beam as beam

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers import growing as driver
from beam_dp.drivers.clock import require_public_end
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import REFUSALS
from beam_dp.drivers.growing import RELEASES
from beam_dp.drivers.growing import GrowingDriver
from beam_dp.drivers.growing import GrowingEngine
from beam_dp.errors import InvalidParamsError
from beam_dp.io.queries import QueryAnswer
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import PrivacyUnit
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.growing_entry import LOOP_ELEMENT
from beam_dp.transforms.growing_entry import TagFn
from beam_dp.transforms.growing_entry import item_step
from beam_dp.transforms.growing_entry import late_query
from beam_dp.transforms.growing_entry import late_record
from beam_dp.transforms.growing_entry import strip_text
from beam_dp.transforms.growing_options import GROWING_DOCS
from beam_dp.transforms.growing_options import GROWING_HINTS
from beam_dp.transforms.growing_options import check_global_window
from beam_dp.transforms.lateness import LatenessGate
from beam_dp.transforms.lateness import batch_input
from beam_dp.transforms.shell import DEAD_LETTER

__all__ = [
    'GROWING_DOCS',
    'GROWING_HINTS',
    'GrowingDatabaseOutputs',
    'GrowingDatabaseTransform',
]

class GrowingDatabaseOutputs(NamedTuple):
    """Outputs of a growing-database transform: ``answers`` (``QueryAnswer`` with a value, or a
    sparse-vector ⊥), ``refusals`` (``QueryAnswer`` with ``refusal`` set: one per refused
    query), ``releases`` (``EpochReleaseRecord`` of the scheduler transforms; empty for PMWG)
    and ``dead_letter`` (``DeadLetter``)."""
    answers: beam.PCollection
    refusals: beam.PCollection
    releases: beam.PCollection
    dead_letter: beam.PCollection


class GrowingDatabaseTransform(shell.ShellTransform):
    """Base of the public transforms: the shared arguments, their validation and the wiring.

    A subclass's ``__init__`` takes its mechanism's own arguments and ``**kwargs`` (the shared
    ones, which ``arguments.public`` adds to its public signature), keeps them, calls
    ``super().__init__(**kwargs)`` and defines ``_build(epsilon, delta, domain_size)`` (the pure
    mechanism) and ``_make_engine(mechanism)`` (its ``GrowingEngine``). The budget is checked
    at construction."""

    def __init__(self, *, budget: PrivacyBudget, domain_size: int,
                 domain_fn: Callable[[Any], int], start, step, end=None, allowed_lateness=0,
                 period=None, privacy_unit: PrivacyUnit = EventLevel(),
                 data_key_fn: Optional[Callable] = None,
                 query_key_fn: Optional[Callable] = None,
                 accountant: Optional[BudgetAccountant] = None, noise_key: Optional[str] = None,
                 debug_metrics: bool = False, testing_seed: Optional[int] = None,
                 label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        with self.params():
            epsilon, delta = driver.budget_epsilon_delta(self.owner, budget)
            mechanism = self._build(epsilon, delta, domain_size)
        self._engine = self._make_engine(mechanism)
        self._domain_size = mechanism.domain_size
        self._setup(privacy_unit, domain_fn, data_key_fn, query_key_fn, start, step, end,
                    allowed_lateness, period)

    def _build(self, epsilon: float, delta: float, domain_size: int):
        """The pure mechanism of every instance."""
        raise NotImplementedError

    def _make_engine(self, mechanism) -> GrowingEngine:
        raise NotImplementedError

    def _setup(self, privacy_unit, domain_fn, data_key_fn, query_key_fn, start, step, end,
               allowed_lateness, period=None) -> None:
        owner = self.owner
        if privacy_unit is not None and not isinstance(privacy_unit, EventLevel):
            raise InvalidParamsError(
                f'{owner}: only privacy_unit=EventLevel() is supported, got {privacy_unit!r}: '
                f"the mechanism's schedule reads the exact database size (swap-one, sizes "
                f'public), which a user with several records would change. Keep one record per '
                f'user upstream (event level is then user level).')
        self._clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                        allowed_lateness=allowed_lateness)
        self._period = None if period is None else shell.to_micros(owner, 'period', period,
                                                                    allow_zero=False,
                                                                    duration=True)
        shell.check_callables(owner, domain_fn=domain_fn, data_key_fn=data_key_fn,
                              query_key_fn=query_key_fn, optional=('data_key_fn', 'query_key_fn'))
        if (data_key_fn is None) != (query_key_fn is None) and period is not None:
            raise InvalidParamsError(
                f'{owner}: with period=, give both data_key_fn and query_key_fn or neither (the '
                f'instance key is (key, period index), or the period index alone).')
        self._domain_fn = domain_fn
        self._data_key_fn = data_key_fn
        self._query_key_fn = query_key_fn
        self.check_budget()

    def privacy_costs(self):
        """The cost per privacy unit (one record): spent once whatever the number of keys (each
        record is in exactly one instance: parallel composition)."""
        return [(self.label, self._engine.mechanism.privacy_cost())]

    @property
    def mechanism(self):
        return self._engine.mechanism

    def _display(self, **extra):
        """``display_data`` of a scheduler transform: the public parameters, ``extra`` (the
        box's own) before the privacy unit and the clock."""
        m = self.mechanism
        return {'mechanism': self._engine.name, 'epsilon': str(m.epsilon),
                'delta': str(m.delta), 'n': str(m.n), 'domain_size': str(m.domain_size),
                **extra, 'privacy_unit': 'one record (swap-one; sizes public)',
                **self._clock.describe()}

    @property
    def engine(self) -> GrowingEngine:
        """The pure adapter of one instance (``drivers.growing.run_instance``)."""
        return self._engine

    @property
    def clock(self):
        return self._clock

    def loop_driver(self) -> GrowingDriver:
        """What the release loop runs per key (``beam_dp.testing.replay`` drives it too)."""
        return GrowingDriver(self._engine, self._clock, self._period)

    def expand(self, inputs):
        if isinstance(inputs, dict):
            data, queries = inputs['data'], inputs['queries']
        else:
            data, queries = inputs
        check_global_window(self.owner, data, queries)
        require_public_end(self.owner, bool(data.is_bounded and queries.is_bounded),
                           self._clock)
        noise_label = self.spend_budget((data, queries))
        label, name, n_dom, clock = self.label, self._engine.name, self._domain_size, self._clock
        gate = not (batch_input(data) and batch_input(queries))
        records = data | 'TagData' >> beam.ParDo(TagFn(
            RECORD, label, name, self._data_key_fn, self._domain_fn, n_dom, clock,
            keep_records=gate, period_micros=self._period)).with_outputs(DEAD_LETTER,
                                                                         main='items')
        asked = queries | 'TagQueries' >> beam.ParDo(TagFn(
            QUERY, label, name, self._query_key_fn, None, n_dom, clock,
            period_micros=self._period)).with_outputs(
                DEAD_LETTER, REFUSALS, main='items')
        items = [records.items, asked.items]
        refusals, dead = [asked[REFUSALS]], [records[DEAD_LETTER], asked[DEAD_LETTER]]
        if gate:
            # Whether an item is late is decided on the public deadlines, never by another
            # record of its key (docs/privacy_model.md, "Lateness").
            step_fn = item_step(clock)
            gated = items[0] | 'GateLateRecords' >> LatenessGate(
                clock, label, driver.STAGE, step_fn, late_record(clock), pass_fn=strip_text)
            gated_queries = items[1] | 'GateLateQueries' >> LatenessGate(
                clock, label, driver.STAGE, step_fn, late_record(clock),
                refuse_fn=late_query(clock, name))
            items = [gated.passed, gated_queries.passed]
            refusals.append(gated_queries.refused)
            dead += [gated.dead_letter, gated_queries.dead_letter]
        merged = items | 'MergeInputs' >> beam.Flatten().with_output_types(LOOP_ELEMENT)
        processed = merged | 'AnswerQueries' >> beam.ParDo(release_loop.buffered_loop(
            self.loop_driver(), label, self.rng, cell='key_state',
            noise_label=noise_label)).with_outputs(DEAD_LETTER, REFUSALS, RELEASES,
                                                   main='answers')
        processed.answers.element_type = QueryAnswer
        refused = (processed[REFUSALS], *refusals) | 'MergeRefusals' >> beam.Flatten()
        refused.element_type = QueryAnswer
        dead_letters = shell.merge_dead_letters(dead + [processed[DEAD_LETTER]],
                                                self.debug_metrics, label)
        return GrowingDatabaseOutputs(processed.answers, refused, processed[RELEASES],
                                      dead_letters)
