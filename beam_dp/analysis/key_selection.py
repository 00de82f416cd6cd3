"""How many distinct units a key needs to be released by private key selection (issue 23 item 3).

``key_release_probability(n, ...)`` is the probability that a key with ``n`` distinct units (after
bounding: each unit counted once per key, a unit in at most K keys) is released by the last of
``steps`` steps under ``PrivateKeys(budget=(ε, δ), final_share=f)``; ``units_needed(p, ...)``
the smallest such n with probability ≥ p. Public parameters only.

* With a known end (``steps`` given, the transform has ``end=``) and f > 0 the key is released
  if the continual SVT at ((1-f)ε, (1-f)δ) selects it or, at the last step, the static
  truncated-geometric rule at (fε, fδ) keeps its final count. The probability returned is the exact
  final-test probability π(n) combined with the SVT's for a key whose n units all arrive at the
  first step, assuming the two independent: 1 - (1 - P_svt)(1 - π(n)). For units arriving
  later the SVT part is smaller; the final test's π(n) alone is a lower bound that does not
  depend on when units arrive (``final_only=True`` returns it).
* Without an end, or with f = 0, only the SVT at (ε, δ) runs: P[some t ≤ steps: n + Y_t > τ_t + Z]
  for n units at the first step, summed exactly over the threshold noise Z (float).
"""

import math
from typing import Optional

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.key_selection import ContinualKeySelection
from beam_dp.mechanisms.key_selection import TruncatedGeometricSelection
from beam_dp.noise.geometric import dlap_tail

__all__ = [
    'key_release_probability',
    'units_needed',
]

_OWNER = 'units_needed'


def _check(epsilon, delta, max_keys, steps, final_share):
    v.check_positive(_OWNER, 'epsilon', epsilon)
    v.check_probability(_OWNER, 'delta', delta, allow_zero=False)
    v.check_positive_int(_OWNER, 'max_keys', max_keys)
    if steps is not None:
        v.check_positive_int(_OWNER, 'steps', steps)
    if not isinstance(final_share, (int, float)) or not 0 <= final_share < 1:
        raise InvalidParamsError(f'{_OWNER}: final_share must be in [0, 1), got '
                                 f'{final_share!r}.')


def _svt_probability(selection: ContinualKeySelection, n: int, steps: int) -> float:
    """P[a key with n units from step 1 is selected by ``steps``] (float)."""
    scale = selection.scale
    a = math.exp(-1.0 / scale)
    norm = (1 - a) / (1 + a)
    thresholds = [selection.threshold(t) for t in range(1, steps + 1)]
    radius = int(60 * scale) + 5
    total = 0.0
    for z in range(-radius, radius + 1):
        weight = norm * a ** abs(z)
        if weight < 1e-300:
            continue
        # not selected at t: Y_t ≤ τ_t + z - n, i.e. not (Y_t ≥ τ_t + z - n + 1)
        log_never = 0.0
        for tau in thresholds:
            q = min(1.0, dlap_tail(scale, tau + z - n + 1))
            if q >= 1.0:
                log_never = -math.inf
                break
            log_never += math.log1p(-q)
        total += weight * (1.0 - math.exp(log_never))
    return min(1.0, total)


def key_release_probability(n: int, epsilon: float, delta: float, max_keys: int, *,
                        steps: Optional[int] = None, final_share: float = 0.9,
                        final_only: bool = False) -> float:
    """Probability that a key with ``n`` distinct units is released by step ``steps`` (module
    docstring). ``steps`` None: no known end (the SVT over ``steps`` is then required)."""
    _check(epsilon, delta, max_keys, steps, final_share)
    v.check_non_negative_int(_OWNER, 'n', n)
    if n == 0:
        return 0.0
    if steps is not None and final_share > 0:
        final = TruncatedGeometricSelection(final_share * epsilon, final_share * delta,
                                            max_keys)
        # pylint: disable=import-outside-toplevel  (drivers import analysis: at call time)
        from beam_dp.drivers.private_keys import FINAL_COUNT_CAP
        pi = final.selection_probability(min(n, FINAL_COUNT_CAP))
        if final_only:
            return pi
        svt = ContinualKeySelection((1 - final_share) * epsilon, (1 - final_share) * delta,
                                   max_keys)
        return 1 - (1 - _svt_probability(svt, n, steps)) * (1 - pi)
    if steps is None:
        raise InvalidParamsError(f'{_OWNER}: without a known end give steps= (the horizon the '
                                 f'probability is asked for).')
    return _svt_probability(ContinualKeySelection(epsilon, delta, max_keys), n, steps)


def units_needed(p: float, epsilon: float, delta: float, max_keys: int, *,
                 steps: Optional[int] = None, final_share: float = 0.9,
                 final_only: bool = False, limit: int = 1 << 20) -> int:
    """The smallest number of distinct units n with ``key_release_probability(n, ...) ≥ p``.

    Args:
      p: the target release probability, in (0, 1).
      epsilon, delta: the selection budget of ``PrivateKeys``.
      max_keys: K, keys per unit (``UserLevel.max_keys``; 1 at event level).
      steps: the number of steps (``end``); None for an unbounded stream (then required for
        the SVT's horizon: raises).
      final_share: ``PrivateKeys.final_share`` (used with a known end).
      final_only: count only the final test (a bound that holds whenever units arrive).

    Raises:
      InvalidParamsError: on a bad parameter, or if no n ≤ ``limit`` reaches p.
    """
    if not isinstance(p, (int, float)) or not 0 < p < 1:
        raise InvalidParamsError(f'{_OWNER}: p must be in (0, 1), got {p!r}.')

    def ok(n):
        return key_release_probability(n, epsilon, delta, max_keys, steps=steps,
                                   final_share=final_share, final_only=final_only) >= p

    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > limit:
            raise InvalidParamsError(f'{_OWNER}: no key size up to {limit} is released with '
                                     f'probability {p} at these parameters.')
    lo = hi // 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
