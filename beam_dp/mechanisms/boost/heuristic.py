"""The readiness heuristic with adaptive per-bin thresholds, Penalize, and the learning-rate
schedule (spec 002 §3.1, §3.3).

Per histogram node: ``count[v]`` counts the MW updates that purposely touched bin v (q(v) > 0 and
s ≠ 0; bumped by q(v)), ``thr[v]`` starts at C0. A query is *ready* on a node when every bin of its
support has count ≥ thr (or, with ``quantile`` > 0, when at most that fraction of its support is
under threshold: the artifact's CitiBike relaxation). Penalize, after an SV failure, sets
thr[v] = m + S0 on supp(q), m = min count on supp(q) (erratum 8: the artifact's code rule; the
literal "thr += S0" would leave over-counted bins ready and keep failing). Setting (not raising
to) m + S0 can lower a bin's threshold that an earlier penalty on another query had raised;
spec §3.3's "max" form differs exactly there and is more conservative (more bypasses).

Everything here reads histogram state only, which is a function of earlier DP outputs: it never
reads data, so it is free (post-processing).
"""

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from beam_dp import _validation as v

__all__ = [
    'COVID_LEARNING_RATE',
    'LearningRate',
    'Readiness',
    'readonly',
]


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only (states are immutable; shared by the Boost modules)."""
    a.setflags(write=False)
    return a


@dataclasses.dataclass(frozen=True)
class Readiness:
    """IsHistogramReady / Penalize with per-bin thresholds.

    Args:
      c0: the initial per-bin threshold C0 (≥ 0; ``math.inf`` never ready: Laplace only).
      s0: the Penalize step S0 (≥ 0).
      cap: an optional ceiling on thresholds (the artifact's CitiBike cap of 5), None for none.
      quantile: the fraction of a query's support allowed under threshold (0 = all bins).
      always: vanilla PMW (every query is ready; Penalize is a no-op).

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    c0: float = 100.0
    s0: float = 5.0
    cap: Optional[float] = None
    quantile: float = 0.0
    always: bool = False

    def __post_init__(self):
        owner = type(self).__name__
        c0 = v.check_real(owner, 'c0', self.c0)
        if c0 < 0:
            v._fail(owner, f'c0 must be >= 0, got {c0:g}.')
        v.check_non_negative(owner, 's0', self.s0)
        if self.cap is not None:
            v.check_positive(owner, 'cap', self.cap)
        if not 0.0 <= v.check_real(owner, 'quantile', self.quantile) < 1.0:
            v._fail(owner, f'quantile must be in [0, 1), got {self.quantile:g}.')
        if not isinstance(self.always, bool):
            v._fail(owner, f'always must be a bool, got {self.always!r}.')

    def initial_threshold(self, domain_size: int) -> np.ndarray:
        c0 = self.c0 if self.cap is None else min(self.c0, self.cap)
        return readonly(np.full(domain_size, float(c0)))

    def is_ready(self, count: np.ndarray, thr: np.ndarray, support: np.ndarray) -> bool:
        """All (or all but ``quantile``) bins of supp(q) have count ≥ thr."""
        if self.always:
            return True
        if math.isinf(self.c0) and self.cap is None:
            return False
        under = np.count_nonzero(count[support] < thr[support])
        return under <= math.floor(self.quantile * support.size)

    def penalize(self, count: np.ndarray, thr: np.ndarray, support: np.ndarray) -> np.ndarray:
        """The new thresholds after an SV failure on a query with support ``support``."""
        if self.always or support.size == 0:
            return thr
        new = thr.copy()
        target = float(count[support].min()) + self.s0
        if self.cap is not None:
            target = min(target, self.cap)
        new[support] = target
        return readonly(new)


@dataclasses.dataclass(frozen=True)
class LearningRate:
    """lr as a step function of m(q) = min_{v ∈ supp q} count[v] (spec §3.1 [REF]).

    ``steps``: ((m_0 = 0, lr_0), (m_1, lr_1), ...) with increasing m_i: lr = lr_i for the last
    m_i ≤ m. A constant rate is ``LearningRate(((0, lr),))``.
    """
    steps: Tuple[Tuple[float, float], ...] = ((0, 0.025),)

    def __post_init__(self):
        owner = type(self).__name__
        steps = tuple((float(m), float(lr)) for m, lr in self.steps)
        if not steps or steps[0][0] != 0:
            v._fail(owner, f'steps must start at count 0, got {self.steps!r}.')
        for i, (m, lr) in enumerate(steps):
            v.check_positive(owner, f'steps[{i}] rate', lr)
            if i and m <= steps[i - 1][0]:
                v._fail(owner, f'steps must have increasing counts, got {self.steps!r}.')
        object.__setattr__(self, 'steps', steps)

    def rate(self, count: np.ndarray, support: np.ndarray) -> float:
        m = float(count[support].min()) if support.size else 0.0
        lr = self.steps[0][1]
        for start, rate in self.steps:
            if m >= start:
                lr = rate
        return lr


#: Covid: "0:2_50:0.5_100:0.2" divided by 8 (spec §3.1).
COVID_LEARNING_RATE = LearningRate(((0, 0.25), (50, 0.0625), (100, 0.025)))
