"""The entry stage of the per-key segment transforms (``beam_dp.transforms.segmented``):
'ExtractAndValidate' turns a record into ``(key, (step, payload))`` or a dead letter, and what
'GateLateRecords' passes on of it.
"""

import apache_beam as beam

from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import text_key
from beam_dp.drivers.segmented import SegmentItem
from beam_dp.errors import InvalidRecordError
from beam_dp.transforms import shell

__all__ = []      # the stages of ``SegmentedPerKey``, no public name


class _ExtractFn(beam.DoFn):
    """record → (key, (step, payload)) or a dead letter; ``parse(record)`` gives the payload."""

    def __init__(self, label, clock: StepClock, key_fn, parse, public_keys,
                 keep_records: bool = False):
        self._label = label
        self._clock = clock
        self._key_fn = key_fn
        self._parse = parse
        self._public = public_keys
        #: Before the gate: (step, payload, rendering, µs), so a late record's dead letter
        #: holds it; the gate strips it from what it passes.
        self._keep = keep_records

    def setup(self):
        self._public_set = None if self._public is None else frozenset(self._public)

    def process(self, record, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        try:
            key = text_key(shell.extract_key(self._key_fn, record))   # numpy.str_ → str
            if self._public_set is not None and key not in self._public_set:
                raise InvalidRecordError(f'key {key!r} is not in the public key set')
            step = self._clock.checked_step(micros)
            try:
                payload = self._parse(record)
            except Exception as e:  # pylint: disable=broad-except
                raise InvalidRecordError(str(e)) from e
        except InvalidRecordError as e:
            yield shell.dead_letter(self._label, 'ExtractAndValidate', str(e), record, micros)
            return
        if self._keep:
            yield key, (step, payload, shell.render_record(record), micros)
        else:
            yield key, SegmentItem(step, payload)


def _strip_record(item) -> SegmentItem:
    """'GateLateRecords' passes ``(step, payload, rendering, µs)`` on as ``SegmentItem(step,
    payload)``: 'ReleaseSegments' never stores the record."""
    return SegmentItem(item[0], item[1])
