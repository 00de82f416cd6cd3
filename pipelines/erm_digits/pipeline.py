"""The ERM job graph: read examples, release private models per stream, write them.

  source        Create (embedded) / ReadFromAvro (batch) / ReadFromPubSub (streaming) | 'Parse'
  'ByStream'    Partition by the record's stream: digits | drift | other (→ dead letter)
  per dataset   'Continual<Name>'  beam_dp ContinualERM (Alg 4)   ε per example
                'Sliding<Name>'    beam_dp SlidingWindowERM (Alg 5) ε per example
                'Ftrl<Name>'       beam_dp ContinualERM(algorithm='dp_ftrl') ε per example
                (one BudgetAccountant of 3ε per dataset: each example is read by all three)
  models        → 'WriteModelsAvro' / 'PublishModels'   (beam_dp.io.erm.MODEL_RELEASE_SCHEMA)
  ledger        → 'WriteLedgerAvro' / 'PublishLedger'   (ERM_LEDGER_SCHEMA)
  dead letters  → 'WriteDeadLettersAvro' / 'PublishDeadLetters'

No DP logic lives here: the public parameters (``data.DATASETS``) go to beam_dp, which
validates them when the graph is built.
"""

import operator
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import apache_beam as beam
import fastavro
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from beam_dp import BudgetAccountant
from beam_dp import ContinualERM
from beam_dp import DeadLetter
from beam_dp import PrivacyBudget
from beam_dp import SlidingWindowERM
from beam_dp.io.erm import ERM_LEDGER_SCHEMA
from beam_dp.io.erm import MODEL_RELEASE_SCHEMA
from beam_dp.io.erm import ledger_row_to_avro
from beam_dp.io.erm import model_release_to_avro
from beam_dp.io.records import DEAD_LETTER_SCHEMA
from beam_dp.io.records import dead_letter_to_avro
from pipelines.common.launch import noise_key_scope
from pipelines.common import sinks
from pipelines.common.pubsub_codec import decode
from pipelines.erm_digits import data

__all__ = [
    'DEAD_LETTERS_PREFIX',
    'JobOutputs',
    'LEDGER_PREFIX',
    'METHODS',
    'MODELS_PREFIX',
    'build_job',
    'build_pipeline',
    'job_accountants',
    'release_schedule',
    'transforms_for',
]

MODELS_PREFIX = 'models'
LEDGER_PREFIX = 'ledger'
DEAD_LETTERS_PREFIX = 'dead_letters'
STREAMING_FILE_FLUSH_SECONDS = 60
_JOB = 'erm_digits'
#: The releases per dataset, in ``transforms_for``'s order (label prefixes).
METHODS = ('Continual', 'Sliding', 'Ftrl')


class JobOutputs(NamedTuple):
    models: beam.PCollection
    ledger: beam.PCollection
    dead_letters: beam.PCollection


class _Parse(beam.DoFn):
    """Avro record / Pub/Sub message → the record at its event time, or a dead letter."""

    def __init__(self, pubsub: bool):
        self._pubsub = pubsub

    def process(self, element):
        try:
            record = decode(data.INPUT_SCHEMA, element) if self._pubsub else element
            micros = record['event_time_micros']
            if isinstance(micros, bool) or not isinstance(micros, int):
                raise ValueError('event_time_micros must be an integer')
        except Exception as e:  # pylint: disable=broad-except
            yield beam.pvalue.TaggedOutput('dead_letter', DeadLetter(
                _JOB, 'Parse', str(e), repr(element)[:2000], None))
            return
        yield window.TimestampedValue(record, Timestamp(micros=micros))


def _by_stream(record, _num) -> int:
    names = [ds.name for ds in data.DATASETS]
    stream = record.get('stream') if isinstance(record, dict) else None
    return names.index(stream) if stream in names else len(names)


def _unknown_stream(record) -> DeadLetter:
    return DeadLetter(_JOB, 'ByStream', 'stream is not one of '
                      f'{[ds.name for ds in data.DATASETS]}', repr(record)[:2000],
                      record.get('event_time_micros') if isinstance(record, dict) else None)


def job_accountants(args) -> Dict[str, BudgetAccountant]:
    """One 3ε accountant per dataset (the datasets' examples are disjoint: parallel
    composition), keyed by dataset name; the privacy ledger reads them after the graph is built
    (pipelines/common/ledger.py)."""
    return {ds.name: BudgetAccountant(PrivacyBudget(epsilon=len(METHODS) * args.epsilon))
            for ds in data.DATASETS}


def _end(args, ds: data.Dataset) -> Optional[int]:
    embedded = not (args.input_subscription or args.input_avro)
    return data.end_seconds(ds) if embedded and args.end_seconds is None else args.end_seconds


def release_schedule(args) -> Tuple[float, Optional[float]]:
    """The public block schedule: the common start, and the last dataset's end (None when a
    dataset has no end)."""
    ends = [_end(args, ds) for ds in data.DATASETS]
    return data.START_SECONDS, None if any(e is None for e in ends) else max(ends)


