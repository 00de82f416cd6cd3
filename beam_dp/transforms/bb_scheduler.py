"""``BBSchedulerQueries`` / ``BBImproverQueries``: rerun a pluggable static ε-DP black box as a
database grows (Cummings et al., Algorithms 1-2), answering a public query stream in Beam.

Same wiring as ``WindowedPMWG`` (``growing_database.py``): data and queries tagged, keyed by
(key, window), processed in event-time order by one stateful DoFn. The per-instance logic is
``BBEngine`` (``beam_dp.drivers.growing``: it cuts record batches at epoch starts) around
``beam_dp.mechanisms.BBScheduler`` / ``BBImprover`` unchanged; every black-box run is emitted as
an ``EpochReleaseRecord`` (``beam_dp.io.epochs``; public metadata: epoch, t, ε_i, α_i,
ln(1/β_i)) on its schedule, and queries are answered from the current run (post-processing).
"""

from typing import Any, Callable, Optional

from beam_dp.drivers.growing import BBEngine
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.transforms.growing_database import GrowingDatabaseTransform

__all__ = [
    'BBImproverQueries',
    'BBSchedulerQueries',
]


class _BBQueries(GrowingDatabaseTransform):
    _owner_name = ''

    def _init(self, make_mechanism, domain_fn, data_key_fn, query_key_fn, allowed_lateness,
              timer_granularity, start=None):
        with self.params():
            mechanism = make_mechanism()
        self._mechanism = mechanism
        box = getattr(mechanism.mechanism, 'name', 'black_box')
        self._engine = BBEngine(mechanism, f'{self._owner_name.lower()}/{box}')
        self._domain_size = mechanism.domain_size
        self._setup(domain_fn, data_key_fn, query_key_fn, allowed_lateness, timer_granularity,
                    start)

    def display_data(self):
        m = self._mechanism
        return {'mechanism': self._engine.name, 'epsilon': str(m.epsilon),
                'delta': str(m.delta), 'n': str(m.n), 'domain_size': str(m.domain_size),
                'privacy_unit': 'one record (swap-one; sizes public)'}


