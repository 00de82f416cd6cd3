"""Statistical tier (issue 23 item 2): the banded inverse square root (``BandedInverseCounter``)
releases with exactly the closed-form variance it reports (``release_variance``, what
``Release.noise_stddev`` carries), with power: each check passes at the true variance and fails
30% off; a counter drawing 30% too much noise fails the same test."""

import dataclasses
import fractions

import pytest

from beam_dp.mechanisms.banded import BandedInverseCounter
from beam_dp.mechanisms.participation import Participation
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue
from tests.statistical.test_counters_statistical import RUNS
from tests.statistical.test_counters_statistical import _check
from tests.statistical.test_counters_statistical import _errors

pytestmark = pytest.mark.statistical

PATTERN = Participation(max_groups=3, max_steps=4, step_bound=2.0, total_bound=20.0)


@pytest.mark.parametrize('mechanism, ts', [
    (BandedInverseCounter(rho=0.5, bands=8, horizon=40, l1_sensitivity=24.0,
                          l2_sensitivity=14.0, participation=PATTERN, dimension=RUNS),
     (1, 2, 7, 8, 20, 40)),
    (BandedInverseCounter(rho=2.0, bands=2, horizon=30, l1_sensitivity=3.0, dimension=RUNS),
     (1, 5, 30)),
], ids=['bisr_participation', 'bisr_p2'])
def test_release_variance_matches_closed_form_with_power(mechanism, ts):
    _check(_errors(mechanism, max(ts), seed=29), mechanism, ts)


@dataclasses.dataclass(frozen=True)
class _MisScaled(BandedInverseCounter):
    """Draws noise 30% larger in std than it declares."""

    @property
    def sigma2_grid(self):
        return BandedInverseCounter.sigma2_grid.func(self) * fractions.Fraction(169, 100)


def test_a_mis_scaled_counter_fails_the_same_test():
    kwargs = dict(rho=0.5, bands=8, horizon=20, participation=PATTERN, l1_sensitivity=24.0,
                  dimension=RUNS)
    honest, bad = BandedInverseCounter(**kwargs), _MisScaled(**kwargs)
    errors = _errors(bad, 20, seed=7)
    for t in (3, 20):
        assert variance_pvalue(errors[t - 1], honest.release_variance(t)) < P_THRESHOLD
