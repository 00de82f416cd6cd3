"""Continual and sliding-window private ERM on a stream (Watson et al. 2022; spec 003 §8).

``ContinualERM`` (Alg 4 with its Alg 2 prefix bases; Alg 8 with ``sampling``; DP-FTRL on a
continual counter with ``algorithm='dp_ftrl'``) and
``SlidingWindowERM`` (Alg 5 PSWERM) release noised models of a stream of labelled feature
vectors. Every decision is the pure driver's (``beam_dp.drivers.erm.ERMStreamDriver``); this
module is wiring on the shared shell and the release loop (docs/erm.md).

Wiring (labels are part of the update contract):

  records
    | 'GlobalWindow'        re-window (timestamps kept; blocks are the StepClock's steps)
    | 'ExtractAndValidate'  (stream, (block, features, label)), ``erm_entry.py``; malformed /
                            unknown stream /
                            before start / after end → dead letter (the driver's reasons)
    + 'StreamSeeds'/'SeedAtStart'  one element per public stream at ``start``: every stream
                            releases from block 0, with or without data
    | 'MergeSeeds'          typed Tuple[str, Any]: the state key coder is deterministic
    | 'TrainBlocks'         the release loop (``release_loop.buffered_loop``) per stream,
                            running ``drivers.erm.ERMLoop``: pending ``BlockRecord``s in its
                            bag, the ``StreamState`` in its cell, ONE event-time timer at the
                            release time of the next block; on fire the blocks are closed in
                            index order (empty blocks included: padded to n_max), late
                            records (block already closed) dead-lettered
    | 'MergeDeadLetters'

Noise address: ``rng.derive(label)``, then the driver's ('erm', stream), ('subsample', b) and
('job', release id) (DP-FTRL: ('dp_ftrl', b)); with ``noise_key=`` a re-fired timer releases bit-identical models.
"""

import operator
from typing import Any, Callable, NamedTuple, Optional, Sequence

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import require_public_end
from beam_dp.drivers.erm import LEDGER
from beam_dp.drivers.erm import ERMLoop
from beam_dp.drivers.erm import ERMStreamDriver
from beam_dp.io.erm import ERMLedgerRow
from beam_dp.io.erm import ModelRelease
from beam_dp.mechanisms.erm import SlidingWindowChain
from beam_dp.transforms import arguments
from beam_dp.transforms import erm_options
from beam_dp.transforms import release_loop
from beam_dp.transforms import shell
from beam_dp.transforms.lateness import batch_input
from beam_dp.transforms.erm_entry import ExtractFn
from beam_dp.transforms.erm_options import ERM_DOCS
from beam_dp.transforms.erm_options import ERM_GUARANTEE
from beam_dp.transforms.erm_options import check_unwindowed
from beam_dp.transforms.shell import DEAD_LETTER

__all__ = [
    'ContinualERM',
    'ERMOutputs',
    'ERM_DOCS',
    'SlidingWindowERM',
    'check_unwindowed',
]

class ERMOutputs(NamedTuple):
    """``releases``: ``ModelRelease`` records (every noised model, internal chain models with
    ``published=False``). ``ledger``: ``ERMLedgerRow`` per model (the audit trail of the per-record
    cost). ``dead_letter``: ``DeadLetter`` records (malformed, unknown stream, out of range,
    late)."""
    releases: beam.PCollection
    ledger: beam.PCollection
    dead_letter: beam.PCollection


