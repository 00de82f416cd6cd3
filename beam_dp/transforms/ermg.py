"""``ERMGQueries``: private ERM rerun at every size of a growing database (Cummings et al.,
Theorem 12: BBImprover with an ε-DP ERM box) answering a public query stream in Beam.

Same wiring as ``BBImproverQueries`` (``growing_database.py``): data and queries tagged, keyed,
processed in event-time order on the public step clock by the one release loop. The
per-instance logic is ``beam_dp.drivers.smalldbg.ermg_engine`` (a ``BBEngine``: one lazy run
per size, at the first query at that size) around ``beam_dp.mechanisms.ermg.ermg`` unchanged.
"""

from typing import Sequence

from beam_dp.drivers.smalldbg import ermg_engine
from beam_dp.mechanisms.ermg import ermg
from beam_dp.transforms import arguments
from beam_dp.transforms.growing_database import GROWING_DOCS
from beam_dp.transforms.growing_database import GROWING_HINTS
from beam_dp.transforms.growing_database import GrowingDatabaseTransform

__all__ = ['ERMGQueries']

ERMG_DOCS = {
    **GROWING_DOCS,
    'budget': '``PrivacyBudget(epsilon=ε, delta=δ)`` with ε in (0, 1) and δ in (0, 1/e] '
              '(BBImprover is (ε, δ)-DP only): the whole release of every instance.',
    'points': 'the public table of the N possible examples\' features (N×d, each row of L2 '
              'norm ≤ 1): the finite universe; a record is the index of its example.',
    'labels': 'the N labels in {0, 1} of the table\'s examples.',
    'reg': 'Λ > 0, the L2 regularisation (strong convexity) of the logistic risk.',
    'domain_fn': 'record → the index in [0, N) of its (features, label) example in the table.',
    'beta': 'the failure probability (β_t = β/(2t²) per run).',
    'c': 'the decay exponent c of ε_t = √c·ε/(3√ln(1/δ)·t^{1/2+c}) (default 0.1, ≤ n/2).',
}


class _ERMGBase(GrowingDatabaseTransform):
    """The implementation (``ERMGQueries`` is its public signature): the shared arguments and
    wiring are ``GrowingDatabaseTransform``'s; the domain is the table (no ``domain_size``)."""

    def _build(self, epsilon, delta, domain_size):
        return ermg(epsilon=epsilon, delta=delta, **self._box_args)

    def _make_engine(self, mechanism):
        return ermg_engine(mechanism)

    def display_data(self):
        m = self.mechanism
        return self._display(dim=str(m.mechanism.dim), reg=str(m.mechanism.reg))


@arguments.public(docs=ERMG_DOCS, hints=GROWING_HINTS, drop=('domain_size', 'period'))
class ERMGQueries(_ERMGBase):
    """Answers a public query stream from a private logistic-regression model refit at every new
    size of a growing database (ERMG, Theorem 12: BBImprover with an ε-DP ERM box), per key, on
    the public step clock.

    Apply it to ``(data, queries)`` as ``BBImproverQueries``. The universe is a PUBLIC table
    of N labelled examples (``points``, ``labels``); a record is the index of its example
    (``domain_fn``). At the first query at a new size t the instance fits the L2-regularised
    logistic risk on its t records and releases θ_t + L2-Laplace noise (output perturbation,
    ε_t-DP for sensitivity 2/(tΛ)); a ``LinearQuery`` f is answered with ⟨f, P_θ(y = 1 | x_i)⟩
    (a point query: the model's probability at that example; post-processing). Each run is an
    ``EpochReleaseRecord`` (``epoch`` = t).

    Privacy unit and neighbouring relation: one record (``EventLevel()``), swap-one: the size
    t of each key's database and the key of every record are PUBLIC (docs/privacy_model.md).
    User level is refused.

    Sensitivity and guarantee: ε_t = √c·ε/(3√ln(1/δ)·t^{1/2+c}), Σ ε_t² ≤ ε²/(9 ln(1/δ)),
    CDP composition ≤ ε: (ε, δ)-DP with ε < 1, δ ≤ 1/e; parallel composition across keys.

    Not guaranteed: accuracy: the excess regularised risk of run t is ≤ α_t =
    g(1/(ε_t t))² ln²(2t²/β), g = (1/4 + Λ)/2·(4(d+1)/Λ)², w.p. 1 − β/(2t²) — vacuous until t
    is very large (spec P14; docs/growing_databases.md, "ERMG").

    Cite: Cummings et al., "Differential Privacy for Growing Databases", NeurIPS 2018,
    Theorem 12; Chaudhuri, Monteleoni, Sarwate 2011; docs/growing_databases.md.

    Returns:
      ``GrowingDatabaseOutputs(answers, refusals, releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter. BudgetExceededError: if ``accountant`` cannot pay.
    """

    def __init__(self, *, points: Sequence, labels: Sequence, reg: float, beta: float, n: int,
                 c: float = 0.1, **kwargs):
        self._box_args = {'points': points, 'labels': labels, 'reg': reg, 'beta': beta,
                          'n': n, 'c': c}
        super().__init__(domain_size=None, **kwargs)
