"""``replay``: THE reference of every family — a driver (``beam_dp.drivers.protocol``) driven
in plain Python exactly as the release loop (``beam_dp.transforms.release_loop``) drives it in
the Beam job: the same state per loop key, the same pending bag, one release timer and one
end-of-input timer per key (a timer is consumed when it fires, as in Beam), the same noise
root.

Under the same seed (or the same ``noise_key`` source: ``transform.rng``) and label, a replay
releases exactly what the job releases, which is what the seeded parity tests check.

Events are what reaches the loop and when the watermark moves:

* ``Element(key, payload)`` — one element of the loop's input (``payload`` None: the key's seed
  at ``start``); a family's ``loop_events``-style helper builds them from records;
* ``Watermark(micros)`` — fires every timer due at or before ``micros``, in time order (timers
  a firing sets that are also due fire too).

At the end the input ends: with a clock that has a last step the watermark passes every
release time (the job releases through the last step); without one the end-of-input timer stops
each key's loop at the last ``Watermark`` given (what a runner fires between the end of a
bounded input and the end-of-input timer is runner-defined: give the watermark you compare at).
"""

import heapq
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from beam_dp import noise
from beam_dp.drivers.protocol import END_OF_TIME_MICROS
from beam_dp.drivers.protocol import UNCHANGED
from beam_dp.drivers.protocol import NoiseRoot
from beam_dp.drivers.protocol import Outcome
from beam_dp.io.records import DeadLetter

__all__ = [
    'Element',
    'Replayed',
    'Watermark',
    'key_events',
    'keyed_events',
    'release_table',
    'replay',
    'stream_events',
]


class Element(NamedTuple):
    """One element of the loop's input: its loop key and payload (None: the key's seed)."""
    key: Any
    payload: Any = None


class Watermark(NamedTuple):
    """The input watermark reaches ``micros``."""
    micros: int


class Replayed(NamedTuple):
    """What the loop emitted: ``releases`` (main output, in emission order), ``dead_letters``
    (``DeadLetter`` records as the job writes them), ``tagged`` ({tag: [values]}), and the
    final ``states`` and ``pending`` per loop key."""
    releases: List[Any]
    dead_letters: List[DeadLetter]
    tagged: Dict[str, List[Any]]
    states: Dict[Any, Any]
    pending: Dict[Any, List[Any]]


class _Key:
    __slots__ = ('state', 'pending', 'timer', 'finished', 'started', 'end_armed')

    def __init__(self):
        self.state = None
        self.pending = []
        self.timer = None
        self.finished = False
        self.started = False
        self.end_armed = False


def _render(record) -> str:
    from beam_dp.transforms.shell import render_record  # pylint: disable=import-outside-toplevel
    return render_record(record)


def replay(driver, events: Sequence, *, label: str, seed=None, rng=None,
           noise_label: Optional[str] = None, end_input: bool = True) -> Replayed:
    """Drives ``driver`` over ``events`` as the release loop of the transform ``label`` does.

    Args:
      driver: the family's loop driver (``transform.loop_driver()``, e.g.
        ``KeyedReleaseDriver.loop_driver()``, ``SegmentLoop``, ``ERMLoop``, ``BoostLoop``,
        ``GrowingDriver``).
        Its ``LOOP`` attribute says which loop runs it ('single_cell' or 'buffered').
      events: ``Element`` and ``Watermark`` values (plain ``(key, payload)`` pairs are
        elements).
      label: the transform's label (dead letters; the noise label unless ``noise_label``).
      seed: the ``testing_seed`` of the job, or ``rng``: its random source (``transform.rng``).
      end_input: end the input after the events (fire every remaining timer, then the
        end-of-input timers), as a bounded input or a drained job does.
    """
    if (seed is None) == (rng is None):
        raise ValueError('replay: give exactly one of seed or rng')
    base = noise.seeded(seed) if rng is None else rng
    root = NoiseRoot(base, label if noise_label is None else noise_label)
    single = getattr(driver, 'LOOP', 'buffered') == 'single_cell'
    clock = driver.clock
    keys: Dict[Any, _Key] = {}
    out = Replayed([], [], {}, {}, {})
    # (micros, order, key): lazily invalidated
    timers: List[Tuple[int, int, Any]] = []
    order = [0]

    def arm(key, entry, micros):
        if micros is not None:
            entry.timer = micros
            order[0] += 1
            heapq.heappush(timers, (micros, order[0], key))

    def emit(result: Outcome, entry: _Key):
        if result.state is not UNCHANGED:
            entry.state = result.state
        out.releases.extend(result.releases)
        for dead in result.dead_letters:
            out.dead_letters.append(DeadLetter(label, dead.stage, dead.reason,
                                               _render(dead.record), dead.event_time_micros))
        for tag, value in result.tagged:
            out.tagged.setdefault(tag, []).append(value)

    def element(key, payload):
        entry = keys.get(key)
        if entry is None:
            entry = keys[key] = _Key()
        if not entry.started:
            entry.started = True
            started = driver.start(key, root)
            entry.state = started.state
            arm(key, entry, started.timer_micros)
            entry.end_armed = clock.last_step is None
        if payload is None:
            return
        folded = driver.fold(entry.state, key, payload)
        if folded.keep and not single:
            entry.pending.append(payload if folded.stored is None else folded.stored)
        emit(folded, entry)
        arm(key, entry, folded.timer_micros)

    def fire_until(micros):
        while timers and timers[0][0] <= micros:
            when, _, key = heapq.heappop(timers)
            entry = keys.get(key)
            if entry is None or entry.timer != when:     # expired, or re-armed since (Beam
                continue                                 # keeps one timer per key)
            entry.timer = None
            if entry.finished:
                continue
            closed = driver.close(entry.state, key, when,
                                  [] if single else list(entry.pending), root)
            if closed.expire:          # the loop clears the key's state and timers
                del keys[key]
                emit(closed, _Key())
                continue
            if closed.pending is not None:
                entry.pending = list(closed.pending)
            emit(closed, entry)
            arm(key, entry, closed.timer_micros)

    for event in events:
        if isinstance(event, Watermark):
            fire_until(event.micros)
        else:
            key, payload = event
            element(key, payload)
    if end_input:
        if clock.last_step is not None:
            fire_until(END_OF_TIME_MICROS - 1)
        for key, entry in keys.items():
            if not entry.end_armed or entry.finished:
                continue
            entry.timer = None
            if single:
                entry.state = driver.end_of_input(entry.state)
                continue
            entry.finished = True
            end = getattr(driver, 'end_of_input', None)
            if end is not None:
                ended = end(entry.state, key, list(entry.pending), root)
                if ended.pending is not None:
                    entry.pending = list(ended.pending)
                emit(ended, entry)
    for key, entry in keys.items():
        out.states[key] = entry.state
        out.pending[key] = entry.pending
    return out


