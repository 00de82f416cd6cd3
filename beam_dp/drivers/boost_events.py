"""The event order of one Boost dataset (pure, no Beam): what ``BoostQueries``' stateful DoFn
applies on each timer, and the pure reference its parity tests replay.

Items are ``('row', event_time_micros, attributes)`` and ``('query', event_time_micros,
BoostQueryRecord)``. ``run_events`` adds the rows to their open blocks (a row of a sealed block
is refused as late by the driver), then walks event time: each block is sealed at its end plus the
allowed lateness (empty blocks included), each group of queries stamped at one instant is
submitted together (the driver answers it in query-id order); a seal and a query group at the
same instant: the seal first. So the outputs depend on event times only, never on bundling.
``parse_query`` checks a query element (record or Avro dict) before it becomes an event.
"""

import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional

from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.protocol import END_OF_TIME_MICROS
from beam_dp.drivers.protocol import Dead
from beam_dp.drivers.protocol import Outcome
from beam_dp.drivers.protocol import RecordText
from beam_dp.errors import InvalidRecordError
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostBlockSealed
from beam_dp.io.boost import BoostLedgerRow
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.boost import BoostRefusal
from beam_dp.io.boost import boost_from_avro
from beam_dp.noise import canonical_key

__all__ = ['BLOCKS', 'BoostItem', 'BoostLoop', 'LEDGER', 'QUERY', 'REFUSALS', 'ROW', 'parse_query',
           'refuse_waiting', 'run_events']

ROW, QUERY = 'row', 'query'
_QUERY_TYPES = {'query_id': str, 'dataset': str, 'subsets': list, 'vector': list,
                'first_block': int, 'last_block': int, 'latest': int}


def parse_query(element) -> BoostQueryRecord:
    """A ``BoostQueryRecord`` or its Avro dict → the record, types checked (its window and
    predicate are checked by the driver, which refuses them with a reason).

    Raises:
      InvalidRecordError: the dead-letter reason.
    """
    if isinstance(element, dict):
        try:
            element = boost_from_avro(BoostQueryRecord, element)
        except (KeyError, TypeError) as e:
            raise InvalidRecordError(f'query dict is not a BoostQueryRecord: {e!r}') from e
    if not isinstance(element, BoostQueryRecord):
        raise InvalidRecordError(f'a query must be a BoostQueryRecord or its Avro dict, got '
                                 f'{type(element).__name__}')
    for name, kind in _QUERY_TYPES.items():
        value = getattr(element, name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise InvalidRecordError(f'query field {name} must be {kind.__name__}, got '
                                     f'{value!r:.80}')
    if not element.query_id:
        raise InvalidRecordError('query has no query_id')
    # The ids address the query's noise: their canonical (plain str) form, as every key.
    element = element._replace(query_id=canonical_key(element.query_id),
                               dataset=canonical_key(element.dataset))
    if not (all(isinstance(s, list) for s in element.subsets)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                    for x in element.vector)):
        raise InvalidRecordError('query subsets must be lists and vector numbers')
    return element


def run_events(driver: BoostDriver, clock, state, items: List[tuple], upto: int, rng):
    """THE order of a dataset's events up to event time ``upto`` (the DoFn's timer and the pure
    reference share it): rows of blocks not yet sealed are added; then, in time order, each
    block seal (at end + lateness) and each group of queries stamped at one instant (in
    query-id order, by the driver); a seal and a query group at the same instant: seal first.
    Returns (state, outputs, items not yet due)."""
    state, rejected = driver.add_rows(state, [(i[1], i[2]) for i in items if i[0] == ROW])
    queries = sorted((i for i in items if i[0] == QUERY and i[1] <= upto),
                     key=lambda i: (i[1], i[2].query_id))
    rest = [i for i in items if i[0] == QUERY and i[1] > upto]
    out: List[Any] = list(rejected)
    last = clock.last_step
    for t in sorted({i[1] for i in queries}) + [None]:
        watermark = (upto if t is None else t) - clock.allowed_lateness_micros
        if last is not None:
            watermark = min(watermark, driver.block_end(last))
        state, sealed = driver.seal_until(state, watermark, rng)
        out.extend(sealed)
        if t is not None:
            state, answered = driver.submit(state, [i[2] for i in queries if i[1] == t], rng,
                                            now_micros=t)
            out.extend(answered)
        if last is not None and state.mech.num_blocks > last:
            state, refused = refuse_waiting(driver, state)
            out.extend(refused)
    return state, out, rest


