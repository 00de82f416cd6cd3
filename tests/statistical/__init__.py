"""Constants shared by the statistical test tier (marked ``statistical``).

Each statistical test must show power: it passes at the true noise scale and fails when the
scale is off by FUDGE_FACTOR (30%) in either direction, with the same sample size.

P_THRESHOLD: a goodness-of-fit test passes when its p-value is above this. With seeded
    generators the outcome is deterministic; 1e-4 keeps a correct sampler from failing under a
    reseed (per-test false-failure rate 1e-4).
SAMPLE_SIZE: samples per goodness-of-fit test; at 20k samples a 30% scale error gives p-values
    far below 1e-10 for every distribution tested here.
FUDGE_FACTOR: the relative scale error the tests must detect.
sizes(default, spec): the two sample sizes of a test whose spec names more samples than the
    default run affords: ``default`` runs always, ``spec`` (the spec's size) carries the
    ``spec_size`` marker and runs with ``BEAM_DP_SPEC_SIZE=1`` or ``-m spec_size``
    (``tests/conftest.py``; README "Tests").
"""

import pytest

P_THRESHOLD = 1e-4
SAMPLE_SIZE = 20_000
FUDGE_FACTOR = 0.3


def sizes(default: int, spec: int, name: str = 'size'):
    """``pytest.mark.parametrize`` over (default, spec) sample sizes; the spec-size case is
    marked ``spec_size`` (ids 'default' and 'spec_size')."""
    return pytest.mark.parametrize(name, [
        pytest.param(default, id='default'),
        pytest.param(spec, id='spec_size', marks=pytest.mark.spec_size)])
