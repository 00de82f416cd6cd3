"""Shared wiring of the growing-database transforms (``WindowedPMWG``, ``BBSchedulerQueries``,
``BBImproverQueries``): two tagged inputs, one stateful DoFn per (key, window), event-time order.

Wiring (labels are part of the Dataflow update contract):

  data    | 'TagData'      key_fn, window id, domain_fn → (key, window id), record item;
                           malformed → dead letter
  queries | 'TagQueries'   (query_id, LinearQuery), a LinearQuery with an id, or an Avro dict →
                           query item; invalid → dead letter + an INVALID_QUERY refusal
  each    | '...ToGlobalWindow'  timestamps kept; the window id is part of the key
  data    | 'GateLateRecords'  with ``start=``, fixed windows and an unbounded input only:
                           ``lateness.LatenessGate`` on the window deadlines (``_WindowSchedule``)
                           dead-letters a record of a closed window, whatever the other items
  queries | 'GateLateQueries'  the same, on the same schedule: a query of a closed window gets
                           the closed instance's HALTED refusal (on the answers), whatever the
                           records (else a record opening the instance decided HALTED vs t=0)
  (both)  | 'MergeInputs'  Flatten
          | 'AnswerQueries'  the release loop (``release_loop.buffered_loop``: cell 'instance',
                           bag 'pending', timers 'flush' and 'expire') running
                           ``drivers.growing.GrowingLoop`` per (key, window id): items wait in
                           the bag and are processed in event-time order on the watermark

Order: an item stamped τ is processed once the watermark passes τ, together with every pending
item stamped ≤ τ, sorted by (timestamp, records before queries, tie), where the tie is the record's
domain element or the query id. So a query stamped τ sees exactly the records stamped ≤ τ that
were not late; a late record (stamped before an already processed query)
is counted at the next processing, i.e. in a later t. With bounded inputs (batch) the loop's
end-of-input timer processes everything, in the same order, in one go.

Lateness: a fixed window's instance is closed by its 'expire' timer, which the instance's first
item arms, so without the gate another record of the same (key, window) decides whether a record
arriving after the deadline is dead-lettered or counted (docs/privacy_model.md, "Lateness"). With
``start=`` the gate decides it first; its passed records reach 'AnswerQueries' before the
deadline (the argument: ``lateness._DropLateFn``), where the closed-instance check stays as a
backstop. Queries are gated too ('GateLateQueries'): otherwise a query arriving after its
window's deadline was refused HALTED when a record had opened the instance and answered by a
fresh, empty instance (NOT_STARTED, t = 0) when none had. Update note: 'AnswerQueries' is the
shared release loop (its 'meta' and 'armed' cells went into the 'instance' cell; 'finished' and
'end_of_input' are new): drain a running job and restart it.

The loop holds state and sets timers; every decision is the driver's
(``beam_dp.drivers.growing``: ``GrowingLoop``, the engine adapters around the pure mechanisms,
the order, the answers and refusals); ``beam_dp.testing.replay`` drives ``loop_driver()`` as
the job does. The schedule is public: a query is answered when it is processed
(its arrival time is public, docs/privacy_model.md), and the database size t used by the
mechanisms is public under the swap-one relation the transforms declare.
"""

import typing
from typing import Callable, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.transforms.window import FixedWindows
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import GlobalWindows
from apache_beam.transforms.window import SlidingWindows

from beam_dp.drivers import growing as driver
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import RELEASES
from beam_dp.drivers.growing import GrowingEngine
from beam_dp.drivers.growing import GrowingLoop
from beam_dp.drivers.growing import closed_reason
from beam_dp.drivers.growing import halted
from beam_dp.drivers.growing import late_window_reason
from beam_dp.errors import InvalidParamsError
from beam_dp.io.queries import QueryAnswer
from beam_dp.queries import LinearQuery
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.clock import format_micros
from beam_dp.drivers.clock import refuse_milliseconds
from beam_dp.transforms import shell
from beam_dp.transforms.lateness import LatenessGate
from beam_dp.transforms.release_loop import buffered_loop
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.shell import RecordText

__all__ = [
    'GrowingDatabaseOutputs',
    'GrowingDatabaseTransform',
]

