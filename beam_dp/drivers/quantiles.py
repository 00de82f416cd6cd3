"""Driver of ``ContinualQuantilesPerKey``: chosen percentiles per key from a continual histogram
over a bucketed value domain, pure and tested without Beam.

A quantile release is a keyed continual histogram (``KeyedReleaseDriver``, metric 'histogram':
the same key layout, extraction, user-level bounding, counters, private keys and release loop)
whose bins are M = B**D equal buckets of [lower, upper], followed by post-processing in the
loop driver (``QuantilesLoop``): prefix sums of the bucket estimates, made monotone, searched
for each percentile's target rank, interpolated inside the bucket. Post-processing of a DP
release costs nothing.

Two layouts of the M buckets (``layout=``):

* 'tree': the hierarchical histogram (``mechanisms.hierarchical_histogram``): one counter per
  node of the B-ary tree (root to leaves, D + 1 levels); a record touches D + 1 nodes, so the
  counter runs at L1 = D + 1, L2 = √(D + 1) at event level; at user level at D + 1 times the
  leaf histogram's L1 and √(D + 1) times its L2 (each level of the tree is a coarsening of the
  unit's leaf-histogram change, itself a valid leaf-histogram change of the same unit: same
  keys, steps and per-step mass, so L1 and L2² add up over the D + 1 levels; the BLT's
  multi-participation bound is scaled by √(D + 1) alike); then Hay et al.'s consistency (least
  squares: the BLUE of every range).
* 'flat': the leaf histogram alone (L1 = L2 = 1 per record); a prefix of j + 1 buckets sums
  j + 1 independent noises.

With σ² the counter's per-node variance at L1 = L2 = 1 and s² = σ² × (the tree's sensitivity
factor: (D + 1)² for Laplace noise, D + 1 for Gaussian), the rank estimate at bucket j for
percentile p (prefix_j − p · count) has variance
  flat: σ² ((1 − p)² (j + 1) + p² (M − j − 1))
  tree: s² (a[j] − 2p b[j] + p² c)   (a, b, c: ``prefix_variance_factors``: ≤ 1 for B = 2)
``layout='auto'`` computes both in closed form, averaged over the buckets j and the requested
percentiles, and runs the smaller (``QuantilesDriver.layout_variances``). Event level, 52 steps,
median and p90: with ε the flat layout wins up to 64 buckets and the tree from 256 (1024
buckets: rank sd 72 vs 112 records); with ρ the tree wins from 16 buckets (1024: 8.3 vs 43).
docs/quantiles.md tabulates them.
"""


import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from beam_dp.drivers import counter_choice
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.protocol import Outcome
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io.quantiles import QuantileRelease
from beam_dp.mechanisms import hierarchical_histogram as hh

__all__ = ['LAYOUTS', 'QuantilesDriver', 'QuantilesLoop', 'quantiles_from_buckets']

LAYOUTS = ('auto', 'tree', 'flat')
_OWNER = 'ContinualQuantilesPerKey'