def refuse_waiting(driver: BoostDriver, state):
    """Once the last block is sealed (or at the end of input) every query still waiting for an
    unsealed block is refused ('window_not_sealed'), in query-id order."""
    out: List[Any] = []
    waiting, state = state.pending, dataclasses.replace(state, pending=())
    for q in waiting:
        state, rows = driver._finish(state, q, 'window_not_sealed', None)  # pylint: disable=protected-access
        out.extend(rows)
    return state, out


class BoostItem(NamedTuple):
    """One event of a dataset: ``kind`` ROW (``payload``: the attributes) or QUERY (``payload``:
    the ``BoostQueryRecord``), at ``micros``."""
    kind: str
    micros: int
    payload: Any


#: The tags of a Boost dataset's outputs besides the answers and the dead letters.
REFUSALS, LEDGER, BLOCKS = 'refusals', 'ledger', 'blocks'
_STAGE = 'AnswerQueries'


class BoostLoop:
    """``BufferedDriver`` of the Boost datasets (``beam_dp.drivers.protocol``), keyed by
    dataset: the cell holds ``(BoostDriverState, armed wake micros or None)``, rows and queries
    wait in the pending bag, ONE timer wakes at the next block seal or the next query, whichever
    is first (``run_events`` orders what is due). Noise at (label); the drivers' own addresses
    below it. At the end of input every waiting query is refused ('window_not_sealed')."""

    LOOP = 'buffered'

    def __init__(self, drivers: Dict[str, BoostDriver], clock: StepClock):
        self.drivers = drivers
        self.clock = clock

    def _seal_time(self, block: int) -> Optional[int]:
        if self.clock.last_step is not None and block > self.clock.last_step:
            return None
        return self.clock.release_time_micros(block)

    @staticmethod
    def _arm(wake: Optional[int], micros: Optional[int]):
        """(wake, timer micros): arm at ``micros`` only if it is earlier than ``wake``."""
        if micros is not None and (wake is None or micros < wake):
            return micros, min(micros, END_OF_TIME_MICROS)
        return wake, None

    def start(self, dataset: str, noise_root) -> Outcome:
        wake, micros = self._arm(None, self._seal_time(0))
        return Outcome((self.drivers[dataset].init_state(), wake), timer_micros=micros)

    def fold(self, stored, dataset: str, item: BoostItem) -> Outcome:
        state, wake = stored
        kind, micros, payload = item[:3]
        if kind == ROW:
            driver = self.drivers[dataset]
            block = (micros - driver.start_micros) // driver.block_micros
            carried = len(item) > 3      # the row's rendering: never stored
            if block < state.mech.num_blocks:
                record = RecordText(item[3]) if carried else {
                    'dataset': dataset, 'attributes': payload}
                return Outcome(dead_letters=[Dead(_STAGE, self.clock.late_reason(block), record,
                                                  micros)])
            return Outcome(keep=True, stored=BoostItem(*item[:3]) if carried else None)
        wake, timer = self._arm(wake, micros)
        return Outcome((state, wake), timer_micros=timer, keep=True)

    def close(self, stored, dataset: str, fired_micros: int, pending, noise_root) -> Outcome:
        state, _ = stored
        state, out, rest = run_events(self.drivers[dataset], self.clock, state, list(pending),
                                      fired_micros, noise_root.derive())
        times = [i[1] for i in rest if i[0] == QUERY]
        seal = self._seal_time(state.mech.num_blocks)
        times += [] if seal is None else [seal]
        wake, timer = self._arm(None, min(times) if times else None)
        return self._route(out, (state, wake), timer_micros=timer, pending=rest)

    def end_of_input(self, stored, dataset: str, pending=(),  # pylint: disable=unused-argument
                     noise_root=None) -> Outcome:
        state, _ = stored
        state, out = refuse_waiting(self.drivers[dataset], state)
        return self._route(out, (state, None), pending=[])

    @staticmethod
    def _route(out, state, **kwargs) -> Outcome:
        answers, dead, tagged = [], [], []
        for record in out:
            if isinstance(record, BoostAnswerRecord):
                answers.append(record)
            elif isinstance(record, BoostRefusal):
                tagged.append((REFUSALS, record))
            elif isinstance(record, BoostLedgerRow):
                tagged.append((LEDGER, record))
            elif isinstance(record, BoostBlockSealed):
                tagged.append((BLOCKS, record))
            else:
                dead.append(Dead(_STAGE, record.reason, record.record, record.event_time_micros))
        return Outcome(state, answers, dead, tagged=tagged, **kwargs)
