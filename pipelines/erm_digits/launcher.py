"""Runs the ERM job: parses the command line (``options``), builds the graph (``pipeline``),
runs it; after a local run prints the summary (``summary``): the published models, and with
evaluation (``--evaluate``; on by default on the embedded data) their accuracy and a plot.
"""

from typing import List, Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

from pipelines.common.launch import remove_empty_temp_dirs
from pipelines.common.launch import run_pipeline
from pipelines.common.launch import runner_name
from pipelines.common.launch import with_default_runner
from pipelines.erm_digits import pipeline as job
from pipelines.erm_digits import summary
from pipelines.erm_digits.options import parse_args

__all__ = ['run']


def run(argv: Optional[List[str]] = None) -> None:
    args, beam_args = parse_args(argv)
    options = PipelineOptions(with_default_runner(beam_args))
    streaming = bool(args.input_subscription) or options.view_as(StandardOptions).streaming
    if not run_pipeline(job.build_pipeline(args, options), runner_name(options)):
        return
    remove_empty_temp_dirs(args.output_avro, args.dead_letter_avro)
    if streaming or not args.output_avro or '://' in args.output_avro:
        return
    print(summary.summarize(args).text())
