"""Runs the continual-counts job: parses the command line (``options``), builds the graph
(``pipeline``), runs it; after a local batch run prints a summary of the releases and saves a
plot (``summary``): the truth and the error against it only when evaluation is on
(``pipelines.common.evaluation``).
"""

import logging
from typing import List, Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

from pipelines.common.launch import is_dry_run
from pipelines.common.launch import remove_empty_temp_dirs
from pipelines.common.launch import run_pipeline
from pipelines.common.launch import runner_name
from pipelines.common.launch import waits_for_job
from pipelines.common.launch import with_default_runner
from pipelines.common.ledger import guard_stream
from pipelines.continual_counts import pipeline as job
from pipelines.continual_counts import sample_data
from pipelines.continual_counts import summary
from pipelines.continual_counts.options import parse_args

__all__ = [
    'local_batch_args',
    'run',
]

_LOG = logging.getLogger(__name__)

# Local batch runs: Beam 2.77's in-process FnApiRunner weighs every state-cache write with
# objsize (a walk over all loaded modules, milliseconds per call), which makes the stateful
# contribution bounding ~7x slower than the work itself. One subprocess SDK worker with the
# state cache off avoids it. Applied only when the user chose no direct running mode.
_FAST_LOCAL_BATCH_ARGS = ['--direct_running_mode=multi_processing', '--direct_num_workers=1',
                          '--max_cache_memory_usage_mb=0']


def local_batch_args(args, beam_args: List[str]) -> List[str]:
    """``beam_args`` plus the fast local-batch settings when they apply."""
    options = PipelineOptions(beam_args)
    runner = runner_name(options)
    chosen = any(a.startswith(('--direct_running_mode', '--direct_num_workers',
                               '--max_cache_memory_usage_mb')) for a in beam_args)
    streaming = bool(args.input_subscription) or options.view_as(StandardOptions).streaming
    if runner == 'DirectRunner' and not streaming and not chosen:
        return with_default_runner(list(beam_args) + _FAST_LOCAL_BATCH_ARGS)
    return with_default_runner(beam_args)


def run(argv: Optional[List[str]] = None) -> None:
    """Builds and runs the job; waits and summarises for local batch runs."""
    args, beam_args = parse_args(argv)
    options = PipelineOptions(local_batch_args(args, beam_args))
    streaming = bool(args.input_subscription) or options.view_as(StandardOptions).streaming
    runner = runner_name(options)
    _LOG.info('continual_counts: input=%s runner=%s streaming=%s epsilon=%g output=%s',
              args.input_subscription or args.input_avro or sample_data.RIDES_PATH, runner,
              streaming, args.epsilon, args.output_avro or args.output_topic)
    accountants = job.job_accountants(args)
    pipeline = job.build_pipeline(args, options, accountants=accountants)
    start, end = job.release_schedule(args)
    guard_stream(args, beam_args, job=job.JOB, accountants=accountants, start=start, end=end,
                 dry_run=is_dry_run(options) and not waits_for_job(options, runner))
    if not run_pipeline(pipeline, runner):
        return
    remove_empty_temp_dirs(args.output_avro, args.dead_letter_avro)
    if streaming or not args.output_avro:
        return
    print(summary.summarize_run(args).text())
