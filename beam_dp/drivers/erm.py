"""The continual / sliding-window ERM driver (pure, no Beam): what a DoFn keyed by stream calls.

One stream (one key in the global window) is a sequence of event-time blocks on the shared public
``StepClock`` (block b = the clock's step b, [start + b·len, start + (b+1)·len)). The release
loop runs ``ERMLoop`` per stream: ``BlockRecord``s wait in its pending bag, the ``StreamState``
is in its cell; 'ExtractAndValidate' parses each record with ``add`` (malformed records come
back as (reason, record) for the dead-letter output), ``ERMLoop.fold`` dead-letters a record of
an already-released block (late), and the loop

* sets an event-time timer at ``release_time(b)`` = end of block b + allowed lateness (the
  clock's ``release_time_micros``), and when
  it fires calls ``close_through(state, b, rng, stream)``: blocks next_block..b are closed in
  index order (empty blocks included), each becomes exactly the mechanism's n_max nominal
  records — a uniform random subsample without replacement if more arrived (not first-come),
  zero-gradient padding if fewer — so release times and normalisations are data-independent
  (spec 003 §8.2, trap T8);
* emits the returned ``ReleaseEvent``s (``beam_dp.io.erm.model_release_from_event``).

Within a block, records are sorted by a stable key (label, then features) before subsampling, so
element order within and across bundles cannot change a release (§12 C12). Features are made
finite-length vectors, get the bias column if ``fit_intercept``, then are clipped to the loss's
public clip norm. Noise addresses: ``rng.derive('erm', stream)`` then ('subsample', b) per block
and the mechanism's ('job', id) per model (``DPFTRL``: ('dp_ftrl', b) per block).

``ERMLoop`` is what the release loop runs per stream; ``beam_dp.testing.replay`` drives it
exactly as the job does, so a notebook, a benchmark and the Beam job release the same models
under a seed.
State: the open blocks' records (what a Beam Bag would hold) plus the mechanism's bounded state.
"""

import dataclasses
from typing import Any, Iterable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.protocol import Outcome
from beam_dp.drivers.protocol import Dead
from beam_dp.drivers.protocol import RecordText
from beam_dp.drivers.protocol import late_letter
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io.erm import ledger_row_from_event
from beam_dp.io.erm import model_release_from_event
from beam_dp.mechanisms.erm.ftrl import DPFTRL
from beam_dp.mechanisms.erm.losses import clip_features
from beam_dp.mechanisms.erm.psgd import permutation
from beam_dp.mechanisms.erm.release import ERMRelease
from beam_dp.mechanisms.erm.release import ReleaseEvent
from beam_dp.mechanisms.erm.release import ReleaseState
from beam_dp.noise import RandomSource

__all__ = [
    'BlockRecord',
    'ERMLoop',
    'ERMStreamDriver',
    'LEDGER',
    'StreamState',
]


@dataclasses.dataclass(frozen=True)
class StreamState:
    """next_block: the first block not yet released. pending: (block, records) of open blocks,
    records as (features tuple, label). mech: the mechanism's state (``ReleaseState`` of an
    ``ERMRelease``, ``FTRLState`` of a ``DPFTRL``)."""
    next_block: int
    pending: Tuple[Tuple[int, Tuple[Tuple[Tuple[float, ...], int], ...]], ...]
    mech: ReleaseState

    def pending_records(self) -> int:
        return sum(len(r) for _, r in self.pending)


