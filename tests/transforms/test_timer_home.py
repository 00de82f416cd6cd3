"""Every timer of beam_dp lives in ``beam_dp/transforms/release_loop.py`` (issue 22): the
release loops and the watermark gate declare them; a family's module subclasses or calls those
and declares none. The check reads the source (any use of ``TimerSpec`` or ``on_timer``: an
import, a call, a decorator, an attribute such as ``userstate.TimerSpec``), so a module that
adds a timer of its own fails here, and the test below shows that it does.
"""

import ast
import pathlib
from typing import Dict, List

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
HOME = 'beam_dp.transforms.release_loop'
#: Modules still moving onto the watermark gate (none since the warm-up's close moved, issue
#: 23). An entry must go when its module no longer declares a timer
#: (``test_pending_entries_still_pend``).
PENDING: set = set()
_TIMER_NAMES = ('TimerSpec', 'on_timer')


def timer_uses(source: str, module: str) -> List[str]:
    """``module:line uses NAME`` for every use of a timer name in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        else:
            continue
        out += [f'{module}:{node.lineno} uses {name}' for name in names
                if name in _TIMER_NAMES]
    return out


def timers_outside_home(sources: Dict[str, str]) -> List[str]:
    """The timer uses of every module of ``sources`` ({dotted name: source}) but the home's
    and the pending ones'."""
    return [use for module, source in sorted(sources.items())
            if module != HOME and module not in PENDING
            for use in timer_uses(source, module)]


def repository_sources() -> Dict[str, str]:
    sources = {}
    for path in sorted((REPO / 'beam_dp').rglob('*.py')):
        sources['.'.join(path.relative_to(REPO).with_suffix('').parts)] = path.read_text()
    return sources


def test_no_module_but_the_release_loop_declares_a_timer():
    sources = repository_sources()
    assert len(sources) > 100                      # the walk found the tree
    assert timer_uses(sources[HOME], HOME)          # the home has them: the check sees them
    assert timers_outside_home(sources) == []


def test_pending_entries_still_pend():
    sources = repository_sources()
    for module in PENDING:
        assert timer_uses(sources[module], module), (
            f'{module} declares no timer any more: remove it from PENDING')


@pytest.mark.parametrize('source,expected', [
    ('from apache_beam.transforms.userstate import TimerSpec\n',
     'beam_dp.transforms._probe:1 uses TimerSpec'),
    ('from apache_beam.transforms import userstate\n\n\nclass F:\n'
     '    T = userstate.TimerSpec("t", None)\n',
     'beam_dp.transforms._probe:5 uses TimerSpec'),
    ('import apache_beam as beam\n\n\nclass F(beam.DoFn):\n'
     '    @beam.transforms.userstate.on_timer(None)\n    def f(self):\n        pass\n',
     'beam_dp.transforms._probe:5 uses on_timer'),
    ('from apache_beam.transforms.userstate import on_timer as fire\n',
     'beam_dp.transforms._probe:1 uses on_timer'),
])
def test_one_added_timer_fails(source, expected):
    sources = repository_sources()
    sources['beam_dp.transforms._probe'] = source
    found = timers_outside_home(sources)
    assert found and found[0] == expected, found

