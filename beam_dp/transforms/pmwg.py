"""``WindowedPMWG``: PMWG (private multiplicative weights for growing databases) on two Beam
streams — data records and a public stream of linear queries — per key and per window.

The wiring (tagging, timers, dead letters) is in ``growing_database.py``; the per-instance logic
is ``PMWGEngine`` (``beam_dp.drivers.growing``) around ``beam_dp.mechanisms.PMWG`` unchanged:
the DoFn stores its ``PMWGState``, the driver calls ``add_data`` and ``answer``.
"""

from typing import Any, Callable, Optional

from beam_dp.drivers.growing import PMWGEngine
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.transforms.growing_database import GrowingDatabaseTransform

__all__ = [
    'WindowedPMWG',
]


class WindowedPMWG(GrowingDatabaseTransform):
    """Answers a public stream of linear queries on a growing database with PMWG, per key and
    per window, in event time.

    Apply it to a pair ``(data, queries)`` (or a dict with keys 'data' and 'queries'):

    * ``data``: records, mapped to a domain element in [0, N) by ``domain_fn``;
    * ``queries``: ``(query_id, LinearQuery)`` pairs, ``LinearQuery`` objects with a
      ``query_id``, or Avro dicts of ``beam_dp.io.queries.QUERY_SCHEMA``.

    Instances: one PMWG per (key, window). ``data_key_fn`` / ``query_key_fn`` give the key (one
    key = one database; default: a single database). In the global window the database grows
    for ever (the paper's setting). With ``FixedWindows`` (applied to both inputs before this
    transform) every window runs an independent instance, started empty, finalised when the
    watermark passes its end plus ``allowed_lateness``; later queries of that window are refused
    (HALTED, "window closed") and later records dead-lettered. Sliding windows are refused with
    an error (a record would be in size/period instances, each spending the full budget on it),
    as are sessions (data-dependent boundaries).

    Order: each instance processes its records and queries in event-time order when the
    watermark passes them — at equal timestamps records before queries, then by domain element /
    query id — so a query stamped τ is answered on exactly the records stamped ≤ τ (late records
    count in a later t). The answer is released when the query is processed: the query's
    arrival time is public (docs/privacy_model.md).

    Privacy unit and neighbouring relation: one record, under the paper's swap-one model (two
    streams are neighbours if, from some time on, one record differs and the sizes stay equal).
    The number of records per key and window, and therefore the database size t at every query,
    is PUBLIC: PMWG's schedule (the uniform update, ξ_t, Δ_t = 1/t, the hard-query cap) reads the
    exact t, which answers also carry. Do not use this transform where the record count is
    private (add/remove neighbours) (docs/privacy_model.md); which key and window a record
    belongs to is public too. Event-level, or user-level if each user adds one record.

    Sensitivity and guarantee: queries f ∈ [0, 1]^N (validated); every instance is
    ε-DP (δ = 0, Theorem 14/18) or (ε, δ)-DP (Theorem 17/24) for its records. Each record is in
    one instance, so the whole output is (ε, δ)-DP (parallel composition over keys and fixed
    windows); ``privacy_cost()`` is spent once on ``accountant`` at construction.

    Releases: one ``QueryAnswer`` per query with an id: a value ('easy': the public estimate;
    'hard': a noisy answer, ``hard=True``), or a refusal with reason — NOT_STARTED (t < n),
    HALTED (hard-query cap or ledger exhausted, for ever; or window closed), INVALID_QUERY (also
    dead-lettered). Records whose ``domain_fn`` fails, and queries without an id, go to the
    dead-letter output only.

    Not guaranteed: accuracy, which needs α above Theorem 14/17's bound (vacuous below
    n ≈ 10⁷-10⁸ at ε = 1; measured: docs/growing_databases.md) and a query budget the
    mechanism does not enforce.

    Cite: Cummings, Krehbiel, Lai, Tantipongpipat, "Differential Privacy for Growing Databases",
    NeurIPS 2018, Alg 3; docs/growing_databases.md.

    Args:
      epsilon, delta, alpha, n, domain_size, p: ``PMWG``'s parameters (validated by it).
      domain_fn: record → domain element index in [0, domain_size).
      data_key_fn, query_key_fn: record / query → key (None: one database).
      accountant: a ``BudgetAccountant`` to spend the cost from (raises at construction).
      allowed_lateness: seconds a fixed window's instance waits after the window's end.
      timer_granularity: seconds; 0 processes every distinct timestamp (exact latency), larger
        values batch processing to the end of each granule (same order and answers, fewer
        timers).
      start: with fixed windows on an unbounded input, the public start of the windows (seconds
        since the epoch): a lateness gate then decides on the public deadlines that a record
        is late, never another record of its window (docs/privacy_model.md, "Lateness"), and
        records of windows before it are dead-lettered. None (default): no gate.
      noise_key, debug_metrics, testing_seed: as ``ContinualCountPerKey`` (a reference to the
        secret noise key: replayed answers are bit-identical; SENSITIVE exact dead-letter
        counts; seeds for tests only).
      label: the transform's label (also its ledger label and noise address).

    Returns:
      ``GrowingDatabaseOutputs(answers, releases (empty), dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter (or, when applied, unsupported windowing).
      BudgetExceededError: if ``accountant`` cannot pay for the cost.
    """

    def __init__(self, *, epsilon: float, alpha: float, n: int, domain_size: int,
                 domain_fn: Callable[[Any], int], delta: float = 0.0, p: Optional[float] = None,
                 data_key_fn: Optional[Callable] = None, query_key_fn: Optional[Callable] = None,
                 accountant=None, allowed_lateness=0, timer_granularity=0, start=None,
                 noise_key: Optional[str] = None, debug_metrics: bool = False,
                 testing_seed: Optional[int] = None, label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        with self.params():
            self._mechanism = PMWG(epsilon=epsilon, alpha=alpha, n=n, domain_size=domain_size,
                                   delta=delta, p=p)
        self._engine = PMWGEngine(self._mechanism)
        self._domain_size = self._mechanism.domain_size
        self._setup(domain_fn, data_key_fn, query_key_fn, allowed_lateness, timer_granularity,
                    start)

    def display_data(self):
        m = self._mechanism
        return {'mechanism': 'pmwg', 'epsilon': str(m.epsilon), 'delta': str(m.delta),
                'alpha': str(m.alpha), 'n': str(m.n), 'domain_size': str(m.domain_size),
                'privacy_unit': 'one record (swap-one; sizes public)'}