class BBSchedulerQueries(_BBQueries):
    """Answers a public query stream from a static black box rerun at geometrically spaced sizes
    (BBScheduler, Alg 1), per key and per window, in event time.

    Apply it to ``(data, queries)`` as ``WindowedPMWG`` (same inputs, keys, windows, ordering,
    refusals and dead letters). Each instance holds the histogram of its records and runs the box
    (``mechanism``, a ``StaticMechanism``: ``LaplaceQueryVector``, ``StaticPMWBox``,
    ``CallableBlackBox``) once per epoch: eagerly when its size reaches t_i = ⌈(1+γ)^i n⌉
    (exactly at that count whatever the bundling: record batches are cut at the epoch starts),
    or, with ``lazy=True``, at the first query of an epoch on the current snapshot. Each run is
    emitted as an ``EpochReleaseRecord``; queries are answered from the latest run
    (post-processing, no cost).

    Privacy unit and neighbouring relation: one record, swap-one (the paper's model). The size t
    of each (key, window) database is PUBLIC — the epoch schedule is triggered by it
    (docs/privacy_model.md) — and so are the key and window of every record. Do not use it
    where counts are private (add/remove neighbours). Event-level, or user-level with one
    record per user.

    Sensitivity and guarantee: the box must be pure ε_i-DP for sensitivity 1/t.
    δ = 0: Σ ε_i ≤ ε (basic composition); δ > 0: CDP composition ≤ ε (Theorem 10); parallel
    composition across keys and fixed windows. ``privacy_cost()`` is spent on ``accountant`` at
    construction.

    Releases: ``EpochReleaseRecord`` per run; one ``QueryAnswer`` per query: a value, or a
    refusal NOT_STARTED (t < n), UNKNOWN_QUERY (the box cannot answer it), BUDGET_EXHAUSTED,
    HALTED (window closed) or INVALID_QUERY.

    Not guaranteed: accuracy: α_i + γ/(1+γ) per epoch w.p. 1 − β_i (Lemma 11); requires γ < 1.

    Cite: Cummings et al., "Differential Privacy for Growing Databases", NeurIPS 2018,
    Alg 1, Theorem 10, Lemma 11; docs/growing_databases.md.

    Args:
      mechanism: the static black box. epsilon, beta, n, domain_size, delta, p, g, lazy:
        ``BBScheduler``'s parameters.
      domain_fn, data_key_fn, query_key_fn, accountant, allowed_lateness, timer_granularity,
        start, noise_key, debug_metrics, testing_seed, label: as ``WindowedPMWG``.

    Raises:
      InvalidParamsError: on a bad parameter. BudgetExceededError: if ``accountant`` cannot pay.
    """
    _owner_name = 'BBScheduler'

    def __init__(self, *, mechanism, epsilon: float, beta: float, n: int, domain_size: int,
                 domain_fn: Callable[[Any], int], delta: float = 0.0, p: Optional[float] = None,
                 g: Optional[float] = None, lazy: bool = False,
                 data_key_fn: Optional[Callable] = None, query_key_fn: Optional[Callable] = None,
                 accountant=None, allowed_lateness=0, timer_granularity=0, start=None,
                 noise_key: Optional[str] = None, debug_metrics: bool = False,
                 testing_seed: Optional[int] = None, label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        self._init(lambda: BBScheduler(mechanism=mechanism, epsilon=epsilon, beta=beta, n=n,
                                       domain_size=domain_size, delta=delta, p=p, g=g,
                                       lazy=lazy),
                   domain_fn, data_key_fn, query_key_fn, allowed_lateness, timer_granularity,
                   start)


class BBImproverQueries(_BBQueries):
    """Answers a public query stream from a static black box rerun at every new size, with
    shrinking ε_t (BBImprover, Alg 2), per key and per window, in event time.

    As ``BBSchedulerQueries``, except: the box runs lazily, at most once per size t, at the first
    query at a new size (``EpochReleaseRecord.epoch`` is that t); ε_t = √c·ε/(3√ln(1/δ)
    t^{1/2+c}); (ε, δ)-DP only (ε < 1, δ ∈ (0, 1/e]). Eager runs (one per record) are not offered:
    they would cost a box run per record and their batching would depend on the runner.

    Privacy unit and relation: one record, swap-one; t is PUBLIC (docs/privacy_model.md).

    Cite: Cummings et al., "Differential Privacy for Growing Databases", NeurIPS 2018,
    Alg 2, Theorem 13; docs/growing_databases.md.

    Args:
      mechanism: the static black box. epsilon, delta, beta, n, domain_size, c, p1, p2:
        ``BBImprover``'s parameters. lazy: only True (the default) is supported.
      domain_fn, data_key_fn, query_key_fn, accountant, allowed_lateness, timer_granularity,
        start, noise_key, debug_metrics, testing_seed, label: as ``WindowedPMWG``.

    Raises:
      InvalidParamsError: on a bad parameter. BudgetExceededError: if ``accountant`` cannot pay.
    """
    _owner_name = 'BBImprover'

    def __init__(self, *, mechanism, epsilon: float, delta: float, beta: float, n: int,
                 domain_size: int, domain_fn: Callable[[Any], int], c: float = 0.1,
                 p1: Optional[float] = None, p2: float = 0.0,
                 data_key_fn: Optional[Callable] = None, query_key_fn: Optional[Callable] = None,
                 accountant=None, allowed_lateness=0, timer_granularity=0, start=None,
                 noise_key: Optional[str] = None, debug_metrics: bool = False,
                 testing_seed: Optional[int] = None, label: Optional[str] = None,
                 lazy: bool = True):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        if lazy is not True:
            raise InvalidParamsError(f'{self.owner}: only lazy=True is supported (one run per '
                                     f'size at query times), got lazy={lazy!r}.')
        self._init(lambda: BBImprover(mechanism=mechanism, epsilon=epsilon, delta=delta,
                                      beta=beta, n=n, domain_size=domain_size, c=c, p1=p1, p2=p2,
                                      lazy=True),
                   domain_fn, data_key_fn, query_key_fn, allowed_lateness, timer_granularity,
                   start)
