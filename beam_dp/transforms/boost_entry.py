"""The entry stages of ``BoostQueries``: 'ExtractRows' / 'ExtractQueries' (``ExtractFn``:
validate a row or a query, key it by its dataset, as a ``BoostItem``; a query of an unknown
dataset is refused 'wrong_dataset'). The wiring is ``boost.py``."""

import apache_beam as beam

from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.boost_events import QUERY
from beam_dp.drivers.boost_events import REFUSALS
from beam_dp.drivers.boost_events import ROW
from beam_dp.drivers.boost_events import BoostItem
from beam_dp.drivers.boost_events import parse_query
from beam_dp.drivers.clock import StepClock
from beam_dp.errors import InvalidRecordError
from beam_dp.io.boost import BoostRefusal
from beam_dp.transforms import shell

__all__ = [
    'ExtractFn',
]


class ExtractFn(beam.DoFn):
    """Rows → (dataset, ('row', micros, attributes)); queries → (dataset, ('query', micros,
    record)); or a dead letter (a query of an unknown dataset: a refusal)."""

    def __init__(self, kind: str, label: str, driver: BoostDriver, fns, datasets,
                 clock: StepClock, keep_records: bool = False):
        self._kind = kind
        self._label = label
        self._driver = driver
        #: Rows: a 4th item, the input record's rendering, so a late row's dead letter holds
        #: it ('AnswerQueries' drops it before storing the row).
        self._keep = keep_records
        self._fns = fns
        self._datasets = frozenset(datasets)
        self._clock = clock

    def setup(self):
        self._empty = self._driver.init_state()

    def extract_row(self, record, micros: int):
        """(dataset, item); raises ``InvalidRecordError`` with the dead-letter reason."""
        dataset_fn, attributes_fn = self._fns
        dataset = shell.extract_key(dataset_fn, record)
        if not isinstance(dataset, str) or dataset not in self._datasets:
            raise InvalidRecordError(f'dataset {dataset!r:.80} is not in the public dataset set')
        try:
            attributes = tuple(attributes_fn(record))
        except Exception as e:  # pylint: disable=broad-except
            raise InvalidRecordError(f'attributes_fn raised {e!r}') from e
        state, rejected = self._driver.add_rows(self._empty, [(micros, attributes)])
        if rejected:
            raise InvalidRecordError(rejected[0].reason)
        self._clock.checked_step(micros)       # after its last step: the clock's reason
        return dataset, BoostItem(ROW, micros, tuple(int(x) for x in attributes))

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        stage = 'ExtractRows' if self._kind == ROW else 'ExtractQueries'
        try:
            if self._kind == ROW:
                dataset, item = self.extract_row(element, micros)
                if self._keep:
                    item += (shell.render_record(element),)
                yield dataset, item
                return
            query = parse_query(element)
        except InvalidRecordError as e:
            yield shell.dead_letter(self._label, stage, str(e), element, micros)
            return
        if query.dataset not in self._datasets:
            yield beam.pvalue.TaggedOutput(REFUSALS, BoostRefusal(
                query.dataset, query.query_id, 'wrong_dataset', query.first_block,
                query.last_block, False))
            return
        yield query.dataset, BoostItem(QUERY, micros, query)
