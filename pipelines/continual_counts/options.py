"""Command line of the continual-counts job: its own arguments; the rest goes to Beam.

``parse_args`` reads the job's arguments with ``parse_known_args``; everything it does not know
(``--runner``, ``--project``, ``--streaming``, ...) goes to ``PipelineOptions``. Every Flex
Template parameter in ``metadata.json`` is one of these arguments.

With no arguments the job runs on the embedded sample data (``data/rides.avro``) on the
DirectRunner, user-level on rider_id with ε = 1, and writes to ``./out/continual_counts/``.
The summary printed after a local batch run shows the truth and the error only when evaluation
is on (``--evaluate``, or the embedded sample: ``pipelines.common.evaluation``).
A batch input always gets a public ``--end`` (default: ``--start`` + 48 steps).
"""

import argparse
import os
from typing import List, Optional, Tuple

from pipelines.common import evaluation
from pipelines.common.launch import add_debug_metrics_argument
from pipelines.common.launch import add_noise_key_argument
from pipelines.common.ledger import add_ledger_arguments
from pipelines.common.ledger import check_ledger_arguments
from pipelines.common.launch import optional_int
from pipelines.common.launch import resolve_output_defaults
from pipelines.common.launch import time_arg
from pipelines.continual_counts import sample_data

__all__ = [
    'DEFAULT_BATCH_STEPS',
    'DEFAULT_OUTPUT',
    'build_parser',
    'parse_args',
]

