"""The Boost-queries job graph: read rows and queries, answer with BoostQueries, write outputs.

  rows     Create (embedded sample) / ReadFromAvro / ReadFromPubSub | 'StampRows'
  queries  Create (embedded sample) / ReadFromAvro / ReadFromPubSub | 'StampQueries'
  (both)   'AnswerWithBoost'  beam_dp BoostQueries (dataset 'covid', shape 2×2×4×8, weekly blocks)
  answers, refusals, ledger, blocks → '<Name>Avro' files (beam_dp.io.boost schemas; refusals:
  beam_dp.io.queries.ANSWER_SCHEMA, the one refusal record) and, for the
           answers, 'PublishAnswers'; dead letters → 'DeadLetters' Avro / Pub/Sub

No DP logic lives here: the parameters go to beam_dp, which validates them when the graph is built.
"""

import operator
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import apache_beam as beam
import fastavro
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from beam_dp import BoostQueries
from beam_dp import BudgetAccountant
from beam_dp import DeadLetter
from beam_dp import PrivacyBudget
from beam_dp.io import boost as records
from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.queries import ANSWER_SCHEMA
from beam_dp.io.records import dead_letter_to_avro
from pipelines.common.launch import noise_key_scope
from pipelines.boost_queries import sample_data
from pipelines.common import sinks
from pipelines.common.pubsub_codec import decode

__all__ = ['JobOutputs', 'build_job', 'build_pipeline', 'job_accountants', 'query_time_micros',
           'release_schedule']

STREAMING_FILE_WINDOW_SECONDS = 60
#: (output, file prefix, Avro schema) of every typed output.
OUTPUT_FILES = (('answers', 'answers', records.BOOST_ANSWER_SCHEMA),
                ('refusals', 'refusals', ANSWER_SCHEMA),   # QueryAnswer refusals
                ('ledger', 'ledger', records.BOOST_LEDGER_SCHEMA),
                ('blocks', 'blocks', records.BOOST_BLOCK_SCHEMA))


class JobOutputs(NamedTuple):
    answers: beam.PCollection
    refusals: beam.PCollection
    ledger: beam.PCollection
    blocks: beam.PCollection
    dead_letters: beam.PCollection


def query_time_micros(query: dict, blocks: int) -> int:
    """The public event time of a query read from a file: 1 s after the end of its last block
    (a latest-P query: after the last block ``blocks``)."""
    last = blocks - 1 if query.get('latest', 0) > 0 else int(query['last_block'])
    last = max(0, min(last, blocks - 1))
    return (sample_data.START_SECONDS + (last + 1) * sample_data.BLOCK_SECONDS + 1) * 10 ** 6


class _Stamp(beam.DoFn):
    """Avro row → at its event time; Avro query → at ``query_time_micros``; Pub/Sub message →
    the decoded record (its timestamp is the message's event_time attribute)."""

    def __init__(self, kind: str, blocks: int, schema=None):
        self._kind = kind
        self._blocks = blocks
        self._schema = schema

    def process(self, element):
        try:
            if self._schema is not None:
                yield decode(self._schema, getattr(element, 'data', element))
                return
            micros = (element['event_time_micros'] if self._kind == 'row'
                      else query_time_micros(element, self._blocks))
            yield window.TimestampedValue(element, Timestamp(micros=int(micros)))
        except Exception as e:  # pylint: disable=broad-except
            yield beam.pvalue.TaggedOutput('dead_letter', DeadLetter(
                'boost_queries', f'stamp_{self._kind}', repr(e)[:500], repr(element)[:2000],
                None))


def _read(pipeline, name, kind, subscription, path, schema, blocks):
    label = f'Read{name}'
    if subscription:
        raw = pipeline | label >> beam.io.ReadFromPubSub(
            subscription=subscription, with_attributes=True, timestamp_attribute='event_time')
        stamp = _Stamp(kind, blocks, schema)
    elif path:
        raw = pipeline | label >> beam.io.ReadFromAvro(path)
        stamp = _Stamp(kind, blocks)
    elif kind == 'row':
        raw = pipeline | label >> beam.Create(sample_data.job_rows())
        stamp = _Stamp(kind, blocks)
    else:
        raw = pipeline | label >> beam.Create(
            [window.TimestampedValue(q, Timestamp(micros=t)) for t, q in sample_data.job_queries()])
        return raw, None
    parsed = raw | f'Stamp{name}' >> beam.ParDo(stamp).with_outputs('dead_letter', main='ok')
    return parsed.ok, parsed.dead_letter


