"""The growing-database driver (pure, no Beam): what the ``WindowedPMWG``, ``BBSchedulerQueries``
and ``BBImproverQueries`` DoFns call for one (key, window) instance.

An instance receives items ``(micros, kind, tie, payload)``: a record (``RECORD``, payload = its
domain element) or a query (``QUERY``, payload = (query_id, LinearQuery)). ``process`` takes the
items that are due, in event-time order (``order``: by timestamp, records before queries, then
the domain element / query id), feeds each run of records to the mechanism as one batch and
answers each query on exactly the records before it. The engine adapts one pure mechanism:

* ``PMWGEngine``: records → ``PMWG.add_data``; a query → ``PMWG.answer``;
* ``BBEngine``: records → ``add_data_with_releases``, CUT AT EPOCH STARTS for an eager
  ``BBScheduler`` so the box runs at exactly t_i whatever the batching;
  a query → ``answer`` (a lazy run is emitted as a release).

So ``run_instance`` over a whole stream in a notebook gives what the Beam job gives, however the
runner bundles it (the parity tests). Noise: the instance's source is ``instance_rng(rng, label,
key, window)``; record batches draw from ``.derive('data')``, the i-th query of the instance from
``.derive('query', i)``.

Every ``QueryAnswer`` is built here (``answer_record``), refusals included. ``GrowingDriver`` is
the instance's driver that the buffered release loop runs per key on the step clock as
'AnswerQueries' and that ``beam_dp.testing.replay`` drives as the job does.
"""

import dataclasses
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.protocol import Dead
from beam_dp.drivers.protocol import Outcome
from beam_dp.drivers.protocol import RecordText
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io.epochs import EpochReleaseRecord
from beam_dp.io.queries import REFUSAL_REASONS
from beam_dp.io.queries import QueryAnswer
from beam_dp.io.queries import query_from_avro
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.queries import LinearQuery

__all__ = [
    'answer_record',
    'BBEngine',
    'budget_epsilon_delta',
    'check_domain_index',
    'ClockState',
    'GrowingDriver',
    'GrowingEngine',
    'GrowingItem',
    'instance_key',
    'instance_rng',
    'InstanceOutput',
    'late_query',
    'normalise_query',
    'order',
    'period_last_step',
    'PMWGEngine',
    'process',
    'QUERY',
    'RECORD',
    'REFUSALS',
    'refusal_message',
    'run_instance',
    'split_refusals',
]

RECORD, QUERY = 0, 1
#: The tag of the scheduler transforms' ``EpochReleaseRecord`` output.
RELEASES = 'releases'
#: The stage of the instance loop's answers and dead letters (the transform's label for it).
STAGE = 'AnswerQueries'


def instance_rng(rng: noise.RandomSource, label: str, key, window_id) -> noise.RandomSource:
    """The random source of one (key, window) instance: queries use ``.derive('query', i)`` (i =
    the instance's query index), data batches ``.derive('data')``. Under a seed this makes every
    runner and bundling draw the same noise."""
    return rng.derive(label, key, window_id)


def instance_key(key, keyed: bool, micros: int, period_micros: Optional[int]):
    """The key of the instance an item belongs to: the user key, or with a period the pair
    (key, period index) (the period index alone without a key function). Periods are aligned
    on the epoch (index = ⌊micros / period⌋), as Beam's FixedWindows."""
    if period_micros is None:
        return key
    index = int(micros) // period_micros
    return (key, index) if keyed else index