class _ERMTransform(shell.ShellTransform):
    """Shared implementation of the ERM transforms (every argument of the family); the public
    classes build ``self._schedule`` and end with ``self._finish()``."""

    def __init__(self, *, start, step, budget: PrivacyBudget, public_streams: Sequence[str],
                 num_classes: int, feature_dim: int, records_per_block: int, mu: float,
                 update_mu: Optional[float] = None, end=None, allowed_lateness=0,
                 clip_norm: float = 1.0, loss: str = 'softmax',
                 passes: int = 10, batch_size: int = 1, fit_intercept: bool = True,
                 stream_fn: Callable[[Any], Any] = operator.itemgetter(0),
                 features_fn: Callable[[Any], Any] = operator.itemgetter(1),
                 label_fn: Callable[[Any], Any] = operator.itemgetter(2),
                 reproduce_paper: bool = False, accountant: Optional[BudgetAccountant] = None,
                 noise_key: Optional[str] = None, debug_metrics: bool = False,
                 testing_seed: Optional[int] = None, label: Optional[str] = None):
        super().__init__(label, accountant=accountant, testing_seed=testing_seed,
                         noise_key=noise_key, debug_metrics=debug_metrics)
        owner = self.owner
        erm_options.check_arguments(owner, budget, public_streams, stream_fn, features_fn,
                                    label_fn)
        self._clock = shell.parse_clock(owner, start=start, step=step, end=end,
                                        allowed_lateness=allowed_lateness)
        self._budget = budget
        self._streams = list(public_streams)
        self._fns = (stream_fn, features_fn, label_fn)
        with self.params():
            self._psgd, self._update_psgd = erm_options.optimisers(
                owner, loss, num_classes, clip_norm, mu, update_mu, passes, batch_size,
                reproduce_paper)
            self._shape = (records_per_block, feature_dim, fit_intercept)

    def _finish(self, ftrl: Optional[tuple] = None) -> None:
        """Builds the mechanism: ``ERMRelease`` of ``self._schedule``, or with ``ftrl`` =
        (learning_rate, grid_bits, counter) a ``DPFTRL``."""
        with self.params():
            self._driver = erm_options.stream_driver(
                self.owner, self._shape, self._schedule, self._psgd, self._update_psgd,
                self._budget, self._clock, ftrl)
            self._driver.mechanism.privacy_cost()
        self.check_budget()

    @property
    def driver(self) -> ERMStreamDriver:
        """The pure per-stream driver this transform runs (its ``loop_driver()`` under
        ``beam_dp.testing.replay`` gives the job's releases)."""
        return self._driver

    def privacy_costs(self):
        return [(self.label, self._driver.mechanism.privacy_cost())]

    def display_data(self):
        return {'schedule': type(self._schedule or self._driver.mechanism).__name__,
                'budget': str(self._budget),
                'step_seconds': self._clock.step_micros / 1e6, 'streams': len(self._streams),
                'records_per_block': self._driver.mechanism.records_per_block,
                'reproduce_paper': self._psgd.reproduce_paper}

    def loop_driver(self) -> ERMLoop:
        """What the release loop runs per stream (``beam_dp.testing.replay`` drives it too)."""
        return ERMLoop(self._driver, float(self._budget.epsilon), self._psgd.loss.num_classes)

    def expand(self, records):
        check_unwindowed(self.owner, records)
        require_public_end(self.owner, records.is_bounded, self._clock)
        noise_label = self.spend_budget(records)
        label, clock = self.label, self._clock
        extracted = (
            records
            | 'GlobalWindow' >> beam.WindowInto(GlobalWindows())
            | 'ExtractAndValidate' >> beam.ParDo(ExtractFn(
                label, self._driver, self._fns, self._streams,
                keep_records=not batch_input(records))).with_outputs(
                    DEAD_LETTER, main='valid'))
        seeds = shell.seeds_at_start(records.pipeline, self._streams, clock.start_micros,
                                     create_label='StreamSeeds', key_type=str)
        inputs = shell.merge_seeds(extracted.valid, seeds, key_type=str)
        trained = inputs | 'TrainBlocks' >> beam.ParDo(release_loop.buffered_loop(
            self.loop_driver(), label, self.rng, cell='stream_state', noise_label=noise_label)
        ).with_outputs(DEAD_LETTER, LEDGER, main='releases')
        releases, ledger = trained.releases, trained[LEDGER]
        releases.element_type = ModelRelease
        ledger.element_type = ERMLedgerRow
        return ERMOutputs(releases, ledger, shell.merge_dead_letters(
            [extracted[DEAD_LETTER], trained[DEAD_LETTER]], self.debug_metrics, label))


