"""``SmallDBGQueries``: SmallDB rerun on a growing database (Cummings et al., Theorem 9) answering a
public query stream in Beam.

Same wiring as ``BBSchedulerQueries`` (``growing_database.py``): data and queries tagged, keyed,
processed in event-time order on the public step clock by the one release loop. The
per-instance logic is ``beam_dp.drivers.smalldbg.smalldbg_engine`` (a ``BBEngine``: record
batches cut at epoch starts) around ``beam_dp.mechanisms.smalldb.smalldbg`` unchanged.
"""

from typing import Any, Callable, Optional, Sequence

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.growing import budget_epsilon_delta
from beam_dp.drivers.smalldbg import smalldbg_engine
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.smalldb import MAX_CANDIDATES
from beam_dp.mechanisms.smalldb import smalldbg
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import PrivacyUnit
from beam_dp.queries import LinearQuery
from beam_dp.transforms import arguments
from beam_dp.transforms import shell
from beam_dp.transforms.growing_database import GROWING_DOCS
from beam_dp.transforms.growing_database import GROWING_HINTS
from beam_dp.transforms.growing_database import GrowingDatabaseTransform

__all__ = ['SmallDBGQueries']

SMALLDBG_DOCS = {
    **GROWING_DOCS,
    'queries': 'the query class ℱ: k ≥ 2 distinct ``LinearQuery`` over the domain (N ≥ 2; '
               'weights multiples of 2^-16). Accuracy '
               'is guaranteed for these queries; any other query over the domain is answered '
               'from the synthetic database too (post-processing, no bound).',
    'beta': 'the failure probability of the whole stream (Σ β_i = β).',
    'lazy': 'False (default): the box runs at each epoch start t_i; True: at the first query '
            'of an epoch, on the current snapshot.',
    'max_candidates': 'the cap on the number of synthetic databases C(N+m−1, m) SmallDB '
                      'enumerates (default 100,000, at most 2,000,000): above it the '
                      'construction is refused (SmallDB is exponential in the domain).',
}


class _SmallDBGBase(GrowingDatabaseTransform):
    """The implementation (``SmallDBGQueries`` is its public signature)."""

    def __init__(self, *, queries: Sequence[LinearQuery], budget: PrivacyBudget, beta: float,
                 n: int, domain_size: int, domain_fn: Callable[[Any], int], start, step, end=None,
                 allowed_lateness=0, lazy: bool = False, max_candidates: int = MAX_CANDIDATES,
                 privacy_unit: PrivacyUnit = EventLevel(),
                 data_key_fn: Optional[Callable] = None, query_key_fn: Optional[Callable] = None,
                 accountant: Optional[BudgetAccountant] = None, noise_key: Optional[str] = None,
                 debug_metrics: bool = False, testing_seed: Optional[int] = None,
                 label: Optional[str] = None):
        # the shell only: this class builds its mechanism itself and calls ``_setup``
        shell.ShellTransform.__init__(self, label, accountant=accountant,
                                      testing_seed=testing_seed, noise_key=noise_key,
                                      debug_metrics=debug_metrics)
        with self.params():
            epsilon, delta = budget_epsilon_delta(self.owner, budget)
            mechanism = smalldbg(queries=queries, epsilon=epsilon, beta=beta, n=n, delta=delta,
                                 lazy=lazy, max_candidates=max_candidates)
            if domain_size != mechanism.domain_size:
                raise InvalidParamsError(
                    f'{self.owner}: domain_size={domain_size!r} but the queries are over a '
                    f'domain of size {mechanism.domain_size}.')
        self._mechanism = mechanism
        self._engine = smalldbg_engine(mechanism)
        self._domain_size = mechanism.domain_size
        self._setup(privacy_unit, domain_fn, data_key_fn, query_key_fn, start, step, end,
                    allowed_lateness)

    def display_data(self):
        m = self._mechanism
        return {'mechanism': self._engine.name, 'epsilon': str(m.epsilon),
                'delta': str(m.delta), 'n': str(m.n), 'domain_size': str(m.domain_size),
                'queries': str(m.mechanism.k), 'synthetic_size': str(m.mechanism.m),
                'privacy_unit': 'one record (swap-one; sizes public)', **self._clock.describe()}


@arguments.public(docs=SMALLDBG_DOCS, hints=GROWING_HINTS)
class SmallDBGQueries(_SmallDBGBase):
    """Answers a public query stream from SmallDB synthetic databases resampled at geometrically
    spaced sizes (SmallDBG, Theorem 9: BBScheduler with SmallDB), per key, on the public step
    clock.

    Apply it to ``(data, queries)`` as ``BBSchedulerQueries`` (same inputs, keys, step clock,
    ordering, refusals, dead letters and ``releases``). Each instance holds the histogram of
    its records and, once per epoch (at t_i = ⌈(1+γ)^i n⌉, or lazily), draws a synthetic
    database of m records from the exact exponential mechanism over all C(N+m−1, m) of them;
    every query of the epoch is answered from it.

    SmallDB is exponential in the domain: construction is refused (``InvalidParamsError``)
    when C(N+m−1, m) > ``max_candidates`` (default 100,000), m = ⌈ln k/α²⌉ with
    α = γ(1+γ)^{2/3} fixed by (N, k, ε, β, n) (docs/growing_databases.md, "SmallDBG").

    Privacy unit and neighbouring relation: one record (``EventLevel()``), swap-one: the size
    t of each key's database and the key of every record are PUBLIC (docs/privacy_model.md).
    User level is refused.

    Sensitivity and guarantee: each run is pure ε_i-DP (utility −max_f |f(x) − f(y)|,
    sensitivity 1/t); ``budget.delta`` = 0: Σ ε_i ≤ ε; δ > 0: CDP composition ≤ ε (Theorem 10);
    parallel composition across keys. ``privacy_cost()`` is spent on ``accountant`` at
    construction.

    Outputs: ``releases``: ``EpochReleaseRecord`` per run; ``answers``; ``refusals``
    (NOT_STARTED, BUDGET_EXHAUSTED, LATE, INVALID_QUERY); ``dead_letter``.

    Not guaranteed: accuracy, which is γ(1+γ)^{2/3} + γ/(1+γ) for every query of ``queries``
    at every time w.p. ≥ 1 − β (``mechanism.guaranteed_error()``); needs γ < 1 (refused
    otherwise).

    Cite: Cummings et al., "Differential Privacy for Growing Databases", NeurIPS 2018,
    Theorem 9; Blum, Ligett, Roth 2008; docs/growing_databases.md.

    Returns:
      ``GrowingDatabaseOutputs(answers, refusals, releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter or too many candidates. BudgetExceededError: if
        ``accountant`` cannot pay.
    """