@dataclasses.dataclass(frozen=True)
class QuantilesDriver(KeyedReleaseDriver):
    """A keyed continual histogram over buckets of [lower, upper] with quantile
    post-processing (module docstring).

    Args (besides ``KeyedReleaseDriver``'s; ``metric`` is 'histogram', ``bins`` are set here):
      lower, upper: the public value domain; values outside are clamped to it.
      percentiles: the percentiles to release, in [0, 100].
      branching: B ≥ 2. depth: D ≥ 1 (M = B**D buckets, at most 1024 for the tree).
      layout: 'auto' (the smaller closed-form rank variance), 'tree' or 'flat'.
    """
    percentiles: Tuple[float, ...] = (50.0,)
    branching: int = 2
    depth: int = 6
    histogram_layout: str = 'auto'

    def __post_init__(self):
        owner = _OWNER
        for name in ('branching', 'depth'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParamsError(f'{owner}: {name} must be a positive int, got {value!r}.')
        if self.branching < 2:
            raise InvalidParamsError(f'{owner}: branching must be at least 2, got '
                                     f'{self.branching}.')
        # Compared in logs first: B**D of a huge B or D would never finish.
        if (self.depth * math.log2(self.branching) > math.log2(hh.MAX_TREE_LEAVES) + 1e-9
                or self.branching ** self.depth > hh.MAX_TREE_LEAVES):
            raise InvalidParamsError(f'{owner}: branching**depth buckets (branching='
                                     f'{self.branching}, depth={self.depth}); at most '
                                     f'{hh.MAX_TREE_LEAVES}.')
        leaves = self.branching ** self.depth
        if self.histogram_layout not in LAYOUTS:
            raise InvalidParamsError(f'{owner}: layout must be one of {LAYOUTS}, got '
                                     f'{self.histogram_layout!r}.')
        for name in ('lower', 'upper'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value):
                raise InvalidParamsError(f'{owner}: {name} must be a finite number, got '
                                         f'{value!r}.')
        if not self.lower < self.upper:
            raise InvalidParamsError(f'{owner}: lower must be less than upper, got '
                                     f'[{self.lower}, {self.upper}].')
        try:
            percentiles = tuple(sorted(float(p) for p in self.percentiles))
        except (TypeError, ValueError):
            raise InvalidParamsError(f'{owner}: percentiles must be numbers in [0, 100], got '
                                     f'{self.percentiles!r}.') from None
        if not percentiles or any(not 0 <= p <= 100 for p in percentiles) or \
                len(set(percentiles)) != len(percentiles):
            raise InvalidParamsError(f'{owner}: percentiles must be distinct numbers in [0, 100], '
                                     f'got {self.percentiles!r}.')
        object.__setattr__(self, 'percentiles', percentiles)
        object.__setattr__(self, 'metric', 'histogram')
        object.__setattr__(self, 'bins', tuple(str(i) for i in range(leaves)))
        object.__setattr__(self, '_resolved', 'flat')
        super().__post_init__()     # validates the rest, builds the flat layout's counter
        chosen = self.histogram_layout
        if chosen == 'auto':
            variances = self.layout_variances()
            chosen = 'tree' if variances['tree'] < variances['flat'] else 'flat'
        if chosen == 'tree':
            object.__setattr__(self, '_resolved', 'tree')
            object.__setattr__(self, '_base_counter', self._layout_counter('tree'))
            self._counters.clear()
            self._stddevs.clear()
            self.counter(1)
            factors = hh.prefix_variance_factors(self.branching, self.depth)
        else:
            factors = hh.flat_prefix_factors(leaves)
        object.__setattr__(self, '_factors', factors)

    # -- layout ---------------------------------------------------------------------------------

    @property
    def resolved_layout(self) -> str:
        """'tree' or 'flat': what runs."""
        return self._resolved

    @property
    def leaves(self) -> int:
        return self.branching ** self.depth

    @property
    def bucket_width(self) -> float:
        return (self.upper - self.lower) / self.leaves

    def _layout_sensitivity(self, layout: str) -> Tuple[float, float]:
        """(L1, L2) of the layout: the tree's levels are D + 1 coarsenings of the leaf
        histogram, each a valid leaf-histogram change of the same unit (coarsening keeps a
        unit's keys, steps and per-step mass), so L1 adds up over the levels and L2² too."""
        l1, l2 = self.privacy_unit.sensitivity(1)
        if layout == 'flat':
            return l1, l2
        levels = self.depth + 1
        return levels * l1, math.sqrt(levels) * l2

    def _layout_counter(self, layout: str):
        l1, l2 = self._layout_sensitivity(layout)
        unit = self.privacy_unit
        # The BLT's multi-participation bound is on each key's per-step L2 change (a key's bins
        # together): √(D + 1) times the leaf histogram's in the tree, level by level as above.
        bound = 1 if layout == 'flat' else math.sqrt(self.depth + 1)
        participation = (unit.participation(bound)
                         if unit.name == 'user' and self.private_keys is None else None)
        choose = (counter_choice.choose_final_release if self.final_share
                  else counter_choice.choose_counter)
        extra = (self.final_share,) if self.final_share else ()
        return choose(self.mechanism, self.estimator, self.budget, self.horizon,
                      self.horizon_steps, l1, l2, 1, participation, *extra)

    def layout_variances(self) -> Dict[str, float]:
        """Public, closed form: the rank estimate's variance (records²) of each layout at the
        horizon (or after one step without a horizon), averaged over the buckets j and the
        requested percentiles p (module docstring)."""
        steps = self.horizon or 1
        out = {}
        for layout in ('flat', 'tree'):
            node_var = self._layout_counter(layout).release_variance(steps)
            if layout == 'tree':
                a, b, c = hh.prefix_variance_factors(self.branching, self.depth)
            else:
                a, b, c = hh.flat_prefix_factors(self.leaves)
            p = np.asarray(self.percentiles) / 100.0
            per = a[None, :] - 2 * p[:, None] * b[None, :] + (p ** 2)[:, None] * c
            out[layout] = float(node_var * per.mean())
        return out

    # -- keyed driver hooks ---------------------------------------------------------------------

    def sensitivity(self) -> Tuple[float, float]:
        return self._layout_sensitivity(self._resolved)

    @property
    def value_bound_units(self) -> int:
        return 1 if self._resolved == 'flat' else self.depth + 1

    def counter(self, keys_in_shard: int):
        """The shard's counter over keys × M buckets (the tree layout wraps the node counter:
        ``HierarchicalHistogramCounter``)."""
        if self._resolved == 'flat':
            return super().counter(keys_in_shard)
        counter = self._counters.get(keys_in_shard)
        if counter is None:
            counter = hh.HierarchicalHistogramCounter(
                self._base_counter, self.branching, self.depth, keys_in_shard * self.leaves)
            self._counters[keys_in_shard] = counter
        return counter

    def bucket(self, value) -> int:
        """The bucket of a value (clamped to [lower, upper]).

        Raises:
          InvalidRecordError: 'value is not a number: ...' (a bool, a string or bytes, or
            anything ``float()`` refuses) or 'value is NaN'. ±inf is clamped like any value.
        """
        if isinstance(value, (bool, np.bool_, str, bytes, bytearray)):
            raise InvalidRecordError(f'value is not a number: {value!r:.80}')
        try:
            x = float(value)
        except OverflowError:           # an int beyond the floats: clamped like ±inf
            if not isinstance(value, int):
                raise InvalidRecordError(f'value is not a number: {value!r:.80}') from None
            x = math.inf if value > 0 else -math.inf
        except (TypeError, ValueError):
            raise InvalidRecordError(f'value is not a number: {value!r:.80}') from None
        if math.isnan(x):
            raise InvalidRecordError('value is NaN')
        x = min(max(x, self.lower), self.upper)
        index = int((x - self.lower) / self.bucket_width)
        return min(max(index, 0), self.leaves - 1)

    def extract(self, key, micros: int, record, value_fn):
        """One record → ``(key id, step, shard, slot, 1)`` with slot = key position × M +
        bucket (public keys) or the bucket (private keys).

        Raises:
          InvalidRecordError: with the dead-letter reason.
        """
        key, shard, position = self.locate(key)
        step = self.clock.checked_step(micros)
        try:
            value = value_fn(record)
        except Exception as e:  # pylint: disable=broad-except
            raise InvalidRecordError(f'value_fn raised {e!r}') from e
        bucket = self.bucket(value)
        if position is None:
            return key, step, shard, bucket, 1
        key_index = position * self.layout.num_shards + shard
        return key_index, step, shard, position * self.leaves + bucket, 1

    def release_metadata(self) -> Dict[str, object]:
        meta = dict(super().release_metadata())
        meta['metric'] = 'quantiles'
        meta['mechanism'] = f"{self._resolved}_histogram/{meta['mechanism']}"
        return meta

    def describe(self) -> Dict[str, object]:
        out = dict(super().describe())
        out.update(metric='quantiles', layout=self._resolved, buckets=self.leaves,
                   branching=self.branching, lower=self.lower, upper=self.upper,
                   percentiles=list(self.percentiles))
        return out

    def loop_driver(self):
        return QuantilesLoop(super().loop_driver(), self)

    # -- post-processing ------------------------------------------------------------------------

    def rank_stddev(self, buckets: np.ndarray, noise_stddev: float) -> np.ndarray:
        """Closed form: the noise sd (records) of (prefix up to the bucket − p · count), per
        percentile p, at the given buckets (one per percentile, or an array (..., P))."""
        a, b, c = self._factors
        p = np.asarray(self.percentiles) / 100.0
        var = a[buckets] - 2 * p * b[buckets] + p ** 2 * c
        return noise_stddev * np.sqrt(np.maximum(var, 0.0))

    def quantile_rows(self, estimates: np.ndarray, noise_stddev: float
                      ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bucket estimates (R, M) → (counts (R,), values (R, P), rank sds (R, P))."""
        buckets, values, counts = quantiles_from_buckets(
            estimates, self.percentiles, self.lower, self.upper)
        return counts, values, self.rank_stddev(buckets, noise_stddev)


def quantiles_from_buckets(estimates, percentiles: Sequence[float], lower: float, upper: float
                           ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentiles from noisy bucket counts (R, M) over equal buckets of [lower, upper].

    The prefix sums are made monotone (running maximum); the count is the last prefix; the
    percentile p falls in the first bucket whose monotone prefix reaches p · count (the last
    bucket if none does), and is interpolated linearly inside it. Values are monotone in p
    and within [lower, upper].

    Returns:
      (bucket index (R, P), values (R, P), counts (R,)).
    """
    est = np.atleast_2d(np.asarray(estimates, dtype=np.float64))
    rows, leaves = est.shape
    width = (upper - lower) / leaves
    prefix = np.cumsum(est, axis=1)
    counts = prefix[:, -1].copy()
    mono = np.maximum.accumulate(prefix, axis=1)
    p = np.asarray(sorted(percentiles), dtype=np.float64) / 100.0
    target = p[None, :] * counts[:, None]                                 # (R, P)
    j = (mono[:, None, :] < target[:, :, None]).sum(axis=2)
    j = np.minimum(j, leaves - 1)
    row = np.arange(rows)[:, None]
    high = mono[row, j]
    low = np.where(j > 0, mono[row, np.maximum(j - 1, 0)], 0.0)
    low = np.minimum(low, high)
    span = high - low
    with np.errstate(divide='ignore', invalid='ignore'):
        frac = np.where(span > 0, (target - low) / span, 0.5)
    frac = np.clip(frac, 0.0, 1.0)
    values = lower + width * (j + frac)
    values = np.clip(np.maximum.accumulate(values, axis=1), lower, upper)
    return j, values, counts


class QuantilesLoop:
    """The keyed loop driver (public or private shards) with quantile post-processing: each
    histogram ``Release`` of a close becomes a ``QuantileRelease``; noise addresses, state and
    timers are the keyed driver's."""

    def __init__(self, inner, driver: QuantilesDriver):
        self.inner = inner
        self.driver = driver
        self.clock = inner.clock
        self.LOOP = inner.LOOP          # pylint: disable=invalid-name
        meta = driver.release_metadata()
        self._fields = (meta['metric'], meta['mechanism'], float(meta['epsilon']),
                        float(meta['delta']), float(meta['rho']), meta['privacy_unit'])
        self._percentiles = [float(p) for p in driver.percentiles]
        if hasattr(inner, 'state_size'):
            self.state_size = inner.state_size
        if hasattr(inner, 'payload_size'):
            self.payload_size = inner.payload_size
        if hasattr(inner, 'end_of_input'):
            self.end_of_input = inner.end_of_input

    def start(self, key, noise) -> Outcome:
        return self.inner.start(key, noise)

    def fold(self, state, key, payload) -> Outcome:
        return self.inner.fold(state, key, payload)

    def close(self, state, key, fired_micros: int, pending, noise) -> Outcome:
        out = self.inner.close(state, key, fired_micros, pending, noise)
        if not out.releases:
            return out
        return out._replace(releases=self.convert(out.releases))

    def convert(self, releases) -> List[QuantileRelease]:
        """Histogram ``Release``s (one step) → ``QuantileRelease``s."""
        driver = self.driver
        estimates = np.asarray([r.values for r in releases], dtype=np.float64)
        stddevs = np.asarray([r.noise_stddev for r in releases], dtype=np.float64)
        buckets, values, counts = quantiles_from_buckets(
            estimates, driver.percentiles, driver.lower, driver.upper)
        a, b, c = driver._factors            # pylint: disable=protected-access
        p = np.asarray(driver.percentiles) / 100.0
        var = np.maximum(a[buckets] - 2 * p * b[buckets] + p ** 2 * c, 0.0)
        ranks = stddevs[:, None] * np.sqrt(var)
        width = float(driver.bucket_width)
        layout = driver.resolved_layout
        return [QuantileRelease(r.key, r.step, r.step_start_micros, r.step_end_micros,
                                float(n), list(self._percentiles), row.tolist(), rank.tolist(),
                                width, layout, *self._fields, float(r.noise_stddev))
                for r, n, row, rank in zip(releases, counts.tolist(), values, ranks)]
