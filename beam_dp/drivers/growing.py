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

Every ``QueryAnswer`` is built here (``answer_record``), refusals included.
"""

import dataclasses
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from beam_dp import noise
from beam_dp.errors import InvalidRecordError
from beam_dp.io.epochs import EpochReleaseRecord
from beam_dp.io.queries import REFUSAL_REASONS
from beam_dp.io.queries import QueryAnswer
from beam_dp.io.queries import query_from_avro
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.queries import LinearQuery

__all__ = [
    'BBEngine',
    'GrowingEngine',
    'InstanceOutput',
    'PMWGEngine',
    'QUERY',
    'RECORD',
    'answer_record',
    'check_domain_index',
    'instance_rng',
    'normalise_query',
    'order',
    'process',
    'refusal_message',
    'run_instance',
    'split_due',
]

RECORD, QUERY = 0, 1


def instance_rng(rng: noise.RandomSource, label: str, key, window_id) -> noise.RandomSource:
    """The random source of one (key, window) instance: queries use ``.derive('query', i)`` (i =
    the instance's query index), data batches ``.derive('data')``. Under a seed this makes every
    runner and bundling draw the same noise."""
    return rng.derive(label, key, window_id)


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


def split_due(items: Sequence[tuple], upto: int) -> Tuple[List[tuple], List[tuple]]:
    """(due, rest): the pending items stamped ≤ ``upto`` in ``order``, and the later ones."""
    return order(i for i in items if i[0] <= upto), [i for i in items if i[0] > upto]


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
