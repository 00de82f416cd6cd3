"""Command line of the Boost-queries job: its own arguments (``parse_known_args``); the rest goes
to Beam. Every Flex Template parameter in ``metadata.json`` is one of these arguments.

With no arguments the job runs the embedded Covid-shaped sample (``sample_data``) on the
DirectRunner, writes answers/refusals/ledger/blocks/dead letters as Avro to
``./out/boost_queries/``, prints the budget per path and per block, and plots cumulative budget vs
queries for Boost (``budget_vs_queries.png``); its baselines, re-run on the raw rows, and the
dead-letter count only when evaluation is on (``--evaluate``, or the embedded sample:
``pipelines.common.evaluation``).
"""

import argparse
import os
from typing import List, Optional, Tuple

from pipelines.boost_queries import sample_data
from pipelines.common import evaluation
from pipelines.common.launch import add_debug_metrics_argument
from pipelines.common.launch import add_noise_key_argument
from pipelines.common.ledger import add_ledger_arguments
from pipelines.common.ledger import check_ledger_arguments
from pipelines.common.launch import resolve_output_defaults

__all__ = ['DEFAULT_OUTPUT', 'build_parser', 'parse_args']

DEFAULT_OUTPUT = os.path.join('.', 'out', 'boost_queries')
PRESETS = ('tree_pmw_bypass', 'tree_pmw_bypass_warm', 'pmw_bypass', 'vanilla_pmw', 'laplace',
           'exact_cache', 'tree_exact_cache')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m pipelines.boost_queries',
        description='Cached DP answers to a stream of linear queries over weekly blocks of a '
                    'Covid-shaped table (beam_dp BoostQueries). Without arguments: the embedded '
                    'sample on the DirectRunner. Unknown arguments go to Beam.')
    io = parser.add_argument_group('input and output')
    io.add_argument('--data_subscription', default=None,
                    help='Pub/Sub subscription of Avro rows (streaming; event_time attribute).')
    io.add_argument('--query_subscription', default=None,
                    help='Pub/Sub subscription of Avro BoostQueryRecord queries (streaming).')
    io.add_argument('--data_avro', default=None, help='Avro file(s) of rows (batch).')
    io.add_argument('--query_avro', default=None,
                    help='Avro file(s) of queries (batch; event time = query_time_micros '
                         'field, else the end of the last block).')
    io.add_argument('--output_topic', default=None, help='Pub/Sub topic for Avro answers.')
    io.add_argument('--output_avro', default=None,
                    help=f'Directory for answers/refusals/ledger/blocks-*.avro (default '
                         f'{DEFAULT_OUTPUT}).')
    io.add_argument('--dead_letter_topic', default=None, help='Pub/Sub topic for dead letters.')
    io.add_argument('--dead_letter_avro', default=None,
                    help='Directory for dead_letters-*.avro (default: --output_avro).')
    dp = parser.add_argument_group('privacy and accuracy')
    dp.add_argument('--epsilon', type=float, default=10.0,
                    help='ε_G: the capacity of every block\'s privacy filter (default 10).')
    dp.add_argument('--alpha', type=float, default=0.05,
                    help='Accuracy target α of every answer (fraction; default 0.05).')
    dp.add_argument('--beta', type=float, default=1e-3,
                    help='Failure probability β of the α target (default 1e-3).')
    dp.add_argument('--preset', default='tree_pmw_bypass', choices=PRESETS,
                    help='The mechanism (default tree_pmw_bypass: Boost, Alg. 2).')
    dp.add_argument('--blocks', type=int, default=sample_data.JOB_BLOCKS,
                    help=f'Number of weekly blocks from 2020-01-01 (public end; default '
                         f'{sample_data.JOB_BLOCKS}).')
    dp.add_argument('--noise', default='laplace', choices=('laplace', 'gaussian'),
                    help='laplace (default: pure epsilon-DP per block) or gaussian (exact '
                         'discrete Gaussian answers, rho-zCDP block filters converted to '
                         '(epsilon, delta); needs --delta > 0; not with vanilla_pmw).')
    dp.add_argument('--delta', type=float, default=0.0,
                    help='delta of the (epsilon, delta) budget with --noise gaussian (0 < delta '
                         '< 1); must be 0 (default) with --noise laplace.')
    add_noise_key_argument(dp)
    add_ledger_arguments(dp)
    state = parser.add_argument_group('state bounds (public; default unbounded)')
    state.add_argument('--cache_capacity', type=int, default=None,
                       help='At most this many exact-cache entries (>= 2), about the most '
                            'recently used; an evicted answer is recomputed and charged again.')
    state.add_argument('--retention_blocks', type=int, default=None,
                       help='Windows may start at most this many blocks back (>= 1); older '
                            "ones are refused 'window_expired' and their state is dropped.")
    state.add_argument('--replay_retention_seconds', type=int, default=None,
                       help='Query ids are kept for at least this many seconds of query event '
                            "time (>= 1); older queries are refused 'replay_window_expired'.")
    add_debug_metrics_argument(dp)
    evaluation.add_evaluate_arguments(parser)
    parser.add_argument('--no_baselines', action='store_true',
                        help='Skip the baselines in the summary (pure presets re-run on the same '
                             'data: evaluation only, so never shown without it).')
    parser.add_argument('--verbose', action='store_true',
                        help="Show Beam's INFO logs too (default: Beam warnings only).")
    return parser


def parse_args(argv: Optional[List[str]] = None) -> Tuple[argparse.Namespace, List[str]]:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    check_ledger_arguments(parser, args)
    if bool(args.data_subscription) != bool(args.query_subscription):
        parser.error('give both --data_subscription and --query_subscription, or neither')
    if args.blocks < 1:
        parser.error('--blocks must be >= 1')
    if args.noise == 'gaussian' and not 0 < args.delta < 1:
        parser.error('--noise gaussian needs 0 < --delta < 1')
    if args.noise == 'laplace' and args.delta != 0:
        parser.error('--delta applies to --noise gaussian only')
    for name, least in (('cache_capacity', 2), ('retention_blocks', 1),
                        ('replay_retention_seconds', 1)):
        value = getattr(args, name)
        if value is not None and value < least:
            parser.error(f'--{name} must be >= {least}')
    resolve_output_defaults(args, DEFAULT_OUTPUT)
    # The queries are public; the data decides whether this is the demo.
    evaluation.resolve(args, demo_data=not args.data_avro and not args.data_subscription)
    return args, beam_args
