"""Optional post-processing of released prefix counts: non-negative, non-decreasing series.

A continual count releases, per key, a noisy running total after every step. The true running
total of a count never decreases and is never negative, but the noisy releases can do both (a
quiet key's release goes below zero; a release can dip below the previous one). These pure
functions of the released values restore both properties. They read only released values, so
they cost no privacy (post-processing) and can run anywhere: on the consumer's side, in a
notebook, or in a Beam step after the transform.

Two methods; both outputs lie in {0 ≤ x_0 ≤ x_1 ≤ ...}:

* ``isotonic_counts`` — offline: the least-squares non-negative non-decreasing fit (isotonic
  regression by pool-adjacent-violators, then clipped at 0, which is the exact Euclidean
  projection). Because the true series lies in that convex set, the projection is never farther
  from the truth than the releases are, series by series. It uses all releases so far, so a new
  release can change earlier fitted values. Measured on the tree counter's releases (ε = 1,
  48 steps, ``tests/test_postprocess.py``): RMSE 12.8 → 6.4 on quiet keys (~1 record a day),
  14.3 → 13.8 on busy keys. Recommended.
* ``running_max_counts`` — online: x_t = max(0, y_0, ..., y_t). It never changes a past value,
  but it keeps the largest noise seen so far: biased upwards, RMSE 12.8 → 22.5 on the quiet keys
  above. Use it only where a consumer needs a monotone series that is never revised.

Use them for counts (and sums of non-negative values). Do not use them for sums that can
decrease (negative values) or for ``DynamicCountPerKey`` (deletions make counts decrease).
"""

from typing import Iterable, List

import numpy as np

from beam_dp.errors import InvalidParamsError
from beam_dp.io.records import Release

__all__ = [
    'isotonic_counts',
    'monotone_releases',
    'running_max_counts',
]

_METHODS = ('isotonic', 'running_max')


def _series(owner: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim == 0 or not np.all(np.isfinite(array)):
        raise InvalidParamsError(f'{owner}: values must be a non-empty series (or rows of '
                                 f'series, steps on the last axis) of finite numbers, got '
                                 f'{values!r}.')
    return array


def running_max_counts(values) -> np.ndarray:
    """max(0, running maximum) along the last axis (steps): online, never rewrites the past.

    Args:
      values: released prefix counts, steps on the last axis (a series or keys × steps).

    Returns:
      An array of the same shape, non-negative and non-decreasing along the last axis.

    Raises:
      InvalidParamsError: if the values are not finite numbers.
    """
    array = _series('running_max_counts', values)
    return np.maximum.accumulate(np.maximum(array, 0.0), axis=-1)


def _pava(y: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit of one series (pool adjacent violators, O(T))."""
    means, weights, sizes = [], [], []
    for value in y:
        means.append(float(value))
        weights.append(1.0)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            w = weights[-2] + weights[-1]
            means[-2] = (means[-2] * weights[-2] + means[-1] * weights[-1]) / w
            weights[-2] = w
            sizes[-2] += sizes[-1]
            del means[-1], weights[-1], sizes[-1]
    return np.repeat(means, sizes)


def isotonic_counts(values) -> np.ndarray:
    """The least-squares non-negative, non-decreasing fit along the last axis (steps).

    Isotonic regression (pool adjacent violators) clipped at 0: the Euclidean projection onto
    {0 ≤ x_0 ≤ x_1 ≤ ...}. Offline: a new release can change earlier fitted values.

    Args:
      values: released prefix counts, steps on the last axis (a series or keys × steps).

    Returns:
      An array of the same shape.

    Raises:
      InvalidParamsError: if the values are not finite numbers.
    """
    array = _series('isotonic_counts', values)
    rows = array.reshape(-1, array.shape[-1])
    fitted = np.stack([_pava(row) for row in rows]).reshape(array.shape)
    return np.maximum(fitted, 0.0)


def monotone_releases(releases: Iterable[Release], method: str = 'isotonic') -> List[Release]:
    """``Release`` records with their ``value`` post-processed per key over the steps given.

    Args:
      releases: releases of one count transform (any order; each key's steps are sorted).
      method: 'isotonic' (offline, usually more accurate) or 'running_max' (online).

    Returns:
      The releases sorted by (key, step), ``value`` replaced; everything else unchanged
      (``noise_stddev`` still describes the raw release).

    Raises:
      InvalidParamsError: for an unknown method or a histogram release (post-process its
        ``values`` per bin with the array functions instead).
    """
    if method not in _METHODS:
        raise InvalidParamsError(f"monotone_releases: method must be 'isotonic' or "
                                 f"'running_max', got {method!r}.")
    fit = isotonic_counts if method == 'isotonic' else running_max_counts
    by_key = {}
    for release in releases:
        if release.values:
            raise InvalidParamsError('monotone_releases: histogram releases are not supported; '
                                     'apply isotonic_counts to each bin series.')
        by_key.setdefault(release.key, []).append(release)
    out = []
    for key in sorted(by_key):
        series = sorted(by_key[key], key=lambda r: r.step)
        fitted = fit([r.value for r in series])
        out.extend(r._replace(value=float(v)) for r, v in zip(series, fitted))
    return out
