"""Choosing ``UserLevel`` bounds from DP histograms of per-unit contributions (pure, no Beam):
what ``beam_dp.ChooseContributionBounds`` computes.

The statistics (``STATISTICS``), one positive integer per privacy unit each, from the unit's
records grouped by (key, step) (``unit_statistics``):

* ``keys_per_unit`` K_u: distinct keys of the unit;
* ``contributions_per_step`` m_u: its largest number of records in one (key, step);
* ``steps_per_key`` S_u: its largest number of distinct steps in one key;
* ``total_contributions`` C_u: its records in all.

Privacy: each unit adds 1 to one bucket of each of the four histograms (sensitivity 1 each), and
the four are released by four ``ContributionHistogram``s splitting the budget by ``shares``
(default 0.4 for C, 0.2 for each of K, m, S): ε·share each (discrete Laplace; sequential
composition sums to ε; an (ε, δ) budget is spent as pure ε, δ unused) or ρ·share each (discrete
Gaussian; zCDP composition sums to ρ). The choice below reads only the released histograms and
public parameters: post-processing.

The prediction (issue 23, item 4): for bounds b = (K, m, S, C) and the release the user will run
(``release_budget``, ``horizon`` steps, ``mechanism``),

* noise(b) = the standard deviation of that counter's final release (step ``horizon``), exactly
  as ``KeyedReleaseDriver`` calibrates it at ``UserLevel(K, m, S, C)`` (``predicted_noise``);
* bias(b) = ``key_share`` × (N̂ − kept̂(b)), the records a key holding the fraction
  ``key_share`` of all records loses to bounding. The histograms are marginals; they are
  coupled comonotonically (the unit at quantile p of C_u is at quantile p of K_u, m_u, S_u:
  heavy units are the broad ones), so with X(p) the quantile functions read off the noisy
  CDFs, N̂ = n̂·mean_p C(p) and kept̂(b) = n̂·mean_p min(C, C(p)·Π_d min(1, b_d/X_d(p)))
  over d ∈ {K, m, S} (``predicted_bias``). m_u and S_u are a unit's LARGEST cell and key, so
  the factors for m and S treat every cell and key of the unit as its largest (conservative:
  it pushes m and S up, which costs noise only through L2 and the participation pattern).
* error(b) = √(bias² + noise²); ``choose`` minimises it by coordinate descent over the
  candidate bounds (the largest value of each bucket up to the noisy maximum; S at most the
  horizon), starting from the 0.99 quantiles of K, m, S and the 0.9 quantile of C.

``non_private_histograms``: exact counts, no noise, no privacy (for data the user may see in
the clear; ``ChooseContributionBounds`` documents what this does not protect).
"""

import dataclasses
import functools
import math
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.counter_choice import MECHANISMS
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.io.bounds import BoundsRecommendation
from beam_dp.mechanisms.contribution_histogram import ContributionHistogram
from beam_dp.mechanisms.contribution_histogram import NoisyHistogram
from beam_dp.mechanisms.contribution_histogram import geometric_edges
from beam_dp.noise import RandomSource
from beam_dp.privacy_unit import UserLevel

__all__ = [
    'BoundsChooser',
    'STATISTICS',
    'unit_statistics',
]

STATISTICS = ('keys_per_unit', 'contributions_per_step', 'steps_per_key', 'total_contributions')
_OWNER = 'BoundsChooser'
#: Quantile levels of the comonotone coupling in ``predicted_bias``.
_LEVELS = 512


def _quantiles(hist: NoisyHistogram, levels: np.ndarray) -> np.ndarray:
    """The bucket representative at each quantile level of the released histogram."""
    cdf = hist.cdf()
    idx = np.minimum(np.searchsorted(cdf, levels, side='left'), len(cdf) - 1)
    return hist.representatives[idx]


