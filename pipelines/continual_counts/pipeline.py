"""The continual-counts job graph: read ride events, count them per station with DP, write.

  source                   ReadFromPubSub (streaming) or ReadFromAvro (batch), or an injected
                           PTransform (tests: a TestStream)
    | 'ParseEvents'        decode + validate into RideEvent; malformed → dead letter
    | 'LogEventProgress'   --debug_metrics only: a log line every N events (pass-through)
    | 'ContinualCountPerStation'   beam_dp.ContinualCountPerKey, user-level (rider_id)
  releases    → 'WriteReleasesAvro' / 'PublishReleases'
  dead letters (parse + transform) → 'WriteDeadLettersAvro' / 'PublishDeadLetters'

No DP logic lives here: the bounds, budget and schedule are handed to beam_dp, which validates
them (again, after the Flex Template regexes) when the graph is built.

Metrics and logs: by default only data-independent facts (the options, ε, the release count,
which is keys × steps). Exact counts of private records (events parsed, dead letters per stage)
are SENSITIVE and reported only with ``--debug_metrics`` (README, "What metrics and logs
reveal").

Event time: in batch, from the record's ``event_time_micros``; from Pub/Sub, the message's
``--timestamp_attribute`` (Beam's watermark tracks it), or the publish time without one. With
``--lateness=arrival`` the subscription is read without a timestamp attribute (element
timestamp = publish time) and 'ArrivalTimeLateness' (``beam_dp.ArrivalTimeLateness``), between
'ParseEvents' and the DP stage, assigns each ride to the step of its ``event_time_micros`` and
dead-letters it iff it was published at or after that step's end + allowed lateness.
"""

import logging
import operator
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from beam_dp import ArrivalTimeLateness
from beam_dp import BudgetAccountant
from beam_dp import ContinualCountPerKey
from beam_dp import ContinualOutputs
from beam_dp import DeadLetter
from beam_dp import InvalidRecordError
from beam_dp import PrivacyBudget
from beam_dp import Release
from beam_dp import UserLevel
from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.records import RELEASE_SCHEMA
from beam_dp.io.records import dead_letter_to_avro
from beam_dp.io.records import release_to_avro
from pipelines.common.launch import noise_key_scope
from pipelines.common import pubsub_codec
from pipelines.common import sinks
from pipelines.continual_counts import sample_data
from pipelines.continual_counts.events import decode_event_record
from pipelines.continual_counts.events import RideEvent
from pipelines.continual_counts.events import validate_event

__all__ = [
    'JobOutputs',
    'ParseEvents',
    'build_pipeline',
    'count_per_station',
    'job_accountants',
    'public_keys',
    'read_events',
    'release_schedule',
    'write_dead_letters',
    'write_releases',
]

_LOG = logging.getLogger(__name__)
JOB = 'continual_counts'
RELEASES_PREFIX = 'releases'
DEAD_LETTERS_PREFIX = 'dead_letters'
# Streaming file outputs are flushed at least this often (processing time).
FLUSH_SECONDS = 30
_MAX_RECORD_CHARS = 2000


class JobOutputs(NamedTuple):
    """The job's outputs before the sinks: ``Release`` and ``DeadLetter`` PCollections."""
    releases: beam.PCollection
    dead_letters: beam.PCollection


# -- parsing ---------------------------------------------------------------------------------------

def _render(record: Any) -> str:
    try:
        text = repr(record)
    except Exception:  # pylint: disable=broad-except
        text = f'<unprintable {type(record).__name__}>'
    return text if len(text) <= _MAX_RECORD_CHARS else text[:_MAX_RECORD_CHARS] + '...'


