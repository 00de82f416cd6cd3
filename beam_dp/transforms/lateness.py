"""The lateness gate and the released-step chain: who decides that a record is late (a shell
companion: ``shell.py`` holds the rest of the shared wiring).

A record is late when its step was already released. For that decision to be private it must
depend on the record's step, the public schedule and the arrival order / watermark only, never
on other records (docs/privacy_model.md, "Lateness"). A stage learns that a step is released
from a watermark timer; the *released chain* is such a timer armed on the public schedule
only (``release_loop.ReleasedChain``, run by the shared ``release_loop.watermark_gate``): per
shard, seeded at launch (``shell.seeds_at_start``), its first element (seed or data) starts it
(step 0's release time, and without a last step the 'end_of_input' timer); each firing marks
the armed step released and arms the next step's release time, until the clock's last step (or
until the input ends). The chain's state cell 'released_through' holds ``(released_through,
armed step)``; the armed step is None once the chain ended. Used by ``BoundContributions``
('BoundPerUnit') and by ``LatenessGate`` ('DropLate').

That the watermark itself does not depend on the event times records claim is an assumption on
the source (docs/privacy_model.md, "What the release schedule assumes of the watermark"); where
the source estimates it from them, ``beam_dp.ArrivalTimeLateness`` (``arrival.py``) decides
lateness by each record's own arrival time first.

``LatenessGate`` puts that decision in front of a keyed stage whose own late check depends on
the key's other records ('ReleaseSegments' of the sparse and dynamic transforms, whose key wakes
at its data steps; 'AnswerQueries' of the growing-database transforms, whose fixed-window
instance is closed by a timer its first item arms: its records and, with ``refuse_fn``, its
queries, which get a refusal on a ``refused`` output instead of a dead letter). Wiring (labels
inside the gate's own label):

  (key, (step, ...)) records
    | 'GroupByShardInBundle'  bundle-local: (shard, ((key, item, micros), ...)) per shard
    + 'ShardSeeds' / 'SeedAtStart' / 'MergeSeeds'  one seed per shard at the clock's start
    | 'DropLate'              stateful, keyed by shard: dead-letters a record whose step is
                              released (with the gated stage's name and late reason), passes
                              the rest on with their own timestamps
"""

import collections
import typing
import zlib
from typing import Callable, NamedTuple, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp.drivers.bounding import UNIT_SHARDS
from beam_dp.drivers.clock import StepClock
from beam_dp.transforms.release_loop import ReleasedChain
from beam_dp.transforms.release_loop import watermark_gate
from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import RecordText
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.shell import key_bytes
from beam_dp.transforms.shell import merge_seeds
from beam_dp.transforms.shell import seeds_at_start

__all__ = [
    'GATE_SHARDS',
    'GateOutputs',
    'LatenessGate',
    'REFUSED',
    'batch_input',
    'strip_record',
]

#: The gate's shards: as many as the unit shards of 'BoundPerUnit' (the same parallelism, and
#: ``GATE_SHARDS`` timer firings per step).
GATE_SHARDS = UNIT_SHARDS
#: The tag of the gate's ``refused`` output (only with ``refuse_fn``).
REFUSED = 'refused'


def batch_input(pcoll) -> bool:
    """True when nothing can be late: a bounded input in a batch pipeline, where no release time
    passes before the whole input is read. A bounded input in a *streaming* pipeline gets the
    chain or gate too: its source may advance the watermark part-way through (runner-dependent),
    and then another record must not decide lateness either."""
    streaming = pcoll.pipeline.options.view_as(StandardOptions).streaming
    return bool(pcoll.is_bounded) and not streaming


class GateOutputs(NamedTuple):
    """The outputs of ``LatenessGate``: ``passed`` (the records not late, with their own
    timestamps), ``dead_letter`` (the late ones) and, with ``refuse_fn`` only, ``refused`` (what
    it made of the late ones instead of dead letters; else None)."""
    passed: beam.PCollection
    dead_letter: beam.PCollection
    refused: Optional[beam.PCollection] = None


def _step(item) -> int:
    """The step of a ``(step, payload)`` item."""
    return item[0]


