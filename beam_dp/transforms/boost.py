"""Boost: cached DP answers to linear queries over event-time blocks (spec 002 §5).

``BoostQueries`` answers a stream of linear queries over windows of sealed time blocks of a data
stream, with Alg. 2 tree-structured PMW-Bypass + exact cache (or any preset of
``beam_dp.mechanisms.boost``). Every decision is the pure driver's
(``beam_dp.drivers.boost.BoostDriver``); this module is wiring, state and timers on the shell.

Wiring (labels are part of the update contract):

  data    | 'DataToGlobalWindow' | 'ExtractRows'   (dataset, ('row', micros, attributes));
                              malformed / unknown dataset / before start / after end → dead letter
  queries | 'QueriesToGlobalWindow' | 'ExtractQueries'  (dataset, ('query', micros, record));
                              malformed → dead letter, unknown dataset → 'wrong_dataset' refusal
  + 'DatasetSeeds'/'SeedAtStart'  one element per public dataset at ``start`` (empty datasets
                              still seal their blocks)
  | 'MergeSeeds'              typed Tuple[str, Any]: the state key coder is deterministic
  | 'AnswerQueries'           stateful DoFn per dataset (global window): rows and queries wait
                              in a Bag; ONE event-time timer at the next event (block seal
                              time = block end + allowed_lateness, or a query's timestamp); on
                              fire, events up to the fired time are applied in time order
                              (block seals before queries of the same instant, queries of one
                              instant in query-id order): the order depends on event times
                              only, never on bundling. A row for a sealed block is late
                              (``StepClock.late_reason``, the one late reason) and
                              dead-lettered (a sealed block never changes). Once the last block
                              (``end``) is sealed, or at the end of an unbounded input, the
                              queries still waiting are refused ('window_not_sealed').
  | 'MergeDeadLetters'

Noise address: ``rng.derive(label)``, then the driver's ('boost', dataset, query_id) and the
mechanism's (node, purpose); with ``noise_key=`` a re-run is bit-identical.
"""

import operator
import typing
from typing import Any, Callable, NamedTuple, Optional, Sequence

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.boost import budget_fields
from beam_dp.drivers.boost_events import BLOCKS
from beam_dp.drivers.boost_events import LEDGER
from beam_dp.drivers.boost_events import QUERY
from beam_dp.drivers.boost_events import REFUSALS
from beam_dp.drivers.boost_events import BoostLoop
from beam_dp.drivers.boost_events import ROW
from beam_dp.drivers.boost_events import parse_query
from beam_dp.drivers.clock import require_public_end
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostBlockSealed
from beam_dp.io.boost import BoostLedgerRow
from beam_dp.io.boost import BoostRefusal
from beam_dp.io.boost import refusal_answer
from beam_dp.io.queries import QueryAnswer
from beam_dp.mechanisms.boost import Readiness
from beam_dp.transforms import arguments
from beam_dp.transforms import boost_options
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.lateness import batch_input
from beam_dp.transforms.boost_entry import ExtractFn
from beam_dp.transforms.boost_options import BOOST_DOCS
from beam_dp.transforms.shell import DEAD_LETTER

__all__ = [
    'BOOST_DOCS',
    'BoostOutputs',
    'BoostQueries',
    'QUERY',
    'ROW',
    'parse_query',
]


class BoostOutputs(NamedTuple):
    """``answers``: ``BoostAnswerRecord`` (DP value, count estimate, path; replays flagged);
    ``refusals``: the one refusal record of the query families, a ``QueryAnswer`` with
    ``refusal`` set (a Boost reason in upper case, e.g. 'WINDOW_NOT_SEALED'; the dataset and
    window in ``message``: ``beam_dp.io.boost.refusal_answer``); ``ledger``: ``BoostLedgerRow`` per
    per-block charge; ``blocks``: ``BoostBlockSealed`` per sealed block (public size);
    ``dead_letter``: ``DeadLetter`` (malformed, unknown dataset, late, out-of-range rows and
    malformed queries: as private as the input)."""
    answers: beam.PCollection
    refusals: beam.PCollection
    ledger: beam.PCollection
    blocks: beam.PCollection
    dead_letter: beam.PCollection


