"""The arguments of the ERM transforms (``ContinualERM``, ``SlidingWindowERM``): one description
per argument (``ERM_DOCS``, what ``arguments.public`` lists in each docstring; the guarantee
both docstrings state, ``ERM_GUARANTEE``), their checks (``check_unwindowed`` at expand) and the
construction of what they run: the optimisers (``optimisers``), the mechanism and its stream
driver (``stream_driver``), with ``ContinualERM(algorithm='dp_ftrl')`` (``ftrl_mechanism``):
the Alg 4 arguments it does not take are refused by name, its counter is chosen from public
parameters only."""

from typing import Optional, Tuple

import apache_beam as beam
from apache_beam.transforms.window import FixedWindows
from apache_beam.transforms.window import GlobalWindows
from apache_beam.transforms.window import Sessions
from apache_beam.transforms.window import SlidingWindows

from beam_dp import _validation as v
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.counter_choice import choose_counter
from beam_dp.drivers.erm import ERMStreamDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import BinaryLogistic
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm.baselines import IndependentBlocks
from beam_dp.mechanisms.erm.ftrl import DPFTRL
from beam_dp.mechanisms.erm.ftrl import check_grid_bits
from beam_dp.mechanisms.erm.ftrl import step_l1_sensitivity
from beam_dp.mechanisms.erm.losses import Loss
from beam_dp.mechanisms.erm.schedules import ContinualReleaseSchedule
from beam_dp.mechanisms.erm.schedules import DyadicERMSchedule
from beam_dp.transforms import arguments
from beam_dp.transforms import shell

__all__ = [
    'ALGORITHMS',
    'ERM_DOCS',
    'ERM_GUARANTEE',
    'FTRL_COUNTERS',
    'check_algorithm_arguments',
    'check_arguments',
    'check_unwindowed',
    'ftrl_mechanism',
    'optimisers',
    'stream_driver',
    'watson_schedule',
]

LOSSES = {'softmax': SoftmaxCrossEntropy, 'logistic': BinaryLogistic}

ALGORITHMS = ('alg4', 'dp_ftrl', 'alg2', 'independent_blocks')
#: The pure-ε counters DP-FTRL runs on ('per_step' and 'infinite_tree' need no horizon).
FTRL_COUNTERS = ('auto', 'per_step', 'balanced_tree', 'kary_tree', 'binary_tree',
                 'infinite_tree')
_UNBOUNDED = ('per_step', 'infinite_tree')
#: Arguments of one algorithm only, with their defaults (a non-default value for the other
#: algorithm is refused by name).
_ALG4_ONLY = {'blocks_per_base': None, 'base_fraction': 0.5, 'variant': 'pseudocode',
              'max_level': None, 'sampling': False, 'update_mu': None, 'passes': 10,
              'batch_size': 1, 'reproduce_paper': False}
_FTRL_ONLY = {'learning_rate': 0.5, 'grid_bits': 8, 'counter': 'auto'}
#: The arguments each algorithm takes (of ``_ALG4_ONLY`` ∪ ``_FTRL_ONLY``).
_TAKES = {
    'alg4': frozenset(_ALG4_ONLY),
    'dp_ftrl': frozenset(_FTRL_ONLY),
    'alg2': frozenset({'blocks_per_base', 'max_level', 'sampling', 'passes', 'batch_size',
                       'reproduce_paper'}),
    'independent_blocks': frozenset({'passes', 'batch_size', 'reproduce_paper'}),
}

