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

from beam_dp import _validation as v
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.boost import budget_fields
from beam_dp.drivers.boost_events import BLOCKS
from beam_dp.drivers.boost_events import LEDGER
from beam_dp.drivers.boost_events import QUERY
from beam_dp.drivers.boost_events import REFUSALS
from beam_dp.drivers.boost_events import BoostItem
from beam_dp.drivers.boost_events import BoostLoop
from beam_dp.drivers.boost_events import ROW
from beam_dp.drivers.boost_events import parse_query
from beam_dp.drivers.clock import format_micros
from beam_dp.drivers.clock import require_public_end
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostBlockSealed
from beam_dp.io.boost import BoostLedgerRow
from beam_dp.io.boost import BoostRefusal
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset as boost_preset
from beam_dp.mechanisms.boost.presets import PRESETS
from beam_dp.transforms import arguments
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.lateness import batch_input
from beam_dp.transforms.shell import DEAD_LETTER

__all__ = [
    'BOOST_DOCS',
    'BoostOutputs',
    'BoostQueries',
    'QUERY',
    'ROW',
    'parse_query',
    'refuse_waiting',
    'run_events',
]


BOOST_DOCS = {
    **arguments.COMMON_DOCS,
    'public_datasets': 'the dataset ids (strings), public: one stateful key each (atomic '
                       'check-and-charge); a row or query of another dataset is refused.',
    'shape': 'the public attribute domain sizes (d_1, ..., d_m): a row\'s attributes are a tuple '
             'of ints with 0 ≤ x_a < d_a; the bins are their mixed radix (N = Π d_a).',
    'budget': '``PrivacyBudget(epsilon=ε_G)``: the capacity of every block\'s privacy filter '
              '(each row is in one block; block composition). Pure ε with Laplace noise; with '
              "``noise='gaussian'`` ``PrivacyBudget(rho=ρ_G)`` or ``(epsilon, delta > 0)`` "
              '(ρ_G = the largest ρ converting to it; the ledger then reports ε at that δ).',
    'noise': "'laplace' (default: pure ε-DP) or 'gaussian': the noisy answers get exact "
             'discrete Gaussian noise and every block has a ρ-zCDP filter (the sparse vector '
             'keeps Laplace noise, charged (3ε)²/2); not with preset vanilla_pmw.',
    'cache_capacity': 'at most this many exact-cache entries (≥ 2; None: unbounded).',
    'retention_blocks': 'windows may start at most this many blocks back (older ones are '
                        "refused 'window_expired' and their state dropped; None: never).",
    'replay_retention': 'query ids are kept for at least this long (seconds or Duration) of '
                        "query event time; older queries are refused 'replay_window_expired' "
                        '(None: for ever).',
    'step': 'the length of a time block (seconds, a Beam Duration or a timedelta): block b holds '
            'the rows with event time in [start + b·step, start + (b+1)·step); it is sealed '
            'when the watermark passes its end plus ``allowed_lateness`` (empty blocks too).',
    'preset': "the mechanism: 'tree_pmw_bypass' (Boost, Alg. 2; default), "
              "'tree_pmw_bypass_warm', 'pmw_bypass', or a baseline ('vanilla_pmw', 'laplace', "
              "'exact_cache', 'tree_exact_cache').",
    'alpha': 'the accuracy target α of every answer (a fraction of the window size; default 0.05).',
    'beta': 'the failure probability β of the α target (default 1e-3).',
    'readiness': 'the histogram readiness heuristic ``Readiness(c0, s0)`` (default the '
                 'preset\'s).',
    'window_bound': 'T = 2^m, the longest window in blocks (trees overlap every T blocks).',
    'dataset_fn': 'row → dataset id (default ``row[0]``).',
    'attributes_fn': 'row → attribute tuple (default ``row[1]``).',
}


class BoostOutputs(NamedTuple):
    """``answers``: ``BoostAnswerRecord`` (DP value, count estimate, path; replays flagged);
    ``refusals``: ``BoostRefusal`` with a public reason; ``ledger``: ``BoostLedgerRow`` per
    per-block charge; ``blocks``: ``BoostBlockSealed`` per sealed block (public size);
    ``dead_letter``: ``DeadLetter`` (malformed, unknown dataset, late, out-of-range rows and
    malformed queries: as private as the input)."""
    answers: beam.PCollection
    refusals: beam.PCollection
    ledger: beam.PCollection
    blocks: beam.PCollection
    dead_letter: beam.PCollection


