"""Runs the PMWG-queries job: parses the command line (``options``), builds the graph
(``pipeline``), runs it; after a local batch run prints a summary (answers and refusals; the
error against the true answers only when evaluation is on; ``summary``). The sequence is
``pipelines.common.job.run_job``.
"""

from typing import List, Optional

from pipelines.common.job import run_job
from pipelines.pmwg_queries import pipeline as job
from pipelines.pmwg_queries import summary
from pipelines.pmwg_queries.options import parse_args

__all__ = ['run']


def run(argv: Optional[List[str]] = None) -> None:
    run_job(argv, name='pmwg_queries', parse_args=parse_args, job=job,
            subscribed=lambda args: args.data_subscription, summarize=summary.summarize)