_REFUSED = 'refused'
# Instances are keyed by the deterministic encoding of (key, window id) (``shell.key_bytes``).
_INSTANCE_ELEMENT = typing.Tuple[bytes, typing.Any]


class GrowingDatabaseOutputs(NamedTuple):
    """Outputs of a growing-database transform: ``answers`` (``QueryAnswer``, one per valid or
    invalid query with an id, refusals included), ``releases`` (``EpochReleaseRecord`` of the
    scheduler transforms; empty for PMWG) and ``dead_letter`` (``DeadLetter``)."""
    answers: beam.PCollection
    releases: beam.PCollection
    dead_letter: beam.PCollection


def window_id_of(window) -> Optional[Tuple[int, int]]:
    """None for the global window, else (start, end) in microseconds."""
    if isinstance(window, GlobalWindow):
        return None
    return (window.start.micros, window.end.micros)


def check_windowing(owner: str, *pcolls) -> bool:
    """Returns True for fixed windows, False for the global window; refuses anything else.

    Sliding windows are refused: a record would belong to size/period overlapping instances, each
    spending the full budget on it (the budget would multiply), and a query would get one answer
    per window. Sessions (and other merging windows) are refused because their boundaries depend
    on the data. Apply one transform per FixedWindows offset with a split budget instead.
    """
    fns = [p.windowing.windowfn for p in pcolls]
    for fn in fns:
        if isinstance(fn, SlidingWindows):
            raise InvalidParamsError(
                f'{owner}: sliding windows are not supported: each record would fall in '
                f'size/period overlapping windows and every window instance would spend the full '
                f'budget on it. Use GlobalWindows (one growing database) or FixedWindows '
                f'(independent instances, parallel composition), or split the budget yourself '
                f'over FixedWindows offsets.')
        if not isinstance(fn, (GlobalWindows, FixedWindows)):
            raise InvalidParamsError(
                f'{owner}: only GlobalWindows and FixedWindows are supported (window boundaries '
                f'must not depend on the data), got {type(fn).__name__}.')
    first = fns[0]
    for fn in fns[1:]:
        if type(fn) is not type(first) or (isinstance(fn, FixedWindows) and (
                fn.size != first.size or fn.offset != first.offset)):
            raise InvalidParamsError(f'{owner}: the data and query streams must use the same '
                                     f'windowing, got {first!r} and {fn!r}.')
    return isinstance(first, FixedWindows)


@beam.typehints.with_input_types(typing.Any)
@beam.typehints.with_output_types(_INSTANCE_ELEMENT)
class _TagFn(beam.DoFn):
    """Validates one input and keys it by ``key_bytes((key, window id))``, carrying (key,
    window id) and the item; runs in the input's windows."""

    def __init__(self, kind: int, label: str, mechanism: str, key_fn: Optional[Callable],
                 domain_fn: Optional[Callable], domain_size: int, keep_records: bool = False):
        self._kind = kind
        self._label = label
        self._mechanism = mechanism
        self._key_fn = key_fn
        self._domain_fn = domain_fn
        self._domain_size = domain_size
        #: Records before the gate: a 5th item, the input record's rendering, so a late
        #: record's dead letter holds it ('AnswerQueries' drops it before storing the item).
        self._keep = keep_records

    def process(self, element, timestamp=beam.DoFn.TimestampParam,
                window=beam.DoFn.WindowParam):
        micros = timestamp.micros
        stage = 'TagData' if self._kind == RECORD else 'TagQueries'
        wid = window_id_of(window)
        try:
            key = None if self._key_fn is None else shell.extract_key(self._key_fn, element)
            instance = shell.key_bytes((key, wid))
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
            if reason is not None:
                yield dead_letter(self._label, stage, reason, element, micros)
                return
            item = (micros, RECORD, int(index), int(index))
            if self._keep:
                item += (shell.render_record(element),)
            yield instance, ((key, wid), item)
            return
        qid, query = driver.normalise_query(element, self._domain_size)
        if not qid:
            reason = 'query has no query_id' + ('' if isinstance(query, LinearQuery)
                                                else f' ({query})')
            yield dead_letter(self._label, stage, reason, element, micros)
            return
        if not isinstance(query, LinearQuery):
            yield dead_letter(self._label, stage, f'invalid query {qid!r}: {query}', element,
                              micros)
            yield beam.pvalue.TaggedOutput(_REFUSED, driver.answer_record(
                qid, self._mechanism, micros, refusal='INVALID_QUERY', message=str(query)))
            return
        yield instance, ((key, wid), (micros, QUERY, qid, (qid, query)))


