"""``SmallDBGQueries``: SmallDB rerun on a growing database (Cummings et al., Theorem 9) answering a
public query stream in Beam.

Same wiring as ``BBSchedulerQueries`` (``growing_database.py``): data and queries tagged, keyed,
processed in event-time order on the public step clock by the one release loop. The
per-instance logic is ``beam_dp.drivers.smalldbg.smalldbg_engine`` (a ``BBEngine``: record
batches cut at epoch starts) around ``beam_dp.mechanisms.smalldb.smalldbg`` unchanged.
"""

from typing import Sequence

from beam_dp.drivers.smalldbg import smalldbg_engine
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.smalldb import MAX_CANDIDATES
from beam_dp.mechanisms.smalldb import smalldbg
from beam_dp.queries import LinearQuery
from beam_dp.transforms import arguments
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
    """The implementation (``SmallDBGQueries`` is its public signature): the shared arguments
    and wiring are ``GrowingDatabaseTransform``'s."""

    def _build(self, epsilon, delta, domain_size):
        mechanism = smalldbg(epsilon=epsilon, delta=delta, **self._box_args)
        if domain_size != mechanism.domain_size:
            raise InvalidParamsError(
                f'{self.owner}: domain_size={domain_size!r} but the queries are over a '
                f'domain of size {mechanism.domain_size}.')
        return mechanism

    def _make_engine(self, mechanism):
        return smalldbg_engine(mechanism)

    def display_data(self):
        m = self.mechanism
        return self._display(queries=str(m.mechanism.k), synthetic_size=str(m.mechanism.m))


@arguments.public(docs=SMALLDBG_DOCS, hints=GROWING_HINTS, drop=('period',))
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

    def __init__(self, *, queries: Sequence[LinearQuery], beta: float, n: int,
                 lazy: bool = False, max_candidates: int = MAX_CANDIDATES, **kwargs):
        self._box_args = {'queries': queries, 'beta': beta, 'n': n, 'lazy': lazy,
                          'max_candidates': max_candidates}
        super().__init__(**kwargs)
