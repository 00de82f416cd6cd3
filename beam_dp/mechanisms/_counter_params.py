"""The privacy fields shared by the k-ary tree, per-step and negative-digit tree counters: a
keyword-only frozen dataclass base, validated by ``check_counter_privacy``, whose noises are
checked against the samplers' range by ``check_noise_scales`` (``_dyadic.check_node_noise``:
the one rule, ``beam_dp.noise.noise_scale_problem``)."""

import dataclasses
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.errors import UnsupportedMechanismError
from beam_dp.mechanisms import _dyadic

__all__ = [
    'CounterPrivacy',
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CounterPrivacy:
    """epsilon (pure DP, discrete Laplace) or rho (zCDP, discrete Gaussian) — exactly one; the
    contribution bounds of one privacy unit (L1 over all steps and bins; L2 of per-bin totals,
    default L1); d bins per step."""
    epsilon: Optional[float] = None
    rho: Optional[float] = None
    l1_sensitivity: float = 1.0
    l2_sensitivity: Optional[float] = None
    dimension: int = 1

    def check_counter_privacy(self) -> None:
        owner = type(self).__name__
        _dyadic.check_privacy_params(owner, self.epsilon, self.rho, self.l1_sensitivity,
                                     self.l2_sensitivity)
        v.check_positive_int(owner, 'dimension', self.dimension)

    def check_horizon_counter(self, choice: str, choices) -> None:
        """``check_counter_privacy`` plus a positive int ``horizon`` and ``choice`` (a field
        name) in ``choices``: what the known-horizon trees validate first."""
        owner = type(self).__name__
        v.check_positive_int(owner, 'horizon', self.horizon)
        self.check_counter_privacy()
        v.check_choice(owner, choice, getattr(self, choice), choices)

    def noises(self) -> Tuple[_dyadic.NodeNoise, ...]:
        """Every distinct noise the counter draws (what ``check_noise_scales`` checks)."""
        raise NotImplementedError

    def check_noise_scales(self) -> None:
        """InvalidParamsError at construction if a noise the counter draws is outside the
        exact samplers' range, naming the parameters to change (``_dyadic.check_node_noise``)."""
        for noise in self.noises():
            _dyadic.check_node_noise(type(self).__name__, noise)

    def next_step(self, t_done: int, value) -> Tuple[int, np.ndarray]:
        """(t, value as a d-vector of int64) for the step after ``t_done`` steps, or
        ``UnsupportedMechanismError`` once the horizon is reached."""
        if t_done >= self.horizon:
            raise UnsupportedMechanismError(
                f'{type(self).__name__}: horizon {self.horizon} reached; releasing step '
                f'{t_done + 1} would exceed the declared privacy cost.')
        return t_done + 1, _dyadic.exact_ints(value, self.dimension)

    def noise_for_share(self, share: float) -> _dyadic.NodeNoise:
        """Noise for a set of disjoint cells that together get ``share`` of the budget."""
        return _dyadic.node_noise(self.epsilon, self.rho, share, self.l1_sensitivity,
                                  self.l2_sensitivity)