class _WindowSchedule:
    """The public deadlines of ``FixedWindows`` as a ``StepClock`` for ``LatenessGate``: step k
    is the k-th window from the one holding ``start``, released exactly when its instance's
    'expire' timer fires (at its end - 1 µs + allowed lateness); a record of a window before
    it has a negative step and is dead-lettered as before the start."""

    def __init__(self, windowfn: FixedWindows, start_micros: int, lateness_micros: int):
        size, offset = windowfn.size.micros, windowfn.offset.micros
        self.first = start_micros - (start_micros - offset) % size
        self.size = size
        self.clock = StepClock(max(self.first - 1, 0), size, lateness_micros)  # first ≥ 1: expand

    def step(self, item) -> int:
        """The window index of a tagged record ``((key, wid), item)``."""
        return (item[0][1][0] - self.first) // self.size

    def _reason(self, wid, step) -> str:
        if step < 0:
            return (f'event time is before the release start: window [{wid[0]}, {wid[1]}) us '
                    f'starts before the window holding start ({format_micros(self.first)})')
        return closed_reason(wid)

    def late(self, unused_key, item, step):
        """The dead letter of a gated record: as 'AnswerQueries' words it, holding the input
        record when the item carries it (``_TagFn``), else its domain index."""
        (_, wid), (micros, _, _, payload, *text) = item
        reason = self._reason(wid, step)
        late = late_window_reason(wid, self.clock.allowed_lateness_micros)
        record = RecordText(text[0]) if text else payload
        return (reason if step < 0 else late), record, micros

    def refuse(self, mechanism: str):
        """``refuse_fn`` of the query gate: a late query's HALTED refusal, as a closed
        instance words it ('AnswerQueries', ``GrowingLoop.fold``)."""
        def refuse(unused_key, item, step):
            (_, wid), (micros, _, _, (qid, _)) = item
            return halted(qid, mechanism, micros, self._reason(wid, step))
        return refuse


