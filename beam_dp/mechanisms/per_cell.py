"""Fresh noise per (key, step) cell, calibrated to one cell and composed over a unit's cells:
per-step noise summed (``PerStepCounter``) whose Gaussian is calibrated to the L2 norm of one
unit's change over all (key, step) cells instead of its per-key totals.

Privacy unit and neighbours: a unit's change touches at most ``max_groups``·``max_steps`` cells
(K keys × S steps per key, ``Participation``), at most ``step_bound`` (m·B) in each, at most
``total_bound`` (C·B, or K·m·S·B) in all; add/remove neighbours. Without a participation
(event level, or private keys whose first counter step merges all steps before the selection)
the bound is the per-key totals' L2 (then it is ``PerStepCounter``).

Guarantee: every (key, step) cell gets an independent discrete Gaussian of variance σ² =
Δ²/(2ρ) with Δ = min(l2, capped_l2(total, m·B, K·S)) ≥ the L2 norm of the unit's change over all
cells: the change has at most K·S non-zero cells, each at most m·B, summing to at most the total,
and the largest such L2 norm is ``capped_l2`` (as many cells as possible at the cap: convexity).
The noisy cells are one discrete Gaussian mechanism on the integer vector of all cells (CKS 2020,
Thm 14 per coordinate, composed over coordinates): ρ-zCDP. Releases are prefix sums
(post-processing); Var[release_t] = t·Var(noise). For a pure ε budget the L1 norm over cells
equals the L1 of the totals, so this is ``PerStepCounter`` (discrete Laplace at l1/ε).
"""

import dataclasses
from typing import Optional

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms.participation import Participation
from beam_dp.mechanisms.participation import capped_l2
from beam_dp.mechanisms.per_step import PerStepCounter

__all__ = [
    'PerCellCounter',
    'cell_l2',
]


def cell_l2(participation: Participation) -> float:
    """The largest L2 norm of one unit's change over all (key, step) cells."""
    p = participation
    return capped_l2(p.total_bound, p.step_bound, p.max_groups * p.max_steps)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PerCellCounter(PerStepCounter):
    """``PerStepCounter`` with its Gaussian calibrated to one unit's cells (module docstring).

    Args: as ``PerStepCounter``, plus ``participation`` (a ``Participation`` or None). The
    Gaussian runs at ``cell_sensitivity`` = min(l2, ``cell_l2(participation)``); the fields
    keep what was declared, so ``dataclasses.replace`` (another participation, dimension, ...)
    recalibrates from them.
    """
    participation: Optional[Participation] = None

    def __post_init__(self):
        if self.participation is not None and not isinstance(self.participation,
                                                             Participation):
            raise InvalidParamsError(f'PerCellCounter: participation must be a '
                                     f'Participation, got {self.participation!r}.')
        super().__post_init__()

    @property
    def cell_sensitivity(self) -> float:
        """The L2 the Gaussian is calibrated to: l2 (default l1), lowered to
        ``cell_l2(participation)`` when that is smaller."""
        l2 = self.l1_sensitivity if self.l2_sensitivity is None else self.l2_sensitivity
        if self.participation is None:
            return l2
        return min(float(l2), cell_l2(self.participation))

    def noise_for_share(self, share: float) -> _dyadic.NodeNoise:
        if self.rho is None:                  # pure ε: the L1 over cells is the totals' L1
            return super().noise_for_share(share)
        return _dyadic.node_noise(None, self.rho, share, self.l1_sensitivity,
                                  self.cell_sensitivity)
