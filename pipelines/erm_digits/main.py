"""Thin entrypoint of the ERM job (the Flex Template's FLEX_TEMPLATE_PYTHON_PY_FILE).

It only configures logging and hands the command line to ``launcher.run``.
"""

import os
import sys

if __package__ in (None, ''):
    # Run as a script (the Flex Template launcher runs this file by path): make the repository
    # root importable when the package is not installed.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))

from pipelines.common.launch import configure_logging  # pylint: disable=wrong-import-position
from pipelines.erm_digits import launcher  # pylint: disable=wrong-import-position


def main(argv=None) -> None:
    configure_logging(argv)
    launcher.run(argv)


if __name__ == '__main__':
    main()
