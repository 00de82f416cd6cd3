"""DP histograms of per-unit contributions over geometric buckets, and quantiles read off them
(what ``beam_dp.drivers.bounds`` chooses ``UserLevel`` bounds from).

The statistic: every privacy unit has one positive integer per statistic (its number of keys,
its largest count in one (key, step) cell, ...). The histogram counts units per bucket; the
buckets are public and geometric (``geometric_edges``: 1, 2, 3, 4, 6, 8, 11, 16, ... with
``per_octave`` buckets per doubling, the last one open), as in PipelineDP's contribution
histograms (log-spaced bins of per-unit counts from which its parameter tuning picks bounds).

Privacy unit and neighbours: add/remove one privacy unit. A unit adds exactly 1 to exactly one
bucket of the histogram: L1 and L2 sensitivity 1. Several statistics released together
(``beam_dp.drivers.bounds``: four) compose sequentially, each at its own budget.

Guarantee: every bucket (empty or not, so which buckets are non-empty is not revealed) gets
independent exact discrete noise from ``beam_dp.noise``: discrete Laplace of scale 1/ε (ε-DP)
or discrete Gaussian of σ² = 1/(2ρ) (ρ-zCDP, CKS 2020 Theorem 14). Everything read off the
release (``NoisyHistogram``: counts below the public ``threshold`` set to 0, CDF, quantiles,
excess) is post-processing of the noisy counts and public parameters.

The threshold: a public function of the noise and the number of buckets B — the smallest τ
with B·P[noise ≥ τ] ≤ ``false_bucket_rate`` (0.1): an empty bucket survives with probability
≤ 0.1 in all, so the noise of the many empty buckets of a wide geometric range does not add
phantom units with huge values to the estimates.

Not guaranteed: accuracy at small counts — a quantile is read from noisy counts clipped at 0,
so with few units per bucket it is noisy, and a bucket with fewer units than the threshold
counts as empty (the estimates ignore a thin tail); a value above the last edge is counted in the open
last bucket (its representative is the edge).

Cite: Dwork, McSherry, Nissim, Smith 2006 (histograms, sensitivity 1); Canonne, Kamath,
Steinke 2020 (exact discrete Laplace and Gaussian); PipelineDP ``dataset_histograms``.
"""

import dataclasses
import functools
import math
from typing import Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidParamsError
from beam_dp.noise import RandomSource
from beam_dp.noise import discrete_gaussian
from beam_dp.noise import discrete_laplace
from beam_dp.noise.samplers import as_rational_up
from beam_dp.noise.pmf import discrete_gaussian_variance
from beam_dp.noise.pmf import discrete_laplace_variance

__all__ = [
    'ContributionHistogram',
    'NoisyHistogram',
    'geometric_edges',
]

_OWNER = 'ContributionHistogram'
#: The largest edge allowed (a bound above it is not useful; keeps arrays small).
MAX_EDGE = 1 << 40


def geometric_edges(max_value: int, per_octave: int = 2) -> Tuple[int, ...]:
    """The public lower edges 1 = e_0 < e_1 < ... ≤ ``max_value`` of geometric buckets: the
    distinct values ⌊2^(i/per_octave)⌋ (bucket i is [e_i, e_{i+1}), the last one [e_last, ∞)).

    Raises:
      InvalidParamsError: for a non-positive or too large ``max_value`` or ``per_octave``.
    """
    v.check_positive_int('geometric_edges', 'max_value', max_value)
    v.check_positive_int('geometric_edges', 'per_octave', per_octave)
    if max_value > MAX_EDGE or per_octave > 64:
        raise InvalidParamsError(f'geometric_edges: max_value must be at most 2**40 and '
                                 f'per_octave at most 64, got {max_value}, {per_octave}.')
    edges, i = [], 0
    while True:
        e = int(math.floor(2.0 ** (i / per_octave) + 1e-9))
        if e > max_value:
            break
        if not edges or e > edges[-1]:
            edges.append(e)
        i += 1
    return tuple(edges)


