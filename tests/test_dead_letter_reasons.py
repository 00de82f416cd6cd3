"""docs/dead_letters.md lists every dead-letter reason the code base can produce, and nothing else.

The reasons are read from the source (AST), so a new or reworded reason fails this test until the
page says what it means: the string given to ``InvalidRecordError(...)``, ``dead_letter(...)``,
``Dead(...)`` or Boost's ``_reject(...)``, assigned to a variable named ``reason`` or returned by
a function whose name says ``reason`` (or by one of ``_REASON_FUNCTIONS``). A reason is compared
as its pattern: the literal text with each formatted value written ``…``.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / 'docs' / 'dead_letters.md'
#: call name → position of the reason argument
_CALLS = {'InvalidRecordError': 0, 'dead_letter': 2, 'Dead': 1, '_reject': 0}
#: functions whose returned strings are reasons although their name does not say so
_REASON_FUNCTIONS = {'classify', '_parse', 'check_domain_index'}


def patterns(node):
    """The reason patterns a string expression can take ([] if it is not a literal)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value else []
    if isinstance(node, ast.JoinedStr):
        return [''.join(v.value if isinstance(v, ast.Constant) else '…' for v in node.values)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = patterns(node.left), patterns(node.right)
        if not left and not right:
            return []
        return [a + b for a in (left or ['…']) for b in (right or ['…'])] + (
            left if isinstance(node.right, ast.IfExp) else [])
    if isinstance(node, ast.IfExp):
        return patterns(node.body) + patterns(node.orelse)
    if isinstance(node, ast.Tuple):
        return [p for e in node.elts for p in patterns(e)]
    return []


def _call_name(func):
    return func.id if isinstance(func, ast.Name) else getattr(func, 'attr', None)


def code_reasons():
    """{pattern: [file:line, ...]} over beam_dp/."""
    found = {}

    def add(node, path, pats):
        for p in pats:
            found.setdefault(p, []).append(f'{path.relative_to(ROOT)}:{node.lineno}')

    for path in sorted((ROOT / 'beam_dp').rglob('*.py')):
        tree = ast.parse(path.read_text(encoding='utf-8'))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                at = _CALLS.get(_call_name(node.func))
                if at is not None and len(node.args) > at:
                    add(node, path, patterns(node.args[at]))
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == 'reason' for t in node.targets):
                add(node, path, patterns(node.value))
            elif isinstance(node, ast.FunctionDef) and (
                    'reason' in node.name or node.name in _REASON_FUNCTIONS):
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return) and ret.value is not None:
                        add(ret, path, patterns(ret.value))
    return found


def page_reasons():
    """The patterns of the page's tables: the first cell of a row, in backticks."""
    text = PAGE.read_text(encoding='utf-8')
    return {m.group(1) for m in re.finditer(r'^\| `([^`]+)` \|', text, flags=re.M)}


def test_the_scan_finds_the_known_reasons():
    """The scan itself works: a few reasons of different shapes are found."""
    found = code_reasons()
    for pattern in ('key … is not in the public key set',                  # InvalidRecordError
                    'late: step … was already released (allowed lateness …s)',   # a *reason fn
                    'contribution bound: unit already contributed to max_keys_per_unit=… keys',
                    'query has no query_id',                               # reason = ... + (...)
                    'malformed: expected (timestamp_micros, features, label)'):  # _parse tuple
        assert pattern in found, sorted(found)


def test_every_reason_in_the_code_is_on_the_page():
    missing = {p: where for p, where in code_reasons().items() if p not in page_reasons()}
    assert not missing, ('reasons produced by the code but not listed in docs/dead_letters.md '
                         '(add a row `| `pattern` | stage | when | record |`):\n' + '\n'.join(
                             f'  {p!r}  ({", ".join(w)})' for p, w in sorted(missing.items())))


def test_every_reason_on_the_page_is_in_the_code():
    stale = page_reasons() - set(code_reasons())
    assert not stale, f'docs/dead_letters.md lists reasons no code produces: {sorted(stale)}'


def test_one_phrasing_for_the_same_cause():
    """The same cause is worded once: no second form of the public-set, late, before-start or
    after-end reasons (the variants issue 22 unified)."""
    found = code_reasons()
    for pattern in found:
        if 'public' in pattern and ('not one of' in pattern or 'not in' in pattern):
            assert re.fullmatch(r'(key|bin|dataset|stream) … is not in the public '
                                r'(key|bin|dataset|stream) set', pattern), pattern
        if pattern.startswith('late'):
            assert pattern.startswith('late: '), pattern
    for old in ('before_start', 'after_end', 'event time before start',
                'event time at or after end', 'malformed'):
        assert old not in found, old


if __name__ == '__main__':
    for p, where in sorted(code_reasons().items()):
        print(f'{p}\t{", ".join(where)}')
