"""Helper module (no tests): the ERM driver's one pass over a stream of records and
watermarks (``ERMStreamDriver.add`` + ``close_through``), for the driver's unit tests. The Beam
job's reference is ``beam_dp.testing.replay`` of ``ERMLoop``."""

from typing import Any, NamedTuple, Optional, Sequence, Tuple

from beam_dp.drivers.erm import ERMStreamDriver
from beam_dp.drivers.erm import StreamState
from beam_dp.mechanisms.erm.release import ReleaseEvent
from beam_dp.noise import RandomSource

__all__ = ['ReferenceResult', 'reference']


class ReferenceResult(NamedTuple):
    events: Tuple[ReleaseEvent, ...]
    rejected: Tuple[Tuple[str, Any], ...]
    state: StreamState



def reference(driver: ERMStreamDriver, stream: str, inputs: Sequence, rng: RandomSource,
              until_block: Optional[int] = None) -> ReferenceResult:
    """Drives one stream as a TestStream would: ``inputs`` is a sequence of
    ('record', timestamp_micros, x, y) and ('watermark', timestamp_micros); a watermark closes
    every block whose release time it has passed. At the end blocks are closed through
    ``until_block`` (default: the last block that received a record)."""
    state = driver.init_state()
    events, rejected = [], []
    last_seen = -1
    for item in inputs:
        if item[0] == 'watermark':
            through = driver.last_final_block(int(item[1]))
            if through >= state.next_block:
                out, state = driver.close_through(state, through, rng, stream)
                events.extend(out)
            continue
        record = tuple(item[1:])
        state, bad = driver.add(state, [record])
        rejected.extend(bad)
        if not bad:
            last_seen = max(last_seen, driver.clock.step_of(record[0]))
    final = last_seen if until_block is None else until_block
    if final >= state.next_block:
        out, state = driver.close_through(state, final, rng, stream)
        events.extend(out)
    return ReferenceResult(tuple(events), tuple(rejected), state)
