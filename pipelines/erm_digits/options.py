"""Command line of the ERM job: its own arguments (``parse_known_args``); the rest goes to Beam.
Every Flex Template parameter in ``metadata.json`` is one of these arguments.

With no arguments the job streams the embedded digits and drifting streams (``data.py``) on the
DirectRunner, writes ``models-*.avro``, ``ledger-*.avro`` and ``dead_letters-*.avro`` plus
``accuracy.png`` to ``./out/erm_digits/`` and prints test accuracy per release next to the
non-private model (evaluation, on by default on the embedded data only: ``--evaluate``,
``pipelines.common.evaluation``).
"""

import argparse
import os
from typing import List, Optional, Tuple

from pipelines.common import evaluation
from pipelines.common.launch import add_noise_key_argument
from pipelines.common.ledger import add_ledger_arguments
from pipelines.common.ledger import check_ledger_arguments
from pipelines.common.launch import optional_int
from pipelines.common.launch import resolve_output_defaults

__all__ = ['DEFAULT_OUTPUT', 'build_parser', 'parse_args']

DEFAULT_OUTPUT = os.path.join('.', 'out', 'erm_digits')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m pipelines.erm_digits',
        description='Continual and sliding-window private ERM (beam_dp ContinualERM, its '
                    'DP-FTRL option, and SlidingWindowERM) over a stream of labelled examples. '
                    'Without arguments: the embedded digits and drifting streams on the '
                    'DirectRunner. Unknown arguments go to Beam.')
    io = parser.add_argument_group('input and output')
    io.add_argument('--input_subscription', default=None,
                    help='Pub/Sub subscription of Avro examples (streaming; event_time '
                         'attribute; schema pipelines/erm_digits/data.py INPUT_SCHEMA).')
    io.add_argument('--input_avro', default=None,
                    help='Avro file(s) of examples (batch; needs --end_seconds).')
    io.add_argument('--end_seconds', type=optional_int, default=None,
                    help='Public end of the release period in seconds since the epoch '
                         '(required for --input_avro; default for the embedded data: its '
                         'last block).')
    io.add_argument('--output_topic', default=None, help='Pub/Sub topic for Avro models.')
    io.add_argument('--output_avro', default=None,
                    help=f'Directory for models-*.avro and ledger-*.avro (default '
                         f'{DEFAULT_OUTPUT}).')
    io.add_argument('--ledger_topic', default=None,
                    help='Pub/Sub topic for the privacy ledger rows (default: files only).')
    io.add_argument('--dead_letter_topic', default=None, help='Pub/Sub topic for dead letters.')
    io.add_argument('--dead_letter_avro', default=None,
                    help='Directory for dead_letters-*.avro (default: --output_avro).')
    dp = parser.add_argument_group('privacy')
    dp.add_argument('--epsilon', type=float, default=100.0,
                    help='ε of EACH transform per example (three transforms read each '
                         'example: Alg 4, Alg 5 and DP-FTRL, 3ε in total per example; default '
                         '100: see benchmarks/erm for accuracy at smaller ε).')
    add_noise_key_argument(dp)
    add_ledger_arguments(dp)
    evaluation.add_evaluate_arguments(parser)
    parser.add_argument('--no_plot', action='store_true',
                        help='Do not write accuracy.png (written only with evaluation).')
    parser.add_argument('--verbose', action='store_true',
                        help="Show Beam's INFO logs too (default: Beam warnings only).")
    return parser


def parse_args(argv: Optional[List[str]] = None) -> Tuple[argparse.Namespace, List[str]]:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    check_ledger_arguments(parser, args)
    if args.input_subscription and args.input_avro:
        parser.error('give at most one of --input_subscription and --input_avro')
    if args.input_avro and args.end_seconds is None:
        parser.error('--input_avro is a bounded input: give its public --end_seconds')
    if not args.epsilon > 0:
        parser.error('--epsilon must be positive')
    resolve_output_defaults(args, DEFAULT_OUTPUT)
    evaluation.resolve(args, demo_data=not args.input_avro and not args.input_subscription)
    return args, beam_args
