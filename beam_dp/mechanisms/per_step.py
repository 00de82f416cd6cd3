"""Per-step noise, summed: every step's input gets fresh discrete noise and the release is the
running total of the noisy increments (the baseline every continual counter must beat; it is the
best counter for short horizons, e.g. pure ε = 1 up to a few hundred steps).

Privacy unit and neighbours: any change of the input stream whose L1 norm (summed over all steps
and bins) is at most ``l1_sensitivity`` — and, for the Gaussian variant, whose per-bin totals of
absolute changes have L2 norm at most ``l2_sensitivity`` (then the change's L2 norm over all
(step, bin) cells is ≤ l2 too); event- or user-level is fixed by the transform; add/remove
neighbours.

Guarantee: the noisy increments are one Laplace (resp. Gaussian) mechanism on the whole stream:
discrete Laplace of scale l1/ε per cell is ε-DP, discrete Gaussian σ² = l2²/(2ρ) per cell is
ρ-zCDP (CKS 2020), for every horizon — nothing depends on T, so it runs forever. The releases
are post-processing (prefix sums): exact integers. Var[release_t] = t·Var(noise).

State: the running noisy total per bin. Cite: Dwork, Naor, Pitassi, Rothblum 2010 (the "simple
counting mechanism" baseline).
"""

import dataclasses
import math
from typing import Tuple

import numpy as np

from beam_dp.accounting import PrivacyCost
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms._counter_params import CounterPrivacy
from beam_dp.noise import RandomSource

__all__ = [
    'PerStepCounter',
    'PerStepState',
]


@dataclasses.dataclass(frozen=True)
class PerStepState:
    """t steps consumed; ``total`` the running noisy sum per bin (read-only int64)."""
    t: int
    total: np.ndarray

    def nbytes(self) -> int:
        return self.total.nbytes + 8


@dataclasses.dataclass(frozen=True)
class PerStepCounter(CounterPrivacy):
    """Continual prefix sums with independent noise on every step, summed (any horizon).

    Args:
      epsilon / rho: total budget (exactly one); ε → discrete Laplace, ρ → discrete Gaussian.
      l1_sensitivity, l2_sensitivity, dimension: as ``BinaryTreeCounter``.

    Raises:
      InvalidParamsError: on a bad parameter, or a noise scale outside the exact samplers'
        range (``beam_dp.noise.noise_scale_problem``).
    """

    def __post_init__(self):
        self.check_counter_privacy()
        self.check_noise_scales()

    def noises(self) -> Tuple[_dyadic.NodeNoise, ...]:
        return (self.step_noise,)

    @property
    def step_noise(self) -> _dyadic.NodeNoise:
        return self.noise_for_share(1.0)

    def privacy_cost(self) -> PrivacyCost:
        return _dyadic.cost(self.epsilon, self.rho)

    def init_state(self) -> PerStepState:
        return PerStepState(0, _dyadic.readonly(np.zeros(self.dimension, dtype=np.int64)))

    def step(self, state: PerStepState, value, rng: RandomSource) -> Tuple[np.ndarray, PerStepState]:
        """Consumes step t+1's integer vector (already bounded); returns the noisy prefix sum."""
        value = _dyadic.exact_ints(value, self.dimension)
        # Exact past int64 (grid units of large sums): exact_int.py.
        total = _dyadic.exact_add(_dyadic.exact_add(state.total, value),
                                  self.step_noise.sample(rng, self.dimension))
        new_state = PerStepState(state.t + 1, _dyadic.readonly(total))
        return total.copy(), new_state

    def release_variance(self, t: int) -> float:
        """Exact noise variance (per bin) of the release after step t: t·Var(noise)."""
        return max(0, t) * self.step_noise.variance()

    def variances(self, horizon: int) -> np.ndarray:
        return np.arange(1, horizon + 1) * self.step_noise.variance()

    @property
    def noise_stddev(self) -> float:
        """The std of one step's noise (the release at t has √t times it)."""
        return math.sqrt(self.step_noise.variance())
