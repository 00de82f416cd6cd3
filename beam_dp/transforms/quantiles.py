"""Continual percentiles per key (``ContinualQuantilesPerKey``): the keyed continual histogram's
wiring ('GlobalWindow' → 'ExtractAndValidate' → ('KeyByUnit' → 'BoundContributions') →
'PreAggregate' + 'ShardSeeds' → 'ReleaseNoisyValues', the one release loop) over M buckets of
[lower, upper], with the quantile post-processing inside the loop driver
(``beam_dp.drivers.quantiles.QuantilesLoop``). All arithmetic is in the driver.
"""

import logging
from typing import Optional
from typing import Sequence

from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.quantiles import QuantilesDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.io.quantiles import QuantileRelease
from beam_dp.transforms import arguments
from beam_dp.transforms.continual import _SECOND
from beam_dp.transforms.continual import _ContinualPerKey

__all__ = ['ContinualQuantilesPerKey']

_LOG = logging.getLogger(__name__)

_DOCS = {
    **arguments.KEYED_DOCS,
    'value_fn': 'record → its numeric value (default ``record[1]``); NaN or non-numeric: '
                'dead-lettered.',
    'lower': 'the smallest value of the public domain: values below are raised to it (and '
             'counted in the first bucket). No default.',
    'upper': 'the largest value of the public domain: values above are lowered to it. No '
             'default.',
    'percentiles': 'the percentiles to release, distinct numbers in [0, 100] (default '
                   '(50,): the median). ``percentiles=[0.5]`` is the 0.5th percentile, not '
                   'the median: give fractions as ``quantiles=``.',
    'quantiles': 'the same as fractions in [0, 1], as ``numpy.quantile`` takes them '
                 '(``quantiles=[0.5, 0.9]`` is ``percentiles=[50, 90]``); give one of the two.',
    'branching': 'B, the tree\'s branching factor (default 2).',
    'depth': 'D: the domain is cut into M = B**D equal buckets (default 6: 64 buckets; at most '
             '1024 buckets). A value is exact to one bucket width (upper − lower) / M.',
    'layout': "'auto' (default: the layout with the smaller closed-form rank error for the "
              "budget, horizon and percentiles), 'tree' (the hierarchical histogram) or 'flat' "
              "(the leaf histogram, ranges summed).",
}


def _numbers(owner: str, name: str, values, domain: str) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, '__iter__'):
        raise InvalidParamsError(f'{owner}: {name} must be a list of numbers in {domain}, '
                                 f'got {values!r}.')
    return tuple(values)


def _percentiles_of(owner: str, percentiles, quantiles) -> tuple:
    """The percentiles asked for, from ``percentiles=`` (in [0, 100]) or ``quantiles=`` (in
    [0, 1]); both given is refused. Percentiles that are all at most 1 are most likely
    fractions meant as quantiles: allowed (they are valid percentiles), with a warning."""
    if percentiles is not None and quantiles is not None:
        raise InvalidParamsError(f'{owner}: give percentiles= (in [0, 100]) or quantiles= (in '
                                 f'[0, 1]), not both.')
    if quantiles is not None:
        fractions = _numbers(owner, 'quantiles', quantiles, '[0, 1]')
        try:
            bad = [q for q in fractions if not 0 <= float(q) <= 1]
        except (TypeError, ValueError):
            bad = list(fractions)
        if bad or not fractions:
            raise InvalidParamsError(f'{owner}: quantiles must be numbers in [0, 1] (fractions, '
                                     f'as numpy.quantile takes them), got {quantiles!r}.')
        return tuple(100.0 * float(q) for q in fractions)
    if percentiles is None:
        return (50.0,)
    values = _numbers(owner, 'percentiles', percentiles, '[0, 100]')
    try:
        small = bool(values) and all(0 <= float(p) <= 1 for p in values) and \
            any(float(p) > 0 for p in values)
    except (TypeError, ValueError):
        small = False          # the driver names the bad value
    if small:
        _LOG.warning('%s: percentiles=%r are read in [0, 100] (%r is the %sth percentile); '
                     'for fractions write quantiles=%r.', owner, list(values), values[-1],
                     values[-1], list(values))
    return values


@arguments.public(docs=_DOCS, required=('lower', 'upper'), defaults={'value_fn': _SECOND},
                  drop=('grid_bits', 'bins', 'count_share', 'output'))
