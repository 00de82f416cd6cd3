"""Command line of the PMWG-queries job: its own arguments (``parse_known_args``); the rest goes
to Beam. Every Flex Template parameter in ``metadata.json`` is one of these arguments.

With no arguments the job replays the embedded sample trips and queries (``data/``) on the
DirectRunner, writes ``answers-*.avro`` to ``./out/pmwg_queries/`` and prints a summary (answers,
refusals; the error against the true answers only when evaluation is on: ``--evaluate``, or the
embedded sample, ``pipelines.common.evaluation``).
"""

import argparse
import os
from typing import List, Optional, Tuple

from pipelines.common import evaluation
from pipelines.common.launch import add_debug_metrics_argument
from pipelines.common.launch import add_noise_key_argument
from pipelines.common.ledger import add_ledger_arguments
from pipelines.common.ledger import check_ledger_arguments
from pipelines.common.launch import resolve_output_defaults
from pipelines.common.launch import time_arg
from pipelines.pmwg_queries import sample_data

__all__ = ['DEFAULT_OUTPUT', 'build_parser', 'parse_args']

DEFAULT_OUTPUT = os.path.join('.', 'out', 'pmwg_queries')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m pipelines.pmwg_queries',
        description='DP answers to a public stream of linear queries over a growing database of '
                    'taxi trips (beam_dp WindowedPMWG). Without arguments: the embedded sample '
                    'data on the DirectRunner. Unknown arguments go to Beam.')
    io = parser.add_argument_group('input and output')
    io.add_argument('--data_subscription', default=None,
                    help='Pub/Sub subscription of Avro trips (streaming; event_time attribute).')
    io.add_argument('--query_subscription', default=None,
                    help='Pub/Sub subscription of Avro queries (streaming).')
    io.add_argument('--data_avro', default=None, help='Avro file(s) of trips (batch).')
    io.add_argument('--query_avro', default=None, help='Avro file(s) of queries (batch).')
    io.add_argument('--output_topic', default=None, help='Pub/Sub topic for Avro answers.')
    io.add_argument('--output_avro', default=None,
                    help=f'Directory for answers-*.avro (default {DEFAULT_OUTPUT}).')
    io.add_argument('--dead_letter_topic', default=None, help='Pub/Sub topic for dead letters.')
    io.add_argument('--dead_letter_avro', default=None,
                    help='Directory for dead_letters-*.avro (default: --output_avro).')
    dp = parser.add_argument_group('privacy and accuracy')
    dp.add_argument('--epsilon', type=float, default=1.0, help='Total ε per trip (default 1).')
    dp.add_argument('--delta', type=float, default=0.0, help='Total δ (default 0: pure DP).')
    dp.add_argument('--alpha', type=float, default=0.2,
                    help='PMWG target accuracy α in (0, 1] (default 0.2).')
    dp.add_argument('--beta', type=float, default=0.05,
                    help='Failure probability reported with α (PMWG does not use it; default '
                         '0.05).')
    dp.add_argument('--domain_size', type=int, default=sample_data.DOMAIN_SIZE,
                    help='Cells: 4 payment types × domain_size/4 two-minute duration bins '
                         f'(default {sample_data.DOMAIN_SIZE}).')
    dp.add_argument('--window_seconds', type=int, default=0,
                    help='Independent databases per fixed event-time period of this many seconds '
                         '(the period is the key: each trip is in one database, parallel '
                         'composition); 0: one growing database (default).')
    dp.add_argument('--start', type=time_arg, default=None,
                    help='Public start of the step clock (RFC 3339 or epoch seconds): records '
                         'and queries before it are dead-lettered. Required except on the '
                         'embedded sample (default there: its start).')
    dp.add_argument('--step_seconds', type=float, default=60.0,
                    help='Public step: the trips and queries of a step are processed, and the '
                         'answers released, when the watermark passes its end (default 60).')
    dp.add_argument('--end', type=time_arg, default=None,
                    help='Public end (RFC 3339 or epoch seconds): nothing after it is answered. '
                         'Required for Avro (batch) input; optional on Pub/Sub. Default on the '
                         'embedded sample: its end.')
    add_noise_key_argument(dp)
    add_ledger_arguments(dp)
    add_debug_metrics_argument(dp)
    evaluation.add_evaluate_arguments(parser)
    parser.add_argument('--verbose', action='store_true',
                        help="Show Beam's INFO logs too (default: Beam warnings only).")
    return parser


def parse_args(argv: Optional[List[str]] = None) -> Tuple[argparse.Namespace, List[str]]:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    check_ledger_arguments(parser, args)
    if bool(args.data_subscription) != bool(args.query_subscription):
        parser.error('give both --data_subscription and --query_subscription, or neither')
    if args.domain_size % len(sample_data.PAYMENTS) or args.domain_size < 4:
        parser.error('--domain_size must be a positive multiple of 4 (payment types)')
    if args.window_seconds < 0:
        parser.error('--window_seconds must be >= 0')
    if args.step_seconds <= 0:
        parser.error('--step_seconds must be > 0')
    sample = not args.data_avro and not args.data_subscription
    if sample:
        start = sample_data.SAMPLE_START.timestamp()
        args.start = start if args.start is None else args.start
        args.end = start + sample_data.SPAN_SECONDS if args.end is None else args.end
    if args.start is None:
        parser.error('--start is required (the public start of the step clock: RFC 3339 or '
                     'epoch seconds, at or before the first trip to count)')
    if args.data_avro and args.end is None:
        parser.error('--end is required with --data_avro (batch input): the public end of the '
                     'period to answer, so that the releases do not depend on the data')
    resolve_output_defaults(args, DEFAULT_OUTPUT)
    # The queries are public; the data decides whether this is the demo.
    evaluation.resolve(args, demo_data=sample)
    return args, beam_args
