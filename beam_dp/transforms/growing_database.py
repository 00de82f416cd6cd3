"""Shared wiring of the growing-database transforms (``WindowedPMWG``, ``BBSchedulerQueries``,
``BBImproverQueries``): two tagged inputs on the public step clock (``start``/``step``/``end``),
one instance per key on the one release loop (``release_loop.buffered_loop`` running
``beam_dp.drivers.growing.GrowingDriver``).

Wiring (labels are part of the Dataflow update contract):

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

import typing
from typing import Any, Callable, NamedTuple, Optional

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

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
from beam_dp.drivers.growing import GrowingItem
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io.queries import QueryAnswer
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import PrivacyUnit
from beam_dp.queries import LinearQuery
from beam_dp.transforms import arguments
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.lateness import LatenessGate
from beam_dp.transforms.lateness import batch_input
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import RecordText
from beam_dp.transforms.shell import dead_letter

__all__ = [
    'GROWING_DOCS',
    'GROWING_HINTS',
    'GrowingDatabaseOutputs',
    'GrowingDatabaseTransform',
]

_LOOP_ELEMENT = typing.Tuple[bytes, typing.Any]

#: Descriptions of the growing-database arguments (``arguments.public``).
GROWING_DOCS = {
    **arguments.COMMON_DOCS,
    'budget': '``PrivacyBudget(epsilon=ε)`` (pure ε) or ``PrivacyBudget(epsilon=ε, '
              'delta=δ)``: the whole release of every instance (each record is in one '
              'instance: parallel composition over keys). Not ``rho``.',
    'privacy_unit': 'only ``EventLevel()`` (the default): one record, swap-one (the database '
                    'size is public). User level is refused: bound each user to one record '
                    'upstream, and event level is then user level.',
    'start': 'event time of the start of step 0 (seconds since the epoch, a Beam Timestamp or '
             'a timezone-aware datetime): records and queries before it are dead-lettered.',
    'step': 'the length of a step (seconds, a Beam Duration or a timedelta): the records and '
            'queries of a step are processed, and the answers released, when the watermark '
            'passes its end plus ``allowed_lateness``.',
    'allowed_lateness': 'how long (seconds) a step waits for late records and queries after '
                        "its end; later records are dead-lettered, later queries refused 'LATE' "
                        '(default 0).',
    'domain_fn': 'record → its domain element, an integer in [0, domain_size).',
    'data_key_fn': 'record → key (one key = one database; None, the default: one database).',
    'query_key_fn': 'query → key (None, the default: one database).',
    'period': 'None (default): each key\'s database grows for ever. A duration (seconds, a Beam '
              'Duration or a timedelta): one independent database per key and fixed event-time '
              'period (periods aligned on the epoch, as Beam\'s FixedWindows: the instance key '
              'is (key, period index), or the period index without ``data_key_fn``), whose '
              'state is cleared once the last step of its period is released (the state held '
              'stays bounded over a long job).',
    'n': 'the initial size: queries before an instance has n records are refused '
         "'NOT_STARTED'.",
    'domain_size': 'N, the size of the public data domain {0, ..., N-1}.',
    'alpha': "the accuracy target α of PMWG's answers.",
    'p': 'PMWG: the failure probability (default 1/N); the BB transforms: as their mechanism.',
    'mechanism': 'the static black box (``LaplaceQueryVector``, ``StaticPMWBox``, '
                 '``CallableBlackBox``), pure ε_i-DP for sensitivity 1/t.',
    'beta': 'the failure probability of the accuracy bound of each run.',
    'g': 'BBScheduler: the epoch growth γ ∈ (0, 1) (default the mechanism\'s).',
    'lazy': 'BBScheduler: False (default) runs the box eagerly at each epoch start; True at '
            "the first query of an epoch. BBImprover: only True.",
    'c': 'BBImprover: the decay exponent c of ε_t (default 0.1).',
    'p1': 'BBImprover: as ``BBImprover`` (default the mechanism\'s).',
    'p2': 'BBImprover: as ``BBImprover`` (default 0).',
}

#: What to write instead of the arguments of the Beam-window version.
GROWING_HINTS = {
    'timer_granularity': 'answers are released at the end of each step of the public clock: '
                         'pass step=<seconds> (and start=, end=) instead',
    'window': 'Beam windows are not read: pass period=<seconds> for an independent database '
              'per period (its state cleared once the period is released)',
    'unit_fn': 'only privacy_unit=EventLevel() is supported',
}


class GrowingDatabaseOutputs(NamedTuple):
    """Outputs of a growing-database transform: ``answers`` (``QueryAnswer`` with a value, or a
    sparse-vector ⊥), ``refusals`` (``QueryAnswer`` with ``refusal`` set: one per refused
    query), ``releases`` (``EpochReleaseRecord`` of the scheduler transforms; empty for PMWG)
    and ``dead_letter`` (``DeadLetter``)."""
    answers: beam.PCollection
    refusals: beam.PCollection
    releases: beam.PCollection
    dead_letter: beam.PCollection


def check_global_window(owner: str, *pcolls) -> None:
    """Refuses inputs in Beam windows other than the global window (the step clock replaced
    them).

    Raises:
      InvalidParamsError: saying what to write instead.
    """
    for pcoll in pcolls:
        fn = pcoll.windowing.windowfn
        if not isinstance(fn, GlobalWindows):
            raise InvalidParamsError(
                f'{owner}: the inputs must be in the global window, got {type(fn).__name__}: '
                f'Beam windows are not read (the public step clock start=/step=/end= decides '
                f'when answers are released). For an independent database per period, pass '
                f'period=<seconds> (each record is in one instance: parallel composition).')


@beam.typehints.with_input_types(typing.Any)
@beam.typehints.with_output_types(_LOOP_ELEMENT)
class _TagFn(beam.DoFn):
    """Validates one input and keys it by ``key_bytes(key)``, as a ``GrowingItem``."""

    def __init__(self, kind: int, label: str, mechanism: str, key_fn: Optional[Callable],
                 domain_fn: Optional[Callable], domain_size: int, clock,
                 keep_records: bool = False, period_micros: Optional[int] = None):
        self._period = period_micros
        self._kind = kind
        self._label = label
        self._mechanism = mechanism
        self._key_fn = key_fn
        self._domain_fn = domain_fn
        self._domain_size = domain_size
        self._clock = clock
        #: Records on an unbounded input: their rendering, for a late dead letter (never
        #: stored by 'AnswerQueries').
        self._keep = keep_records

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        stage = 'TagData' if self._kind == RECORD else 'TagQueries'
        try:
            key = None if self._key_fn is None else shell.extract_key(self._key_fn, element)
            key = driver.instance_key(key, self._key_fn is not None, micros, self._period)
            instance = shell.key_bytes(key)
        except Exception as e:  # pylint: disable=broad-except
            yield dead_letter(self._label, stage, str(e), element, micros)
            return
        if self._kind == RECORD:
            try:
                index = self._domain_fn(element)
            except Exception as e:  # pylint: disable=broad-except
                yield dead_letter(self._label, stage, f'domain_fn raised {e!r}', element, micros)
                return
            reason = driver.check_domain_index(index, self._domain_size)
            if reason is None:
                reason = self._outside(micros)
            if reason is not None:
                yield dead_letter(self._label, stage, reason, element, micros)
                return
            text = shell.render_record(element) if self._keep else None
            yield instance, GrowingItem(key, (micros, RECORD, int(index), int(index)), text)
            return
        qid, query = driver.normalise_query(element, self._domain_size)
        if not qid:
            reason = 'query has no query_id' + ('' if isinstance(query, LinearQuery)
                                                else f' ({query})')
            yield dead_letter(self._label, stage, reason, element, micros)
            return
        if not isinstance(query, LinearQuery):
            dead = dead_letter(self._label, stage, f'invalid query {qid!r}: {query}', element,
                               micros)
        else:
            outside = self._outside(micros)
            dead = None if outside is None else dead_letter(self._label, stage, outside,
                                                            element, micros)
        if dead is not None:
            yield dead
            yield beam.pvalue.TaggedOutput(REFUSALS, driver.answer_record(
                qid, self._mechanism, micros, refusal='INVALID_QUERY', message=dead.value.reason))
            return
        yield instance, GrowingItem(key, (micros, QUERY, qid, (qid, query)))

    def _outside(self, micros: int) -> Optional[str]:
        """Why an event time is outside the clock (before start, after end), or None."""
        try:
            self._clock.checked_step(micros)
        except InvalidRecordError as e:
            return str(e)
        return None


def _item_step(clock):
    def step(payload: GrowingItem) -> int:
        return clock.step_of(payload.item[0])
    return step


def _late_record(clock):
    def late(unused_key, payload: GrowingItem, step):
        record = payload.item[3] if payload.text is None else RecordText(payload.text)
        return clock.late_reason(step), record, payload.item[0]
    return late


def _late_query(clock, mechanism: str):
    def refuse(unused_key, payload: GrowingItem, step):
        micros, _, _, (qid, _) = payload.item
        return driver.late_query(qid, mechanism, micros, clock, step)
    return refuse


def _strip_text(payload: GrowingItem) -> GrowingItem:
    return payload._replace(text=None)


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
        shell.check_callable(owner, 'domain_fn', domain_fn)
        shell.check_callable(owner, 'data_key_fn', data_key_fn, optional=True)
        shell.check_callable(owner, 'query_key_fn', query_key_fn, optional=True)
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
        records = data | 'TagData' >> beam.ParDo(_TagFn(
            RECORD, label, name, self._data_key_fn, self._domain_fn, n_dom, clock,
            keep_records=gate, period_micros=self._period)).with_outputs(DEAD_LETTER,
                                                                         main='items')
        asked = queries | 'TagQueries' >> beam.ParDo(_TagFn(
            QUERY, label, name, self._query_key_fn, None, n_dom, clock,
            period_micros=self._period)).with_outputs(
                DEAD_LETTER, REFUSALS, main='items')
        items = [records.items, asked.items]
        refusals, dead = [asked[REFUSALS]], [records[DEAD_LETTER], asked[DEAD_LETTER]]
        if gate:
            # Whether an item is late is decided on the public deadlines, never by another
            # record of its key (docs/privacy_model.md, "Lateness").
            step_fn = _item_step(clock)
            gated = items[0] | 'GateLateRecords' >> LatenessGate(
                clock, label, driver.STAGE, step_fn, _late_record(clock), pass_fn=_strip_text)
            gated_queries = items[1] | 'GateLateQueries' >> LatenessGate(
                clock, label, driver.STAGE, step_fn, _late_record(clock),
                refuse_fn=_late_query(clock, name))
            items = [gated.passed, gated_queries.passed]
            refusals.append(gated_queries.refused)
            dead += [gated.dead_letter, gated_queries.dead_letter]
        merged = items | 'MergeInputs' >> beam.Flatten().with_output_types(_LOOP_ELEMENT)
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
