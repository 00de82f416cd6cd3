"""``BBSchedulerQueries`` / ``BBImproverQueries``: rerun a pluggable static ε-DP black box as a
database grows (Cummings et al., Algorithms 1-2), answering a public query stream in Beam.

Same wiring as ``WindowedPMWG`` (``growing_database.py``): data and queries tagged, keyed by
key, processed in event-time order on the public step clock by the one release loop. The per-instance logic is
``BBEngine`` (``beam_dp.drivers.growing``: it cuts record batches at epoch starts) around
``beam_dp.mechanisms.BBScheduler`` / ``BBImprover`` unchanged; every black-box run is emitted as
an ``EpochReleaseRecord`` (``beam_dp.io.epochs``; public metadata: epoch, t, ε_i, α_i,
ln(1/β_i)) on its schedule, and queries are answered from the current run (post-processing).
"""

from typing import Optional

from beam_dp.drivers.growing import BBEngine
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.transforms import arguments
from beam_dp.transforms.growing_database import GROWING_DOCS
from beam_dp.transforms.growing_database import GROWING_HINTS
from beam_dp.transforms.growing_database import GrowingDatabaseTransform

__all__ = [
    'BBImproverQueries',
    'BBSchedulerQueries',
]


class _BBQueries(GrowingDatabaseTransform):
    """What both transforms share: ``_box_args`` (set by the subclass) build the box."""
    _owner_name = ''

    def _build(self, epsilon, delta, domain_size):
        box = BBScheduler if self._owner_name == 'BBScheduler' else BBImprover
        return box(epsilon=epsilon, delta=delta, domain_size=domain_size, **self._box_args)

    def _make_engine(self, mechanism):
        box = getattr(mechanism.mechanism, 'name', 'black_box')
        return BBEngine(mechanism, f'{self._owner_name.lower()}/{box}')

    def display_data(self):
        return self._display()


@arguments.public(docs=GROWING_DOCS, hints=GROWING_HINTS)
class BBSchedulerQueries(_BBQueries):
    """Answers a public query stream from a static black box rerun at geometrically spaced sizes
    (BBScheduler, Alg 1), per key, on the public step clock.

    Apply it to ``(data, queries)`` as ``WindowedPMWG`` (same inputs, keys, step clock,
    ordering, refusals and dead letters). Each instance holds the histogram of its records and runs the box
    (``mechanism``, a ``StaticMechanism``: ``LaplaceQueryVector``, ``StaticPMWBox``,
    ``CallableBlackBox``) once per epoch: eagerly when its size reaches t_i = ⌈(1+γ)^i n⌉
    (exactly at that count whatever the bundling: record batches are cut at the epoch starts),
    or, with ``lazy=True``, at the first query of an epoch on the current snapshot. Each run is
    emitted as an ``EpochReleaseRecord``; queries are answered from the latest run
    (post-processing, no cost).

    Privacy unit and neighbouring relation: one record (``EventLevel()``), swap-one (the
    paper's model). The size t of each key's database is PUBLIC — the epoch schedule is
    triggered by it (docs/privacy_model.md) — and so is the key of every record. Do not use it
    where counts are private (add/remove neighbours). User level is refused (keep one record
    per user upstream).

    Sensitivity and guarantee: the box must be pure ε_i-DP for sensitivity 1/t.
    ``budget.delta`` = 0: Σ ε_i ≤ ε (basic composition); δ > 0: CDP composition ≤ ε
    (Theorem 10); parallel composition across keys. ``privacy_cost()`` is spent on ``accountant`` at
    construction.

    Outputs: ``releases``: ``EpochReleaseRecord`` per run; ``answers``: one ``QueryAnswer``
    per answered query; ``refusals``: one ``QueryAnswer`` with ``refusal`` set per refused query
    — NOT_STARTED (t < n), UNKNOWN_QUERY (the box cannot answer it), BUDGET_EXHAUSTED, LATE or
    INVALID_QUERY.

    Not guaranteed: accuracy: α_i + γ/(1+γ) per epoch w.p. 1 − β_i (Lemma 11); requires γ < 1.

    Cite: Cummings et al., "Differential Privacy for Growing Databases", NeurIPS 2018,
    Alg 1, Theorem 10, Lemma 11; docs/growing_databases.md.

    Returns:
      ``GrowingDatabaseOutputs(answers, refusals, releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter. BudgetExceededError: if ``accountant`` cannot pay.
    """
    _owner_name = 'BBScheduler'

    def __init__(self, *, mechanism, beta: float, n: int, p: Optional[float] = None,
                 g: Optional[float] = None, lazy: bool = False, **kwargs):
        self._box_args = {'mechanism': mechanism, 'beta': beta, 'n': n, 'p': p, 'g': g,
                          'lazy': lazy}
        super().__init__(**kwargs)


@arguments.public(docs=GROWING_DOCS, hints=GROWING_HINTS)
class BBImproverQueries(_BBQueries):
    """Answers a public query stream from a static black box rerun at every new size, with
    shrinking ε_t (BBImprover, Alg 2), per key, on the public step clock.

    As ``BBSchedulerQueries``, except: the box runs lazily, at most once per size t, at the first
    query at a new size (``EpochReleaseRecord.epoch`` is that t); ε_t = √c·ε/(3√ln(1/δ)
    t^{1/2+c}); (ε, δ)-DP only (``budget`` with ε < 1, δ ∈ (0, 1/e]). Eager runs (one per record) are not offered:
    they would cost a box run per record and their batching would depend on the runner.

    Privacy unit and relation: one record (``EventLevel()``; user level refused), swap-one; t
    is PUBLIC (docs/privacy_model.md).

    Cite: Cummings et al., "Differential Privacy for Growing Databases", NeurIPS 2018,
    Alg 2, Theorem 13; docs/growing_databases.md.

    Returns:
      ``GrowingDatabaseOutputs(answers, refusals, releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter. BudgetExceededError: if ``accountant`` cannot pay.
    """
    _owner_name = 'BBImprover'

    def __init__(self, *, mechanism, beta: float, n: int, c: float = 0.1,
                 p1: Optional[float] = None, p2: float = 0.0, lazy: bool = True, **kwargs):
        if lazy is not True:
            raise InvalidParamsError(f'{type(self).__name__}: only lazy=True is supported (one '
                                     f'run per size at query times), got lazy={lazy!r}.')
        self._box_args = {'mechanism': mechanism, 'beta': beta, 'n': n, 'c': c, 'p1': p1,
                          'p2': p2, 'lazy': True}
        super().__init__(**kwargs)