def job_budget(args) -> PrivacyBudget:
    """--epsilon, with --delta only for Gaussian noise."""
    return PrivacyBudget(epsilon=args.epsilon,
                         delta=args.delta if args.noise == 'gaussian' else 0.0)


def job_accountants(args) -> Dict[str, BudgetAccountant]:
    """The job's accountant (one part: every row), read by the privacy ledger after the graph
    is built (pipelines/common/ledger.py)."""
    return {'rows': BudgetAccountant(job_budget(args))}


def release_schedule(args) -> Tuple[float, float]:
    """The public block schedule: the sample start and --blocks blocks later."""
    start = sample_data.START_SECONDS
    return start, start + args.blocks * sample_data.BLOCK_SECONDS


def build_job(pipeline, args, accountants: Optional[Dict[str, BudgetAccountant]] = None
              ) -> JobOutputs:
    rows, dead_rows = _read(pipeline, 'Rows', 'row', args.data_subscription, args.data_avro,
                            sample_data.ROW_SCHEMA, args.blocks)
    queries, dead_queries = _read(pipeline, 'Queries', 'query', args.query_subscription,
                                  args.query_avro, records.BOOST_QUERY_SCHEMA, args.blocks)
    budget = job_budget(args)
    accountant = (accountants or job_accountants(args))['rows']
    start, end = release_schedule(args)
    with noise_key_scope(args):
        boost = BoostQueries(
            public_datasets=[sample_data.DATASET], shape=list(sample_data.SHAPE), budget=budget,
            start=start, step=sample_data.BLOCK_SECONDS,
            end=end, preset=args.preset,
            alpha=args.alpha, beta=args.beta, noise=args.noise,
            cache_capacity=args.cache_capacity, retention_blocks=args.retention_blocks,
            replay_retention=args.replay_retention_seconds,
            dataset_fn=operator.itemgetter('dataset'),
            attributes_fn=operator.itemgetter('attributes'), accountant=accountant,
            debug_metrics=args.debug_metrics)
    out = (rows, queries) | 'AnswerWithBoost' >> boost
    dead = tuple(d for d in (dead_rows, dead_queries) if d is not None) + (out.dead_letter,)
    dead = dead | 'MergeDeadLetters' >> beam.Flatten().with_output_types(DeadLetter)
    return JobOutputs(out.answers, out.refusals, out.ledger, out.blocks, dead)


def _streaming_file_window() -> beam.PTransform:
    return beam.WindowInto(window.FixedWindows(STREAMING_FILE_WINDOW_SECONDS))


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
    if args.output_avro:
        for name, prefix, schema in OUTPUT_FILES:
            sinks.write_avro_files(getattr(outputs, name), args.output_avro,
                                   name=name.capitalize(), prefix=prefix,
                                   schema=fastavro.parse_schema(dict(schema)),
                                   to_avro=records.boost_to_avro,
                                   streaming_window=_streaming_file_window)
    if args.output_topic:
        sinks.publish(outputs.answers, args.output_topic, name='Answers',
                      encode_fn=sinks.avro_encoder(records.BOOST_ANSWER_SCHEMA,
                                                   records.boost_to_avro))
    if args.dead_letter_avro:
        sinks.write_avro_files(outputs.dead_letters, args.dead_letter_avro, name='DeadLetters',
                               prefix='dead_letters', schema=DEAD_LETTER_SCHEMA,
                               to_avro=dead_letter_to_avro,
                               streaming_window=_streaming_file_window)
    if args.dead_letter_topic:
        sinks.publish(outputs.dead_letters, args.dead_letter_topic, name='DeadLetters',
                      encode_fn=sinks.avro_encoder(DEAD_LETTER_SCHEMA, dead_letter_to_avro))
    if outputs_fn is not None:
        outputs_fn(outputs)
    return pipeline
