"""Statistical tier for ``ContinualMeanPerKey`` / ``ContinualVariancePerKey`` (the keyed
driver's ratio metrics), with power: RUNS keys with identical data in one shard are RUNS
independent runs of the same release. At the last step of a 16-step horizon:

* the count's error has exactly the variance ``noise_stddev``² (the counter's closed form);
* the mean's and the variance's errors have the variance the releases report
  (``mean_stddev``, ``variance_stddev``: the delta method, at n ≫ σ), with the equal split
  and with a ``count_share``;

each passes at the true scale and is rejected when the predicted scale is 30% off.
"""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers import mean as ratio
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.privacy_unit import EventLevel
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

RUNS = 4000
HORIZON = 16
LOWER, UPPER = 0.0, 100.0
#: per step: 40 records of each value (the same for every key): mean 62.5, variance 1268.75
VALUES = (10.0, 50.0, 90.0, 100.0)


def _last_releases(metric, budget, count_share=None, seed=3):
    keys = [f'k{i}' for i in range(RUNS)]
    driver = KeyedReleaseDriver(metric=metric, budget=budget, privacy_unit=EventLevel(),
                                clock=StepClock(0, 60_000_000, last_step=HORIZON - 1),
                                layout=KeyLayout.of(keys, 1), lower=LOWER, upper=UPPER,
                                count_share=count_share)
    dim = driver.bins_per_key
    w = ratio.weights(metric, driver.grid_bits, count_share, gaussian=budget.is_zcdp)
    one = np.zeros(dim, dtype=np.int64)
    for x in VALUES:
        one += 40 * np.array(ratio.coordinates(metric, LOWER, UPPER, driver.grid_bits, x, w))
    positions = np.arange(RUNS * dim, dtype=np.int64)
    values = np.tile(one, RUNS)
    state, base = driver.init_shard(0), noise.seeded(seed)
    for step in range(HORIZON):
        released, state = driver.release_step(0, state, [(positions, values)], base.derive(step))
    sigma = driver.coordinate_stddevs(driver.noise_stddev(HORIZON - 1))
    truth = (one * HORIZON / np.array(w))[None, :]
    exact, extra = ratio.finish(metric, LOWER, UPPER, truth, sigma)
    got, got_extra = ratio.finish(metric, LOWER, UPPER, released, sigma)
    return driver, sigma, exact[0], extra[0], got, got_extra


def _check(errors, var):
    assert abs(errors.mean()) < 5 * np.sqrt(var / errors.size)
    assert variance_pvalue(errors, var) > P_THRESHOLD
    for factor in ((1 - FUDGE_FACTOR) ** 2, (1 + FUDGE_FACTOR) ** 2):
        assert variance_pvalue(errors, var * factor) < P_THRESHOLD, factor


@pytest.mark.parametrize('count_share', [None, 0.2])
@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)],
                         ids=['laplace', 'gaussian'])
def test_mean_errors_have_the_reported_variance(budget, count_share):
    driver, sigma, exact, extra, got, got_extra = _last_releases('mean', budget, count_share)
    n = HORIZON * 160
    assert exact == pytest.approx(62.5, abs=0.05)
    _check(got_extra[:, 0] - n, sigma[0] ** 2)                  # the count: noise_stddev
    assert sigma[0] == driver.noise_stddev(HORIZON - 1)
    _check(got - exact, extra[2] ** 2)                          # the mean: mean_stddev
    # the reported sd (at the noisy values) is the one at the truth, to first order
    assert np.median(got_extra[:, 2]) == pytest.approx(extra[2], rel=0.01)


@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)],
                         ids=['laplace', 'gaussian'])
def test_variance_errors_have_the_reported_variance(budget):
    driver, sigma, exact, extra, got, got_extra = _last_releases('variance', budget)
    assert exact == pytest.approx(1268.75, rel=1e-3)
    _check(got_extra[:, 2] - extra[2], extra[3] ** 2)           # its mean
    _check(got - exact, extra[4] ** 2)                          # the variance