class GrowingDatabaseTransform(shell.ShellTransform):
    """Base of the public transforms: validation of the shared arguments and the wiring.

    Subclasses call ``super().__init__(label, accountant=..., noise_key=..., debug_metrics=...,
    testing_seed=...)``, build their
    mechanism inside ``with self.params():``, set ``self._engine`` (a ``GrowingEngine``) and
    ``self._domain_size``, and call ``_setup``, which checks the budget."""

    def _setup(self, domain_fn, data_key_fn, query_key_fn, allowed_lateness,
               timer_granularity, start=None) -> None:
        owner = self.owner
        refuse_milliseconds(owner, 'start', start)
        self._start = None if start is None else shell.to_micros(owner, 'start', start,
                                                                  allow_zero=False)
        shell.check_callable(owner, 'domain_fn', domain_fn)
        shell.check_callable(owner, 'data_key_fn', data_key_fn, optional=True)
        shell.check_callable(owner, 'query_key_fn', query_key_fn, optional=True)
        self._lateness = shell.to_micros(owner, 'allowed_lateness', allowed_lateness,
                                         duration=True)
        self._granularity = shell.to_micros(owner, 'timer_granularity', timer_granularity,
                                            duration=True)
        self._domain_fn = domain_fn
        self._data_key_fn = data_key_fn
        self._query_key_fn = query_key_fn
        self.check_budget()

    def privacy_costs(self):
        """The cost per privacy unit (one record): spent once whatever the number of keys or
        fixed windows (each record is in exactly one instance: parallel composition)."""
        return [(self.label, self._engine.mechanism.privacy_cost())]

    @property
    def mechanism(self):
        return self._engine.mechanism

    def loop_driver(self, bounded: bool) -> GrowingLoop:
        """The driver 'AnswerQueries' runs per (key, window) instance (``bounded``: both
        inputs are bounded); ``beam_dp.testing.replay`` drives it as the job does."""
        return GrowingLoop(self._engine, bounded, self._granularity, self._lateness)

    @property
    def engine(self) -> GrowingEngine:
        """The pure driver of one instance (drive it with ``drivers.growing.run_instance``)."""
        return self._engine

    def expand(self, inputs):
        if isinstance(inputs, dict):
            data, queries = inputs['data'], inputs['queries']
        else:
            data, queries = inputs
        fixed = check_windowing(self.owner, data, queries)
        noise_label = self.spend_budget((data, queries))
        label, name, n_dom = self.label, self._engine.name, self._domain_size
        bounded = bool(data.is_bounded and queries.is_bounded)
        tagged_data = data | 'TagData' >> beam.ParDo(_TagFn(
            RECORD, label, name, self._data_key_fn, self._domain_fn, n_dom,
            keep_records=fixed and not bounded)).with_outputs(DEAD_LETTER, main='items')
        tagged_queries = queries | 'TagQueries' >> beam.ParDo(_TagFn(
            QUERY, label, name, self._query_key_fn, None, n_dom)).with_outputs(
                DEAD_LETTER, _REFUSED, main='items')
        records = tagged_data.items | 'DataToGlobalWindow' >> beam.WindowInto(GlobalWindows())
        asked = tagged_queries.items | 'QueriesToGlobalWindow' >> beam.WindowInto(
            GlobalWindows())
        refused = tagged_queries[_REFUSED] | 'RefusedToGlobalWindow' >> beam.WindowInto(
            GlobalWindows())
        refusals, gate_dead = [refused], []
        if fixed and not bounded and self._start is None:
            raise InvalidParamsError(
                f'{self.owner}: start must be set for an unbounded input in fixed windows: '
                f'without a public start the stage cannot learn when each window is released '
                f'independently of the data, and whether a late record is counted would depend '
                f'on other records of its window (not private). Pass start= (a datetime or '
                f'epoch seconds at or before the first window to answer).')
        if fixed and not bounded:
            # Whether a record's instance is closed depends on its (key, window)'s other items
            # (the first one arms 'expire'): the gate decides it on the public deadlines first.
            schedule = _WindowSchedule(data.windowing.windowfn, self._start, self._lateness)
            if schedule.first < 1:
                raise InvalidParamsError(
                    f'{self.owner}: start must fall in a window that begins after the epoch '
                    f'(the window holding start={self._start / 1e6:g} s begins at '
                    f'{schedule.first / 1e6:g} s): the deadlines would then run later than the '
                    f"windows' own.")
            gated = records | 'GateLateRecords' >> LatenessGate(
                schedule.clock, label, 'AnswerQueries', schedule.step, schedule.late)
            records, gate_dead = gated.passed, [gated.dead_letter]
            # A query's fate must not depend on records either: a closed instance refuses it
            # HALTED, an unopened one would answer it (t = 0). The same schedule decides it.
            gated_queries = asked | 'GateLateQueries' >> LatenessGate(
                schedule.clock, label, 'AnswerQueries', schedule.step, schedule.late,
                refuse_fn=schedule.refuse(name))
            asked = gated_queries.passed
            refusals.append(gated_queries.refused)
            gate_dead.append(gated_queries.dead_letter)
        items = ((records, asked)
                 | 'MergeInputs' >> beam.Flatten().with_output_types(_INSTANCE_ELEMENT))
        processed = items | 'AnswerQueries' >> beam.ParDo(buffered_loop(
            self.loop_driver(bounded), label, self.rng, cell='instance', timer='flush',
            expiry='expire', noise_label=noise_label)).with_outputs(
                DEAD_LETTER, RELEASES, main='answers')
        answers = (processed.answers, *refusals) | 'MergeAnswers' >> beam.Flatten()
        answers.element_type = QueryAnswer
        dead = shell.merge_dead_letters([
            tagged_data[DEAD_LETTER]
            | 'DataDeadLettersToGlobalWindow' >> beam.WindowInto(GlobalWindows()),
            tagged_queries[DEAD_LETTER]
            | 'QueryDeadLettersToGlobalWindow' >> beam.WindowInto(GlobalWindows()),
            processed[DEAD_LETTER]] + gate_dead, self.debug_metrics, label)
        return GrowingDatabaseOutputs(answers, processed[RELEASES], dead)
