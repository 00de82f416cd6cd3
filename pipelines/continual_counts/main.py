"""Thin entrypoint of the continual-counts job (the Flex Template's FLEX_TEMPLATE_PYTHON_PY_FILE).

It only configures logging and hands the command line to ``launcher.run``.
"""

import logging
import os
import re
import sys

if __package__ in (None, ''):
    # Run as a script (the Flex Template launcher runs this file by path): make the repository
    # root importable when the package is not installed.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))

from pipelines.common.launch import configure_logging  # pylint: disable=wrong-import-position
from pipelines.continual_counts import launcher  # pylint: disable=wrong-import-position


class _WorkerLogFilter(logging.Filter):
    """Local subprocess SDK workers log through Beam's job service as a protobuf dump: keep only
    this package's lines (the progress lines), shortened to their message."""

    # Known, harmless warnings of a local subprocess worker.
    _HARMLESS = ('No semi_persistent_directory found', 'Discarding unparseable args')
    _MESSAGE = re.compile(r'message: "(.*?)"(?: instruction_id| transform_id| log_location)')

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if not text.startswith('Worker:'):
            return True
        if 'pipelines/continual_counts' not in text and (
                record.levelno < logging.WARNING or any(h in text for h in self._HARMLESS)):
            return False
        match = self._MESSAGE.search(text)
        if match:
            record.msg, record.args = 'worker: %s', (match.group(1),)
        return True


def main(argv=None) -> None:
    configure_logging(argv)
    # ... but show the SDK worker's log lines (the progress lines) of local subprocess workers.
    worker_log = logging.getLogger('apache_beam.runners.portability.local_job_service')
    worker_log.setLevel(logging.INFO)
    worker_log.addFilter(_WorkerLogFilter())
    launcher.run(argv)


if __name__ == '__main__':
    main()