#: Descriptions of every argument of the ERM transforms (``arguments.public``).
ERM_DOCS = {
    **arguments.COMMON_DOCS,
    'step': 'the length of a block (seconds, a Beam Duration or a timedelta): block b holds '
            'the records with event time in [start + b·step, start + (b+1)·step); it is closed '
            'and trained when the watermark passes its end plus ``allowed_lateness``.',
    'budget': '``PrivacyBudget(epsilon=ε)``: ε bounds every record\'s total cost over the whole '
              'unbounded release (pure ε-DP; zCDP and δ are refused).',
    'public_streams': 'the stream ids (strings), public: each stream is one independent model '
                      'sequence (parallel composition: a record belongs to one stream), '
                      'released at every block whether or not it has data.',
    'num_classes': 'K, the public label set {0, ..., K−1}; other labels are dead-lettered.',
    'feature_dim': 'the length of a feature vector (without the bias column).',
    'records_per_block': 'n_max, the public nominal size of a block: a block with more '
                         'records is uniformly subsampled to n_max (not first-come), one with '
                         'fewer is padded with zero-gradient slots; models are normalised by '
                         'n_max (spec 003 §8.2, trap T8).',
    'mu': 'strong convexity μ of the regulariser (μ/2)‖w − c‖² (the paper\'s λ is μ/2); '
          "with algorithm='dp_ftrl' the regulariser's μ per nominal record (the model is "
          '−S/(μN + 1/η); benchmarks/erm digits: 0.002).',
    'update_mu': 'μ of the models regularised toward a released centre (PBERM updates and '
                 'fine-tunes); default ``mu``. The noise scale follows (Δ₂ = 2L/(μ·n)), so the '
                 'cost is unchanged; a larger value keeps a one-block update close to its '
                 'centre (benchmarks/erm: digits, μ = 0.01, update_mu = 1).',
    'clip_norm': 'public clip norm C of a feature vector with its bias column (default 1): '
                 'sets the per-example Lipschitz constant L (softmax √2·C, logistic C).',
    'loss': "'softmax' (multinomial logistic, default) or 'logistic' (binary, K = 2).",
    'passes': 'permutation-SGD passes over the n_nominal slots of a model (default 10).',
    'batch_size': 'SGD mini-batch size (default 1; any size keeps Δ₂ = 2L/(μn)).',
    'fit_intercept': 'append a constant 1 to each feature vector before clipping (default True).',
    'stream_fn': 'record → stream id (default ``record[0]``).',
    'features_fn': 'record → feature vector (default ``record[1]``).',
    'label_fn': 'record → integer label (default ``record[2]``).',
    'blocks_per_base': 'B/b0: blocks per Alg 2 base model; the first release is after B blocks '
                       "(required with algorithm='alg4'; not taken by 'dp_ftrl').",
    'base_fraction': 'share of ε for the prefix bases (default ½; the rest pays the updates).',
    'variant': "'pseudocode' (small updates centred on the latest large update; default) or "
               "'chain' (each update centred on the previous release; App. C baseline).",
    'max_level': 'cap on the prefix doubling (bounded state: ≤ 2^{K+1}·B blocks kept); None '
                 'keeps all history (state grows, trap T9).',
    'sampling': 'the Appendix B sampling variant (Alg 8 / sliding fine-tune sampling).',
    'levels': 'k: the window is 2^k − 1 blocks (k ≥ 2; the paper\'s w = 7·w0 is k = 3).',
    'release_policy': "which chain model is published: 'chain_end' (paper), 'newest_bucket' or "
                      "'all_levels'; every chain model is output (``published`` says which).",
    'reproduce_paper': 'the paper\'s constants (γ = 10 > μ, batch 256, 500 iterations, '
                       'data-dependent Yedida L): NOT differentially private; every release and '
                       'ledger row says so in ``privacy``. Default False.',
    'algorithm': "'alg4' (default: Watson et al.'s continual release, Alg 4 with Alg 2 bases), "
                 "'alg2' (Alg 2 alone: the dyadic multi-resolution release, node (k, q) trained "
                 'from scratch on the last 2^k·B blocks at t = q·2^k·B and published, a record '
                 'pays Σ_k ε/2^{k+1} < ε; takes blocks_per_base, max_level, sampling), '
                 "'independent_blocks' (the baseline of spec 003 §7.1: every block trained "
                 'alone with the whole ε, one model per block) '
                 "or 'dp_ftrl' (DP-FTRL: each block's grid-rounded gradient sum at the current "
                 'released model is one step of a pure-ε continual counter; the model is '
                 '−S/(μN + 1/η) of its noisy prefix sum S, N = records so far; '
                 '``beam_dp.mechanisms.erm.DPFTRL``). benchmarks/erm: dp_ftrl is the more accurate '
                 'on stationary streams (digits ε = 100: 0.894 vs 0.786 final); neither forgets '
                 'under drift (use ``SlidingWindowERM``).',
    'learning_rate': "η of algorithm='dp_ftrl' (1/η regularises every model toward 0; default "
                     '0.5). ``mu`` is its strong convexity per nominal record.',
    'grid_bits': "k of algorithm='dp_ftrl': gradients are rounded to the grid 2^-k and summed "
                 'exactly (default 8); one record changes a block\'s sum by ≤ 2(L₁·2^k + D/2) '
                 'in L1, the counter\'s sensitivity.',
    'counter': "the counter of algorithm='dp_ftrl': 'auto' (default: "
               '``beam_dp.analysis.select_counter`` for the number of blocks, which needs '
               "``end``), 'per_step', 'balanced_tree', 'kary_tree', 'binary_tree' (known "
               "horizon) or 'infinite_tree' ('per_step' and 'infinite_tree' run without end).",
}