def _segment_late(clock: StepClock):
    """``late_fn`` of a ``(key, (step, payload))`` record, as 'ReleaseSegments' words it; of a
    ``(key, (step, payload, rendering, event time µs))`` one (the record carried through the
    gate): the record as it was, at its own time."""
    def late(key, item, step):
        if len(item) > 2:
            return clock.late_reason(step), RecordText(item[2]), item[3]
        return (clock.late_reason(step), {'key': key, 'step': step, 'payload': item[1]},
                clock.step_end(step) - 1)
    return late


def strip_record(item):
    """``pass_fn`` of a gate whose items carry the input record (``(step, payload, rendering,
    µs)``): what passes is ``(step, payload)``, so the keyed stage never stores the record."""
    return item[:2]


class _GroupByShardInBundleFn(beam.DoFn):
    """Bundle-local: ``(key, item)`` → ``(shard, ((key, item, micros), ...))``, one element per
    gate shard and bundle (records in arrival order), timestamped at its earliest record, so
    the stateful stage is called once per (shard, bundle). A key's shard is the CRC-32 of its
    ``key_bytes`` (the bytes Beam keys state by), mod the number of shards; a key that cannot be
    encoded goes to the dead letter. At ``MAX_BUFFERED`` records the groups are emitted early
    (a runner may make one bundle of a whole backlog)."""

    MAX_BUFFERED = 50_000

    def __init__(self, shards: int, transform_label: str, stage: str):
        self._shards = shards
        self._label = transform_label
        self._stage = stage

    def start_bundle(self):
        self._by_shard = collections.defaultdict(list)
        self._shard_of = {}
        self._count = 0

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        key, item = element
        try:
            shard = self._shard_of.get(key)
            if shard is None:
                shard = self._shard_of[key] = zlib.crc32(key_bytes(key)) % self._shards
        except Exception as e:  # pylint: disable=broad-except  (unhashable, not encodable)
            yield dead_letter(self._label, self._stage,
                              f'key cannot be encoded as a state key: {e!r}', element,
                              timestamp.micros)
            return
        self._by_shard[shard].append((key, item, timestamp.micros))
        self._count += 1
        if self._count >= self.MAX_BUFFERED:
            yield from self.finish_bundle()

    def finish_bundle(self):
        for shard, records in self._by_shard.items():
            yield WindowedValue((shard, tuple(records)),
                                Timestamp(micros=min(r[2] for r in records)), [GlobalWindow()])
        self._by_shard = collections.defaultdict(list)
        self._count = 0


#: The released chain's gate ('released_through', 'released', 'end_of_input'), shared with
#: 'BoundPerUnit' (``contribution_bounding``).
_ChainGate = watermark_gate()


class _DropLateFn(_ChainGate):
    """Keyed by gate shard. State: the shard's released chain (module docstring) in ONE cell
    'released_through' and its 'released' / 'end_of_input' timers (the shared watermark gate's)
    — no per-key state, no bag.
    A record whose step is ≤ the shard's released step is dead-lettered (the gated stage's
    name, its reason: ``late_fn``); every other record goes on with its own timestamp.

    Why a passed record is never late downstream: the gate passes a record for step s only while
    its chain has not released s, i.e. while its pending 'released' timer is set at the release
    time of a step r ≤ s. A pending watermark timer holds the gate's output watermark at its
    time, so the gate's output watermark — and hence the input watermark of the keyed stage
    after it — has not passed release_time(r) ≤ release_time(s) when the record is emitted, and
    cannot pass it before the bundle that emitted the record is committed and its output is
    pending downstream. The keyed stage's timer for step s (or any later step) is therefore not
    due before the record is in its state: its own late check (kept as a backstop) never fires
    for a record that passed the gate. What decides a record's fate is its step, the public
    schedule and the arrival order / watermark: never another record, of its key or any other.

    A bounded input (batch) does not run the gate (a batch runner passes no release time before
    the whole input is bounded: nothing is late, whatever the data)."""

    def __init__(self, clock: StepClock, transform_label: str, stage: str, step_fn: Callable,
                 late_fn: Callable, refuse_fn: Optional[Callable] = None,
                 pass_fn: Optional[Callable] = None):
        self._schedule = ReleasedChain(clock)
        self._label = transform_label
        self._stage = stage
        self._step_fn = step_fn
        self._late_fn = late_fn
        self._refuse_fn = refuse_fn
        self._pass_fn = pass_fn

    def process(self, element, released_state=beam.DoFn.StateParam(_ChainGate.RELEASED),
                released_timer=beam.DoFn.TimerParam(_ChainGate.RELEASED_TIMER),
                end_timer=beam.DoFn.TimerParam(_ChainGate.END_TIMER)):
        _, records = element
        released = self._gate(released_state, released_timer, end_timer)
        if records is None:                      # the shard's launch seed
            return
        for key, item, micros in records:
            step = self._step_fn(item)
            if step <= released and self._refuse_fn is not None:
                yield beam.pvalue.TaggedOutput(REFUSED, self._refuse_fn(key, item, step))
            elif step <= released:
                reason, record, event_micros = self._late_fn(key, item, step)
                yield dead_letter(self._label, self._stage, reason, record, event_micros)
            else:
                if self._pass_fn is not None:
                    item = self._pass_fn(item)
                yield TimestampedValue((key, item), Timestamp(micros=micros))


