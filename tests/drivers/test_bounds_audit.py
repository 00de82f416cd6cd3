"""DP audit of ``BoundsChooser`` (what ``ChooseContributionBounds`` releases) on neighbouring
inputs: the per-unit statistics with and without one unit (the worst case: a unit at the far
end of every statistic) are released with the same seed, so the noise is identical and the four
histograms differ only by the unit's counts; from the two releases and public parameters alone
the audit recovers the difference (exactly one bucket by 1 in each histogram) and computes the
privacy loss of the transcript from the declared noise of each histogram: Σ 1/b_j for discrete
Laplace (must equal ε: the shares compose to the budget), Σ 1/(2σ_j²) for discrete Gaussian
(the zCDP of the joint release, must equal ρ). A chooser that gave every histogram the whole
budget (no composition) fails the same audit."""

import dataclasses

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.mechanisms.contribution_histogram import ContributionHistogram

RELEASE = PrivacyBudget(rho=0.5)
BACKGROUND = [(1, 1, 3, 3), (2, 4, 10, 40), (3, 2, 30, 90), (1, 1, 1, 1)] * 25
WORST = (1 << 20, 1 << 20, 1 << 20, 1 << 22)       # every statistic in the open last bucket


def _pair(chooser, unit, seed=3):
    without = chooser.release(chooser.exact_counts(BACKGROUND), noise.seeded(seed))
    with_unit = chooser.release(chooser.exact_counts(BACKGROUND + [unit]), noise.seeded(seed))
    return without, with_unit


def _loss(chooser, pair):
    without, with_unit = pair
    loss = 0.0
    for name in STATISTICS:
        delta = np.array(with_unit[name].counts) - np.array(without[name].counts)
        assert np.abs(delta).sum() == 1, (name, delta)      # one unit, one bucket, by 1
        h = chooser.histograms[name]
        param = float(noise.as_rational_up(h.noise_param))
        loss += (np.abs(delta).sum() / param if h.kind == 'laplace'
                 else float(delta @ delta) / (2 * param))
    return loss


@pytest.mark.parametrize('unit', [WORST, (1, 1, 1, 1), (3, 2, 17, 60)])
@pytest.mark.parametrize('budget, field', [(PrivacyBudget(epsilon=0.3), 'epsilon'),
                                           (PrivacyBudget(rho=0.05), 'rho')])
def test_transcript_loss_is_the_budget(unit, budget, field):
    chooser = BoundsChooser(budget, RELEASE, 30)
    loss = _loss(chooser, _pair(chooser, unit))
    target = getattr(budget, field)
    assert loss <= target * (1 + 1e-9) and loss >= target * 0.999
    assert getattr(chooser.privacy_cost(), field) == pytest.approx(target)


def test_the_audit_catches_histograms_that_do_not_compose():
    budget = PrivacyBudget(epsilon=0.3)
    chooser = BoundsChooser(budget, RELEASE, 30)
    broken = {n: ContributionHistogram(chooser.edges, epsilon=budget.epsilon)
              for n in STATISTICS}                       # each at the WHOLE ε
    object.__setattr__(chooser, 'histograms', broken)
    assert _loss(chooser, _pair(chooser, WORST)) > budget.epsilon * 3.9


def test_the_release_hides_which_buckets_are_empty():
    chooser = BoundsChooser(PrivacyBudget(rho=0.05), RELEASE, 30)
    released = chooser.release(chooser.exact_counts([]), noise.seeded(1))
    for name in STATISTICS:
        assert len(released[name].counts) == len(chooser.edges)
        assert any(released[name].counts)                 # noise on every bucket
    assert dataclasses.is_dataclass(chooser)
