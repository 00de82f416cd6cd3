"""Runs the PMWG-queries job: parses the command line (``options``), builds the graph
(``pipeline``), runs it; after a local batch run prints a summary (answers and refusals; the
error against the true answers only when evaluation is on; ``summary``).
"""

from typing import List, Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

from pipelines.common.launch import run_pipeline
from pipelines.common.launch import runner_name
from pipelines.common.launch import with_default_runner
from pipelines.pmwg_queries import pipeline as job
from pipelines.pmwg_queries import summary
from pipelines.pmwg_queries.options import parse_args

__all__ = ['run']


def run(argv: Optional[List[str]] = None) -> None:
    args, beam_args = parse_args(argv)
    options = PipelineOptions(with_default_runner(beam_args))
    streaming = bool(args.data_subscription) or options.view_as(StandardOptions).streaming
    if not run_pipeline(job.build_pipeline(args, options), runner_name(options)):
        return
    if streaming or not args.output_avro:
        return
    print(summary.summarize(args).text())