def _identity(value):
    return value


def keyed_events(driver, contributions, steps: int) -> List:
    """The loop events of a keyed continual release over public keys
    (``KeyedReleaseDriver``): every shard's seed, one ``ShardPartial`` per (shard, step) of the
    already-bounded ``contributions`` (key, step, value) (value: the raw value for sums, means
    and variances, the bin label for histograms, ignored for counts), then the watermark that releases steps
    0..steps-1."""
    from collections import defaultdict  # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.keyed import ShardPartial  # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.keyed import add_units  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    sums: Dict[Tuple[int, int], Dict[int, int]] = {}
    for key, step, value in contributions:
        micros = driver.clock.step_bounds(step)[0]
        _, _, shard, flat, units = driver.extract(key, micros, value, _identity)
        add_units(sums.setdefault((shard, step), defaultdict(int)), flat, units)
    events: List = [Element(shard, None) for shard in range(driver.num_shards)]
    for (shard, step), per_slot in sorted(sums.items()):
        events.append(Element(shard, ShardPartial(
            step, np.fromiter(per_slot.keys(), np.int64, len(per_slot)),
            np.fromiter(per_slot.values(), np.int64, len(per_slot)))))
    events.append(Watermark(driver.clock.release_time_micros(steps - 1)))
    return events


def release_table(releases) -> Dict[Tuple[str, int], List[float]]:
    """{(key, step): per-bin values} of ``Release`` records (``[value]`` without bins)."""
    return {(r.key, r.step): list(r.values) if r.values else [r.value] for r in releases}


def key_events(clock, key: str, batches, until: int, private: bool = False) -> List:
    """The loop events of one key of a segmented release (sparse, dynamic: ``SegmentLoop``):
    the key's seed (a public key), one ``SegmentItem`` per (step, payload) of ``batches``, then
    the watermark that releases through step ``until``."""
    from beam_dp.drivers.segmented import SegmentItem  # pylint: disable=import-outside-toplevel
    events: List = [] if private else [Element(key, None)]
    events += [Element(key, SegmentItem(step, payload)) for step, payload in batches]
    events.append(Watermark(clock.release_time_micros(until)))
    return events


def stream_events(driver, stream: str, inputs, until_block: Optional[int] = None) -> List:
    """The loop events of one ERM stream (``ERMLoop``): its seed, one ``BlockRecord`` per valid
    ('record', micros, features, label) of ``inputs`` (what 'ExtractAndValidate' passes on;
    the others are its dead letters), ``Watermark`` for each ('watermark', micros), then (with
    ``until_block``) the watermark that releases through that block."""
    from beam_dp.errors import InvalidRecordError  # pylint: disable=import-outside-toplevel
    empty = driver.init_state()
    events: List = [Element(stream, None)]
    for item in inputs:
        if item[0] == 'watermark':
            events.append(Watermark(int(item[1])))
            continue
        try:
            events.append(Element(stream, driver.block_record(*item[1:], empty=empty)))
        except InvalidRecordError:
            continue
    if until_block is not None:
        events.append(Watermark(driver.clock.release_time_micros(until_block)))
    return events
