"""Thin entrypoint of the PMWG-queries job (the Flex Template's FLEX_TEMPLATE_PYTHON_PY_FILE).

It only configures logging and hands the command line to ``launcher.run``.
"""

import logging
import os
import sys

if __package__ in (None, ''):
    # Run as a script (the Flex Template launcher runs this file by path): make the repository
    # root importable when the package is not installed.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))

from pipelines.pmwg_queries import launcher  # pylint: disable=wrong-import-position


def main(argv=None) -> None:
    logging.basicConfig(level=logging.INFO, format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    # Beam's own INFO logs are verbose; keep ours and Beam's warnings.
    logging.getLogger('apache_beam').setLevel(logging.WARNING)
    launcher.run(argv)


if __name__ == '__main__':
    main()