@dataclasses.dataclass(frozen=True)
class NoisyHistogram:
    """Released (noisy) unit counts per bucket and what is read off them (post-processing).

    ``edges``: the public lower edges; ``counts``: one released count per bucket (may be
    negative); ``threshold``: every estimate below reads a count under it as 0."""
    edges: Tuple[int, ...]
    counts: Tuple[int, ...]
    threshold: int = 1

    def __post_init__(self):
        if len(self.edges) != len(self.counts) or not self.edges:
            raise InvalidParamsError(f'NoisyHistogram: edges and counts must have one entry per '
                                     f'bucket, got {len(self.edges)} and {len(self.counts)}.')

    @functools.cached_property
    def estimated_counts(self) -> np.ndarray:
        """The counts the estimates read: a count under ``threshold`` is 0."""
        counts = np.asarray(self.counts, dtype=float)
        return np.where(counts >= max(self.threshold, 1), counts, 0.0)

    @functools.cached_property
    def representatives(self) -> np.ndarray:
        """A value standing for each bucket: the midpoint of [e_i, e_{i+1} - 1]; the open last
        bucket's is its edge."""
        lo = np.asarray(self.edges, dtype=float)
        hi = np.append(lo[1:] - 1, lo[-1])
        return (lo + hi) / 2

    @property
    def units(self) -> float:
        """Estimated number of units (clipped counts summed)."""
        return float(self.estimated_counts.sum())

    @property
    def mass(self) -> float:
        """Estimated sum of the statistic over units (Σ count · representative)."""
        return float(self.estimated_counts @ self.representatives)

    def upper_values(self) -> Tuple[int, ...]:
        """The largest value of each bucket (e_{i+1} - 1; the open last bucket: its edge): the
        candidate bounds (a bound there keeps its bucket whole)."""
        return tuple(self.edges[i + 1] - 1 for i in range(len(self.edges) - 1)) + (
            self.edges[-1],)

    def cdf(self) -> np.ndarray:
        """Estimated P[statistic ≤ upper value of bucket i] (monotone; all 1 when empty)."""
        total = self.units
        if total <= 0:
            return np.ones(len(self.edges))
        return np.cumsum(self.estimated_counts) / total

    def quantile(self, q: float) -> int:
        """The upper value of the first bucket whose estimated CDF reaches ``q`` (a bound that
        keeps about a fraction q of the units whole)."""
        v.check_probability('NoisyHistogram', 'q', q, allow_zero=False, allow_one=True)
        cdf = self.cdf()
        i = int(np.searchsorted(cdf, q - 1e-12, side='left'))
        return self.upper_values()[min(i, len(self.edges) - 1)]

    def excess(self, bound: float) -> float:
        """Estimated Σ_units max(0, statistic − bound) (what a cap at ``bound`` removes)."""
        return float(self.estimated_counts @ np.maximum(self.representatives - bound, 0.0))

    def kept_fraction(self, bound: float) -> float:
        """Estimated mean over units of min(1, bound / statistic); 1 when there are none."""
        total = self.units
        if total <= 0:
            return 1.0
        return float(self.estimated_counts @ np.minimum(1.0, bound / self.representatives)) / total


