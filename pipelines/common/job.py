"""The one launch sequence of the jobs: parse → build → guard the stream → run → summarise.

Every job's launcher was the same dozen lines (parse the command line, build the graph with the
job's accountants, check the privacy ledger of the stream with the job's public release
schedule, run, and after a local batch run print the summary); ``run_job`` is them, once. A job
module (``pipelines.<job>.pipeline``) gives ``job_accountants(args)``,
``build_pipeline(args, options, accountants=...)`` and ``release_schedule(args)``.
"""

from typing import Callable, List, Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

from pipelines.common.launch import is_dry_run
from pipelines.common.launch import remove_empty_temp_dirs
from pipelines.common.launch import run_pipeline
from pipelines.common.launch import runner_name
from pipelines.common.launch import waits_for_job
from pipelines.common.launch import with_default_runner
from pipelines.common.ledger import guard_stream

__all__ = ['run_job']


def run_job(argv: Optional[List[str]], *, name: str, parse_args: Callable, job,
            subscribed: Callable, summarize: Optional[Callable] = None,
            beam_args_fn: Optional[Callable] = None, tidy: bool = False):
    """Runs the job ``name`` on the command line ``argv``.

    Args:
      parse_args: argv → (job arguments, Beam arguments).
      job: the job's pipeline module (``job_accountants``, ``build_pipeline``,
        ``release_schedule``).
      subscribed: job arguments → whether the input is a Pub/Sub subscription (streaming).
      summarize: job arguments → the summary of a finished local batch run (``.text()`` is
        printed); None: nothing printed.
      beam_args_fn: (job arguments, Beam arguments) → the Beam arguments to run with (default
        ``with_default_runner``).
      tidy: remove empty temporary directories left in the local output directories.

    Returns:
      The printed summary, or None (streaming, a remote or dry run, no local output).
    """
    args, beam_args = parse_args(argv)
    run_args = (beam_args_fn(args, beam_args) if beam_args_fn is not None
                else with_default_runner(beam_args))
    options = PipelineOptions(run_args)
    streaming = bool(subscribed(args)) or options.view_as(StandardOptions).streaming
    runner = runner_name(options)
    accountants = job.job_accountants(args)
    pipeline = job.build_pipeline(args, options, accountants=accountants)
    start, end = job.release_schedule(args)
    guard_stream(args, beam_args, job=name, accountants=accountants, start=start, end=end,
                 dry_run=is_dry_run(options) and not waits_for_job(options, runner))
    if not run_pipeline(pipeline, runner):
        return None
    if tidy:
        remove_empty_temp_dirs(args.output_avro, args.dead_letter_avro)
    if streaming or summarize is None or not _local(args.output_avro):
        return None
    summary = summarize(args)
    print(summary.text())
    return summary


def _local(path: Optional[str]) -> bool:
    """A local output directory (a summary reads it back)."""
    return bool(path) and '://' not in path


