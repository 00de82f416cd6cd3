"""``WindowedPMWG``: PMWG (private multiplicative weights for growing databases) on two Beam
streams — data records and a public stream of linear queries — per key, on the public step
clock.

The wiring (tagging, lateness gate, the release loop) is in ``growing_database.py``; the
per-instance logic is ``PMWGEngine`` (``beam_dp.drivers.growing``) around
``beam_dp.mechanisms.PMWG`` unchanged, run by ``GrowingDriver`` on the one release loop.
"""

from typing import Optional

from beam_dp.drivers.growing import PMWGEngine
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.transforms import arguments
from beam_dp.transforms.growing_database import GROWING_DOCS
from beam_dp.transforms.growing_database import GROWING_HINTS
from beam_dp.transforms.growing_database import GrowingDatabaseTransform

__all__ = [
    'WindowedPMWG',
]


@arguments.public(docs=GROWING_DOCS, hints=GROWING_HINTS)
class WindowedPMWG(GrowingDatabaseTransform):
    """Answers a public stream of linear queries on a growing database with PMWG, per key, on
    the public step clock.

    Apply it to a pair ``(data, queries)`` (or a dict with keys 'data' and 'queries'), both in
    the global window:

    * ``data``: records, mapped to a domain element in [0, N) by ``domain_fn``;
    * ``queries``: ``(query_id, LinearQuery)`` pairs, ``LinearQuery`` objects with a
      ``query_id``, or Avro dicts of ``beam_dp.io.queries.QUERY_SCHEMA``.

    Instances: one PMWG per key (``data_key_fn`` / ``query_key_fn``; default a single
    database), growing for ever (the paper's setting); with ``period=``, one per key and fixed
    event-time period, its state cleared once the period is released. Beam windows are refused
    (the name is historical).

    Order and schedule: the records and queries of step k ([start + k·step, start +
    (k+1)·step)) are processed when the watermark passes the step's end plus
    ``allowed_lateness``, in event-time order — at equal timestamps records before queries,
    then by domain element / query id — so a query stamped τ is answered on exactly the
    records stamped ≤ τ, and released at the end of its step. A record of a released step is
    dead-lettered (late), a query of one refused 'LATE', decided on the public deadlines
    (docs/privacy_model.md, "Lateness"); records and queries before ``start`` or after ``end``
    are dead-lettered (the queries also refused INVALID_QUERY).

    Privacy unit and neighbouring relation: one record (``EventLevel()``), under the paper's
    swap-one model (two streams are neighbours if, from some time on, one record differs and
    the sizes stay equal). The number of records per key, and therefore the database size t at
    every query, is PUBLIC: PMWG's schedule (the uniform update, ξ_t, Δ_t = 1/t, the hard-query
    cap) reads the exact t, which answers also carry. Do not use this transform where the
    record count is private (add/remove neighbours) (docs/privacy_model.md); which key a record
    belongs to is public too. User level is refused (keep one record per user upstream).

    Sensitivity and guarantee: queries f ∈ [0, 1]^N (validated); every instance is
    ε-DP (``budget.delta`` = 0, Theorem 14/18) or (ε, δ)-DP (Theorem 17/24) for its records.
    Each record is in one instance, so the whole output is (ε, δ)-DP (parallel composition over
    keys); ``privacy_cost()`` is spent once on ``accountant`` at construction.

    Outputs: ``answers``: one ``QueryAnswer`` per answered query ('easy': the public estimate;
    'hard': a noisy answer, ``hard=True``); ``refusals``: one ``QueryAnswer`` with ``refusal``
    set per refused query — NOT_STARTED (t < n), HALTED (hard-query cap or ledger exhausted,
    for ever), LATE, INVALID_QUERY (also dead-lettered) — the one refusal shape of every query
    family (README, "Refusals"). Records whose ``domain_fn`` fails, and queries without an
    id, go to the dead-letter output only.

    Not guaranteed: accuracy, which needs α above Theorem 14/17's bound (vacuous below
    n ≈ 10⁷-10⁸ at ε = 1; measured: docs/growing_databases.md) and a query budget the
    mechanism does not enforce.

    Cite: Cummings, Krehbiel, Lai, Tantipongpipat, "Differential Privacy for Growing Databases",
    NeurIPS 2018, Alg 3; docs/growing_databases.md.

    Returns:
      ``GrowingDatabaseOutputs(answers, refusals, releases (empty), dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter (or, when applied, Beam windows or a bounded input
        without ``end``).
      BudgetExceededError: if ``accountant`` cannot pay for the cost.
    """

    def __init__(self, *, alpha: float, n: int, p: Optional[float] = None, **kwargs):
        self._pmwg_args = {'alpha': alpha, 'n': n, 'p': p}
        super().__init__(**kwargs)

    def _build(self, epsilon, delta, domain_size):
        return PMWG(epsilon=epsilon, delta=delta, domain_size=domain_size, **self._pmwg_args)

    def _make_engine(self, mechanism):
        return PMWGEngine(mechanism)

    def display_data(self):
        m = self.mechanism
        return {'mechanism': 'pmwg', 'epsilon': str(m.epsilon), 'delta': str(m.delta),
                'alpha': str(m.alpha), 'n': str(m.n), 'domain_size': str(m.domain_size),
                'privacy_unit': 'one record (swap-one; sizes public)', **self._clock.describe()}
