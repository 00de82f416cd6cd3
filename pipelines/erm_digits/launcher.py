"""Runs the ERM job: parses the command line (``options``), builds the graph (``pipeline``),
runs it; after a local run prints the summary (``summary``): the published models, and with
evaluation (``--evaluate``; on by default on the embedded data) their accuracy and a plot. The
sequence is ``pipelines.common.job.run_job``.
"""

from typing import List, Optional

from pipelines.common.job import run_job
from pipelines.erm_digits import pipeline as job
from pipelines.erm_digits import summary
from pipelines.erm_digits.options import parse_args

__all__ = ['run']


def run(argv: Optional[List[str]] = None) -> None:
    run_job(argv, name='erm_digits', parse_args=parse_args, job=job,
            subscribed=lambda args: args.input_subscription, summarize=summary.summarize,
            tidy=True)
