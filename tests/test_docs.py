"""The documentation cannot rot: every ```python block in docs/*.md that is preceded by the line
``<!-- runnable -->`` is executed as a script (in a fresh interpreter, from the repository root,
with this checkout's ``beam_dp`` first on the path: a worktree tests its own code, not an
installed copy) and must exit 0; every relative link between the pages must resolve."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs'
MARKER = '<!-- runnable -->'
_BLOCK = re.compile(r'^' + re.escape(MARKER) + r'[ \t]*\n```python[ \t]*\n(.*?)^```[ \t]*$',
                    re.MULTILINE | re.DOTALL)
_LINK = re.compile(r'\]\(([^)#\s]+\.md)(#[^)]*)?\)')
#: The family pages, each of which must carry at least one runnable example.
FAMILY_PAGES = ('continual_counts.md', 'partitioning.md', 'growing_databases.md')


def runnable_blocks(text: str):
    """The code of every ```python block directly preceded by the runnable marker."""
    return [m.group(1) for m in _BLOCK.finditer(text)]


def _examples():
    for page in sorted(DOCS.glob('*.md')):
        for i, code in enumerate(runnable_blocks(page.read_text(encoding='utf-8'))):
            yield pytest.param(code, id=f'{page.name}[{i}]')


def test_extractor_finds_only_marked_blocks():
    text = ('<!-- runnable -->\n```python\nprint(1)\n```\n\n'
            '```python\nraise SystemExit(1)\n```\n'
            '<!-- runnable -->\n```python\nx = 2\nprint(x)\n```\n')
    assert runnable_blocks(text) == ['print(1)\n', 'x = 2\nprint(x)\n']


@pytest.mark.parametrize('page', FAMILY_PAGES)
def test_every_family_page_has_a_runnable_example(page):
    assert runnable_blocks((DOCS / page).read_text(encoding='utf-8')), page


def test_relative_links_between_pages_resolve():
    broken = []
    for page in sorted(DOCS.glob('*.md')):
        for target, _ in _LINK.findall(page.read_text(encoding='utf-8')):
            if '://' not in target and not (page.parent / target).exists():
                broken.append(f'{page.name} -> {target}')
    assert not broken, broken


@pytest.mark.pipeline
@pytest.mark.parametrize('code', list(_examples()))
def test_runnable_example(code, tmp_path):
    script = tmp_path / 'example.py'
    script.write_text(code, encoding='utf-8')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]))
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                            text=True, timeout=600, check=False, env=env)
    assert result.returncode == 0, (
        f'example failed (exit {result.returncode}):\n{code}\n--- stderr (tail) ---\n'
        f'{result.stderr[-4000:]}')