def check_algorithm_arguments(owner: str, algorithm: str, given: dict) -> None:
    """Refuses an argument the algorithm does not take (``given``: name → value as passed)."""
    if algorithm not in ALGORITHMS:
        raise InvalidParamsError(f'{owner}: algorithm must be one of {ALGORITHMS}, got '
                                 f'{algorithm!r}.')
    takes = _TAKES[algorithm]
    for name, default in {**_ALG4_ONLY, **_FTRL_ONLY}.items():
        if name not in takes and name in given and given[name] != default:
            applies = ' or '.join(repr(a) for a in ALGORITHMS if name in _TAKES[a])
            raise InvalidParamsError(f'{owner}: {name}={given[name]!r} applies to '
                                     f'algorithm={applies} only, not algorithm={algorithm!r}.')
    if algorithm in ('alg4', 'alg2') and given.get('blocks_per_base') is None:
        what = 'Alg 2 base model' if algorithm == 'alg4' else 'level-0 Alg 2 node'
        raise InvalidParamsError(f"{owner}: blocks_per_base (B/b0: blocks per {what}) is "
                                 f"required with algorithm={algorithm!r}.")


def watson_schedule(algorithm: str, epsilon: float, blocks_per_base: Optional[int],
                    base_fraction: float, variant: str, max_level: Optional[int],
                    sampling: bool):
    """The release schedule of a Watson et al. algorithm (spec 003): 'alg4' Alg 4 with its Alg 2
    prefix bases; 'alg2' Alg 2 alone (the dyadic multi-resolution release: node (k, q) on the
    last 2^k·B blocks at t = q·2^k·B, every node published; Alg 6 with ``sampling``);
    'independent_blocks' the baseline of §7.1 (each block trained alone with the whole ε)."""
    if algorithm == 'alg2':
        return DyadicERMSchedule(blocks_per_base=blocks_per_base, epsilon=epsilon,
                                 max_level=max_level, sampling=sampling)
    if algorithm == 'independent_blocks':
        return IndependentBlocks(epsilon=epsilon)
    return ContinualReleaseSchedule(blocks_per_base=blocks_per_base, epsilon=epsilon,
                                    base_fraction=base_fraction, variant=variant,
                                    max_level=max_level, sampling=sampling)


def ftrl_mechanism(owner: str, loss: Loss, records_per_block: int, feature_dim: int,
                   budget: PrivacyBudget, clock: StepClock, mu: float, learning_rate: float,
                   grid_bits: int, counter: str) -> DPFTRL:
    """The ``DPFTRL`` of one stream: horizon = the clock's number of blocks (None without an
    end), the counter ``select_counter``'s ('auto') or the named one, both at the step's L1."""
    if counter not in FTRL_COUNTERS:
        raise InvalidParamsError(f'{owner}: counter must be one of {FTRL_COUNTERS}, got '
                                 f'{counter!r}.')
    horizon: Optional[int] = None if clock.last_step is None else clock.last_step + 1
    if horizon is None and counter not in _UNBOUNDED:
        raise InvalidParamsError(
            f"{owner}: algorithm='dp_ftrl' with counter={counter!r} needs the number of blocks: "
            f"pass end=, or counter='infinite_tree' (or 'per_step') for an unbounded stream.")
    check_grid_bits(owner, grid_bits)
    explicit = None
    if counter != 'auto':
        explicit = choose_counter(counter, None, budget, horizon, None,
                                  step_l1_sensitivity(loss, feature_dim, grid_bits), None,
                                  loss.n_params(feature_dim))
    return DPFTRL(loss, records_per_block, feature_dim, float(budget.epsilon), horizon=horizon,
                  mu=mu, learning_rate=learning_rate, grid_bits=grid_bits, counter=explicit)


def check_arguments(owner: str, budget, public_streams, stream_fn, features_fn,
                    label_fn) -> None:
    """The budget (pure ε), the public stream ids (distinct strings) and the extraction
    callables."""
    if not isinstance(budget, PrivacyBudget) or budget.is_zcdp or budget.delta:
        raise InvalidParamsError(f'{owner}: budget must be a pure epsilon '
                                 f'PrivacyBudget(epsilon=...) (the L2-Laplace release is '
                                 f'ε-DP), got {budget!r}.')
    v.check_distinct_strings(owner, 'public_streams', public_streams)
    for name, fn in (('stream_fn', stream_fn), ('features_fn', features_fn),
                     ('label_fn', label_fn)):
        shell.check_callable(owner, name, fn)


