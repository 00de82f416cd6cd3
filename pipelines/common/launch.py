"""Launcher helpers shared by the jobs: argument types, output defaults, runner detection,
running (local and embedded Flink: wait; remote: submit and return; Dataflow dry run: build and
say that nothing was submitted), logging and local tidying."""

import argparse
import datetime
import logging
import os
import sys
import time
from typing import List, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import FlinkRunnerOptions
from apache_beam.options.pipeline_options import PortableOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.options.pipeline_options import TestOptions

from beam_dp.errors import InvalidParamsError
from beam_dp.noise import NoiseKeyRef
from beam_dp.noise import using_noise_key

__all__ = [
    'FLINK_EMBEDDED_MASTERS',
    'FLINK_FINISH_BUNDLE',
    'LOCAL_RUNNERS',
    'add_debug_metrics_argument',
    'add_noise_key_argument',
    'noise_key_scope',
    'configure_logging',
    'is_dry_run',
    'is_local_runner',
    'optional_int',
    'remove_empty_temp_dirs',
    'resolve_output_defaults',
    'run_pipeline',
    'runner_name',
    'time_arg',
    'waits_for_job',
    'with_default_runner',
]

_LOG = logging.getLogger(__name__)
#: Runners that execute in this process (or its subprocesses): the launcher waits for them.
LOCAL_RUNNERS = ('DirectRunner', 'BundleBasedDirectRunner', 'SwitchingDirectRunner',
                 'PrismRunner')


def _noise_key_reference(text: str) -> Optional[str]:
    """argparse type of --noise_key: a validated reference; the value is never echoed."""
    if text.strip() == '':
        return None
    try:
        return NoiseKeyRef(text).reference
    except InvalidParamsError:
        raise argparse.ArgumentTypeError(
            "must be a reference to the secret: 'env:VAR', 'file:/path' or "
            "'gcpsm:projects/P/secrets/S/versions/N' (never the key itself)") from None


def add_noise_key_argument(group) -> None:
    """--noise_key: the job's releases become a PRF of this secret and their address, so a
    retried or restored worker republishes bit-identical values (beam_dp.noise.KeyedRandom)."""
    group.add_argument('--noise_key', type=_noise_key_reference, default=None,
                       help="Reference to the secret noise key: 'env:VAR', 'file:/path' or "
                            "'gcpsm:projects/P/secrets/S/versions/N' (read on the workers, "
                            'never put in the graph). Never the key itself. Default: fresh OS '
                            'randomness (a replay redraws noise).')
    group.add_argument('--stream_id', default=None,
                       help='The identity of the stream this job releases (public, e.g. '
                            "'rides-eu'); required with --noise_key. It is the root of every "
                            'noise address, so one key used by two jobs over different streams '
                            'never draws the same noise. Keep it when the job is restarted or '
                            'updated over the same stream.')
    group.add_argument('--testing_seed', type=_refuse_seed, default=argparse.SUPPRESS,
                       help=argparse.SUPPRESS)


def noise_key_scope(args):
    """``beam_dp.noise.using_noise_key`` for the job's ``--noise_key`` and ``--stream_id``.

    Raises:
      SystemExit: for a noise key without a stream id (or a malformed stream id), with the
        option to add.
    """
    stream_id = getattr(args, 'stream_id', None)
    if args.noise_key is not None:
        if stream_id is None or not str(stream_id).strip():
            raise SystemExit('error: --noise_key needs --stream_id=<the identity of the stream '
                             'this job releases> (the root of every noise address, so that one '
                             'key never gives two streams the same noise).')
        try:
            NoiseKeyRef(args.noise_key, stream_id)
        except InvalidParamsError as e:
            raise SystemExit(f'error: --stream_id: {str(e).split(": ", 1)[-1]}') from None
    return using_noise_key(args.noise_key, stream_id=stream_id if args.noise_key else None)


def add_debug_metrics_argument(group) -> None:
    """--debug_metrics: SENSITIVE exact counts (parsed events, dead letters per stage) as Beam
    metrics and progress logs. Off by default: metrics and logs then carry only data-independent
    facts (README, "What metrics and logs reveal")."""
    group.add_argument('--debug_metrics', action='store_true',
                       help='SENSITIVE: also report exact counts of private records (events '
                            'parsed, dead letters per stage, e.g. how many records exceeded a '
                            'bound) as job metrics and progress logs. Debugging only; they are '
                            'not differentially private. Default: off.')


def _refuse_seed(text: str):
    """A job never takes a seed (issue 10): refuse it loudly instead of passing it to Beam."""
    del text
    raise argparse.ArgumentTypeError(
        'the jobs take no seed (seeded noise is predictable; tests opt in through '
        'beam_dp.noise.testing). Use --noise_key for replay-identical noise.')


