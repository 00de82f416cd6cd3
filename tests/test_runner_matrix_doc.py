"""docs/runners.md's runner matrix is the one the tests generate (``tests/runner_matrix.py``):
a family, output or known failure added to the matrix without regenerating the docs fails here.

    python -m tests.runner_matrix     # prints the table; paste it between the markers
"""

import pathlib

from tests import runner_matrix

DOC = pathlib.Path(__file__).resolve().parent.parent / 'docs' / 'runners.md'


def test_the_docs_show_the_generated_matrix():
    text = DOC.read_text()
    assert text.count(runner_matrix.BEGIN) == 1 and text.count(runner_matrix.END) == 1, (
        'docs/runners.md must hold the runner matrix markers once')
    current = text[text.index(runner_matrix.BEGIN):text.index(runner_matrix.END)
                   + len(runner_matrix.END)]
    assert current == runner_matrix.matrix_table(), (
        'docs/runners.md: the runner matrix is out of date; regenerate it with '
        '`python -m tests.runner_matrix` and paste it between the markers')


def test_the_matrix_covers_every_family_and_both_runners():
    table = runner_matrix.matrix_table()
    from tests import families  # pylint: disable=import-outside-toplevel
    for name in families.FAMILIES:
        assert f'| `{name}` |' in table
    assert set(runner_matrix.RUNNERS) == {'prism', 'flink'}
