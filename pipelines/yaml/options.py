"""Command line of the generic YAML job: its own arguments (``parse_known_args``); the rest goes to
Beam. Every Flex Template parameter in ``metadata.json`` is one of these arguments."""

import argparse
import json
from typing import List, Optional, Tuple

from pipelines.common.launch import add_noise_key_argument
from pipelines.common.ledger import add_ledger_arguments
from pipelines.common.ledger import check_ledger_arguments

__all__ = ['build_parser', 'parse_args']

_DESCRIPTION = (
    'Runs any beam_dp transform (or several, chained with Beam YAML\'s own reads, writes and '
    'mappings) from a Beam YAML pipeline file: --config=path.yaml (local or gs://). The file '
    'configures each transform by field names (docs/configuration.md); beam_dp\'s provider is '
    'added by the job, so the file needs no providers: block. The pipeline\'s total budget '
    '(--epsilon/--delta, or --rho; else the file\'s options.beam_dp_*) is charged by every '
    'beam_dp transform when the graph is built: a config that asks for more is refused before '
    'anything is read or submitted, and the run is recorded in the privacy ledger (--ledger) '
    'before it starts. The job prints nothing computed from the data: its only outputs are '
    'the writes of the config (releases are differentially private; dead letters are not, '
    'route them to a restricted sink). Unknown arguments go to Beam.')


def _epilog() -> str:
    from beam_dp.transforms import yaml_provider  # pylint: disable=import-outside-toplevel
    return ('beam_dp transforms (type: in the config): ' + ', '.join(sorted(
        yaml_provider.TRANSFORMS)) + '. Example configs: pipelines/yaml/configs/*.yaml, e.g. '
        'python -m pipelines.yaml --config=pipelines/yaml/configs/aggregates.yaml '
        '--jinja_variables=\'{"input": "views.avro", "output": "out/"}\' --epsilon=3 '
        '--ledger=none --runner=DirectRunner')


def _jinja(text: str):
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        raise argparse.ArgumentTypeError('expected a JSON object, e.g. {"input": "x"}') from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('expected a JSON object, e.g. {"input": "x"}')
    return value


def _positive(text: str) -> Optional[float]:
    if text.strip() == '':
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a positive number, got {text!r}') from None
    if not 0 < value < float('inf'):
        raise argparse.ArgumentTypeError(f'expected a positive number, got {text!r}')
    return value


def _delta(text: str) -> Optional[float]:
    if text.strip() == '':
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected 0 <= delta < 1, got {text!r}') from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f'expected 0 <= delta < 1, got {text!r}')
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='python -m pipelines.yaml', description=_DESCRIPTION,
                                     epilog=_epilog())
    io = parser.add_argument_group('the pipeline')
    io.add_argument('--config', required=True,
                    help='The Beam YAML pipeline file (a local path or gs://bucket/path.yaml): '
                         'reads, beam_dp transforms configured by field names, writes.')
    io.add_argument('--jinja_variables', type=_jinja, default={},
                    help='A JSON object of the config\'s Jinja variables (e.g. input and output '
                         'paths, Pub/Sub topics): {"input": "gs://b/in*.avro"}.')
    dp = parser.add_argument_group('privacy')
    dp.add_argument('--epsilon', type=_positive, default=None,
                    help='The total ε of every beam_dp transform of the pipeline (overrides '
                         'the config\'s options.beam_dp_epsilon). A config whose transforms ask '
                         'for more is refused before anything runs.')
    dp.add_argument('--delta', type=_delta, default=None,
                    help='The total δ (with --epsilon; default 0).')
    dp.add_argument('--rho', type=_positive, default=None,
                    help='The total ρ (zCDP), instead of --epsilon/--delta.')
    add_noise_key_argument(dp)
    add_ledger_arguments(dp)
    parser.add_argument('--verbose', action='store_true',
                        help="Show Beam's INFO logs too (default: Beam warnings only).")
    return parser


def parse_args(argv: Optional[List[str]] = None) -> Tuple[argparse.Namespace, List[str]]:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    check_ledger_arguments(parser, args)
    if args.rho is not None and (args.epsilon is not None or args.delta is not None):
        parser.error('give either --rho or --epsilon/--delta')
    if args.delta is not None and args.epsilon is None:
        parser.error('--delta needs --epsilon')
    return args, beam_args
