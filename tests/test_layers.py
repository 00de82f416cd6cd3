"""Layers, enforced: every ``import`` of beam_dp and pipelines/ points down the layer order, and
the pure layers never import Beam.

The order (README "Architecture", DESIGN.md "Layers"), lowest first. A module may import its own
package and any package of a strictly lower layer; packages on the same layer are independent
(neither imports the other)::

    0  errors                                   exceptions only, imports nothing of beam_dp
    1  _validation | fields                     argument checks shared by every layer | field
                                                names read from schema'd records
    2  noise                                    the only place randomness is drawn
    3  accounting | queries                     budgets and costs | linear queries
    4  mechanisms                               the papers' algorithms, and the counter choice
                                                (mechanisms/counter_selection.py)
    5  privacy_unit                             the privacy unit (calibrated by
                                                mechanisms.participation)
    6  io                                       output records and their coders
    7  drivers | postprocess                    what a DoFn calls | post-processing of releases
    8  analysis                                 utility analysis before a run (the counter
                                                choice's CLI; user-level error via the drivers)
    9  transforms | ledger_store                the PTransforms | the privacy ledger on Beam's
                                                FileSystems (what the jobs open)
    10 testing                                  tools for tests and notebooks (drive a family by
                                                hand); product code never imports it
    11 beam_dp (the package's __init__)         the public facade
    12 pipelines                                runnable jobs (top-level pipelines/)

Every import counts: module level, inside functions or ``if TYPE_CHECKING:``, relative or
absolute, ``import beam_dp.x`` and ``from beam_dp import x``. Beam (``apache_beam``) may be
imported from transforms/ and above, and in io/coders.py (the coders of the records).
"""

import ast
import pathlib
from typing import Dict, Iterator, List, Tuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

#: Layer of each top-level name (first component after ``beam_dp``, or ``pipelines``).
LAYERS: Dict[str, int] = {
    'errors': 0,
    '_validation': 1, 'fields': 1,
    'noise': 2,
    'accounting': 3, 'queries': 3,
    'mechanisms': 4,
    'privacy_unit': 5,
    'io': 6,
    'drivers': 7, 'postprocess': 7,
    'analysis': 8,
    'transforms': 9, 'ledger_store': 9,
    'testing': 10,
    '': 11,                    # beam_dp itself (its __init__)
    'pipelines': 12,
}

#: Layers that never import Beam, and the one module of them that does.
BEAM_FREE_BELOW = LAYERS['transforms']
BEAM_ALLOWED = {'beam_dp.io.coders'}


def package_of(module: str) -> str:
    """The key of ``LAYERS`` a dotted module name belongs to."""
    parts = module.split('.')
    if parts[0] == 'pipelines':
        return 'pipelines'
    return parts[1] if len(parts) > 1 else ''