def time_arg(text: str) -> float:
    """argparse type: RFC 3339 (2024-06-02T00:00:00Z) or seconds since the epoch → epoch
    seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        value = datetime.datetime.fromisoformat(text.replace('Z', '+00:00').replace('z', '+00:00'))
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f'expected RFC 3339 (e.g. 2024-06-02T00:00:00Z) or epoch seconds, got {text!r}') from e
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f'a time zone is required (e.g. a trailing Z): {text!r}')
    return value.timestamp()


def optional_int(text: str) -> Optional[int]:
    """argparse type: '' → None, else an int."""
    return None if text.strip() == '' else int(text)


def resolve_output_defaults(args, default_output: str) -> None:
    """--output_avro defaults to ``default_output`` when no --output_topic is given;
    --dead_letter_avro defaults to --output_avro when no --dead_letter_topic is given."""
    if args.output_avro is None and not args.output_topic:
        args.output_avro = default_output
    if args.dead_letter_avro is None and not args.dead_letter_topic and args.output_avro:
        args.dead_letter_avro = args.output_avro


def runner_name(options: PipelineOptions) -> str:
    runner = options.view_as(StandardOptions).runner
    if runner is None:
        return 'DirectRunner'
    return runner if isinstance(runner, str) else type(runner).__name__


def is_local_runner(runner: str) -> bool:
    return runner in LOCAL_RUNNERS


#: Flink masters that run an embedded cluster inside the job server this process starts.
FLINK_EMBEDDED_MASTERS = ('[local]', '[auto]')


def waits_for_job(options: PipelineOptions, runner: Optional[str] = None) -> bool:
    """Whether the launcher must wait for the job: it runs in this process or in processes that
    die with it (a local runner; Flink's embedded cluster, ``--flink_master`` '[local]' or
    '[auto]', the default; any portable runner whose SDK harness is this process,
    ``--environment_type=LOOPBACK``). A remote runner (Dataflow, a Flink cluster) is only
    submitted to: a Flex Template launcher must not wait for a streaming job."""
    runner = runner or runner_name(options)
    if is_local_runner(runner):
        return True
    if (options.view_as(PortableOptions).environment_type or '').upper() == 'LOOPBACK':
        return True
    if runner in ('FlinkRunner', 'flink'):
        master = (options.view_as(FlinkRunnerOptions).flink_master or '[auto]').strip()
        return master in FLINK_EMBEDDED_MASTERS
    return False


def is_dry_run(options: PipelineOptions) -> bool:
    """``--dry_run=True`` (Dataflow): the job is built and validated, never submitted."""
    return bool(options.view_as(TestOptions).dry_run)


def run_pipeline(pipeline: beam.Pipeline, runner: str) -> bool:
    """Runs ``pipeline``; when the job runs here (``waits_for_job``) waits for it and returns
    True (raising if it failed).

    On Dataflow and other remote runners returns False once the job is submitted (a Flex
    Template launcher must not wait for a streaming job); with ``--dry_run=True`` nothing is
    submitted, and the log says so.
    """
    started = time.monotonic()
    options = pipeline.options
    wait = waits_for_job(options, runner)
    if not wait and is_dry_run(options):
        pipeline.run()
        _LOG.info('Dry run on %s: the job graph was built and validated; nothing was submitted '
                  '(no job was created, no data read, no budget recorded in the ledger).', runner)
        return False
    result = pipeline.run()
    if not wait:
        _LOG.info('Submitted to %s.', runner)
        return False
    if not is_local_runner(runner):
        _LOG.info('Running on %s here; waiting for the job to finish (stop it with Ctrl-C).',
                  runner)
    state = result.wait_until_finish()
    if state is not None and str(state).rsplit('.', 1)[-1] not in ('DONE', 'UPDATED'):
        raise SystemExit(f'error: the job on {runner} ended in state {state}.')
    _LOG.info('Pipeline finished in %.1f s.', time.monotonic() - started)
    return True


def configure_logging(argv: Optional[List[str]] = None) -> None:
    """INFO for the jobs' own loggers; Beam's (verbose) INFO logs off, its warnings kept, unless
    the command line ``argv`` (default ``sys.argv[1:]``) has ``--verbose``."""
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO,
                        format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    verbose = '--verbose' in argv
    logging.getLogger('apache_beam').setLevel(logging.INFO if verbose else logging.WARNING)


#: Flink runner option the jobs turn on (docs/runners.md): without it, a checkpoint taken inside
#: a bundle makes the Flink runner (2.62) send the held watermark downstream before that
#: bundle's output, so on-time records reach the release stage after their step's release and
#: are dead-lettered as late.
FLINK_FINISH_BUNDLE = '--finish_bundle_before_checkpointing'

#: Prism experiment the jobs turn on (docs/runners.md, "Known Prism differences"): Prism's
#: dynamic split of a running bundle that holds timers re-queues them (apache/beam#35771), and
#: whole timer firings and stateful inputs were then processed twice. With it, no dynamic split.
PRISM_NO_SPLIT = '--experiments=prism_disable_sdf_split'


def _has_flag(beam_args: List[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + '=') for a in beam_args)


def with_default_runner(beam_args: List[str]) -> List[str]:
    """``beam_args`` with ``--runner=DirectRunner`` when no runner is chosen (the runner Beam
    would pick anyway, without its 'Missing pipeline option (runner)' log line), and on the
    Flink runner with ``--finish_bundle_before_checkpointing`` unless it is given
    (``FLINK_FINISH_BUNDLE``); on Prism with ``PRISM_NO_SPLIT``."""
    args = list(beam_args)
    runners = [a.split('=', 1)[1] if '=' in a else (args[i + 1] if i + 1 < len(args) else '')
               for i, a in enumerate(args) if a == '--runner' or a.startswith('--runner=')]
    if not runners:
        return args + ['--runner=DirectRunner']
    if runners[-1] in ('FlinkRunner', 'flink') and not _has_flag(args, FLINK_FINISH_BUNDLE):
        args.append(FLINK_FINISH_BUNDLE)
    if runners[-1] in ('PrismRunner', 'prism') and PRISM_NO_SPLIT not in args:
        args.append(PRISM_NO_SPLIT)
    return args


def remove_empty_temp_dirs(*directories: Optional[str]) -> None:
    """fileio leaves its (empty) .temp* directories behind; tidy local ones."""
    for directory in directories:
        if not directory or '://' in directory or not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if name.startswith('.temp') and os.path.isdir(path) and not os.listdir(path):
                os.rmdir(path)