DEFAULT_OUTPUT = os.path.join('.', 'out', 'continual_counts')
#: Steps released from a batch input without --end: the sample's two days of hourly steps.
DEFAULT_BATCH_STEPS = 48


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m pipelines.continual_counts',
        description='Differentially private continual counts of bike rides per start station '
                    '(beam_dp ContinualCountPerKey, user-level on rider_id). Without arguments: '
                    'the embedded sample data on the DirectRunner. Unknown arguments go to Beam '
                    '(--runner, --project, ...).')
    io = parser.add_argument_group('input and output')
    io.add_argument('--input_subscription', default=None,
                    help='Pub/Sub subscription (projects/P/subscriptions/S) of Avro-encoded ride '
                         'events; switches to streaming.')
    io.add_argument('--input_avro', default=None,
                    help='Glob of Avro files of ride events (batch). Default: the sample data.')
    io.add_argument('--output_topic', default=None,
                    help='Pub/Sub topic (projects/P/topics/T) for Avro-encoded releases.')
    io.add_argument('--output_avro', default=None,
                    help=f'Directory (local or gs://) for releases-*.avro. Default when no '
                         f'--output_topic is given: {DEFAULT_OUTPUT}.')
    io.add_argument('--dead_letter_topic', default=None,
                    help='Pub/Sub topic for Avro-encoded dead letters.')
    io.add_argument('--dead_letter_avro', default=None,
                    help='Directory for dead_letters-*.avro. Default: --output_avro (when no '
                         '--dead_letter_topic is given).')
    io.add_argument('--timestamp_attribute', default='event_time',
                    help='Pub/Sub attribute holding the event time (RFC 3339 or epoch millis); '
                         'empty: the publish time. Ignored with --lateness=arrival.')
    io.add_argument('--lateness', choices=('watermark', 'arrival'), default='watermark',
                    help="Who decides that a ride is late. 'watermark' (default): Beam's "
                         'watermark of --timestamp_attribute; on Dataflow it is estimated from '
                         "the event times of other riders' messages (docs/privacy_model.md). "
                         "'arrival': read Pub/Sub without a timestamp attribute (the publish "
                         "time, set by Pub/Sub) and count a ride iff it was published before its "
                         'step (from the event_time_micros field) ends + '
                         '--allowed_lateness_seconds (beam_dp.ArrivalTimeLateness): a decision '
                         'that depends on that message only. Pub/Sub input only.')
    dp = parser.add_argument_group('privacy and schedule')
    dp.add_argument('--epsilon', type=float, default=1.0,
                    help='Total ε of the job for one rider (default 1.0).')
    dp.add_argument('--delta', type=float, default=0.0,
                    help='Total δ (default 0: pure DP; unused by the ε counters).')
    dp.add_argument('--step_seconds', type=int, default=sample_data.SAMPLE_STEP_SECONDS,
                    help='Release step in event-time seconds (default 3600).')
    dp.add_argument('--allowed_lateness_seconds', type=int, default=0,
                    help='A step is released this long after its end; later records are '
                         'dead-lettered (default 0).')
    dp.add_argument('--public_keys', default=None,
                    help='Comma-separated public station names (default: the sample stations).')
    dp.add_argument('--public_keys_file', default=None,
                    help='File (local or gs://) of public keys, one per line.')
    dp.add_argument('--max_contributions_per_step', type=int, default=1,
                    help='Rides per rider, station and step that count (default 1).')
    dp.add_argument('--max_keys_per_unit', type=int, default=2,
                    help='Stations per rider that count (default 2: home and work).')
    dp.add_argument('--max_steps_per_unit', type=int, default=3,
                    help='Steps per rider and station that count, over the whole horizon '
                         '(default 3).')
    dp.add_argument('--horizon_steps', type=optional_int, default=None,
                    help='A known number of steps (binary tree); default: unbounded.')
    dp.add_argument('--mechanism', default='auto',
                    choices=('auto', 'blt', 'balanced_tree', 'kary_tree', 'binary_tree',
                             'infinite_tree', 'unbounded_tree', 'per_step'),
                    help="The continual counter: 'auto' (default) picks the one with the lowest "
                         "expected error for the budget and the known horizon (see "
                         "`python -m beam_dp.analysis`); the others force one.")
    dp.add_argument('--estimator', choices=('textbook', 'variance_reduced'), default=None,
                    help="Tree counters only (binary_tree, infinite_tree, kary_tree): how a "
                         "release combines the noisy node counts: 'variance_reduced' (Honaker "
                         "2015, same privacy, lower variance) or 'textbook' (the plain sum of the "
                         "covering nodes). Given alone (with --mechanism auto) it keeps the old "
                         "binary/infinite trees.")
    dp.add_argument('--start', type=time_arg, default=sample_data.SAMPLE_START.timestamp(),
                    help='Start of step 0: RFC 3339 or epoch seconds (default: the sample start, '
                         f'{sample_data.SAMPLE_START.isoformat()}).')
    dp.add_argument('--end', type=time_arg, default=None,
                    help='Public end: no step starting at or after it is released; RFC 3339 or '
                         'epoch seconds. A batch input (--input_avro, the sample data) needs one: '
                         f'the default there is --start + {DEFAULT_BATCH_STEPS} x --step_seconds '
                         '(--horizon_steps x --step_seconds when given), i.e. two days of hourly '
                         'steps like the sample; it never depends on the data. Pass the end of '
                         'the period your files cover. Streaming: none (releases until drained).')
    dp.add_argument('--num_shards', type=optional_int, default=None,
                    help='Stateful shards holding the keys (default: 512 keys per shard).')
    add_noise_key_argument(dp)
    add_ledger_arguments(dp)
    run = parser.add_argument_group('local run')
    run.add_argument('--plot', default=None,
                     help="PNG of the released series after a local batch run (with the true "
                          "series only when evaluation is on: --evaluate), or 'none' (default: "
                          '<output_avro>/releases.png).')
    evaluation.add_evaluate_arguments(run)
    run.add_argument('--progress_every', type=int, default=10_000,
                     help='Log a progress line every N releases (and, with --debug_metrics, '
                          'every N events) (default 10000).')
    add_debug_metrics_argument(run)
    run.add_argument('--postprocess', choices=('none', 'isotonic', 'running_max'),
                     default='none',
                     help='Also report the releases after optional post-processing into '
                          'non-negative, non-decreasing counts (beam_dp.postprocess; no privacy '
                          "cost): 'isotonic' (least-squares fit, revises past values) or "
                          "'running_max' (online, biased upwards). Default 'none'.")
    run.add_argument('--verbose', action='store_true',
                     help="Show Beam's INFO logs too (default: Beam warnings only).")
    return parser


def parse_args(argv: Optional[List[str]] = None) -> Tuple[argparse.Namespace, List[str]]:
    """(job arguments with defaults resolved, remaining arguments for PipelineOptions)."""
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    check_ledger_arguments(parser, args)
    if args.input_subscription and args.input_avro:
        parser.error('give at most one of --input_subscription and --input_avro')
    if args.lateness == 'arrival' and not args.input_subscription:
        parser.error('--lateness=arrival needs --input_subscription (the publish time is the '
                     'arrival time; a batch input has none, and nothing in it is late)')
    args.uses_sample_data = not args.input_subscription and not args.input_avro
    evaluation.resolve(args, demo_data=args.uses_sample_data)
    if args.end is None and not args.input_subscription:
        # A bounded input needs a public end (beam_dp refuses one without): from public
        # parameters only, never from the data.
        args.end = args.start + (args.horizon_steps or DEFAULT_BATCH_STEPS) * args.step_seconds
    resolve_output_defaults(args, DEFAULT_OUTPUT)
    if args.plot is None and args.output_avro:
        args.plot = os.path.join(args.output_avro, 'releases.png')
    if args.plot is not None and args.plot.lower() == 'none':
        args.plot = None
    return args, beam_args