class _ParseFn(beam.DoFn):
    """Decodes and validates one input; malformed inputs go to the 'dead_letter' output.

    ``kind='avro'``: the input is a decoded Avro record (dict); the output is timestamped with
    the event's own time. ``kind='pubsub'``: the input is a ``PubsubMessage`` (or raw bytes)
    holding one schemaless Avro event; the element's timestamp (the message's timestamp
    attribute) is kept.
    """

    def __init__(self, kind: str, debug_metrics: bool = False):
        if kind not in ('avro', 'pubsub'):
            raise ValueError(f'_ParseFn: kind must be avro or pubsub, got {kind!r}')
        self._kind = kind
        self._debug = debug_metrics
        self._dead = beam.metrics.Metrics.counter(JOB, f'dead_letters_parse_{kind}')
        self._ok = beam.metrics.Metrics.counter(JOB, f'events_parsed_{kind}')

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        try:
            if self._kind == 'avro':
                event = validate_event(element)
            else:
                data = getattr(element, 'data', element)
                event = validate_event(decode_event_record(data))
        except InvalidRecordError as e:
            if self._debug:                      # SENSITIVE: an exact count of private records
                self._dead.inc()
            yield beam.pvalue.TaggedOutput(
                'dead_letter', DeadLetter(transform='ParseEvents', stage=f'parse_{self._kind}',
                                          reason=str(e), record=_render(element),
                                          event_time_micros=_element_micros(timestamp)))
            return
        if self._debug:
            self._ok.inc()
        if self._kind == 'avro':
            yield window.TimestampedValue(event, Timestamp(micros=event.event_time_micros))
        else:
            yield event


def _element_micros(timestamp) -> Optional[int]:
    try:
        micros = timestamp.micros
    except AttributeError:
        return None
    # Batch reads carry Beam's minimum timestamp: no event time is known then.
    return micros if micros >= 0 else None


class ParseEvents(beam.PTransform):
    """Raw inputs → ``RideEvent`` (main output) and ``DeadLetter`` (tag 'dead_letter')."""

    def __init__(self, kind: str, label: Optional[str] = None, debug_metrics: bool = False):
        super().__init__(label)
        self._kind = kind
        self._debug = debug_metrics

    def expand(self, raw):
        parsed = raw | 'Parse' >> beam.ParDo(_ParseFn(self._kind, self._debug)).with_outputs(
            'dead_letter', main='events')
        parsed.events.element_type = RideEvent
        parsed.dead_letter.element_type = DeadLetter
        return parsed


class _LogProgress(beam.DoFn):
    """Pass-through that logs every ``every`` elements it sees (per DoFn instance); silent
    unless ``enabled`` (counts of private records are logged only with --debug_metrics)."""

    def __init__(self, what: str, every: int, enabled: bool = True):
        self._what = what
        self._every = max(1, int(every)) if enabled else 0

    def setup(self):
        self._seen = 0

    def process(self, element):
        self._seen += 1
        if self._every and self._seen % self._every == 0:
            _LOG.info('%s: %d so far (this worker)', self._what, self._seen)
        yield element


# -- sources ---------------------------------------------------------------------------------------

def input_kind(args) -> str:
    """'pubsub' with --input_subscription, else 'avro' (the sample data without --input_avro)."""
    return 'pubsub' if args.input_subscription else 'avro'


def read_events(pipeline: beam.Pipeline, args, source: Optional[beam.PTransform] = None):
    """Applies the source and 'ParseEvents'. Returns (events, parse dead letters).

    ``source`` replaces the configured read (tests): it must yield what the configured read
    yields — ``PubsubMessage`` elements with --input_subscription, else decoded Avro records.
    """
    kind = input_kind(args)
    if source is None:
        if kind == 'pubsub':
            # --lateness=arrival: no timestamp attribute, the element timestamp is the publish
            # time (and the watermark Pub/Sub's, from publish times).
            attribute = None if args.lateness == 'arrival' else args.timestamp_attribute or None
            source = beam.io.ReadFromPubSub(subscription=args.input_subscription,
                                            with_attributes=True,
                                            timestamp_attribute=attribute)
        else:
            source = beam.io.ReadFromAvro(args.input_avro or sample_data.RIDES_PATH)
    raw = pipeline | 'ReadEvents' >> source
    parsed = raw | 'ParseEvents' >> ParseEvents(kind, debug_metrics=args.debug_metrics)
    events = parsed.events | 'LogEventProgress' >> beam.ParDo(
        _LogProgress('events parsed', args.progress_every, enabled=args.debug_metrics))
    events.element_type = RideEvent
    return events, parsed.dead_letter


