"""Statistical tier (issue 23 item 2): the counters fitted to the participation release with
exactly the closed-form variance they report (``Release.noise_stddev``), with power: each check
passes at the true variance and fails 30% off; a banded counter drawing 30% too much noise
fails the same test."""

import dataclasses
import fractions

import pytest

from beam_dp.mechanisms.banded import BandedCounter
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.per_cell import PerCellCounter
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue
from tests.statistical.test_counters_statistical import RUNS
from tests.statistical.test_counters_statistical import _check
from tests.statistical.test_counters_statistical import _errors

pytestmark = pytest.mark.statistical

PATTERN = Participation(max_groups=3, max_steps=4, step_bound=2.0, total_bound=20.0)


@pytest.mark.parametrize('mechanism, ts', [
    (BandedCounter(rho=0.5, bands=8, horizon=40, l1_sensitivity=24.0, l2_sensitivity=14.0,
                   participation=PATTERN, dimension=RUNS), (1, 2, 7, 20, 40)),
    (BandedCounter(rho=2.0, bands=2, horizon=None, l1_sensitivity=3.0, dimension=RUNS),
     (1, 5, 33)),
    (PerCellCounter(rho=0.5, l1_sensitivity=24.0, l2_sensitivity=14.0, participation=PATTERN,
                    dimension=RUNS), (1, 10, 30)),
], ids=['banded', 'banded_unbounded', 'per_cell'])
def test_release_variance_matches_closed_form_with_power(mechanism, ts):
    _check(_errors(mechanism, max(ts), seed=23), mechanism, ts)


@dataclasses.dataclass(frozen=True)
class _MisScaledBanded(BandedCounter):
    """Draws noise 30% larger in std than it declares."""

    @property
    def sigma2_grid(self):
        return BandedCounter.sigma2_grid.func(self) * fractions.Fraction(27, 16)


def test_a_mis_scaled_banded_counter_fails_the_same_test():
    kwargs = dict(rho=0.5, bands=8, horizon=20, participation=PATTERN, l1_sensitivity=24.0,
                  dimension=RUNS)
    honest, bad = BandedCounter(**kwargs), _MisScaledBanded(**kwargs)
    errors = _errors(bad, 20, seed=7)
    for t in (3, 20):
        assert variance_pvalue(errors[t - 1], honest.release_variance(t)) < P_THRESHOLD
