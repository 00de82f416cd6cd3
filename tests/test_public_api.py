"""Every name in every public ``__all__`` resolves, and params objects are frozen."""

import dataclasses
import importlib

import pytest

MODULES = [
    'beam_dp',
    'beam_dp.accounting',
    'beam_dp.analysis',
    'beam_dp.drivers',
    'beam_dp.errors',
    'beam_dp.io',
    'beam_dp.ledger_store',
    'beam_dp.mechanisms',
    'beam_dp.noise',
    'beam_dp.privacy_unit',
    'beam_dp.queries',
    'beam_dp.testing',
    'beam_dp.transforms',
]


@pytest.mark.parametrize('name', MODULES)
def test_all_names_resolve(name):
    module = importlib.import_module(name)
    assert module.__all__, name
    for symbol in module.__all__:
        assert hasattr(module, symbol), f'{name}.{symbol}'
    assert list(module.__all__) == sorted(module.__all__), f'{name}.__all__ is not sorted'


def test_params_are_frozen_dataclasses():
    import beam_dp
    for cls in (beam_dp.PrivacyBudget, beam_dp.PrivacyCost, beam_dp.BinaryTreeCounter,
                beam_dp.InfiniteTreeCounter, beam_dp.EventLevel, beam_dp.UserLevel,
                beam_dp.BLTCounter, beam_dp.KaryTreeCounter, beam_dp.PerStepCounter):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls


def test_the_subpackages_the_docs_name_need_only_import_beam_dp():
    """README / docs write ``beam_dp.analysis.units_needed(...)`` and
    ``beam_dp.postprocess.isotonic_counts(...)`` after ``import beam_dp`` (a fresh interpreter:
    another test may have imported them already)."""
    import subprocess
    import sys
    code = ('import beam_dp; beam_dp.analysis.units_needed; beam_dp.analysis.final_share_error; '
            'beam_dp.postprocess.isotonic_counts; beam_dp.noise.NoiseKeyRef')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=False, cwd=str(__import__('pathlib').Path(__file__).parents[1]))
    assert out.returncode == 0, out.stderr[-2000:]