class ContinualQuantilesPerKey(_ContinualPerKey):
    """Continual percentiles of a bounded value per key, released at every step.

    Releases, for every key and every step (as ``ContinualCountPerKey``: public keys or
    ``PrivateKeys``, a fixed event-time schedule, idle keys and empty steps released), the chosen
    ``percentiles`` of the values (``value_fn``, clamped to [``lower``, ``upper``]) of the
    key's records from ``start`` to the end of the step, as a ``QuantileRelease``.

    How: [lower, upper] is cut into M = B**D equal buckets and a continual counter (the keyed
    counters: BLT, k-ary tree, per-step, ...; ``mechanism=``) counts each bucket per key. Two
    layouts, compared in closed form at construction (``layout='auto'``, the smaller rank
    variance wins; ``QuantileRelease.layout`` says which ran):

    * 'tree' — a hierarchical histogram: the counter runs over every node of a B-ary tree on
      the buckets (root, B nodes, ..., M leaves). A record touches one node per level, D + 1
      nodes: the sensitivity is L1 = D + 1, L2 = √(D + 1) at event level, and at user level
      D + 1 times the leaf histogram's L1 and √(D + 1) times its L2 (each level is a coarsening
      of the leaf histogram, a valid leaf-histogram change of the same unit, so L1 and L2² add
      up over the levels; the BLT's multi-participation bound is scaled alike; audited in
      tests/statistical/test_quantiles_statistical.py). The noisy tree is made consistent (Hay, Rastogi,
      Miklau, Suciu 2010: least squares, the best linear unbiased estimate of every range);
      a prefix of buckets then has noise variance σ²·a_j with a_j ≤ 1 for B = 2 (σ the
      per-node noise sd).
    * 'flat' — the leaf histogram alone (L1 = L2 = 1): a prefix of j + 1 buckets sums j + 1
      independent noises, variance σ²·(j + 1).

    With Laplace noise (ε) the tree pays (D + 1)² in variance per node, so a few dozen buckets
    favour 'flat' and many buckets the tree; with Gaussian noise (ρ) the tree pays only D + 1
    and wins from a handful of buckets (docs/quantiles.md tabulates the closed forms).

    Post-processing (free): the prefix sums are made monotone (running maximum), the count is
    the last prefix, percentile p is the first bucket whose prefix reaches p × count,
    interpolated inside it; released values are monotone across percentiles and in
    [lower, upper].

    Error statement (public): ``QuantileRelease.rank_error_stddev[i]`` is the exact noise sd,
    in records, of (estimated prefix at the released bucket − p × estimated count), from the
    counter's exact ``noise_stddev`` and the layout's linear map; the value is exact to one
    bucket (``value_resolution``), and the bucket holding the percentile can add at most its
    own records to the rank error. With few records the percentiles are noise: a rank error of
    σ records is meaningless for a key with fewer than a few σ records.

    Returns:
      ``ContinualOutputs(releases, dead_letter)`` (releases: ``QuantileRelease``).

    Raises:
      InvalidParamsError: on a bad or missing parameter, naming it.
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """
    _metric = 'histogram'
    _release_type = QuantileRelease

    _value_required = True

    def __init__(self, *, percentiles: Optional[Sequence[float]] = None,
                 quantiles: Optional[Sequence[float]] = None, branching: int = 2,
                 depth: int = 6, layout: str = 'auto', **kwargs):
        percentiles = _percentiles_of(type(self).__name__, percentiles, quantiles)
        self._histogram_args = {'percentiles': percentiles, 'branching': branching,
                                'depth': depth, 'histogram_layout': layout}
        super().__init__(**kwargs)

    def _make_driver(self, owner, public_keys, private_keys, clock, privacy_unit, *, budget,
                     num_shards, lower, upper, horizon_steps, estimator, mechanism, final_share,
                     **unused):
        percentiles = self._histogram_args['percentiles']
        if private_keys is not None and num_shards is not None:
            raise InvalidParamsError(f'{owner}: with private keys set '
                                     f'PrivateKeys(num_shards=...), not num_shards.')
        key_layout = None if private_keys is not None else KeyLayout.of(list(public_keys),
                                                                        num_shards)
        return QuantilesDriver(
            metric='histogram', budget=budget, privacy_unit=privacy_unit, clock=clock,
            layout=key_layout, private_keys=private_keys, horizon_steps=horizon_steps,
            estimator=estimator, mechanism=mechanism, lower=lower, upper=upper,
            final_share=final_share,
            **{**self._histogram_args, 'percentiles': tuple(percentiles)})

    def loop_driver(self):
        """What the release loop runs (``beam_dp.testing.replay`` drives the same)."""
        return self._driver.loop_driver()