class LatenessGate(beam.PTransform):
    """Dead-letters every record whose step is already released on the public schedule, before
    a keyed stage whose own late check depends on other records (``_DropLateFn``'s docstring
    has the argument); passes the rest on, timestamps kept. Apply it to an UNBOUNDED input
    only (the caller skips it for a bounded one).

    Input: ``(key, item)`` in the global window (any deterministically encodable key), the
    item's step ``step_fn(item)`` (default ``item[0]``: ``(step, payload)``; a step < 0 is
    never passed). Output: ``GateOutputs(passed, dead_letter)``. Dead letters carry ``stage``
    (the gated stage's name, whose reason ``late_fn`` words: a consumer counting late records
    per stage sees no change). Cost: ``shards`` timer firings per step (O(1) state per shard),
    one stateful call per (shard, bundle).

    Args:
      clock: the public schedule of the steps in the input.
      transform_label: the ``DeadLetter.transform`` of its dead letters.
      stage: the ``DeadLetter.stage`` of its dead letters (the stage it gates).
      step_fn: item → its step on ``clock``.
      late_fn: ``(key, item, step)`` → (reason, record, event time µs) of its dead letter
        (default: as 'ReleaseSegments' words a late ``(key, (step, payload))``).
      refuse_fn: optional ``(key, item, step)`` → the element a late record becomes on the
        ``refused`` output instead of a dead letter (a late query's refusal: an answer, not an
        error); ``late_fn`` is then unused.
      shards: the number of gate shards (default ``GATE_SHARDS``).
      pass_fn: optional item → the item passed on (e.g. ``strip_record``: an item may carry
        the input record for its dead letter, which the gated stage must not store).
    """

    def __init__(self, clock: StepClock, transform_label: str, stage: str,
                 step_fn: Callable = _step, late_fn: Optional[Callable] = None,
                 shards: int = GATE_SHARDS, refuse_fn: Optional[Callable] = None,
                 pass_fn: Optional[Callable] = None):
        super().__init__()
        self._clock = clock
        self._transform_label = transform_label
        self._stage = stage
        self._step_fn = step_fn
        self._late_fn = late_fn or _segment_late(clock)
        self._shards = shards
        self._refuse_fn = refuse_fn
        self._pass_fn = pass_fn

    def expand(self, pcoll):
        label, stage = self._transform_label, self._stage
        grouped = pcoll | 'GroupByShardInBundle' >> beam.ParDo(
            _GroupByShardInBundleFn(self._shards, label, stage)).with_output_types(
                typing.Tuple[int, typing.Any]).with_outputs(DEAD_LETTER, main='grouped')
        shards = merge_seeds(grouped.grouped, seeds_at_start(
            pcoll.pipeline, range(self._shards), self._clock.start_micros))
        refusing = self._refuse_fn is not None
        tags = (DEAD_LETTER, REFUSED) if refusing else (DEAD_LETTER,)
        gated = shards | 'DropLate' >> beam.ParDo(_DropLateFn(
            self._clock, label, stage, self._step_fn, self._late_fn,
            self._refuse_fn, self._pass_fn)).with_outputs(*tags, main='passed')
        dead = ((grouped[DEAD_LETTER], gated[DEAD_LETTER])
                | 'MergeGateDeadLetters' >> beam.Flatten())
        return GateOutputs(gated.passed, dead, gated[REFUSED] if refusing else None)
