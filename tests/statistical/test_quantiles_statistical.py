"""Statistical tier and DP audits of ``ContinualQuantilesPerKey``'s driver, on neighbouring
streams.

* The stated rank error (``QuantileRelease.rank_error_stddev``, closed form) is the noise's true
  scale: over 20k independent trials (keys of one shard's counter), the variance of (estimated
  prefix at the percentile's bucket − p × estimated count) − its true value matches the stated
  variance (p > 1e-4) and a statement 30% off in either direction is rejected.
* Empirical DP audit (event level, Laplace): 2·10^5 trials of each of two neighbouring streams
  (one record apart); a Clopper–Pearson lower bound on ε from threshold events on released
  prefix sums must stay ≤ ε, and the same audit of a tree calibrated without its depth (L1 = 1
  while a record touches D + 1 nodes) must exceed ε, so the audit can fail.
* Exact audit (user level, BLT, ρ): same seed on both neighbouring streams, the node-level
  Gaussian privacy loss of the worst-case unit (all its records in one bucket) recovered from
  the transcripts is ≤ ρ and uses most of it; calibrated with the leaf histogram's L2 (no √(D+1))
  it overspends, so the audit can fail.
"""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from beam_dp import EventLevel
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp import noise
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.quantiles import QuantilesDriver
from beam_dp.mechanisms import blt_optimize
from beam_dp.mechanisms import hierarchical_histogram as hh
from beam_dp.mechanisms.blt import grid_offset
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical import SAMPLE_SIZE
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

STEPS = 4


def _driver(budget, layout, depth=5, unit=None, mechanism='auto', percentiles=(10, 50, 90)):
    return QuantilesDriver(metric='histogram', budget=budget, privacy_unit=unit or EventLevel(),
                           clock=StepClock(0, 1_000_000, last_step=STEPS - 1),
                           layout=KeyLayout.of(['k'], None), lower=0.0, upper=1.0,
                           percentiles=percentiles, branching=2, depth=depth,
                           histogram_layout=layout, mechanism=mechanism)


def _trials(driver, leaves_per_step, trials, seed):
    """Runs the driver's counter over ``trials`` keys fed the same leaf counts per step;
    returns the final bucket estimates (trials, M)."""
    counter = driver.counter(trials)
    state = counter.init_state()
    rng = noise.seeded(seed)
    for step, x in enumerate(leaves_per_step):
        est, state = counter.step(state, np.tile(np.asarray(x, dtype=np.int64), trials),
                                  rng.derive(step))
    return np.asarray(est).reshape(trials, driver.leaves)


@pytest.mark.parametrize('budget', [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5)],
                         ids=['laplace', 'gaussian'])
@pytest.mark.parametrize('layout', ['tree', 'flat'])
def test_the_stated_rank_error_is_the_true_scale(budget, layout):
    driver = _driver(budget, layout)
    m = driver.leaves
    rng = np.random.default_rng(4)
    per_step = [rng.integers(0, 6, m) for _ in range(STEPS)]
    truth = np.sum(per_step, axis=0)
    est = _trials(driver, per_step, SAMPLE_SIZE, seed=11)
    prefix, true_prefix = np.cumsum(est, axis=1), np.cumsum(truth)
    sd = driver.noise_stddev(STEPS - 1)
    for i, p in enumerate(driver.percentiles):
        j = int(np.searchsorted(true_prefix, p / 100 * true_prefix[-1]))
        noise_part = (prefix[:, j] - p / 100 * prefix[:, -1]) - (
            true_prefix[j] - p / 100 * true_prefix[-1])
        buckets = np.full(len(driver.percentiles), j)
        stated = float(driver.rank_stddev(buckets, sd)[i])
        assert variance_pvalue(noise_part, stated ** 2) > P_THRESHOLD, (p, stated)
        for off in (1 + FUDGE_FACTOR, 1 / (1 + FUDGE_FACTOR)):
            assert variance_pvalue(noise_part, (off * stated) ** 2) < P_THRESHOLD, (p, off)


# -- empirical audit (event level, Laplace) --------------------------------------------------

class _DepthBlind(QuantilesDriver):
    """A tree calibrated as if a record touched one node (the bug the audit must catch)."""

    def _layout_sensitivity(self, layout):
        return self.privacy_unit.sensitivity(1)


AUDIT_TRIALS = 200_000
ALPHA = 0.01


def _clopper_pearson(k, n, alpha):
    lo = sps.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = sps.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return lo, hi