def unit_statistics(cells: Mapping[Tuple[object, int], int]) -> Tuple[int, int, int, int]:
    """(K_u, m_u, S_u, C_u) of one unit from its records per (key, step) (module docstring).

    Raises:
      InvalidParamsError: for a unit without records or a non-positive cell count.
    """
    if not cells:
        raise InvalidParamsError(f'{_OWNER}: a unit has at least one record.')
    steps_per_key: Dict[object, int] = {}
    largest, total = 0, 0
    for (key, _), n in cells.items():
        if n < 1:
            raise InvalidParamsError(f'{_OWNER}: cell counts are positive, got {n}.')
        steps_per_key[key] = steps_per_key.get(key, 0) + 1
        largest = max(largest, n)
        total += n
    return len(steps_per_key), largest, max(steps_per_key.values()), total


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChooserOptions:
    """The settings of the bound choice (keyword-only), shared by ``BoundsChooser`` and
    ``beam_dp.drivers.warm_up.WarmUpPlan`` (which builds one from them); ``BoundsChooser``
    validates them."""
    mechanism: str = 'auto'
    key_share: float = 0.1
    max_value: int = 1 << 20
    per_octave: int = 2
    shares: Tuple[float, float, float, float] = (0.2, 0.2, 0.2, 0.4)

    def chooser_options(self) -> Dict[str, Any]:
        """These settings as keyword arguments of a ``BoundsChooser``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(ChooserOptions)}


@dataclasses.dataclass(frozen=True)
class BoundsChooser(ChooserOptions):
    """Releases the four contribution histograms and chooses the bounds (module docstring).

    Args:
      budget: what the histograms spend (``PrivacyBudget``; ε or ρ; δ of an (ε, δ) budget is not
        used). Ignored (may be None) with ``non_private_histograms``.
      release_budget: the budget of the counter that will run at the chosen bounds.
      horizon: the steps of that release (the error is that of its final total).
      mechanism: that release's ``mechanism=`` ('auto' by default).
      key_share: the share of all records held by a key whose error matters (public; e.g. 0.1
        for one of the top 10 keys when the data are spread over them).
      max_value: the largest bucket edge (values above fall in the open last bucket).
      per_octave: buckets per doubling of the value.
      shares: the budget fractions of (K, m, S, C)'s histograms (positive, summing to ≤ 1).
      non_private_histograms: exact histograms, NOT differentially private.

    Raises:
      InvalidParamsError: on a bad parameter, naming it.
    """
    budget: Optional[PrivacyBudget]
    release_budget: PrivacyBudget
    horizon: int
    non_private_histograms: bool = False

    def __post_init__(self):
        if not isinstance(self.non_private_histograms, bool):
            raise InvalidParamsError(f'{_OWNER}: non_private_histograms must be True or False, '
                                     f'got {self.non_private_histograms!r}.')
        if self.non_private_histograms:
            if self.budget is not None:
                raise InvalidParamsError(f'{_OWNER}: non_private_histograms spends no budget: '
                                         f'pass budget=None, got {self.budget}.')
        elif not isinstance(self.budget, PrivacyBudget):
            raise InvalidParamsError(f'{_OWNER}: budget must be a PrivacyBudget, got '
                                     f'{self.budget!r}.')
        if not isinstance(self.release_budget, PrivacyBudget):
            raise InvalidParamsError(f'{_OWNER}: release_budget must be a PrivacyBudget, got '
                                     f'{self.release_budget!r}.')
        v.check_positive_int(_OWNER, 'horizon', self.horizon)
        v.check_choice(_OWNER, 'mechanism', self.mechanism, MECHANISMS)
        v.check_probability(_OWNER, 'key_share', self.key_share, allow_zero=False,
                            allow_one=True)
        v.check_positive_int(_OWNER, 'max_value', self.max_value)
        shares = tuple(self.shares) if isinstance(self.shares, (tuple, list)) else ()
        if (len(shares) != len(STATISTICS) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in shares)
                or sum(shares) > 1 + 1e-9):
            raise InvalidParamsError(f'{_OWNER}: shares must be 4 positive fractions summing to '
                                     f'at most 1, got {self.shares!r}.')
        object.__setattr__(self, 'shares', tuple(float(x) for x in shares))
        object.__setattr__(self, '_noise_cache', {})
        # Builds the histogram mechanism (validates max_value, per_octave) and one release.
        self.histograms  # pylint: disable=pointless-statement
        self.predicted_noise(1, 1, 1, 1)

    @functools.cached_property
    def edges(self) -> Tuple[int, ...]:
        return geometric_edges(self.max_value, self.per_octave)

    @functools.cached_property
    def histograms(self) -> Optional[Dict[str, ContributionHistogram]]:
        """The DP mechanism of each statistic (None with ``non_private_histograms``)."""
        if self.non_private_histograms:
            return None
        b = self.budget
        out = {}
        for name, share in zip(STATISTICS, self.shares):
            privacy = {'rho': b.rho * share} if b.is_zcdp else {'epsilon': b.epsilon * share}
            out[name] = ContributionHistogram(self.edges, **privacy)
        return out

    def privacy_cost(self) -> PrivacyCost:
        """The four histograms' costs composed (at most the budget)."""
        total = PrivacyCost()
        for hist in (self.histograms or {}).values():
            total = total + hist.privacy_cost()
        return total

    # -- releasing ---------------------------------------------------------------------------------

    def exact_counts(self, stats: Iterable[Tuple[int, int, int, int]]) -> Dict[str, np.ndarray]:
        """Units per bucket of each statistic, from per-unit (K_u, m_u, S_u, C_u) (exact)."""
        stats = np.asarray(list(stats), dtype=np.int64).reshape(-1, len(STATISTICS))
        edges = np.asarray(self.edges, dtype=np.int64)
        out = {}
        for i, name in enumerate(STATISTICS):
            buckets = np.searchsorted(edges, stats[:, i], side='right') - 1
            out[name] = np.bincount(buckets, minlength=len(edges)).astype(np.int64)
        return out

    def bucket_indices(self, unit_stats: Tuple[int, int, int, int]) -> Tuple[int, ...]:
        """The bucket of each of one unit's statistics."""
        edges = np.asarray(self.edges, dtype=np.int64)
        return tuple(int(i) for i in np.searchsorted(edges, np.asarray(unit_stats), 'right') - 1)

    def release(self, counts: Mapping[str, np.ndarray],
                rng: Optional[RandomSource]) -> Dict[str, NoisyHistogram]:
        """The released histograms: every bucket of every statistic gets its noise from
        ``rng.derive(statistic)`` (exact counts, no rng, with ``non_private_histograms``)."""
        out = {}
        for name in STATISTICS:
            c = np.asarray(counts.get(name, np.zeros(len(self.edges))), dtype=np.int64)
            if self.histograms is None:
                out[name] = NoisyHistogram(self.edges, tuple(int(x) for x in c))
            else:
                out[name] = self.histograms[name].release(c, rng.derive(name))
        return out

    # -- predicting --------------------------------------------------------------------------------

    def predicted_noise(self, k: int, m: int, s: int, c: int) -> Tuple[float, str]:
        """(Noise sd of the final release, the counter's name) at ``UserLevel(K, m, S, C)``:
        the counter ``KeyedReleaseDriver`` runs for these bounds, budget and horizon (infinite
        when no counter can run there, e.g. noise beyond the samplers' range)."""
        cache = self._noise_cache
        if (k, m, s, c) not in cache:
            try:
                driver = KeyedReleaseDriver(
                metric='count', budget=self.release_budget,
                privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=k,
                                       max_contributions_per_step=m, max_steps_per_unit=s,
                                       max_total_contributions=c),
                clock=StepClock(0, 1, last_step=self.horizon - 1),
                layout=KeyLayout.of(['key'], 1), mechanism=self.mechanism)
                cache[(k, m, s, c)] = (driver.noise_stddev(self.horizon - 1),
                                       driver.mechanism_name)
            except (InvalidParamsError, ArithmeticError, ValueError):
                cache[(k, m, s, c)] = (math.inf, 'none')
        return cache[(k, m, s, c)]

    def predicted_bias(self, hists: Mapping[str, NoisyHistogram], k: int, m: int, s: int,
                       c: int) -> float:
        """``key_share`` × the estimated records lost to the bounds (module docstring)."""
        total = hists['total_contributions']
        units = total.units
        if units <= 0:
            return 0.0
        levels = (np.arange(_LEVELS) + 0.5) / _LEVELS
        records = _quantiles(total, levels)
        kept = records.copy()
        for name, bound in (('keys_per_unit', k), ('contributions_per_step', m),
                            ('steps_per_key', s)):
            kept *= np.minimum(1.0, bound / _quantiles(hists[name], levels))
        if c is not None:
            kept = np.minimum(kept, float(c))
        return self.key_share * units * float(np.mean(records - kept))

    def predict(self, hists, k, m, s, c) -> Tuple[float, float, float, str]:
        """(bias, noise, total error, mechanism name) at bounds (K, m, S, C)."""
        bias = self.predicted_bias(hists, k, m, s, c)
        noise, name = self.predicted_noise(k, m, s, c)
        return bias, noise, math.hypot(bias, noise), name

    # -- choosing ----------------------------------------------------------------------------------

    def candidates(self, hist: NoisyHistogram, cap: Optional[int] = None) -> Tuple[int, ...]:
        """The bucket upper values up to the noisy maximum (and ``cap``)."""
        top = hist.quantile(1.0)
        out = [u for u in hist.upper_values() if u <= top]
        if cap is not None:
            out = sorted({min(u, cap) for u in out})
        return tuple(out) or (1,)

    def choose(self, hists: Mapping[str, NoisyHistogram], rounds: int = 6) -> BoundsRecommendation:
        """The bounds of lowest predicted error (coordinate descent) as a record."""
        for name in STATISTICS:
            if not isinstance(hists.get(name), NoisyHistogram):
                raise InvalidParamsError(f'{_OWNER}: hists must map every statistic of '
                                         f'{STATISTICS} to a NoisyHistogram.')
        caps = {'steps_per_key': self.horizon}
        options = [self.candidates(hists[n], caps.get(n)) for n in STATISTICS]
        start_q = (0.99, 0.99, 0.99, 0.9)
        current = [min(hists[n].quantile(q), caps.get(n, math.inf))
                   for n, q in zip(STATISTICS, start_q)]
        current = [min(opts, key=lambda u, x=x: abs(u - x)) for opts, x in zip(options, current)]
        best = self.predict(hists, *current)[2]
        for _ in range(rounds):
            changed = False
            for i in (3, 0, 1, 2):                                  # C first: it binds most
                for value in options[i]:
                    trial = list(current)
                    trial[i] = value
                    error = self.predict(hists, *trial)[2]
                    if error < best * (1 - 1e-12):
                        best, current, changed = error, trial, True
            if not changed:
                break
        bias, noise, error, name = self.predict(hists, *current)
        cost = self.privacy_cost()
        return BoundsRecommendation(
            *[int(x) for x in current], bias, noise, error, name,
            not self.non_private_histograms, cost.epsilon, cost.delta, cost.rho,
            list(self.edges), *[list(hists[n].counts) for n in STATISTICS],
            [int(hists[n].threshold) for n in STATISTICS])

    def run(self, stats: Iterable[Tuple[int, int, int, int]],
            rng: Optional[RandomSource]) -> BoundsRecommendation:
        """Release and choose, from per-unit (K_u, m_u, S_u, C_u) (what the transform does)."""
        return self.choose(self.release(self.exact_counts(stats), rng))