def transforms_for(ds: data.Dataset, epsilon: float, end_seconds: Optional[int],
                   accountant: Optional[BudgetAccountant] = None):
    """(ContinualERM, SlidingWindowERM, ContinualERM(algorithm='dp_ftrl')) of one dataset,
    sharing a 3ε accountant (default: a fresh one). DP-FTRL's counter: ``select_counter``'s for
    the public number of blocks, or the infinite-horizon tree without an end (Pub/Sub)."""
    if accountant is None:
        accountant = BudgetAccountant(PrivacyBudget(epsilon=len(METHODS) * epsilon))
    shared = dict(
        start=data.START_SECONDS, step=data.STEP_SECONDS, end=end_seconds,
        budget=PrivacyBudget(epsilon=epsilon), public_streams=[ds.name],
        num_classes=ds.num_classes, feature_dim=ds.feature_dim,
        records_per_block=ds.records_per_block, stream_fn=operator.itemgetter('stream'),
        features_fn=operator.itemgetter('features'), label_fn=operator.itemgetter('label'),
        accountant=accountant)
    common = dict(shared, mu=ds.mu, update_mu=ds.update_mu, passes=ds.passes,
                  batch_size=ds.batch_size)
    return (ContinualERM(blocks_per_base=ds.blocks_per_base, base_fraction=ds.base_fraction,
                         **common),
            SlidingWindowERM(levels=ds.levels, **common),
            ContinualERM(algorithm='dp_ftrl', mu=ds.ftrl_mu, counter='auto' if end_seconds
                         is not None else 'infinite_tree', **shared))


def _read(pipeline, args):
    if args.input_subscription:
        raw = pipeline | 'ReadExamples' >> beam.io.ReadFromPubSub(
            subscription=args.input_subscription, timestamp_attribute='event_time')
    elif args.input_avro:
        raw = pipeline | 'ReadExamples' >> beam.io.ReadFromAvro(args.input_avro)
    else:
        records = [r for ds in data.DATASETS for r in data.records_of(ds, data.embedded(ds))]
        raw = pipeline | 'ReadExamples' >> beam.Create(records)
    parsed = raw | 'Parse' >> beam.ParDo(_Parse(bool(args.input_subscription))).with_outputs(
        'dead_letter', main='records')
    return parsed.records, parsed.dead_letter


def build_job(pipeline, args, accountants: Optional[Dict[str, BudgetAccountant]] = None
              ) -> JobOutputs:
    records, dead_parse = _read(pipeline, args)
    parts = records | 'ByStream' >> beam.Partition(_by_stream, len(data.DATASETS) + 1)
    models, ledger = [], []
    dead = [dead_parse, parts[len(data.DATASETS)] | 'UnknownStream' >> beam.Map(
        _unknown_stream).with_output_types(DeadLetter)]
    accountants = accountants or job_accountants(args)
    with noise_key_scope(args):
        for i, ds in enumerate(data.DATASETS):
            name = ds.name.capitalize()
            for kind, transform in zip(METHODS, transforms_for(ds, args.epsilon, _end(args, ds),
                                                               accountants[ds.name])):
                out = parts[i] | f'{kind}{name}' >> transform
                models.append(out.releases)
                ledger.append(out.ledger)
                dead.append(out.dead_letter)
    return JobOutputs(tuple(models) | 'MergeModels' >> beam.Flatten(),
                      tuple(ledger) | 'MergeLedger' >> beam.Flatten(),
                      tuple(dead) | 'MergeDeadLetters' >> beam.Flatten().with_output_types(
                          DeadLetter))


def _write(pcoll, prefix, path, topic, schema, to_avro, name):
    """Avro files (batch: one; streaming: flushed periodically) and/or Pub/Sub."""
    if path:
        sinks.write_avro_files(
            pcoll, path, name=name, prefix=prefix, schema=schema, to_avro=to_avro,
            streaming_window=lambda: sinks.flush_periodically(STREAMING_FILE_FLUSH_SECONDS))
    if topic:
        sinks.publish(pcoll, topic, name=name, encode_fn=sinks.avro_encoder(schema, to_avro))


def build_pipeline(args, options: PipelineOptions, *,
                   outputs_fn: Optional[Callable[[JobOutputs], None]] = None,
                   accountants: Optional[Dict[str, BudgetAccountant]] = None) -> beam.Pipeline:
    """The whole job graph (not run); streaming is switched on when reading Pub/Sub.
    ``accountants``: ``job_accountants(args)`` to read the spent costs afterwards (the privacy
    ledger)."""
    if args.input_subscription:
        options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(options=options)
    outputs = build_job(pipeline, args, accountants)
    _write(outputs.models, MODELS_PREFIX, args.output_avro, args.output_topic,
           fastavro.parse_schema(dict(MODEL_RELEASE_SCHEMA)), model_release_to_avro, 'Models')
    _write(outputs.ledger, LEDGER_PREFIX, args.output_avro, args.ledger_topic,
           fastavro.parse_schema(dict(ERM_LEDGER_SCHEMA)), ledger_row_to_avro, 'Ledger')
    _write(outputs.dead_letters, DEAD_LETTERS_PREFIX, args.dead_letter_avro,
           args.dead_letter_topic, DEAD_LETTER_SCHEMA, dead_letter_to_avro, 'DeadLetters')
    if outputs_fn is not None:
        outputs_fn(outputs)
    return pipeline