def _epsilon_lower_bound(driver):
    """max over threshold events on released prefix sums of log(P'(E)/P(E)), each probability
    bounded by Clopper–Pearson at ALPHA (Bonferroni over the events), from the two neighbours:
    background counts, and the same plus one record in bucket 0 at step 0."""
    background = [np.array([5, 3, 2, 1]), np.array([0, 1, 0, 2])]
    plus = [background[0] + np.array([1, 0, 0, 0]), background[1]]
    events, best = [], -math.inf
    for step in (1, 2):
        a = _trials(driver, background[:step], AUDIT_TRIALS, seed=21)
        b = _trials(driver, plus[:step], AUDIT_TRIALS, seed=22)
        for width in (1, 2, 4):
            sa, sb = a[:, :width].sum(axis=1), b[:, :width].sum(axis=1)
            for q in (0.9, 0.99, 0.999):
                t = np.quantile(sb, q)
                events.append(((sb > t).sum(), (sa > t).sum()))
    alpha = ALPHA / len(events)
    for kb, ka in events:
        low, _ = _clopper_pearson(int(kb), AUDIT_TRIALS, alpha)
        _, high = _clopper_pearson(int(ka), AUDIT_TRIALS, alpha)
        if low > 0:
            best = max(best, math.log(low / high))
    return best


def test_empirical_audit_event_level_tree_stays_within_epsilon():
    driver = _driver(PrivacyBudget(epsilon=1.0), 'tree', depth=2, mechanism='per_step')
    assert driver.sensitivity()[0] == 3
    eps_lb = _epsilon_lower_bound(driver)
    assert eps_lb <= 1.0, eps_lb
    assert eps_lb > 0.2                         # the audit sees the record at all


def test_empirical_audit_catches_a_tree_calibrated_without_its_depth():
    driver = _DepthBlind(metric='histogram', budget=PrivacyBudget(epsilon=1.0),
                         privacy_unit=EventLevel(),
                         clock=StepClock(0, 1_000_000, last_step=STEPS - 1),
                         layout=KeyLayout.of(['k'], None), lower=0.0, upper=1.0,
                         branching=2, depth=2, histogram_layout='tree', mechanism='per_step')
    assert driver.sensitivity()[0] == 1
    assert _epsilon_lower_bound(driver) > 1.0


# -- exact audit (user level, BLT) -------------------------------------------------------------

HORIZON = 8


def _unit():
    return UserLevel(unit_fn=len, max_keys_per_unit=1, max_contributions_per_step=2,
                     max_steps_per_unit=3)


def _node_transcript(driver, leaves_per_step):
    """The node counter's releases (steps, N) under one seed (both neighbours share it)."""
    inner = driver.counter(1)._inner                    # pylint: disable=protected-access
    state = inner.init_state()
    rng = noise.seeded(5)
    rows = []
    for step in range(HORIZON):
        nodes = hh.node_counts(np.asarray(leaves_per_step[step], dtype=np.int64), 2,
                               driver.depth)
        est, state = inner.step(state, nodes, rng.derive(step))
        rows.append(np.asarray(est, dtype=np.float64))
    return np.array(rows), inner


def _blt_loss(driver):
    m = driver.leaves
    background = [np.zeros(m, dtype=np.int64) for _ in range(HORIZON)]
    background[0][3] = 4
    background[4][1] = 2
    with_unit = [x.copy() for x in background]
    unit = _unit()
    for step in range(unit.max_steps_per_unit):          # m per step on S steps, one bucket
        with_unit[step][0] += unit.max_contributions_per_step
    without, inner = _node_transcript(driver, background)
    withu, _ = _node_transcript(driver, with_unit)
    theta, w = inner.exact_params
    c = blt_optimize.blt_coefficients(theta, w, HORIZON)
    increments = np.diff(withu - without, axis=0, prepend=0.0)
    loss = 0.0
    for t in range(HORIZON):
        cx = sum(c[k] * increments[t - k] for k in range(t + 1))
        shift = inner.grid_bits + grid_offset(t + 1)
        du = np.round(np.ldexp(cx, shift))
        assert np.allclose(du, np.ldexp(cx, shift), atol=1e-3)
        loss += float(np.sum(du * du)) / (2 * float(inner.grid_sigma2(t + 1)))
    return loss


def _user_driver(cls=QuantilesDriver):
    return cls(metric='histogram', budget=PrivacyBudget(rho=0.5), privacy_unit=_unit(),
               clock=StepClock(0, 1_000_000, last_step=HORIZON - 1),
               layout=KeyLayout.of(['k'], None), lower=0.0, upper=1.0, branching=2, depth=3,
               histogram_layout='tree', mechanism='blt')


def test_exact_audit_user_level_tree_loss_is_within_rho():
    driver = _user_driver()
    assert 'multi_participation' in driver.mechanism_name
    loss = _blt_loss(driver)
    assert loss <= 0.5
    assert loss >= 0.5 * 0.6


class _LeafL2(QuantilesDriver):
    """A user-level tree calibrated with the leaf histogram's L2 (no √(D + 1))."""

    def _layout_sensitivity(self, layout):
        l1, l2 = self.privacy_unit.sensitivity(1)
        return (self.depth + 1) * l1, l2

    def _layout_counter(self, layout):
        counter = super()._layout_counter(layout)
        return dataclasses.replace(counter, participation=self.privacy_unit.participation(1))


def test_exact_audit_catches_a_tree_calibrated_with_the_leaf_l2():
    assert _blt_loss(_user_driver(_LeafL2)) > 0.5 * 1.2
