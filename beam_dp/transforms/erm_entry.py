"""The entry stage of ``ContinualERM`` / ``SlidingWindowERM``: 'ExtractAndValidate'
(``ExtractFn``: a labelled record → (stream, its ``BlockRecord``), or a dead letter with the
driver's reason). The wiring is ``erm.py``."""

from typing import Sequence

import apache_beam as beam

from beam_dp.drivers.erm import ERMStreamDriver
from beam_dp.errors import InvalidRecordError
from beam_dp.transforms import shell

__all__ = [
    'ExtractFn',
]


class ExtractFn(beam.DoFn):
    """record → (stream, (block, features tuple, label)) or a dead letter with the reason."""

    def __init__(self, label: str, driver: ERMStreamDriver, fns, streams: Sequence[str],
                 keep_records: bool = False):
        self._label = label
        self._driver = driver
        self._fns = fns
        self._streams = tuple(streams)
        #: A 4th and 5th item, the input record's rendering and event time, so a late record's
        #: dead letter holds it ('TrainBlocks' drops them before storing the record).
        self._keep = keep_records

    def setup(self):
        self._streams_set = frozenset(self._streams)
        self._empty = self._driver.init_state()

    def extract(self, record, micros: int):
        """(stream, (block, x, y)); raises ``InvalidRecordError`` with the dead-letter reason."""
        stream_fn, features_fn, label_fn = self._fns
        stream = shell.extract_key(stream_fn, record)
        if not isinstance(stream, str) or stream not in self._streams_set:
            raise InvalidRecordError(f'stream {stream!r:.80} is not in the public stream set')
        try:
            x, y = features_fn(record), label_fn(record)
        except Exception as e:  # pylint: disable=broad-except
            raise InvalidRecordError(f'features_fn/label_fn raised {e!r}') from e
        return str(stream), self._driver.block_record(micros, x, y, self._empty)

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        try:
            stream, item = self.extract(record, micros)
            if self._keep:
                item += (shell.render_record(record), micros)
            yield stream, item
        except InvalidRecordError as e:
            yield shell.dead_letter(self._label, 'ExtractAndValidate', str(e), record, micros)
