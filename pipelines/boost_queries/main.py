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
from pipelines.boost_queries import pipeline as job
from pipelines.boost_queries import summary
from pipelines.boost_queries.options import parse_args
from pipelines.common.job import run_job
from pipelines.common.launch import configure_logging


def main(argv=None) -> None:
    configure_logging(argv)
    run_job(argv, name='boost_queries', parse_args=parse_args, job=job,
            subscribed=lambda args: args.data_subscription, summarize=summary.summarize)


if __name__ == '__main__':
    main()
