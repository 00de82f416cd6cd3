"""Thin entrypoint of the generic YAML job (the Flex Template's FLEX_TEMPLATE_PYTHON_PY_FILE):
configures logging and hands the command line to ``launcher.run``
(``python -m pipelines.yaml --help``)."""

import os
import sys

if __package__ in (None, ''):
    # Run as a script (the Flex Template launcher runs this file by path): make the repository
    # root importable when the package is not installed, and keep this directory (whose name is
    # also PyYAML's) off the path.
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != _HERE]
    sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))

from pipelines.common.launch import configure_logging  # pylint: disable=wrong-import-position
from pipelines.yaml import launcher  # pylint: disable=wrong-import-position


def main(argv=None) -> None:
    configure_logging(argv)
    launcher.run(argv)


if __name__ == '__main__':
    main()
