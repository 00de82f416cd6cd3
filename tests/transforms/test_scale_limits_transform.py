"""Issue 21 items 3 and 4 at the transform level: an unsamplable noise scale is refused when the
transform is built (not in 'ReleaseNoisyValues' at the first release), and a key selection
with a large ε releases on DirectRunner (its timers used to raise OverflowError)."""

import math

import pytest

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp.errors import InvalidParamsError
from tests import helpers
from tests.helpers import run_stream

pytestmark = pytest.mark.pipeline

STEP = 60


def _key_step(release):
    return release.key, release.step, release.value


@pytest.mark.parametrize('mechanism', ['per_step', 'kary_tree'])
@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)])
def test_sum_with_upper_1e13_is_refused_when_built(mechanism, budget):
    """The issue's case: it used to build and then fail on the first release."""
    with pytest.raises(InvalidParamsError, match=r'exact samplers.*upper'):
        ContinualSumPerKey(public_keys=['a'], start=0, step=STEP, end=4 * STEP, budget=budget,
                           lower=0.0, upper=1e13, mechanism=mechanism)


def test_a_tiny_selection_epsilon_is_refused_when_built():
    with pytest.raises(InvalidParamsError, match='selection budget'):
        ContinualCountPerKey(keys=PrivateKeys(PrivacyBudget(epsilon=1e-13, delta=1e-6)),
                             start=0, step=STEP, end=4 * STEP, budget=PrivacyBudget(epsilon=1.0))


def test_accepted_large_configurations_release_on_direct_runner():
    """BLT (no cap: ``discrete_gaussian_any``) at upper = 1e13 with a record at the bound, and
    private keys selected at ε = 700 per key (above the old overflow at ~667): both release
    every step."""
    steps = 3
    big = ContinualSumPerKey(public_keys=['a'], start=0, step=STEP, end=steps * STEP,
                             budget=PrivacyBudget(rho=0.5), lower=0.0, upper=1e13,
                             mechanism='blt', testing_seed=3, label='Big')

    def check_big(rows):
        assert sorted((k, s) for k, s, _ in rows) == [('a', s) for s in range(steps)]
        assert all(math.isfinite(v) for _, _, v in rows)     # noise sd ~ 1e13 here
    run_stream(helpers.stream([(('a', 1e13), 5)], steps * STEP + 1), big, extract=_key_step,
               expected=check_big)

    selected = ContinualCountPerKey(keys=PrivateKeys(PrivacyBudget(epsilon=700.0, delta=1e-6),
                                                     num_shards=1),
                                    start=0, step=STEP, end=steps * STEP,
                                    budget=PrivacyBudget(epsilon=1.0), testing_seed=3,
                                    label='Selected')

    def check_selected(rows):
        # Six records of one key at step 0: selected there at ε = 700 (threshold τ_1 = 5).
        assert sorted((k, s) for k, s, _ in rows) == [('k', s) for s in range(steps)]
    run_stream(helpers.stream([(('k', i), 5) for i in range(6)], steps * STEP + 1), selected,
               extract=_key_step, expected=check_selected)