@arguments.public(docs=ERM_DOCS)
class ContinualERM(_ERMTransform):
    __doc__ = """Continual release of a private ERM model of all history (Alg 4 with Alg 2 bases,
    or DP-FTRL with ``algorithm='dp_ftrl'``).

    At block t = 2^k·B a base model is trained on the prefix; between bases PBERM updates
    (regularised toward *released* models only, trap T4) are released after every block, the
    first after B = ``blocks_per_base`` blocks. ε is split ``base_fraction`` : rest (trap T6).

    ``algorithm='dp_ftrl'`` (``beam_dp.mechanisms.erm.DPFTRL``): one published model per block
    from block 0. Each block's clipped records' gradients at the current released model, rounded
    to the grid 2^-``grid_bits`` and summed exactly, are one step of a pure-ε continual counter
    (``counter``; 'auto' = ``select_counter`` for the number of blocks from ``start`` to
    ``end``); the model is w = −S/(μN + 1/η) of the counter's noisy prefix sum S, N = (t+1)·n_max
    nominal records, μ = ``mu``, η = ``learning_rate``: post-processing of the counter. Same
    blocks, subsampling, padding, late records, refused windowing and outputs; a release has
    algo 'dp_ftrl', kind 'prefix', level 0, no centre, block range [t, t+1) (the block it added
    to the counter, charged ε in the ledger; the model depends on blocks 0..t) and noise_scale
    the std of one weight's noise. benchmarks/erm: the more accurate on stationary streams.

    ``algorithm='alg2'``: Alg 2 alone (``DyadicERMSchedule``), the multi-resolution release: at
    t = q·2^k·B blocks node (k, q) is trained from scratch on the last 2^k·B blocks and
    published (algo 'alg2', kind 'node', level k); a record pays Σ_k ε/2^{k+1} < ε.
    ``algorithm='independent_blocks'`` (``IndependentBlocks``, spec 003 §7.1, Fig. 4(d)): each
    block trained alone with the whole ε, one model per block (algo 'independent', kind
    'block'): the baseline the paper compares Alg 4 against.
""" + ERM_GUARANTEE + """
    Cite: Watson, Ghosh, Rozemberczki, Sarkar, "Continual and Sliding Window Release for
    Private Empirical Risk Minimization" (2022), Alg 4 (Alg 8 with ``sampling``), Thm 4;
    Kairouz et al., "Practical and Private (Deep) Learning without Sampling or Shuffling"
    (2021) for DP-FTRL.

    Returns:
      ``ERMOutputs(releases, ledger, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter, an argument of the other ``algorithm`` or input
        windowing; BudgetExceededError: over budget.
    """

    def __init__(self, *, blocks_per_base: Optional[int] = None, base_fraction: float = 0.5,
                 variant: str = 'pseudocode', max_level: Optional[int] = None,
                 sampling: bool = False, algorithm: str = 'alg4', learning_rate: float = 0.5,
                 grid_bits: int = 8, counter: str = 'auto', **kwargs):
        given = dict(kwargs, blocks_per_base=blocks_per_base, base_fraction=base_fraction,
                     variant=variant, max_level=max_level, sampling=sampling,
                     learning_rate=learning_rate, grid_bits=grid_bits, counter=counter)
        super().__init__(**kwargs)
        with self.params():
            erm_options.check_algorithm_arguments(self.owner, algorithm, given)
            if algorithm == 'dp_ftrl':
                self._schedule = None
                self._finish((learning_rate, grid_bits, counter))
                return
            self._schedule = erm_options.watson_schedule(
                algorithm, float(self._budget.epsilon), blocks_per_base, base_fraction,
                variant, max_level, sampling)
        self._finish()


@arguments.public(docs=ERM_DOCS)
class SlidingWindowERM(_ERMTransform):
    __doc__ = """Sliding-window private ERM (Alg 5, PSWERM): a model of the last 2^k − 1 blocks.

    The window is split into power-of-two buckets; a chain of fine-tuned PBERM models (each
    centred on a released model) is retrained as buckets expire, one published model per block
    once the first window is full. State is bounded (≤ window + 1 blocks of records). Do not
    window the input with ``SlidingWindows`` (refused): the cost would multiply.
""" + ERM_GUARANTEE + """
    Cite: Watson et al. (2022), Alg 5, Thm 7.

    Returns:
      ``ERMOutputs(releases, ledger, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter or input windowing; BudgetExceededError: over
        budget.
    """

    def __init__(self, *, levels: int, release_policy: str = 'chain_end',
                 sampling: bool = False, **kwargs):
        super().__init__(**kwargs)
        with self.params():
            self._schedule = SlidingWindowChain(levels=levels, epsilon=float(
                self._budget.epsilon), release_policy=release_policy, sampling=sampling)
        self._finish()

