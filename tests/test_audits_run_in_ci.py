"""Every DP audit and statistical test the project keeps runs in CI (issue 21).

CI (``.ci/run``) runs the README's test command, ``python -m pytest -q``, on ``tests/``. The
audits are ordinary test files: everything under ``tests/statistical/``, every ``*_statistical``
test file elsewhere, and every test file whose docstring calls itself an audit (the exact DP
audits on neighbouring streams in ``tests/mechanisms/`` and ``tests/drivers/``). This checks
that nothing keeps them out of that command: no marker selection, deselection or ignore in the
configuration or the CI script, no skip in an audit file, each audit file collects tests and
none is deselected, and any audit script kept outside ``tests/`` is run by a test.
"""

import configparser
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ROOT / 'tests'
#: Options that would keep tests out of ``python -m pytest -q``.
_FILTERS = re.compile(r'(^|\s)(-m|-k|--deselect|--ignore|--ignore-glob|-p\s+no:|--co|'
                      r'--collect-only|--lf|--last-failed|-x)(\s|=|$)')


def audit_files():
    """The audit and statistical test files (paths relative to the repository)."""
    found = set(TESTS.glob('statistical/test_*.py'))
    found |= set(TESTS.rglob('test_*statistical*.py'))
    for path in TESTS.rglob('test_*.py'):
        head = path.read_text(encoding='utf-8')[:2000]
        docstring = head.split('"""')[1] if head.startswith('"""') else ''
        if (re.search(r'\baudits?\b', docstring, re.IGNORECASE)
                and 'integration' not in path.parts and path != pathlib.Path(__file__)):
            found.add(path)
    return sorted(p.relative_to(ROOT).as_posix() for p in found)


def test_the_audit_files_are_found():
    files = audit_files()
    for expected in ('tests/statistical/test_counters_statistical.py',
                     'tests/statistical/test_noise_distributions.py',
                     'tests/mechanisms/test_balanced_tree.py',
                     'tests/drivers/test_keyed_user_level.py',
                     'tests/mechanisms/boost/test_gaussian_statistical.py'):
        assert expected in files, files


def test_configuration_selects_every_test():
    config = configparser.ConfigParser()
    config.read(ROOT / 'pytest.ini')
    addopts = config.get('pytest', 'addopts', fallback='')
    assert not _FILTERS.search(addopts), addopts
    assert config.get('pytest', 'testpaths').split() == ['tests']
    for name in ('setup.cfg', 'tox.ini', 'pyproject.toml', 'conftest.py'):
        assert not (ROOT / name).exists() or '[tool.pytest' not in (ROOT / name).read_text(), name


def test_ci_runs_the_whole_suite():
    script = (ROOT / '.ci' / 'run').read_text(encoding='utf-8')
    commands = [line for line in script.splitlines()
                if 'pytest' in line and not line.lstrip().startswith('#')]
    assert commands, 'no pytest command in .ci/run'
    for line in commands:
        tail = line.split('pytest', 1)[1]
        assert tail.strip() == '-q', f'.ci/run must run "python -m pytest -q" unfiltered: {line}'


def test_no_audit_file_skips_itself():
    for name in audit_files():
        text = (ROOT / name).read_text(encoding='utf-8')
        for word in ('pytest.skip', 'skipif', 'mark.skip', 'xfail', 'importorskip'):
            assert word not in text, f'{name} uses {word}: CI would not run all of it'


def test_every_audit_file_collects_and_nothing_is_deselected():
    files = audit_files()
    result = subprocess.run([sys.executable, '-m', 'pytest', '--collect-only', '-q',
                             '-p', 'no:cacheprovider', *files], cwd=ROOT, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert not re.search(r'\d+ deselected', result.stdout), result.stdout[-2000:]
    collected = {line.split('::', 1)[0] for line in result.stdout.splitlines() if '::' in line}
    assert collected == set(files), sorted(set(files) - collected)


def test_audit_scripts_outside_tests_are_run_by_a_test():
    """An audit script kept elsewhere (benchmarks/, tools/) must be run by a test."""
    test_text = '\n'.join(p.read_text(encoding='utf-8') for p in TESTS.rglob('*.py'))
    for path in ROOT.rglob('*audit*'):
        rel = path.relative_to(ROOT)
        # tests/ is checked above; hidden folders (.git, .venv, .cache: what CI installs, e.g.
        # checkov's own checks) are not the project's.
        if rel.parts[0] == 'tests' or any(part.startswith('.') for part in rel.parts) or \
                not path.is_file() or path.suffix not in ('.py', '.sh'):
            continue
        assert rel.as_posix() in test_text or path.stem in test_text, (
            f'{rel} is an audit script that no test runs')