@dataclasses.dataclass(frozen=True)
class ERMStreamDriver:
    """Drives an ``ERMRelease`` or a ``DPFTRL`` over the event-time blocks of one stream.

    Args:
      mechanism: the ``ERMRelease`` (schedule, optimiser, n_max, feature_dim) or ``DPFTRL``
        (one counter step per block; same block rules, one release per block).
      raw_dim: length of an input feature vector (feature_dim − 1 with ``fit_intercept``).
      clock: the public block grid (``StepClock``: block b = step b, released at its end plus
        the allowed lateness; a ``last_step`` ends the stream). Default: 1 µs blocks from 0,
        i.e. a record's timestamp is its block index (count-based blocks, notebooks).
      fit_intercept: append a constant 1 before clipping.
    """
    mechanism: ERMRelease
    raw_dim: int
    clock: StepClock = StepClock(0, 1)
    fit_intercept: bool = True

    def __post_init__(self):
        owner = type(self).__name__
        if not isinstance(self.mechanism, (ERMRelease, DPFTRL)):
            raise InvalidParamsError(f'{owner}: mechanism must be an ERMRelease or a DPFTRL, '
                                     f'got {self.mechanism!r}.')
        v.check_positive_int(owner, 'raw_dim', self.raw_dim)
        if not isinstance(self.clock, StepClock):
            raise InvalidParamsError(f'{owner}: clock must be a StepClock, got {self.clock!r}.')
        if self.raw_dim + int(self.fit_intercept) != self.mechanism.feature_dim:
            raise InvalidParamsError(
                f'{owner}: raw_dim + fit_intercept ({self.raw_dim + int(self.fit_intercept)}) '
                f'must equal mechanism.feature_dim ({self.mechanism.feature_dim}).')

    # --- the block grid (public) ---
    def block_start(self, block: int) -> int:
        return self.clock.step_bounds(block)[0]

    def release_time(self, block: int) -> int:
        """The event time at which block ``block`` is final (the DoFn's timer)."""
        return self.clock.release_time_micros(block)

    def last_final_block(self, watermark_micros: int) -> int:
        """The last block whose release time is ≤ the watermark (−1 if none)."""
        clock = self.clock
        last = (watermark_micros - clock.start_micros - clock.allowed_lateness_micros
                ) // clock.step_micros - 1
        return last if clock.last_step is None else min(last, clock.last_step)

    # --- state ---
    def init_state(self) -> StreamState:
        return StreamState(next_block=0, pending=(), mech=self.mechanism.init_state())

    def _parse(self, record) -> Tuple[Optional[tuple], str]:
        try:
            timestamp, x, y = record
            x = np.asarray(x, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            return None, 'malformed: expected (timestamp_micros, features, label)'
        if x.size != self.raw_dim or not np.all(np.isfinite(x)):
            return None, f'malformed: features must be {self.raw_dim} finite numbers'
        classes = self.mechanism.loss.num_classes
        if isinstance(y, bool) or not isinstance(y, (int, np.integer)) or not 0 <= y < classes:
            return None, f'malformed: label must be an integer in [0, {classes})'
        if isinstance(timestamp, bool) or not isinstance(timestamp, (int, np.integer)):
            return None, 'malformed: timestamp_micros must be an integer'
        return (int(timestamp), tuple(float(a) for a in x), int(y)), ''

    def add(self, state: StreamState, records: Iterable) -> Tuple[StreamState, tuple]:
        """Buffers valid records of open blocks; returns (state, ((reason, record), ...))."""
        pending = {b: list(r) for b, r in state.pending}
        rejected = []
        for record in records:
            parsed, reason = self._parse(record)
            if parsed is None:
                rejected.append((reason, record))
                continue
            try:
                block = self.clock.checked_step(parsed[0])
            except InvalidRecordError as e:
                rejected.append((str(e), record))
                continue
            if block < state.next_block:
                rejected.append((self.clock.late_reason(block), record))
            else:
                pending.setdefault(block, []).append((parsed[1], parsed[2]))
        new = dataclasses.replace(state, pending=tuple(
            (b, tuple(r)) for b, r in sorted(pending.items())))
        return new, tuple(rejected)

    def block_record(self, micros: int, features, label, empty: Optional[StreamState] = None
                     ) -> 'BlockRecord':
        """The ``BlockRecord`` of one record stamped ``micros`` (what 'ExtractAndValidate'
        passes on; ``empty``: an ``init_state()`` to reuse); raises ``InvalidRecordError`` with
        the dead-letter reason (malformed, before start, after end)."""
        state, rejected = self.add(self.init_state() if empty is None else empty,
                                   [(micros, features, label)])
        if rejected:
            raise InvalidRecordError(rejected[0][0])
        ((block, ((x, y),)),) = state.pending
        return BlockRecord(block, x, y)

    def _block_data(self, records, rng: RandomSource):
        """Sorted, uniformly subsampled to n_max, bias added, clipped: (x, y)."""
        records = sorted(records, key=lambda r: (r[1], r[0]))
        n_max = self.mechanism.records_per_block
        if len(records) > n_max:
            chosen = np.sort(permutation(rng, len(records), n_max))
            records = [records[i] for i in chosen]
        x = np.array([r[0] for r in records], dtype=np.float64).reshape(-1, self.raw_dim)
        if self.fit_intercept:
            x = np.hstack([x, np.ones((len(x), 1))])
        x = clip_features(x, self.mechanism.loss.clip_norm) if len(x) else x.reshape(
            0, self.mechanism.feature_dim)
        return x, np.array([r[1] for r in records], dtype=np.int64)

    def close_through(self, state: StreamState, block: int, rng: RandomSource, stream: str
                      ) -> Tuple[Tuple[ReleaseEvent, ...], StreamState]:
        """Closes and releases blocks next_block..block in index order (never past the clock's
        last step)."""
        if self.clock.last_step is not None:
            block = min(block, self.clock.last_step)
        stream_rng = rng.derive('erm', stream)
        pending = dict(state.pending)
        mech, events = state.mech, []
        for b in range(state.next_block, block + 1):
            data = self._block_data(pending.pop(b, ()), stream_rng.derive('subsample', b))
            out, mech = self.mechanism.step(mech, data, stream_rng)
            events.extend(out)
        next_block = max(state.next_block, block + 1)
        return tuple(events), StreamState(next_block, tuple(sorted(pending.items())), mech)


class BlockRecord(NamedTuple):
    """One valid record of a stream: its block, its features, its label."""
    block: int
    features: Tuple[float, ...]
    label: int


#: The tag of the ledger rows (``ERMLedgerRow``) a close emits besides the model releases.
LEDGER = 'ledger'
_STAGE = 'TrainBlocks'


class ERMLoop:
    """``BufferedDriver`` of one stream (``beam_dp.drivers.protocol``): the ``StreamState`` in
    the cell, ``BlockRecord``s in the pending bag, a timer per block; a firing closes every
    block whose release time the watermark passed. Noise at (label), then the driver's
    ('erm', stream) addresses."""

    LOOP = 'buffered'

    def __init__(self, driver: ERMStreamDriver, epsilon_total: float, num_classes: int):
        self.driver = driver
        self.clock = driver.clock
        self._epsilon_total = epsilon_total
        self._num_classes = num_classes

    def start(self, stream: str, noise_root) -> Outcome:
        return Outcome(self.driver.init_state(), timer_micros=self.clock.release_time_micros(0))

    def fold(self, state: StreamState, stream: str, item: BlockRecord) -> Outcome:
        block, features, label = item[:3]
        carried = len(item) > 3  # the input record's rendering and time, never stored
        if block >= state.next_block:
            return Outcome(keep=True, stored=BlockRecord(block, features, label) if carried
                           else None)
        if carried:
            return Outcome(dead_letters=[Dead(_STAGE, self.clock.late_reason(block),
                                              RecordText(item[3]), item[4])])
        return Outcome(dead_letters=[late_letter(
            self.clock, _STAGE, block,
            {'stream': stream, 'block': block, 'features': features, 'label': label})])

    def close(self, state: StreamState, stream: str, fired_micros: int, pending,
              noise_root) -> Outcome:
        driver = self.driver
        through = driver.last_final_block(fired_micros)
        if state is None or through < state.next_block:
            return Outcome()
        due, rest = {}, []
        for item in pending:
            if item[0] <= through:
                due.setdefault(item[0], []).append((item[1], item[2]))
            else:
                rest.append(item)
        state = dataclasses.replace(state, pending=tuple(
            (b, tuple(records)) for b, records in sorted(due.items())))
        events, state = driver.close_through(state, through, noise_root.derive(), stream)
        mechanism = driver.mechanism
        releases = [model_release_from_event(stream, event, self._epsilon_total,
                                             self._num_classes, mechanism.feature_dim,
                                             driver.block_start(event.job.lo))
                    for event in events]
        ledger = [(LEDGER, ledger_row_from_event(stream, event, mechanism.ledger_budget))
                  for event in events]
        return Outcome(state, releases, timer_micros=self.clock.next_release_time_micros(through),
                       pending=rest if due else None, tagged=ledger)