class _ExtractFn(beam.DoFn):
    """Rows → (dataset, ('row', micros, attributes)); queries → (dataset, ('query', micros,
    record)); or a dead letter (a query of an unknown dataset: a refusal)."""

    def __init__(self, kind: str, label: str, driver: BoostDriver, fns, datasets, last_block,
                 keep_records: bool = False):
        self._kind = kind
        self._label = label
        self._driver = driver
        #: Rows: a 4th item, the input record's rendering, so a late row's dead letter holds
        #: it ('AnswerQueries' drops it before storing the row).
        self._keep = keep_records
        self._fns = fns
        self._datasets = frozenset(datasets)
        self._last_block = last_block

    def setup(self):
        self._empty = self._driver.init_state()

    def extract_row(self, record, micros: int):
        """(dataset, item); raises ``InvalidRecordError`` with the dead-letter reason."""
        dataset_fn, attributes_fn = self._fns
        dataset = shell.extract_key(dataset_fn, record)
        if not isinstance(dataset, str) or dataset not in self._datasets:
            raise InvalidRecordError(f'dataset {dataset!r:.80} is not in the public dataset set')
        try:
            attributes = tuple(attributes_fn(record))
        except Exception as e:  # pylint: disable=broad-except
            raise InvalidRecordError(f'attributes_fn raised {e!r}') from e
        state, rejected = self._driver.add_rows(self._empty, [(micros, attributes)])
        if rejected:
            raise InvalidRecordError(rejected[0].reason)
        ((block, _),) = state.open_blocks
        if self._last_block is not None and block > self._last_block:
            last = self._last_block
            raise InvalidRecordError(
                f'event time is after the last released step {last}: the record is at '
                f'{format_micros(micros)}, step {last} ends at '
                f'{format_micros(self._driver.block_end(last))}')
        return dataset, BoostItem(ROW, micros, tuple(int(x) for x in attributes))

    def process(self, element, timestamp=beam.DoFn.TimestampParam):
        micros = timestamp.micros
        stage = 'ExtractRows' if self._kind == ROW else 'ExtractQueries'
        try:
            if self._kind == ROW:
                dataset, item = self.extract_row(element, micros)
                if self._keep:
                    item += (shell.render_record(element),)
                yield dataset, item
                return
            query = parse_query(element)
        except InvalidRecordError as e:
            yield shell.dead_letter(self._label, stage, str(e), element, micros)
            return
        if query.dataset not in self._datasets:
            yield beam.pvalue.TaggedOutput(REFUSALS, BoostRefusal(
                query.dataset, query.query_id, 'wrong_dataset', query.first_block,
                query.last_block, False))
            return
        yield query.dataset, BoostItem(QUERY, micros, query)


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
        v.check_distinct_strings(owner, 'public_datasets', public_datasets)
        if preset not in PRESETS:
            raise InvalidParamsError(f'{owner}: preset must be one of {sorted(PRESETS)}, got '
                                     f'{preset!r}.')
        shell.check_callable(owner, 'dataset_fn', dataset_fn)
        shell.check_callable(owner, 'attributes_fn', attributes_fn)
        self._clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                        allowed_lateness=allowed_lateness)
        self._datasets = sorted(public_datasets)
        self._fns = (dataset_fn, attributes_fn)
        with self.params():
            if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)):
                raise InvalidParamsError(f'{owner}: shape must be a list of positive ints, got '
                                         f'{shape!r}.')
            n = 1
            for d in shape:
                n *= d if isinstance(d, int) and not isinstance(d, bool) and d > 0 else 0
            extra = {} if readiness is None else {'readiness': readiness}
            ledger_delta = budget_args.pop('ledger_delta', 0.0)
            mechanism = boost_preset(preset, max(n, 2), alpha=alpha, beta=beta,
                                     window_bound=window_bound, cache_capacity=cache_capacity,
                                     retention_blocks=retention_blocks, **budget_args, **extra)
            replay = None if replay_retention is None else shell.to_micros(
                owner, 'replay_retention', replay_retention, allow_zero=False, duration=True)
            # One driver per dataset, differing only in ``dataset`` (the DoFn re-keys it).
            self._drivers = {d: BoostDriver(d, tuple(shape), mechanism, self._clock.start_micros,
                                            self._clock.step_micros, replay, ledger_delta,
                                            self._clock.allowed_lateness_micros)
                             for d in self._datasets}
        self._mechanism = mechanism
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
                | f'Extract{"Rows" if kind == ROW else name}' >> beam.ParDo(_ExtractFn(
                    kind, label, any_driver, self._fns, self._datasets, clock.last_step,
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
        refusals = (answered[REFUSALS], extracted[QUERY][REFUSALS]) | 'MergeRefusals' >> \
            beam.Flatten().with_output_types(BoostRefusal)
        answered[LEDGER].element_type = BoostLedgerRow
        answered[BLOCKS].element_type = BoostBlockSealed
        dead = shell.merge_dead_letters([extracted[ROW][DEAD_LETTER],
                                         extracted[QUERY][DEAD_LETTER], answered[DEAD_LETTER]],
                                        self.debug_metrics, label)
        return BoostOutputs(answered.answers, refusals, answered[LEDGER], answered[BLOCKS],
                            dead)
