"""The PMWG-queries job graph: read trips and queries, answer with DP, write answers.

  data source    ReadFromAvro (batch) / ReadFromPubSub (streaming) | 'ParseTrips'
  query source   ReadFromAvro / ReadFromPubSub                      | 'ParseQueries'
  (both)         'AnswerWithPMWG'  beam_dp WindowedPMWG on the public step clock (--start,
                 --step_seconds, --end; domain element = duration bin · 4 + payment; with
                 --window_seconds the period is the key: one database per period)
  answers        → 'WriteAnswersAvro' / 'PublishAnswers'  (beam_dp.io.queries.ANSWER_SCHEMA)
  refusals       → 'WriteRefusalsAvro' / 'PublishRefusals'  (the same schema, ``refusal`` set)
  dead letters   → 'WriteDeadLettersAvro' / 'PublishDeadLetters'

No DP logic lives here: the parameters go to beam_dp, which validates them when the graph is built.
"""

import logging
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from beam_dp import BudgetAccountant
from beam_dp import DeadLetter
from beam_dp import PrivacyBudget
from beam_dp.io.queries import ANSWER_SCHEMA
from beam_dp.io.queries import QueryAnswer
from beam_dp.io.queries import answer_to_avro
from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.records import dead_letter_to_avro
from beam_dp.transforms.pmwg import WindowedPMWG
from pipelines.common.launch import noise_key_scope
from pipelines.common import sinks
from pipelines.common.pubsub_codec import decode
from pipelines.pmwg_queries import sample_data

__all__ = [
    'INITIAL_SIZE',
    'JobOutputs',
    'build_pipeline',
    'domain_fn',
    'period_fn',
    'job_accountants',
    'release_schedule',
]

_LOG = logging.getLogger(__name__)
#: PMWG's initial size n: no query of an instance is answered before it holds n records. Not a
#: template parameter (metadata.json is fixed); public, data-independent.
INITIAL_SIZE = 1000
ANSWERS_PREFIX = 'answers'
REFUSALS_PREFIX = 'refusals'
DEAD_LETTERS_PREFIX = 'dead_letters'
STREAMING_FILE_WINDOW_SECONDS = 60


class JobOutputs(NamedTuple):
    answers: beam.PCollection
    refusals: beam.PCollection
    dead_letters: beam.PCollection


def period_fn(window_seconds: int) -> Optional[Callable]:
    """trip or query record → its fixed event-time period (the key of its database, as
    ``WindowedPMWG(period=window_seconds)`` computes it from the event time), or None (one
    database)."""
    if not window_seconds:
        return None
    micros = int(window_seconds) * 1_000_000

    def period(record):
        return int(record['event_time_micros']) // micros

    return period