@arguments.public(docs=BOOST_DOCS)
class BoostQueries(shell.ShellTransform):
    """Boost: DP answers to linear queries over windows of sealed event-time blocks, cached.

    Applied to ``(data, queries)`` (or ``{'data': ..., 'queries': ...}``): ``data`` rows (default
    ``(dataset, attributes)`` at their event time), ``queries`` ``BoostQueryRecord`` (or its Avro
    dict) at their event time. A query over blocks [a, b] (or the latest P sealed blocks) is
    answered once those blocks are sealed: from the exact cache (free), a ready histogram
    (PMW-Bypass R1, the sparse-vector test), or Laplace over the dyadic cover (R3), each
    charge taken atomically from the per-block filters. A replayed query id returns the stored
    answer (``replay=True``) at no charge. Public state bounds (docs/boost.md): at most
    ``cache_capacity`` exact-cache entries, windows starting at most ``retention_blocks``
    back ('window_expired'), query ids kept for ``replay_retention`` (seconds or Duration) of
    query event time ('replay_window_expired' beyond it); None = unbounded.

    Privacy unit and neighbours: event level, one row; replace-one within a block (block sizes
    are public). Guarantee: ε_G-DP (``budget.epsilon``) for everything released about each
    block (answers, refusals, ledger), by per-block filters (block composition; datasets are
    parallel); with ``noise='gaussian'``, ρ_G-zCDP per block (``budget.rho``, or the largest ρ
    within ``(budget.epsilon, budget.delta)``), the ledger in ρ or in ε at that δ. Not protected: the public arguments, block sizes (``blocks`` output), the query
    stream and its timing, the dead-letter output (raw rows).

    Shell arguments (``accountant``, ``noise_key``, ``debug_metrics``, ``testing_seed``,
    ``label``) as every transform (docs/privacy_model.md).

    Cite: Kostopoulou, Tholoniat, Cidon, Geambasu, Lécuyer, "Boost: Effective Caching in
    Differentially-Private Databases" (VLDB 2023), Alg. 1-3.

    Returns:
      ``BoostOutputs(answers, refusals, ledger, blocks, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter (or a bounded input without ``end``);
        BudgetExceededError: over budget.
    """

    def __init__(self, *, public_datasets: Sequence[str], shape: Sequence[int],
                 budget: PrivacyBudget, start, step, end=None, allowed_lateness=0,
                 preset: str = 'tree_pmw_bypass', alpha: float = 0.05, beta: float = 1e-3,
                 readiness: Optional[Readiness] = None, window_bound: int = 64,
                 cache_capacity: Optional[int] = None, retention_blocks: Optional[int] = None,
                 replay_retention=None, noise: str = 'laplace',
                 dataset_fn: Callable[[Any], Any] = operator.itemgetter(0),
                 attributes_fn: Callable[[Any], Any] = operator.itemgetter(1),
                 accountant: Optional[BudgetAccountant] = None, noise_key=None,
                 debug_metrics: bool = False, testing_seed: Optional[int] = None,
                 label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        owner = self.owner
        budget_args = budget_fields(owner, budget, noise)
        boost_options.check_arguments(owner, public_datasets, preset, dataset_fn, attributes_fn)
        self._clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                        allowed_lateness=allowed_lateness)
        self._datasets = sorted(public_datasets)
        self._fns = (dataset_fn, attributes_fn)
        with self.params():
            self._mechanism, self._drivers = boost_options.drivers(
                owner, self._datasets, shape, self._clock, budget_args, replay_retention,
                preset=preset, alpha=alpha, beta=beta, window_bound=window_bound,
                cache_capacity=cache_capacity, retention_blocks=retention_blocks,
                readiness=readiness)
        self.check_budget()

    def loop_driver(self) -> BoostLoop:
        """What the release loop runs per dataset (``beam_dp.testing.replay`` drives it too)."""
        return BoostLoop(dict(self._drivers), self._clock)

    def driver(self, dataset: str) -> BoostDriver:
        """The pure driver of ``dataset`` (``run_events`` with ``rng.derive(label)`` replays
        the transform)."""
        return self._drivers[dataset]

    @property
    def clock(self):
        return self._clock

    def privacy_costs(self):
        return [(self.label, self._mechanism.privacy_cost())]

    def expand(self, inputs):
        data, queries = (inputs['data'], inputs['queries']) if isinstance(inputs, dict) \
            else inputs
        require_public_end(self.owner, bool(data.is_bounded and queries.is_bounded),
                           self._clock)
        noise_label = self.spend_budget((data, queries))
        label, clock = self.label, self._clock
        any_driver = self._drivers[self._datasets[0]]
        extracted = {}
        for kind, pcoll, name in ((ROW, data, 'Data'), (QUERY, queries, 'Queries')):
            extracted[kind] = (
                pcoll
                | f'{name}ToGlobalWindow' >> beam.WindowInto(GlobalWindows())
                | f'Extract{"Rows" if kind == ROW else name}' >> beam.ParDo(ExtractFn(
                    kind, label, any_driver, self._fns, self._datasets, clock,
                    keep_records=not batch_input(pcoll))).with_outputs(
                        DEAD_LETTER, REFUSALS, main='valid'))
        seeds = shell.seeds_at_start(data.pipeline, self._datasets, clock.start_micros,
                                     create_label='DatasetSeeds', key_type=str)
        merged = (extracted[ROW].valid, extracted[QUERY].valid, seeds) | 'MergeSeeds' >> \
            beam.Flatten().with_output_types(typing.Tuple[str, typing.Any])
        answered = merged | 'AnswerQueries' >> beam.ParDo(release_loop.buffered_loop(
            self.loop_driver(), label, self.rng, cell='driver_state', timer='wake',
            noise_label=noise_label)).with_outputs(
                DEAD_LETTER, REFUSALS, LEDGER, BLOCKS, main='answers')
        answered.answers.element_type = BoostAnswerRecord
        refusals = ((answered[REFUSALS], extracted[QUERY][REFUSALS]) | 'MergeRefusals' >>
                    beam.Flatten().with_output_types(BoostRefusal)
                    | 'RefusalsAsAnswers' >> beam.Map(
                        lambda r, at=beam.DoFn.TimestampParam: refusal_answer(r, at.micros)
                    ).with_output_types(QueryAnswer))
        answered[LEDGER].element_type = BoostLedgerRow
        answered[BLOCKS].element_type = BoostBlockSealed
        dead = shell.merge_dead_letters([extracted[ROW][DEAD_LETTER],
                                         extracted[QUERY][DEAD_LETTER], answered[DEAD_LETTER]],
                                        self.debug_metrics, label)
        return BoostOutputs(answered.answers, refusals, answered[LEDGER], answered[BLOCKS],
                            dead)