@dataclasses.dataclass(frozen=True)
class ContributionHistogram:
    """The DP histogram of a per-unit statistic over public buckets (module docstring).

    Args:
      edges: the public lower edges (strictly increasing positive ints from 1;
        ``geometric_edges``).
      epsilon / rho: its budget (exactly one).
      false_bucket_rate: the probability that any empty bucket passes the threshold.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
    """
    edges: Tuple[int, ...]
    epsilon: Optional[float] = None
    rho: Optional[float] = None
    false_bucket_rate: float = 0.1

    def __post_init__(self):
        edges = tuple(self.edges) if isinstance(self.edges, Sequence) else None
        if (not edges or any(isinstance(e, bool) or not isinstance(e, (int, np.integer))
                             for e in edges) or edges[0] != 1
                or any(b <= a for a, b in zip(edges, edges[1:])) or edges[-1] > MAX_EDGE):
            raise InvalidParamsError(f'{_OWNER}: edges must be strictly increasing ints from 1 '
                                     f'up to 2**40, got {self.edges!r}.')
        object.__setattr__(self, 'edges', tuple(int(e) for e in edges))
        if (self.epsilon is None) == (self.rho is None):
            raise InvalidParamsError(f'{_OWNER}: give exactly one of epsilon or rho, got '
                                     f'epsilon={self.epsilon!r}, rho={self.rho!r}.')
        if self.epsilon is not None:
            v.check_positive(_OWNER, 'epsilon', self.epsilon)
        else:
            v.check_positive(_OWNER, 'rho', self.rho)
        v.check_probability(_OWNER, 'false_bucket_rate', self.false_bucket_rate,
                            allow_zero=False)

    @property
    def kind(self) -> str:
        return 'laplace' if self.epsilon is not None else 'gaussian'

    @property
    def noise_param(self) -> float:
        """Discrete Laplace scale 1/ε, or discrete Gaussian σ² = 1/(2ρ)."""
        if self.epsilon is not None:
            return 1.0 / self.epsilon
        return 1.0 / (2 * self.rho)

    @functools.cached_property
    def threshold(self) -> int:
        """The smallest τ ≥ 1 with B·P[noise ≥ τ] ≤ ``false_bucket_rate`` (discrete Laplace:
        P[Y ≥ τ] = a^τ/(1 + a), a = e^(-1/b); discrete Gaussian: the bound e^(-τ²/(2σ²)),
        CKS 2020 Proposition 23)."""
        per_bucket = self.false_bucket_rate / len(self.edges)
        param = float(as_rational_up(self.noise_param))
        if self.kind == 'laplace':
            a = math.exp(-1.0 / param)
            if a <= 0.0:        # a scale so small that a^1 underflows: P[Y ≥ 1] < 2^-1074
                return 1
            tau = math.ceil(math.log(per_bucket * (1 + a)) / math.log(a))
        else:
            tau = math.ceil(math.sqrt(2 * param * math.log(1 / per_bucket)))
        return max(1, int(tau))

    def noise_variance(self) -> float:
        """The exact variance of one bucket's noise (of the rounded-up parameter drawn)."""
        param = float(as_rational_up(self.noise_param))
        if self.kind == 'laplace':
            return discrete_laplace_variance(param)
        return discrete_gaussian_variance(param)

    def privacy_cost(self) -> PrivacyCost:
        """The cost of the histogram."""
        if self.epsilon is not None:
            return PrivacyCost(epsilon=self.epsilon)
        return PrivacyCost(rho=self.rho)

    def bucket_of(self, values) -> np.ndarray:
        """The bucket index of each value (values ≥ 1; above the last edge: the last bucket)."""
        values = np.asarray(values, dtype=np.int64)
        if values.size and values.min() < 1:
            raise InvalidParamsError(f'{_OWNER}: per-unit statistics are at least 1.')
        return np.searchsorted(np.asarray(self.edges, dtype=np.int64), values, side='right') - 1

    def exact_counts(self, values) -> np.ndarray:
        """Units per bucket (exact: private, never released as such)."""
        return np.bincount(self.bucket_of(values), minlength=len(self.edges)).astype(np.int64)

    def release(self, counts, rng: RandomSource) -> NoisyHistogram:
        """Adds one independent noise draw to every bucket of ``counts`` (exact units per
        bucket, one per edge). ``rng`` must be this histogram's own address."""
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != (len(self.edges),):
            raise InvalidParamsError(f'{_OWNER}: counts must have one entry per bucket '
                                     f'({len(self.edges)}), got shape {counts.shape}.')
        if self.kind == 'laplace':
            noise = discrete_laplace(rng, self.noise_param, len(self.edges))
        else:
            noise = discrete_gaussian(rng, self.noise_param, len(self.edges))
        return NoisyHistogram(self.edges, tuple(int(c) for c in counts + noise), self.threshold)
