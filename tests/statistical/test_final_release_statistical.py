"""Statistical tier of ``FinalReleaseCounter`` (``final_share``): the last step's empirical noise
variance matches the stated combined variance with power (passes at the true scale, rejected
30% off either way), the steps before it the continual counter's at its share; a one-shot drawn
30% too narrow fails the same test; and through the keyed driver the final release's spread
matches its ``noise_stddev``."""

import dataclasses

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.final_release import FinalReleaseCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.privacy_unit import UserLevel
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue
from tests.statistical.test_counters_statistical import RUNS
from tests.statistical.test_counters_statistical import _check
from tests.statistical.test_counters_statistical import _errors

pytestmark = pytest.mark.statistical

T = 30


def _laplace(one_shot_scale=1.0):
    inner = KaryTreeCounter(horizon=T, epsilon=0.3, k=3, dimension=RUNS)
    final = PerStepCounter(epsilon=0.7 / one_shot_scale, dimension=RUNS)
    return FinalReleaseCounter(inner, final, final_steps=T, share=0.7, dimension=RUNS)


def _gaussian(one_shot_scale=1.0):
    inner = BLTCounter(rho=0.25, horizon=T, l1_sensitivity=2.0, dimension=RUNS)
    final = PerStepCounter(rho=0.25 / one_shot_scale ** 2, l1_sensitivity=2.0, dimension=RUNS)
    return FinalReleaseCounter(inner, final, final_steps=T, share=0.5, dimension=RUNS)


@pytest.mark.parametrize('make', [_laplace, _gaussian], ids=['laplace', 'gaussian'])
def test_final_variance_matches_the_combination_with_power(make):
    counter = make()
    _check(_errors(counter, T, seed=31), counter, (1, 9, T - 1, T))


@dataclasses.dataclass(frozen=True)
class _Narrow(FinalReleaseCounter):
    """States the honest combination's variance, draws the one-shot 30% too narrow."""

    def one_shot_variance(self) -> float:
        return self.final.release_variance(1) / 0.7 ** 2


@pytest.mark.parametrize('make', [_laplace, _gaussian], ids=['laplace', 'gaussian'])
def test_a_one_shot_drawn_30_percent_too_narrow_fails_the_same_test(make):
    honest = make()
    narrow_draws = make(one_shot_scale=0.7)
    lying = _Narrow(narrow_draws.continual, narrow_draws.final, final_steps=T,
                    dimension=RUNS)
    errors = _errors(lying, T, seed=8)
    assert variance_pvalue(errors[T - 1], honest.release_variance(T)) < P_THRESHOLD


def test_through_the_keyed_driver_at_user_level():
    """RUNS keys of one shard, one run: each key's final error is one sample of the
    combination; its variance is the stated ``noise_stddev`` squared, and 30% off is rejected."""
    keys = [f'k{i}' for i in range(RUNS)]
    unit = UserLevel(unit_fn=len, max_keys_per_unit=2, max_contributions_per_step=1,
                     max_steps_per_unit=4)
    drv = KeyedReleaseDriver(metric='count', budget=PrivacyBudget(epsilon=1.0),
                             privacy_unit=unit, clock=StepClock(0, 1, last_step=T - 1),
                             layout=KeyLayout(keys, 1), final_share=0.8)
    state = drv.init_shard(0)
    positions = np.arange(RUNS, dtype=np.int64)
    for step in range(T):
        released, state = drv.release_step(0, state, [(positions, np.ones(RUNS, np.int64))],
                                           noise.seeded(77).derive(step))
    errors = released[:, 0] - T
    var = drv.noise_stddev(T - 1) ** 2
    assert variance_pvalue(errors, var) > P_THRESHOLD
    for factor in (0.7 ** 2, 1.3 ** 2):
        assert variance_pvalue(errors, var * factor) < P_THRESHOLD
