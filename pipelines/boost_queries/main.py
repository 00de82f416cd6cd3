"""Thin entrypoint of the Boost-queries job (the Flex Template's FLEX_TEMPLATE_PYTHON_PY_FILE):
configures logging, parses the command line, builds and runs the graph, and after a local batch
run prints the budget summary (``summary``)."""

import os
import sys

if __package__ in (None, ''):
    # Run as a script (the Flex Template launcher runs this file by path).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))

# pylint: disable=wrong-import-position
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions

from pipelines.boost_queries import pipeline as job
from pipelines.boost_queries import summary
from pipelines.boost_queries.options import parse_args
from pipelines.common.launch import configure_logging
from pipelines.common.launch import is_dry_run
from pipelines.common.launch import run_pipeline
from pipelines.common.launch import runner_name
from pipelines.common.launch import waits_for_job
from pipelines.common.launch import with_default_runner
from pipelines.common.ledger import guard_stream


def main(argv=None) -> None:
    configure_logging(argv)
    args, beam_args = parse_args(argv)
    options = PipelineOptions(with_default_runner(beam_args))
    streaming = bool(args.data_subscription) or options.view_as(StandardOptions).streaming
    runner = runner_name(options)
    accountants = job.job_accountants(args)
    pipeline = job.build_pipeline(args, options, accountants=accountants)
    start, end = job.release_schedule(args)
    guard_stream(args, beam_args, job='boost_queries', accountants=accountants, start=start,
                 end=end, dry_run=is_dry_run(options) and not waits_for_job(options, runner))
    if not run_pipeline(pipeline, runner):
        return
    if streaming or not args.output_avro:
        return
    print(summary.summarize(args).text())


if __name__ == '__main__':
    main()