def imported_modules(source: str, module: str, is_package: bool) -> Iterator[Tuple[int, str]]:
    """(line, dotted name) of every module ``source`` imports, at any depth of the tree.

    ``from beam_dp import x`` yields ``beam_dp.x`` (x may be a module or a name of the facade:
    either way the import runs the package it names); relative imports are resolved against
    ``module``.
    """
    package = module if is_package else module.rpartition('.')[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')
                base = base[:len(base) - (node.level - 1)]
                target = '.'.join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            if target in ('beam_dp', 'pipelines'):
                for alias in node.names:
                    yield node.lineno, f'{target}.{alias.name}'
            else:
                yield node.lineno, target


def layer_violations(sources: Dict[str, Tuple[str, bool]]) -> List[str]:
    """Every upward or sideways import, and every Beam import of a pure layer, in ``sources``
    ({dotted module name: (source text, is a package __init__)}), as readable lines."""
    out = []
    for module, (source, is_package) in sorted(sources.items()):
        own = package_of(module)
        for line, target in imported_modules(source, module, is_package):
            where = f'{module}:{line} imports {target}'
            top = target.split('.')[0]
            if top == 'apache_beam':
                if LAYERS[own] < BEAM_FREE_BELOW and module not in BEAM_ALLOWED:
                    out.append(f'{where}: Beam below transforms/')
                continue
            if top not in ('beam_dp', 'pipelines'):
                continue
            other = package_of(target)
            if other not in LAYERS:
                # ``from beam_dp import Name``: a name of the facade, i.e. the facade itself.
                other = '' if top == 'beam_dp' else 'pipelines'
            if other == own:
                continue
            if LAYERS[other] >= LAYERS[own]:
                kind = 'sideways' if LAYERS[other] == LAYERS[own] else 'upward'
                out.append(f'{where}: {kind} (layer {own or "beam_dp"} = {LAYERS[own]}, '
                           f'{other or "beam_dp"} = {LAYERS[other]})')
    return out


def repository_sources() -> Dict[str, Tuple[str, bool]]:
    sources = {}
    for top in ('beam_dp', 'pipelines'):
        for path in sorted((REPO / top).rglob('*.py')):
            rel = path.relative_to(REPO).with_suffix('')
            is_package = rel.name == '__init__'
            parts = rel.parts[:-1] if is_package else rel.parts
            sources['.'.join(parts)] = (path.read_text(), is_package)
    return sources


def test_every_module_has_a_layer():
    unknown = sorted({package_of(m) for m in repository_sources()} - set(LAYERS))
    assert not unknown, f'place these in LAYERS (tests/test_layers.py): {unknown}'


def test_no_import_runs_up_or_sideways_and_no_beam_below_transforms():
    sources = repository_sources()
    assert len(sources) > 100            # the walk found the tree
    assert layer_violations(sources) == []


def _tree_with(module: str, source: str) -> Dict[str, Tuple[str, bool]]:
    sources = repository_sources()
    sources[module] = (source, False)
    return sources


@pytest.mark.parametrize('module,source,expected', [
    # The import this test was written against (ERM's counter choice from analysis), at module
    # level and hidden in a function.
    ('beam_dp.mechanisms.erm._probe', 'from beam_dp.analysis import select_counter\n',
     'beam_dp.mechanisms.erm._probe:1 imports beam_dp.analysis: upward'),
    ('beam_dp.drivers._probe', 'def f():\n    from beam_dp.transforms import shell\n',
     'beam_dp.drivers._probe:2 imports beam_dp.transforms: upward'),
    ('beam_dp.noise._probe', 'import beam_dp.accounting.budget\n',
     'beam_dp.noise._probe:1 imports beam_dp.accounting.budget: upward'),
    ('beam_dp.queries._probe', 'from ..accounting import PrivacyBudget\n',
     'beam_dp.queries._probe:1 imports beam_dp.accounting: sideways'),
    ('beam_dp.transforms._probe', 'from beam_dp import testing\n',
     'beam_dp.transforms._probe:1 imports beam_dp.testing: upward'),
    ('beam_dp.mechanisms._probe', 'from beam_dp import PrivacyBudget\n',
     'beam_dp.mechanisms._probe:1 imports beam_dp.PrivacyBudget: upward'),
    ('beam_dp.drivers._probe', 'if False:\n    import apache_beam as beam\n',
     'beam_dp.drivers._probe:2 imports apache_beam: Beam below transforms/'),
    ('beam_dp.io._probe', 'from pipelines.common import sinks\n',
     'beam_dp.io._probe:1 imports pipelines.common: upward'),
])
def test_one_added_upward_import_fails(module, source, expected):
    found = layer_violations(_tree_with(module, source))
    assert len(found) == 1 and found[0].startswith(expected), found


def test_downward_imports_pass():
    for module, source in [
            ('beam_dp.analysis._probe', 'def f():\n    from beam_dp.drivers import bounds\n'),
            ('beam_dp.transforms._probe', 'import apache_beam\nfrom ..drivers import keyed\n'),
            ('beam_dp.mechanisms.erm._probe', 'from . import ledger\nfrom .. import blt\n')]:
        assert layer_violations(_tree_with(module, source)) == [], source