def optimisers(owner: str, loss: str, num_classes: int, clip_norm: float, mu: float,
               update_mu: Optional[float], passes: int, batch_size: int,
               reproduce_paper: bool) -> Tuple[PSGD, PSGD]:
    """(the PSGD of base models, the PSGD of models regularised toward a released centre)."""
    if loss not in LOSSES:
        raise InvalidParamsError(f'{owner}: loss must be one of {sorted(LOSSES)}, got '
                                 f'{loss!r}.')
    if not isinstance(reproduce_paper, bool):
        raise InvalidParamsError(f'{owner}: reproduce_paper must be True or False, got '
                                 f'{reproduce_paper!r}.')
    if update_mu is not None:
        v.check_positive(owner, 'update_mu', update_mu)
    kind = LOSSES[loss]
    the_loss = (kind(clip_norm=clip_norm, num_classes=num_classes)
                if kind is SoftmaxCrossEntropy else kind(clip_norm=clip_norm))
    if num_classes != the_loss.num_classes:
        raise InvalidParamsError(f'{owner}: loss={loss!r} needs num_classes='
                                 f'{the_loss.num_classes}, got {num_classes!r}.')
    base, update = (
        (PSGD.paper(the_loss, paper_lambda=m / 2.0) if reproduce_paper else
         PSGD(the_loss, mu=m, passes=passes, batch_size=batch_size))
        for m in (mu, mu if update_mu is None else update_mu))
    return base, update


def stream_driver(owner: str, shape: tuple, schedule, psgd: PSGD, update_psgd: PSGD,
                  budget: PrivacyBudget, clock: StepClock,
                  ftrl: Optional[tuple] = None) -> ERMStreamDriver:
    """The per-stream driver of ``ERMRelease(schedule, ...)``, or with ``ftrl`` =
    (learning_rate, grid_bits, counter) of a ``DPFTRL``; ``shape`` = (records_per_block,
    feature_dim, fit_intercept)."""
    n_max, raw_dim, fit_intercept = shape
    if isinstance(raw_dim, bool) or not isinstance(raw_dim, int) or raw_dim < 1:
        raise InvalidParamsError(f'{owner}: feature_dim must be a positive int, '
                                 f'got {raw_dim!r}.')
    dim = raw_dim + int(bool(fit_intercept))
    if ftrl is not None:
        mechanism = ftrl_mechanism(owner, psgd.loss, n_max, dim, budget, clock, psgd.mu, *ftrl)
    else:
        mechanism = ERMRelease(schedule, psgd, n_max, dim,
                               update_psgd=None if update_psgd == psgd else update_psgd)
    return ERMStreamDriver(mechanism, raw_dim, clock, fit_intercept)


def check_unwindowed(owner: str, pcoll: beam.PCollection) -> None:
    """At expand: the input must be in the global window (the transform blocks event time).

    Raises:
      InvalidParamsError: for ``SlidingWindows`` (each record would be trained in size/period
        overlapping windows, each spending ε on it, spec 003 §8.2 / T10) and for any other
        windowing (``FixedWindows``, ``Sessions``, ...).
    """
    fn = pcoll.windowing.windowfn
    if isinstance(fn, GlobalWindows):
        return
    if isinstance(fn, SlidingWindows):
        raise InvalidParamsError(
            f'{owner}: the input is windowed with SlidingWindows: each record would fall in '
            f'size/period overlapping windows and each window would be trained from scratch, '
            f'spending the budget once per window (the cost would multiply; spec 003 §8.2). '
            f'Leave the input in the global window: SlidingWindowERM keeps a sliding window of '
            f'levels-many power-of-two buckets itself (Alg 5), at ε per record in total.')
    kind = ('Sessions (data-dependent boundaries)' if isinstance(fn, Sessions) else
            'FixedWindows' if isinstance(fn, FixedWindows) else type(fn).__name__)
    raise InvalidParamsError(
        f'{owner}: the input is windowed with {kind}; leave windowing to the transform: it '
        f'cuts event time into blocks itself (start=, step=) and keeps its state in the global '
        f'window. Remove the WindowInto (or re-window with beam.WindowInto(GlobalWindows())).')


#: The guarantee both ERM transforms state (their docstrings).
ERM_GUARANTEE = """
    Privacy unit and neighbours: event level, one record; substitution of one record (add/remove
    reduces to substitution with a padding slot, as every block is padded or uniformly
    subsampled to the public n_max). Streams are parallel (a record belongs to one stream).
    Guarantee: ε-DP for the whole unbounded sequence of models (and ledger rows) of every
    stream, ε = ``budget.epsilon`` (the per-block ledger checks it before any model is
    trained). Release times are data-independent: one timer per block on the public clock.
    Not protected: the public arguments; the dead-letter output (raw records); late records
    (dead-lettered, never trained). ``reproduce_paper=True`` is NOT DP and says so in every
    output record.
"""
