"""docs/runners.md's runner matrix is the one the tests generate (``tests/runner_matrix.py``):
a family, output or known failure added to the matrix without regenerating the docs fails here.

    python -m tests.runner_matrix     # prints the table; paste it between the markers
"""

import pathlib

from tests import families
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
    for name in families.FAMILIES:
        assert f'| `{name}` |' in table
    assert set(runner_matrix.RUNNERS) == {'prism', 'flink'}


def test_the_families_cover_every_public_transform():
    """A new public transform (a ``ShellTransform`` in ``beam_dp.__all__``) must join
    ``tests/families.py``, and with it the runner matrix."""
    import beam_dp  # pylint: disable=import-outside-toplevel
    from beam_dp.noise.testing import allow_seeded_noise  # pylint: disable=import-outside-toplevel
    from beam_dp.transforms import shell  # pylint: disable=import-outside-toplevel
    public = {n for n in beam_dp.__all__ if isinstance(getattr(beam_dp, n), type)
              and issubclass(getattr(beam_dp, n), shell.ShellTransform)}
    with allow_seeded_noise():
        covered = {type(families.build(name)).__name__ for name in families.FAMILIES}
    assert public and public <= covered, sorted(public - covered)
