"""A continual counter with a one-shot release of the total at a known last step, combined by
inverse variance (``FinalReleaseCounter``).

When the end of a stream is public (``end=`` / ``horizon_steps``), the last release is often the
one that matters most (the day's or the year's total), and a continual counter pays a factor for
releasing every step: over T = 365 steps the best tree or factorization counter's last release
has several times the noise sd of a single batch release at the same budget. This wrapper spends
a share f of the budget on ONE more noisy release of each coordinate's total at the last step
(discrete Laplace of scale L1/(fε), or discrete Gaussian σ² = L2²/(2fρ)), runs the continual
counter at the rest ((1 − f)ε or (1 − f)ρ), and releases at the last step

    x̂ = w · c + (1 − w) · o,   w = v_o / (v_c + v_o),   Var x̂ = v_c · v_o / (v_c + v_o),

with c the continual counter's release (exact variance v_c: its ``release_variance``) and o the
one-shot release (exact variance v_o: the discrete noise's). The two noises are independent, so
the variance is exact; the weights are public; the combination is post-processing.

Privacy unit and neighbours: the wrapped counter's (a change of the input stream with L1 ≤
``l1_sensitivity`` over all steps and bins and per-bin totals of L2 ≤ ``l2_sensitivity``). The
total of the stream moves by at most those norms (triangle inequality over the steps), so the
one-shot release is the Laplace (ε_f-DP) or Gaussian (ρ_f-zCDP, CKS 2020) mechanism on the
totals. Guarantee: sequential composition of the two — ε_c + ε_f (pure) or ρ_c + ρ_f (zCDP),
exactly ``privacy_cost()``.

Cost at the other steps: they release the continual counter alone at (1 − f) of the budget, so
their noise sd is 1/(1 − f) (pure ε) or 1/√(1 − f) (zCDP) times what the whole budget would give.

Noise: the continual counter draws from ``rng`` as it would alone; the one-shot from
``rng.derive('final_release')`` at the last step only (a child address of the step's, used by
no counter). State: the wrapped counter's, the exact running total (integers), the steps taken,
and the counter step of the one-shot (``final_steps``: the counter's own, or a later start's —
a key selected at step s of a private-keys release reaches the end after T − s steps).
"""

import dataclasses
from typing import NamedTuple, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import _dyadic
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.noise import RandomSource

__all__ = ['FinalReleaseCounter', 'FinalReleaseState', 'FINAL_LABEL']

#: The address label of the one-shot draw (a child of the step's source).
FINAL_LABEL = 'final_release'


class FinalReleaseState(NamedTuple):
    """The wrapped counter's state, the exact running total per coordinate (read-only ints),
    the steps taken, and the counter step of the one-shot release."""
    inner: object
    total: np.ndarray
    t: int
    final_steps: int


@dataclasses.dataclass(frozen=True)
class FinalReleaseCounter:
    """A continual counter whose release at counter step ``final_steps`` is combined with a
    one-shot release of the total (module docstring).

    Args:
      continual: the counter of every step (a ``beam_dp.mechanisms`` vector counter, already at
        its share of the budget).
      final: the one-shot noise: a ``PerStepCounter`` at the final share (its one step is the
        one-shot release; same sensitivities as ``continual``).
      final_steps: the counter step of the last release (the known horizon).
      share: the final share f (display only: the two counters carry the budget).
      dimension: coordinates (both counters are widened to it).

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    continual: object
    final: PerStepCounter
    final_steps: int
    share: float = 0.5
    dimension: int = 1

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive_int(owner, 'final_steps', self.final_steps)
        v.check_positive_int(owner, 'dimension', self.dimension)
        if not isinstance(self.final, PerStepCounter):
            raise InvalidParamsError(f'{owner}: final must be a PerStepCounter, got '
                                     f'{self.final!r:.80}.')
        if isinstance(self.continual, FinalReleaseCounter):
            raise InvalidParamsError(f'{owner}: continual must not itself be a '
                                     f'FinalReleaseCounter.')
        for name in ('continual', 'final'):
            counter = getattr(self, name)
            if counter.dimension != self.dimension:
                object.__setattr__(self, name,
                                   dataclasses.replace(counter, dimension=self.dimension))

    # -- the counter protocol ---------------------------------------------------------------------

    def privacy_cost(self) -> PrivacyCost:
        """Sequential composition of the continual counter and the one-shot release."""
        return self.continual.privacy_cost() + self.final.privacy_cost()

    @property
    def rho(self) -> Optional[float]:
        """ρ of the one-shot noise (None: Laplace), for the mechanism's name."""
        return self.final.rho

    def init_state(self, final_steps: Optional[int] = None) -> FinalReleaseState:
        """A new state; ``final_steps``: the counter step of the one-shot if not this counter's
        (a counter started after the clock's first step)."""
        steps = self.final_steps if final_steps is None else int(final_steps)
        if steps < 1:
            raise InvalidParamsError(f'{type(self).__name__}: final_steps must be >= 1, got '
                                     f'{steps}.')
        return FinalReleaseState(self.continual.init_state(),
                                 _dyadic.readonly(np.zeros(self.dimension, dtype=np.int64)),
                                 0, steps)

    def step(self, state: FinalReleaseState, value, rng: RandomSource
             ) -> Tuple[np.ndarray, FinalReleaseState]:
        """The continual release of the next step; at the last step, its inverse-variance
        combination with the one-shot release of the total."""
        value = _dyadic.exact_ints(value, self.dimension)
        estimate, inner = self.continual.step(state.inner, value, rng)
        total = _dyadic.readonly(_dyadic.exact_add(state.total, value))
        t = state.t + 1
        new_state = FinalReleaseState(inner, total, t, state.final_steps)
        if t != state.final_steps:
            return estimate, new_state
        one_shot, _ = self.final.step(self.final.init_state(), total, rng.derive(FINAL_LABEL))
        w = self.continual_weight(t)
        combined = (w * np.asarray(estimate, dtype=np.float64)
                    + (1.0 - w) * np.asarray(one_shot, dtype=np.float64))
        return combined, new_state

    # -- variances --------------------------------------------------------------------------------

    def one_shot_variance(self) -> float:
        """Exact variance (per coordinate) of the one-shot release."""
        return self.final.release_variance(1)

    def continual_weight(self, steps: int) -> float:
        """w of the continual release in the combination at counter step ``steps``."""
        v_c = self.continual.release_variance(steps)
        v_o = self.one_shot_variance()
        return v_o / (v_c + v_o) if v_c + v_o > 0 else 0.5

    def release_variance(self, steps: int, final_steps: Optional[int] = None) -> float:
        """Exact noise variance (per coordinate) of the release after ``steps`` steps: the
        continual counter's, or at ``final_steps`` (default: this counter's) the combination's."""
        v_c = self.continual.release_variance(steps)
        if steps != (self.final_steps if final_steps is None else final_steps):
            return v_c
        v_o = self.one_shot_variance()
        return v_c * v_o / (v_c + v_o) if v_c + v_o > 0 else 0.0