def domain_fn(domain_size: int) -> Callable:
    """trip → cell = duration bin · 4 + payment index, with domain_size/4 two-minute bins."""
    bins = domain_size // len(sample_data.PAYMENTS)

    def cell(trip):
        duration = float(trip['duration_seconds'])
        if not duration >= 0 or duration == float('inf'):
            raise ValueError(f'duration_seconds must be finite and >= 0, got {duration!r}')
        b = min(bins - 1, int(duration // (60 * sample_data.BIN_MINUTES)))
        return b * len(sample_data.PAYMENTS) + sample_data.PAYMENTS.index(trip['payment'])

    return cell


class _Stamp(beam.DoFn):
    """Avro record → the record at its event time; Pub/Sub message → the decoded record."""

    def __init__(self, schema=None):
        self._schema = schema

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        if self._schema is not None:
            try:
                record = decode(self._schema, getattr(element, 'data', element))
            except Exception as e:  # pylint: disable=broad-except
                yield beam.pvalue.TaggedOutput('dead_letter', DeadLetter(
                    'pmwg_queries', 'decode', str(e), repr(element)[:2000], None))
                return
            yield record
            return
        micros = element.get('event_time_micros')
        if not isinstance(micros, int):
            yield beam.pvalue.TaggedOutput('dead_letter', DeadLetter(
                'pmwg_queries', 'parse', 'event_time_micros missing', repr(element)[:2000], None))
            return
        yield window.TimestampedValue(element, Timestamp(micros=micros))


def _read(pipeline, name, subscription, path, schema):
    if subscription:
        raw = pipeline | f'Read{name}' >> beam.io.ReadFromPubSub(
            subscription=subscription, with_attributes=True, timestamp_attribute='event_time')
        parsed = raw | f'Parse{name}' >> beam.ParDo(_Stamp(schema)).with_outputs(
            'dead_letter', main='records')
    else:
        raw = pipeline | f'Read{name}' >> beam.io.ReadFromAvro(path)
        parsed = raw | f'Parse{name}' >> beam.ParDo(_Stamp()).with_outputs(
            'dead_letter', main='records')
    return parsed.records, parsed.dead_letter


def job_accountants(args) -> Dict[str, BudgetAccountant]:
    """The job's accountant (one part: every trip), read by the privacy ledger after the graph
    is built (pipelines/common/ledger.py)."""
    return {'trips': BudgetAccountant(PrivacyBudget(epsilon=args.epsilon, delta=args.delta))}


def release_schedule(args) -> Tuple[Optional[float], Optional[float]]:
    """The public event-time range: --start and --end (None on an open stream)."""
    return args.start, args.end


def build_job(pipeline, args, accountants: Optional[Dict[str, BudgetAccountant]] = None
              ) -> JobOutputs:
    trips, dead_trips = _read(pipeline, 'Trips', args.data_subscription,
                              args.data_avro or sample_data.TRIPS_PATH, sample_data.TRIP_SCHEMA)
    queries, dead_queries = _read(pipeline, 'Queries', args.query_subscription,
                                  args.query_avro or sample_data.QUERIES_PATH,
                                  sample_data.query_record_schema())
    accountant = (accountants or job_accountants(args))['trips']
    with noise_key_scope(args):
        pmwg = WindowedPMWG(
            budget=PrivacyBudget(epsilon=args.epsilon, delta=args.delta), alpha=args.alpha,
            n=INITIAL_SIZE, domain_size=args.domain_size, domain_fn=domain_fn(args.domain_size),
            start=args.start, step=args.step_seconds, end=args.end,
            # one database per period (the period index is its key, as period_fn's), its state
            # cleared once the period is released
            period=args.window_seconds or None, accountant=accountant,
            debug_metrics=args.debug_metrics)
    out = (trips, queries) | 'AnswerWithPMWG' >> pmwg
    dead = ((dead_trips, dead_queries, out.dead_letter)
            | 'MergeDeadLetters' >> beam.Flatten().with_output_types(DeadLetter))
    return JobOutputs(out.answers, out.refusals, dead)


def _streaming_file_window() -> beam.PTransform:
    return beam.WindowInto(window.FixedWindows(STREAMING_FILE_WINDOW_SECONDS))


def _write(pcoll, prefix, path, topic, schema, to_avro, name):
    """Avro files (batch: one; streaming: one per fixed event-time window) and/or Pub/Sub."""
    if path:
        sinks.write_avro_files(pcoll, path, name=name, prefix=prefix, schema=schema,
                               to_avro=to_avro, streaming_window=_streaming_file_window)
    if topic:
        sinks.publish(pcoll, topic, name=name, encode_fn=sinks.avro_encoder(schema, to_avro))


def build_pipeline(args, options: PipelineOptions, *,
                   outputs_fn: Optional[Callable[[JobOutputs], None]] = None,
                   accountants: Optional[Dict[str, BudgetAccountant]] = None) -> beam.Pipeline:
    """The whole job graph (not run); streaming is switched on when reading Pub/Sub.
    ``accountants``: ``job_accountants(args)`` to read the spent costs afterwards (the privacy
    ledger)."""
    if args.data_subscription or args.query_subscription:
        options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(options=options)
    outputs = build_job(pipeline, args, accountants)
    import fastavro  # pylint: disable=import-outside-toplevel
    answer_schema = fastavro.parse_schema(dict(ANSWER_SCHEMA))
    _write(outputs.answers, ANSWERS_PREFIX, args.output_avro, args.output_topic,
           answer_schema, answer_to_avro, 'Answers')
    _write(outputs.refusals, REFUSALS_PREFIX, args.output_avro, args.output_topic,
           answer_schema, answer_to_avro, 'Refusals')
    _write(outputs.dead_letters, DEAD_LETTERS_PREFIX, args.dead_letter_avro,
           args.dead_letter_topic, DEAD_LETTER_SCHEMA, dead_letter_to_avro, 'DeadLetters')
    if outputs_fn is not None:
        outputs_fn(outputs)
    return pipeline


del QueryAnswer
