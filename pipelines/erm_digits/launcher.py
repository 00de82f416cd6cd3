"""Runs the ERM job: parses the command line (``options``), builds the graph (``pipeline``),
runs it; after a local run prints the summary (``summary``): the published models, and with
evaluation (``--evaluate``; on by default on the embedded data) their accuracy and a plot.
"""

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
from pipelines.erm_digits import pipeline as job
from pipelines.erm_digits import summary
from pipelines.erm_digits.options import parse_args

__all__ = ['run']


def run(argv: Optional[List[str]] = None) -> None:
    args, beam_args = parse_args(argv)
    options = PipelineOptions(with_default_runner(beam_args))
    streaming = bool(args.input_subscription) or options.view_as(StandardOptions).streaming
    runner = runner_name(options)
    accountants = job.job_accountants(args)
    pipeline = job.build_pipeline(args, options, accountants=accountants)
    start, end = job.release_schedule(args)
    guard_stream(args, beam_args, job='erm_digits', accountants=accountants, start=start,
                 end=end, dry_run=is_dry_run(options) and not waits_for_job(options, runner))
    if not run_pipeline(pipeline, runner):
        return
    remove_empty_temp_dirs(args.output_avro, args.dead_letter_avro)
    if streaming or not args.output_avro or '://' in args.output_avro:
        return
    print(summary.summarize(args).text())
