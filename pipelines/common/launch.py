"""Launcher helpers shared by the jobs: argument types, output defaults, runner detection,
running (local: wait; remote: submit and return), logging and local tidying."""

import logging
import os
import time
from typing import Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

__all__ = [
    'LOCAL_RUNNERS',
    'configure_logging',
    'is_local_runner',
    'optional_int',
    'remove_empty_temp_dirs',
    'resolve_output_defaults',
    'run_pipeline',
    'runner_name',
]

_LOG = logging.getLogger(__name__)
#: Runners that execute in this process (or its subprocesses): the launcher waits for them.
LOCAL_RUNNERS = ('DirectRunner', 'BundleBasedDirectRunner', 'SwitchingDirectRunner',
                 'PrismRunner')


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


def run_pipeline(pipeline: beam.Pipeline, runner: str) -> bool:
    """Runs ``pipeline``; on a local runner waits for it and returns True.

    On Dataflow and other remote runners returns False once the job is submitted (a Flex
    Template launcher must not wait for a streaming job).
    """
    started = time.monotonic()
    result = pipeline.run()
    if not is_local_runner(runner):
        _LOG.info('Submitted to %s.', runner)
        return False
    result.wait_until_finish()
    _LOG.info('Pipeline finished in %.1f s.', time.monotonic() - started)
    return True


def configure_logging() -> None:
    """INFO for the jobs' own loggers; Beam's (verbose) INFO logs off, its warnings kept."""
    logging.basicConfig(level=logging.INFO,
                        format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    logging.getLogger('apache_beam').setLevel(logging.WARNING)


def remove_empty_temp_dirs(*directories: Optional[str]) -> None:
    """fileio leaves its (empty) .temp* directories behind; tidy local ones."""
    for directory in directories:
        if not directory or '://' in directory or not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if name.startswith('.temp') and os.path.isdir(path) and not os.listdir(path):
                os.rmdir(path)