# -- the DP stage ----------------------------------------------------------------------------------

def public_keys(args) -> List[str]:
    """--public_keys (comma-separated), else --public_keys_file, else the sample station list."""
    if args.public_keys:
        keys = [k.strip() for k in args.public_keys.split(',') if k.strip()]
    else:
        path = args.public_keys_file or sample_data.STATIONS_PATH
        with beam.io.filesystems.FileSystems.open(path) as f:
            text = f.read().decode('utf-8')
        keys = [line.strip() for line in text.splitlines()
                if line.strip() and not line.lstrip().startswith('#')]
    return keys


def job_accountants(args) -> Dict[str, BudgetAccountant]:
    """The job's accountant (one part: every rider), which the privacy ledger reads after the
    graph is built (pipelines/common/ledger.py)."""
    return {'riders': BudgetAccountant(PrivacyBudget(epsilon=args.epsilon, delta=args.delta))}


def release_schedule(args) -> Tuple[float, Optional[float]]:
    """The public event-time range of the releases (start of step 0, end or None)."""
    return args.start, args.end


def count_per_station(events: beam.PCollection, args,
                      accountant: Optional[BudgetAccountant] = None) -> ContinualOutputs:
    """The DP stage: ``ContinualCountPerKey`` per start station, user-level on ``rider_id``."""
    budget = PrivacyBudget(epsilon=args.epsilon, delta=args.delta)
    accountant = accountant if accountant is not None else BudgetAccountant(budget)
    unit = UserLevel(unit_fn=operator.attrgetter('rider_id'),
                     max_keys_per_unit=args.max_keys_per_unit,
                     max_contributions_per_step=args.max_contributions_per_step,
                     max_steps_per_unit=args.max_steps_per_unit)
    with noise_key_scope(args):
        counts = ContinualCountPerKey(
            public_keys=public_keys(args), start=args.start, step=args.step_seconds,
            budget=budget, privacy_unit=unit, key_fn=operator.attrgetter('station'),
            accountant=accountant, allowed_lateness=args.allowed_lateness_seconds,
            horizon_steps=args.horizon_steps, end=args.end, mechanism=args.mechanism,
            estimator=args.estimator,
            num_shards=args.num_shards, debug_metrics=args.debug_metrics)
    return events | 'ContinualCountPerStation' >> counts


# -- sinks -----------------------------------------------------------------------------------------

# Sinks use ``max_writers_per_bundle=0``: every record goes through fileio's sharded path, so
# each window (batch: the whole output) is one file instead of one file per bundle.


def _flush_periodically() -> beam.PTransform:
    return sinks.flush_periodically(FLUSH_SECONDS)


def write_releases(releases: beam.PCollection, args) -> None:
    """Releases → Avro files under --output_avro and/or Avro messages on --output_topic.

    Batch: one file. Streaming: one file per flush (``sinks.flush_periodically``), named by the
    time it was written.
    """
    if args.output_avro:
        sinks.write_avro_files(releases, args.output_avro, name='Releases', prefix=RELEASES_PREFIX,
                               schema=RELEASE_SCHEMA, to_avro=release_to_avro,
                               streaming_window=_flush_periodically, max_writers_per_bundle=0)
    if args.output_topic:
        sinks.publish(releases, args.output_topic, name='Releases', encode_fn=_release_message,
                      with_attributes=True)


def _release_message(release: Release):
    from apache_beam.io.gcp.pubsub import PubsubMessage  # pylint: disable=import-outside-toplevel
    return PubsubMessage(pubsub_codec.encode_release(release),
                         {'key': release.key, 'step': str(release.step),
                          'step_end_micros': str(release.step_end_micros)})


def _dead_letter_message(dead: DeadLetter):
    from apache_beam.io.gcp.pubsub import PubsubMessage  # pylint: disable=import-outside-toplevel
    return PubsubMessage(pubsub_codec.encode_dead_letter(dead),
                         {'transform': dead.transform, 'stage': dead.stage})


