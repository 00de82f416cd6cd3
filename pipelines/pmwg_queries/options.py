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
                    help='Fixed event-time windows (independent databases); 0: one growing '
                         'database (default).')
    dp.add_argument('--start', type=time_arg, default=None,
                    help='Public start of the windows (RFC 3339 or epoch seconds): required with '
                         '--window_seconds on Pub/Sub input, so that when each window closes is '
                         'decided by the public schedule and never by other records (records '
                         'before it are dead-lettered). Default: none (batch input needs none).')
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
    if args.window_seconds and args.data_subscription and args.start is None:
        parser.error('--start is required with --window_seconds on Pub/Sub input (the public '
                     'start of the windows: RFC 3339 or epoch seconds)')
    resolve_output_defaults(args, DEFAULT_OUTPUT)
    # The queries are public; the data decides whether this is the demo.
    evaluation.resolve(args, demo_data=not args.data_avro and not args.data_subscription)
    return args, beam_args
