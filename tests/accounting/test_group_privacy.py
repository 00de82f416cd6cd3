"""``PrivacyCost.for_group``: what a person with k records (or k blocks) gets from a cost stated
for one record. Checked against the exact privacy loss of the discrete mechanisms beam_dp runs."""

import math

import pytest

from beam_dp.accounting import PrivacyCost
from beam_dp.accounting.budget import SWAP_ONE
from beam_dp.errors import InvalidParamsError
from beam_dp.noise.pmf import discrete_gaussian_pmf
from beam_dp.noise.pmf import discrete_laplace_pmf


@pytest.mark.parametrize('k', [1, 2, 3, 7])
@pytest.mark.parametrize('epsilon', [0.1, 0.5, 2.0])
def test_pure_group_cost_is_the_exact_loss_of_a_k_shift(k, epsilon):
    # A sensitivity-1 discrete Laplace count is ε-DP; a person with k records shifts it by k.
    scale = 1.0 / epsilon
    loss = max(abs(math.log(discrete_laplace_pmf(y, scale) / discrete_laplace_pmf(y - k, scale)))
               for y in range(-60, 60))
    group = PrivacyCost(epsilon=epsilon).for_group(k)
    assert group.epsilon == pytest.approx(loss, rel=1e-9)
    assert group.delta == 0.0


@pytest.mark.parametrize('k', [1, 2, 5])
@pytest.mark.parametrize('rho', [0.05, 0.5])
def test_zcdp_group_cost_is_the_renyi_divergence_of_a_k_shift(k, rho):
    # A sensitivity-1 discrete Gaussian with σ² = 1/(2ρ) is ρ-zCDP; for a shift of k the Rényi
    # divergence of order α is α k²/(2σ²) = α·k²ρ (checked numerically at α = 2 on the lattice).
    sigma2 = 1.0 / (2 * rho)
    alpha = 2.0
    ys = [y for y in range(-400, 400) if discrete_gaussian_pmf(y, sigma2) > 0
          and discrete_gaussian_pmf(y - k, sigma2) > 0]
    total = sum(math.exp(alpha * math.log(discrete_gaussian_pmf(y, sigma2))
                         + (1 - alpha) * math.log(discrete_gaussian_pmf(y - k, sigma2)))
                for y in ys)
    renyi = math.log(total) / (alpha - 1)
    group = PrivacyCost(rho=rho).for_group(k)
    assert group.rho == pytest.approx(renyi / alpha, rel=1e-6)
    # The naive k-fold composition (k·ρ) would understate it for k > 1.
    if k > 1:
        assert PrivacyCost(rho=rho).scale(k).rho < renyi / alpha


def test_approximate_group_cost_and_relation_kept():
    cost = PrivacyCost(epsilon=0.5, delta=1e-6, relation=SWAP_ONE)
    group = cost.for_group(3)
    assert group.epsilon == pytest.approx(1.5)
    assert group.delta == pytest.approx(3 * math.exp(1.0) * 1e-6)
    assert group.relation == SWAP_ONE
    assert cost.for_group(1) == cost
    assert PrivacyCost(epsilon=800.0, delta=1e-9).for_group(3).delta == 1.0


@pytest.mark.parametrize('k', [0, -1, 1.5, True, '2', None])
def test_bad_group_size_is_refused(k):
    with pytest.raises(InvalidParamsError, match='k must be an integer'):
        PrivacyCost(epsilon=1.0).for_group(k)
