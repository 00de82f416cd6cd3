"""Pipeline tier: the counter the keyed continual transforms pick by default (issue 14), on
TestStream in streaming mode on the ``BundleBasedDirectRunner`` (named): BLT for a zCDP budget,
per-step noise summed and the k-ary tree for pure-ε budgets with a known horizon (``end``). Every
key is released at every step, empty steps included, with the seeded values of the pure
reference (which drives the same driver) and ``Release.mechanism`` / ``noise_stddev`` saying what
ran; at user level with a total bound C the excess is dead-lettered with its reason."""

import pytest

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests import helpers
from tests.helpers import run_stream

pytestmark = pytest.mark.pipeline

STEP = 60
KEYS = ['a', 'b', 'c']


def _events(steps):
    """(key, unit, second): data on a few steps only, so most (key, step) cells are empty."""
    return [(KEYS[i % 3], f'u{i}', (i * 7) % 3 * STEP + i % STEP)
            for i in range(12)] + [('b', 'u99', (steps - 1) * STEP + 5)]


def _check_parity(transform, events, steps, later=(), dead=None, value=lambda k, u: None):
    def stamped(batch):
        return [((k, u), t) for k, u, t in batch]
    # A second batch (if any) after the first is bounded; then jump over several empty steps
    # at once: each is still released exactly once.
    source = helpers.stream(stamped(events), *((1, stamped(later)) if later else ()),
                            steps * STEP // 2, steps * STEP + 1)
    run_stream(source, transform,
               extract=lambda r: (r.key, r.step, tuple(r.values) or (r.value,), r.mechanism,
                                  r.noise_stddev),
               expected=_matches_reference(transform, events, steps, value), dead=dead)


def _matches_reference(transform, events, steps, value):
    driver = transform.driver
    ref = release_table(replay(driver.loop_driver(), keyed_events(
        driver, [(k, t // STEP, value(k, u)) for k, u, t in events], steps),
        label=transform.label, seed=17, end_input=False).releases)

    def check(actual):
        assert len(actual) == len(KEYS) * steps == len(set((k, s) for k, s, *_ in actual))
        for key, step, values, mechanism, stddev in actual:
            assert mechanism == driver.mechanism_name
            assert stddev == pytest.approx(driver.noise_stddev(step), rel=1e-12)
            assert list(values) == pytest.approx(ref[(key, step)], rel=0, abs=1e-9)
    return check


@pytest.mark.parametrize('budget,steps,mechanism', [
    (PrivacyBudget(rho=0.5), 12, 'blt/4_buffers/discrete_gaussian'),
    (PrivacyBudget(epsilon=1.0), 8, 'per_step/summed/discrete_laplace'),
    (PrivacyBudget(epsilon=1.0), 64, 'balanced_tree[k=15]/signed_digits/discrete_laplace'),
])
def test_default_counter_releases_every_step_with_reference_values(budget, steps, mechanism):
    transform = ContinualCountPerKey(public_keys=KEYS, start=0, step=STEP, end=steps * STEP,
                                     budget=budget, testing_seed=17, label='Counts')
    assert transform.driver.mechanism_name == mechanism
    _check_parity(transform, _events(steps), steps)


def _bin(key, unit):
    return 'odd' if int(unit[1:]) % 2 else 'even'


def test_blt_histogram_at_user_level_with_a_total_bound():
    """ρ-zCDP at user level (K = 2, m = 1, S = 4, C = 3): the BLT calibrated to the unit's
    multi-participation bound; unit 'u50' sends 3 records, then 2 more that only C refuses."""
    steps = 10
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2, max_contributions_per_step=1,
                     max_steps_per_unit=4, max_total_contributions=3)
    transform = ContinualHistogramPerKey(
        public_keys=KEYS, start=0, step=STEP, end=steps * STEP, bins=['even', 'odd'],
        value_fn=lambda r: _bin(*r), budget=PrivacyBudget(rho=0.25), privacy_unit=unit,
        mechanism='blt', testing_seed=17, label='Hist')
    assert transform.driver.mechanism_name == \
        'blt/4_buffers+multi_participation/discrete_gaussian'
    assert transform.driver.sensitivity() == (3, 3.0)    # C = 3 < m·S = 4 < K·m·S = 8
    first = _events(steps) + [('a', 'u50', 5), ('b', 'u50', 65), ('a', 'u50', 130)]
    later = [('a', 'u50', 250), ('b', 'u50', 310)]
    reason = 'contribution bound: unit already contributed max_total_contributions=3 records'
    _check_parity(transform, first, steps, later=later, dead=[('BoundContributions', reason)] * 2,
         value=_bin)


@pytest.mark.parametrize('mechanism,name', [
    ('per_cell', 'per_cell/summed/discrete_gaussian'),
    ('banded', 'banded[p=2]/sqrt+multi_participation/discrete_gaussian'),
    ('auto', 'per_cell/summed/discrete_gaussian'),
])
def test_counters_fitted_to_the_participation_match_the_reference(mechanism, name):
    """User level under ρ (K = 2, m = 1, S = 10 = every step): fresh per-cell noise, the banded
    factorization, and what 'auto' picks for a unit present at every step (per-cell)."""
    steps = 10
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2, max_contributions_per_step=1,
                     max_steps_per_unit=steps)
    transform = ContinualCountPerKey(public_keys=KEYS, start=0, step=STEP, end=steps * STEP,
                                     budget=PrivacyBudget(rho=0.5), privacy_unit=unit,
                                     mechanism=mechanism, testing_seed=17, label='Counts')
    assert transform.driver.mechanism_name == name
    _check_parity(transform, _events(steps), steps)