def write_dead_letters(dead_letters: beam.PCollection, args) -> None:
    """Dead letters → Avro files under --dead_letter_avro and/or messages on --dead_letter_topic.

    Batch: one file. Streaming: one file per flush, as for releases (late records are dead
    letters too, and an event-time window would drop exactly those).
    """
    if args.dead_letter_avro:
        sinks.write_avro_files(dead_letters, args.dead_letter_avro, name='DeadLetters',
                               prefix=DEAD_LETTERS_PREFIX, schema=DEAD_LETTER_SCHEMA,
                               to_avro=dead_letter_to_avro, streaming_window=_flush_periodically,
                               max_writers_per_bundle=0)
    if args.dead_letter_topic:
        sinks.publish(dead_letters, args.dead_letter_topic, name='DeadLetters',
                      encode_fn=_dead_letter_message, with_attributes=True)
    if not args.dead_letter_avro and not args.dead_letter_topic:
        _LOG.warning('No dead-letter sink (--dead_letter_avro / --dead_letter_topic): dead letters '
                     'are dropped (counted in the job metrics only with --debug_metrics).')


# -- the job ---------------------------------------------------------------------------------------

def build_job(pipeline: beam.Pipeline, args, source: Optional[beam.PTransform] = None,
              accountant: Optional[BudgetAccountant] = None) -> JobOutputs:
    """Source → parse → DP counts; returns the outputs before the sinks."""
    events, parse_dead = read_events(pipeline, args, source)
    dead_letters = [parse_dead]
    if getattr(args, 'lateness', 'watermark') == 'arrival':
        judged = events | 'ArrivalTimeLateness' >> ArrivalTimeLateness(
            event_time_fn=_event_timestamp, start=args.start, step=args.step_seconds,
            end=args.end, allowed_lateness=args.allowed_lateness_seconds)
        events = judged.records
        events.element_type = RideEvent
        dead_letters.append(judged.dead_letter)
    counted = count_per_station(events, args, accountant)
    releases = counted.releases | 'LogReleaseProgress' >> beam.ParDo(
        _LogProgress('releases', args.progress_every))
    releases.element_type = Release
    dead = ((*dead_letters, counted.dead_letter)
            | 'MergeDeadLetters' >> beam.Flatten().with_output_types(DeadLetter))
    dead = dead | 'CountDeadLetters' >> beam.Map(
        _count_dead_letter, args.debug_metrics).with_output_types(DeadLetter)
    return JobOutputs(releases, dead)


def _event_timestamp(event: RideEvent) -> Timestamp:
    """The ride's claimed event time (``event_time_micros``), for ``ArrivalTimeLateness``."""
    return Timestamp(micros=event.event_time_micros)


def _count_dead_letter(dead: DeadLetter, debug_metrics: bool) -> DeadLetter:
    """SENSITIVE (--debug_metrics only): exact dead letters per stage, e.g. how many records
    exceeded a contribution bound."""
    if debug_metrics:
        beam.metrics.Metrics.counter(JOB, f'dead_letters_{dead.stage}').inc()
    return dead


def build_pipeline(args, options: PipelineOptions, *,
                   source: Optional[beam.PTransform] = None,
                   outputs_fn: Optional[Callable[[JobOutputs], None]] = None,
                   accountants: Optional[Dict[str, BudgetAccountant]] = None) -> beam.Pipeline:
    """The whole job graph (not run).

    Args:
      args: the job's parsed arguments (``options.parse_args``).
      options: Beam pipeline options; streaming is switched on for --input_subscription.
      source: replaces the configured read (see ``read_events``); for tests.
      outputs_fn: called with the ``JobOutputs`` after the sinks are attached (tests use it to
        attach ``assert_that``).
      accountants: ``job_accountants(args)``, to read the spent costs after the graph is built
        (the privacy ledger); default: a fresh one.
    """
    if args.input_subscription:
        options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(options=options)
    outputs = build_job(pipeline, args, source,
                        accountant=(accountants or {}).get('riders'))
    write_releases(outputs.releases, args)
    write_dead_letters(outputs.dead_letters, args)
    if outputs_fn is not None:
        outputs_fn(outputs)
    return pipeline