def period_last_step(clock: StepClock, micros: int, period_micros: int) -> int:
    """The last step holding an event time of the period of ``micros`` (the step of its last
    microsecond, or the clock's last step if that is earlier)."""
    last = clock.step_of((int(micros) // period_micros + 1) * period_micros - 1)
    return last if clock.last_step is None else min(last, clock.last_step)


def refusal_message(status: str, t: int, n: int) -> str:
    """A human-readable reason for a refusal (every number in it is public)."""
    return {
        'NOT_STARTED': f'the database has {t} records, fewer than the initial size n={n}',
        'HALTED': 'the instance halted: its hard-query cap or budget is exhausted',
        'BUDGET_EXHAUSTED': 'the privacy budget of this instance is exhausted',
        'UNKNOWN_QUERY': 'the black box cannot answer this query (not in its query set)',
    }.get(status, '')


def answer_record(query_id: str, mechanism: str, micros: int, result: Any = None,
                  refusal: Optional[str] = None, message: str = '', n: Optional[int] = None,
                  delta_spent: float = 0.0) -> QueryAnswer:
    """The one place a ``QueryAnswer`` is built.

    With ``result`` (anything with ``value``, ``status``, ``t``, ``epsilon_spent``; optional
    ``delta_spent`` and ``hard``): the mechanism's answer, a refusal status getting
    ``refusal_message`` (``n`` = the instance's initial size). Without: a refusal ``refusal``
    (INVALID_QUERY, HALTED) with ``message`` that spent nothing."""
    if result is None:
        return QueryAnswer(query_id=query_id, value=None, refusal=refusal,
                           message=str(message)[:500], mechanism=mechanism, epsilon_spent=0.0,
                           timestamp=int(micros))
    status = str(getattr(result, 'status', '')).upper()
    refused = status in REFUSAL_REASONS
    t = getattr(result, 't', None)
    return QueryAnswer(
        query_id=query_id,
        value=None if refused or result.value is None else float(result.value),
        refusal=status if refused else None,
        message=refusal_message(status, t, n) if refused and n is not None else '',
        mechanism=mechanism,
        epsilon_spent=float(getattr(result, 'epsilon_spent', 0.0)),
        delta_spent=float(delta_spent or getattr(result, 'delta_spent', 0.0)),
        t=t, hard=getattr(result, 'hard', None), timestamp=int(micros))


def check_domain_index(index, domain_size: int) -> Optional[str]:
    """None if ``index`` is a domain element in [0, domain_size), else why not."""
    if (isinstance(index, bool) or not isinstance(index, (int, np.integer))
            or not 0 <= int(index) < domain_size):
        return f'domain_fn must return an integer in [0, {domain_size}), got {index!r:.40}'
    return None


def normalise_query(element, domain_size: Optional[int] = None) -> Tuple[Optional[str], Any]:
    """(query_id, LinearQuery) from (id, LinearQuery), a LinearQuery with an id or an Avro dict.

    Returns (query_id or None, LinearQuery or an error message); with ``domain_size``, a query
    over another domain is an error."""
    qid, query = _normalise(element)
    if (domain_size is not None and isinstance(query, LinearQuery)
            and query.domain_size != domain_size):
        query = f'query must be over a domain of size {domain_size}, got {query.domain_size}'
    return qid, query


def _normalise(element) -> Tuple[Optional[str], Any]:
    qid = None
    try:
        if isinstance(element, LinearQuery):
            return element.query_id, element
        if isinstance(element, dict):
            qid = element.get('id') or None
            return qid, query_from_avro(element)
        if isinstance(element, (tuple, list)) and len(element) == 2:
            qid = None if element[0] is None else str(element[0])
            query = element[1]
            if isinstance(query, dict):
                query = query_from_avro(query)
            if not isinstance(query, LinearQuery):
                return qid, f'query must be a LinearQuery or an Avro dict, got {query!r:.80}'
            return qid, query
    except InvalidRecordError as e:
        return qid, str(e)
    return None, (f'a query must be (query_id, LinearQuery), a LinearQuery with a query_id or an '
                  f'Avro dict, got {element!r:.80}')


class GrowingEngine:
    """Adapter between an instance and a pure mechanism.

    ``add(state, indices, rng) -> (releases, state)``; ``answer(state, query_id, query, micros,
    rng) -> (QueryAnswer, releases, state)``; ``release_record(key, wid, release, micros)``."""
    name = ''

    def __init__(self, mechanism, name: str):
        self.mechanism = mechanism
        self.name = name

    def init_state(self):
        return self.mechanism.init_state()

    def add(self, state, indices: np.ndarray, rng):
        raise NotImplementedError

    def answer(self, state, query_id: str, query: LinearQuery, micros: int, rng):
        raise NotImplementedError

    def release_record(self, key, wid, release, micros: int):
        raise NotImplementedError


class PMWGEngine(GrowingEngine):
    """Records → ``PMWG.add_data``; a query → ``PMWG.answer`` → ``QueryAnswer``."""

    def __init__(self, mechanism):
        super().__init__(mechanism, 'pmwg')

    def add(self, state, indices, rng):
        return (), self.mechanism.add_data(state, indices, rng)

    def answer(self, state, query_id, query, micros, rng):
        result, state = self.mechanism.answer(state, query, rng)
        return answer_record(query_id, self.name, micros, result, n=self.mechanism.n), (), state


class BBEngine(GrowingEngine):
    """Records → ``add_data_with_releases``, cut at epoch starts (eager ``BBScheduler``), so the
    releases do not depend on how records are batched; a query → ``answer`` (a lazy run is
    detected by the run counter and emitted as a release)."""

    def add(self, state, indices, rng):
        m = self.mechanism
        if m.lazy or not isinstance(m, BBScheduler):
            return m.add_data_with_releases(state, indices, rng)
        releases = []
        rest = np.atleast_1d(np.asarray(indices))
        while rest.size:
            # Cut the batch at the next epoch start: the box then runs exactly at t_i whatever the
            # bundling; several starts at one integer collapse.
            need = max(1, m.start(state.epoch + 1) - state.t)
            chunk, rest = rest[:need], rest[need:]
            new, state = m.add_data_with_releases(state, chunk, rng)
            releases.extend(new)
        return tuple(releases), state

    def answer(self, state, query_id, query, micros, rng):
        runs = state.runs
        result, state = self.mechanism.answer(state, query, rng)
        releases = (state.release,) if state.runs > runs else ()
        answer = answer_record(query_id, self.name, micros, result, n=self.mechanism.n,
                               delta_spent=self.mechanism.delta)
        return answer, releases, state

    def release_record(self, key, wid, release, micros):
        return EpochReleaseRecord(
            key='' if key is None else str(key),
            window_start_micros=None if wid is None else wid[0],
            window_end_micros=None if wid is None else wid[1],
            epoch=int(release.epoch), t=int(release.t), epsilon=float(release.epsilon),
            alpha=float(release.alpha), ln_inv_beta=float(release.ln_inv_beta),
            mechanism=self.name, timestamp=int(micros))


@dataclasses.dataclass(frozen=True)
class InstanceOutput:
    """What processing due items produced: answers (``QueryAnswer``), releases
    (``EpochReleaseRecord``) and rejected queries (reason, payload, micros)."""
    answers: Tuple[QueryAnswer, ...] = ()
    releases: Tuple[Any, ...] = ()
    rejected: Tuple[Tuple[str, Any, int], ...] = ()


def order(items: Sequence[tuple]) -> List[tuple]:
    """Event-time order: (timestamp, records before queries, domain element / query id)."""
    return sorted(items, key=lambda i: i[:3])


def process(engine: GrowingEngine, state, due: Sequence[tuple], base: noise.RandomSource,
            queries_so_far: int, key=None, wid=None) -> Tuple[Any, int, InstanceOutput]:
    """Processes ``due`` (already in ``order``) on ``state``; ``base`` is the instance's
    ``instance_rng``, ``queries_so_far`` its query count. Returns (state, query count, output)."""
    answers, releases, rejected = [], [], []
    batch: List[int] = []
    stamps: List[int] = []
    data_rng = base.derive('data')

    def add_batch(state):
        if not batch:
            return state
        before = getattr(state, 't', 0)
        new, state = engine.add(state, np.asarray(batch, dtype=np.int64), data_rng)
        for r in new:
            # Stamped with the record that brought the size to the run's t (the epoch start),
            # so the record does not depend on how the runner bundled the records.
            at = min(len(stamps), max(1, r.t - before)) - 1
            releases.append(engine.release_record(key, wid, r, stamps[at]))
        batch.clear()
        stamps.clear()
        return state

    for micros, kind, _, payload in due:
        if kind == RECORD:
            batch.append(payload)
            stamps.append(micros)
            continue
        state = add_batch(state)
        qid, query = payload
        index = queries_so_far
        queries_so_far += 1
        try:
            answer, new, state = engine.answer(state, qid, query, micros,
                                               base.derive('query', index))
        except InvalidRecordError as e:
            rejected.append((str(e), payload, micros))
            answers.append(answer_record(qid, engine.name, micros, refusal='INVALID_QUERY',
                                         message=str(e)))
            continue
        releases.extend(engine.release_record(key, wid, r, micros) for r in new)
        answers.append(answer)
    state = add_batch(state)
    return state, queries_so_far, InstanceOutput(tuple(answers), tuple(releases),
                                                 tuple(rejected))


def run_instance(engine: GrowingEngine, items: Sequence[tuple], rng: noise.RandomSource,
                 label: str, key=None, wid=None) -> InstanceOutput:
    """Drives one instance over all of its items in one go (a notebook, a benchmark, the parity
    tests): the same answers and releases as the Beam job under the same ``rng`` and label."""
    _, _, out = process(engine, engine.init_state(), order(items),
                        instance_rng(rng, label, key, wid), 0, key, wid)
    return out


#: The tag of the refusals output (``Outcome.tagged``; ``RELEASES``: the epoch runs).
REFUSALS = 'refusals'


class ClockState(NamedTuple):
    """The loop state of one instance (one key): the user key, the mechanism's state (None
    before the first release), the instance's query count, the last released step (-1: none)
    and the step whose release timer is armed (None: none)."""
    key: Any
    mechanism: Any
    queries: int
    released: int
    wake: Optional[int]


class GrowingItem(NamedTuple):
    """A loop payload: the user key, the item ``(micros, kind, tie, payload)`` and, for a record
    of an unbounded input, its rendering (for a late dead letter; never stored)."""
    key: Any
    item: tuple
    text: Optional[str] = None


def split_refusals(answers: Sequence[QueryAnswer]) -> Tuple[list, list]:
    """(answers, refusals): a refused query goes to the ``refusals`` output, never to the
    answers (the one refusal shape of every query family, README "Refusals")."""
    kept, refused = [], []
    for answer in answers:
        (refused if answer.refusal is not None else kept).append(answer)
    return kept, refused


def late_query(qid: str, mechanism: str, micros: int, clock: StepClock, step: int) -> QueryAnswer:
    """The refusal of a query whose step was already released ('LATE', the one late wording)."""
    return answer_record(qid, mechanism, micros, refusal='LATE', message=clock.late_reason(step))


class GrowingDriver:
    """The buffered-loop driver (``beam_dp.drivers.protocol.BufferedDriver``) of the
    growing-database transforms: one instance per key on the public ``StepClock``.

    ``fold`` keeps an item in the loop's pending bag (a late one — its step already released —
    is dead-lettered, a record, or refused 'LATE', a query) and arms the release time of the
    earliest pending step. ``close`` processes every pending item of the steps up to the armed
    one in ``order`` (``process``: the same answers as ``run_instance``, however the items
    were bundled), emits the answers (main output), the refusals (``REFUSALS``) and the
    black-box runs (``RELEASES``), and arms the next pending step. Steps without items are not
    visited (nothing to release). Noise: the instance's source is ``noise.derive(key, None)``,
    i.e. ``instance_rng(rng, label, key, None)``: the addresses of the Beam-window version in
    the global window, unchanged.

    With ``period_micros`` (per-period instances, ``instance_key``), an instance ends with the
    last step of its period: the close of that step says ``expire`` and the loop clears all
    of the instance's state. An instance whose items stop before its last step arms that
    step's release time (an empty close, which expires it). An item of an expired instance
    never reaches the loop: it is late, and the lateness gate in front of 'AnswerQueries'
    dead-letters (refuses) it on the public deadlines (a batch pipeline has none: every item is
    read before the first release); so the privacy argument is the one of the per-period key
    (each record in one instance, parallel composition), and no noise address is drawn
    twice."""

    LOOP = 'buffered'

    def __init__(self, engine: GrowingEngine, clock: StepClock,
                 period_micros: Optional[int] = None):
        self.engine = engine
        self.clock = clock
        self.period_micros = period_micros

    def start(self, key, noise_root) -> Outcome:
        return Outcome(state=None)

    def fold(self, state: Optional[ClockState], key, payload: GrowingItem) -> Outcome:
        user_key, item, text = payload
        clock = self.clock
        micros, kind, _, body = item[:4]
        step = clock.step_of(micros)
        if state is not None and step <= state.released:
            if kind == QUERY:
                return Outcome(tagged=[(REFUSALS, late_query(body[0], self.engine.name, micros,
                                                             clock, step))])
            return Outcome(dead_letters=[Dead(STAGE, clock.late_reason(step),
                                              body if text is None else RecordText(text),
                                              micros)])
        stored = tuple(item[:4])
        if state is None:
            state = ClockState(user_key, None, 0, -1, None)
        if state.wake is None or step < state.wake:
            return Outcome(state._replace(wake=step), keep=True, stored=stored,
                           timer_micros=clock.release_time_micros(step))
        return Outcome(keep=True, stored=stored)

    def close(self, state: Optional[ClockState], key, fired_micros: int, pending,
              noise_root) -> Outcome:
        if state is None or state.wake is None:
            return Outcome()
        clock, engine, upto, done = self.clock, self.engine, state.wake, state.released
        # ``fold`` never keeps an item of a released step, so an item of a step ≤ ``done`` in
        # the bag was already processed (a bag clear lost by the runner): never twice.
        due = order(i for i in pending if done < clock.step_of(i[0]) <= upto)
        rest = [i for i in pending if clock.step_of(i[0]) > upto]
        mechanism = engine.init_state() if state.mechanism is None else state.mechanism
        mechanism, queries, out = process(engine, mechanism, due,
                                          noise_root.derive(state.key, None), state.queries,
                                          state.key, None)
        answers, refusals = split_refusals(out.answers)
        wake = min((clock.step_of(i[0]) for i in rest), default=None)
        expire = False
        if self.period_micros is not None and wake is None:
            # Per-period instance: it ends with its period's last step (an empty close there).
            last = upto if not due else period_last_step(clock, due[0][0], self.period_micros)
            expire = upto >= last
            wake = None if expire else last
        dead = [Dead(STAGE, reason, payload, micros) for reason, payload, micros in out.rejected]
        return Outcome(None if expire else ClockState(state.key, mechanism, queries, upto, wake),
                       releases=answers, dead_letters=dead, pending=rest,
                       timer_micros=None if wake is None else clock.release_time_micros(wake),
                       tagged=[(REFUSALS, r) for r in refusals]
                       + [(RELEASES, r) for r in out.releases], expire=expire)


def budget_epsilon_delta(owner: str, budget) -> Tuple[float, float]:
    """(ε, δ) of a ``PrivacyBudget`` for a growing-database mechanism (which is parametrised
    by ε and δ; a ρ budget is refused).

    Raises:
      InvalidParamsError: if ``budget`` is not a ``PrivacyBudget(epsilon=..., delta=...)``.
    """
    if not isinstance(budget, PrivacyBudget):
        raise InvalidParamsError(f'{owner}: budget must be a PrivacyBudget, got {budget!r:.80}: '
                                 f'pass budget=PrivacyBudget(epsilon=..., delta=...).')
    if budget.is_zcdp:
        raise InvalidParamsError(f'{owner}: the mechanism is parametrised by (ε, δ), not ρ: pass '
                                 f'budget=PrivacyBudget(epsilon=..., delta=...), got '
                                 f'{budget!r}.')
    return budget.epsilon, budget.delta
