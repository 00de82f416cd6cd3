"""Shared fixtures and the markers that say what each test is.

Markers (registered in pytest.ini, which runs with ``--strict-markers``):

* ``pipeline``: builds or runs a Beam pipeline. Applied here to every test under
  ``tests/transforms/``, ``tests/pipelines/`` and ``tests/integration/`` and in
  ``tests/test_runners_smoke.py``; a test elsewhere that runs a pipeline marks itself.
* ``integration``: runs against a real component (Flink, Prism, the Pub/Sub emulator); applied
  to ``tests/integration/``.
* ``statistical``: a statistical test (power against a mis-scaled sampler); applied to
  ``tests/statistical/``, and marked by hand where such a test sits next to the unit tests.
* ``fuzz``: a property-based (hypothesis) test; applied to every ``@given`` test.
* ``spec_size``: the variant of a statistical test at the sample size its spec names (next to a
  faster default variant); skipped unless ``BEAM_DP_SPEC_SIZE=1`` or ``-m spec_size``.

So ``pytest -m "not pipeline and not statistical"`` is the fast pure-Python tier and
``pytest -m pipeline`` the Beam tier. Runners are named explicitly (see ``tests/runners.py``).
"""

import os
import pathlib

import pytest

from beam_dp.noise.testing import allow_seeded_noise
from tests import runners

_TESTS = pathlib.Path(__file__).resolve().parent

#: Marks applied to every test below a directory (or in a file) of tests/.
_MARKS_BY_PATH = {
    'transforms': ('pipeline',),
    'pipelines': ('pipeline',),
    'integration': ('pipeline', 'integration'),
    'statistical': ('statistical',),
    'test_runners_smoke.py': ('pipeline',),
}


def _marks_for(path: pathlib.Path):
    try:
        first = path.resolve().relative_to(_TESTS).parts[0]
    except (ValueError, IndexError):
        return ()
    return _MARKS_BY_PATH.get(first, ())


def _spec_size_enabled(config) -> bool:
    """The ``spec_size`` variants run with BEAM_DP_SPEC_SIZE=1 or a -m naming the marker."""
    return (os.environ.get('BEAM_DP_SPEC_SIZE') == '1'
            or 'spec_size' in (config.getoption('markexpr', default='') or ''))


def pytest_collection_modifyitems(config, items):
    spec_size = _spec_size_enabled(config)
    for item in items:
        if not spec_size and item.get_closest_marker('spec_size') is not None:
            # Skipped, not deselected: each audit still collects in full, and its default-size
            # variant runs (tests/test_audits_run_in_ci.py).
            item.add_marker(pytest.mark.skip(
                reason='spec-size variant: set BEAM_DP_SPEC_SIZE=1 or pass -m spec_size'))
        present = {m.name for m in item.iter_markers()}
        wanted = list(_marks_for(pathlib.Path(str(item.fspath))))
        if getattr(getattr(item, 'obj', None), 'is_hypothesis_test', False):
            wanted.append('fuzz')
        for name in wanted:
            if name not in present:
                item.add_marker(getattr(pytest.mark, name))


@pytest.fixture(autouse=True, scope='session')
def _allow_seeded_noise():
    """Tests may build transforms with ``testing_seed`` (production code cannot: see
    ``beam_dp.noise.testing``)."""
    with allow_seeded_noise():
        yield


@pytest.fixture
def streaming_pipeline_options():
    """Fresh streaming ``PipelineOptions`` (``runners.streaming_options()``)."""
    return runners.streaming_options()


@pytest.fixture
def direct_runner():
    """The DirectRunner variant that runs TestStream pipelines in streaming mode."""
    return runners.DIRECT_RUNNER
