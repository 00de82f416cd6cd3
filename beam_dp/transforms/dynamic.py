"""Continual per-key counts over a fully-dynamic stream (insertions AND deletions with record ids).

Wiring, state and timers: ``SegmentedPerKey`` (labels 'GlobalWindow', 'ExtractAndValidate',
'GateLateRecords', 'KeySeeds', 'ReleaseSegments'); the per-key logic, including the live-id registry and the
validity rule that decides the sensitivity (docs/partitioning.md), is ``DynamicDriver``
(``beam_dp.drivers.dynamic``): an invalid update is dead-lettered but still COUNTED by the
partitioner.
"""

import numbers
from typing import Any, Callable, Optional, Sequence

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.dynamic import CONSTRUCTIONS
from beam_dp.drivers.dynamic import DynamicDriver
from beam_dp.drivers.dynamic import parse_update
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.plugin import LaplaceHistogram
from beam_dp.mechanisms.plugin import StaticPMW
from beam_dp.mechanisms.time_partition import PAPER_C_THETA
from beam_dp.transforms import arguments
from beam_dp.transforms import shell
from beam_dp.drivers.segmented import SegmentLoop
from beam_dp.transforms.segmented import SegmentedPerKey

__all__ = [
    'DynamicCountPerKey',
    'DynamicHistogramPerKey',
    'DynamicLinearQueriesPerKey',
]

STATIC_MECHANISMS = ('pmw', 'laplace_histogram')


def _default_update(record):
    return record[1], record[2]


@arguments.public(docs=arguments.SEGMENTED_DOCS)
class DynamicCountPerKey(SegmentedPerKey):
    """Continual per-key counts of the live records of an insert/delete stream.

    Each record is an update: ``update_fn(record)`` → (record_id, op) with op +1 / 'insert' or
    -1 / 'delete' (default ``(record[1], record[2])``); the count of a key at a step is the
    number of its inserted and not yet deleted record ids.

    Privacy unit and neighbours: one more update event (event level; Qiu & Yi, "Differential
    Privacy on Dynamic Data", §1.1), within
    streams whose updates are valid; covering a record's whole lifetime (insert + delete) costs
    2ε (run at ε/2). Invalid updates are dead-lettered but counted (see the module doc); in
    streams that contain them an extra update can change another update's validity, so the
    aggregate part degrades to group size 2.

    Guarantee: ε-DP with ``budget=PrivacyBudget(epsilon=ε)``:
      * ``construction='two_stream'`` (C6, default — recommended for counts, see the
        measured errors in docs/partitioning.md):
        insertions and deletions each run C5 with the full ε (parallel composition over the
        fixed split by update type); answer Â - B̂.
      * ``construction='fenwick'`` (C9, Qiu & Yi Theorem 11): one partitioner over all updates
        (ε_p) + the Fenwick interval tree of per-node deletion-only mechanisms (ε_tree); polylog
        worse for counting, meant for polynomial-error plug-ins.
    With ``keys=PrivateKeys(...)`` plus the selection's (ε_s, δ) (units = update events).

    Released: one ``Release`` per key at each segment close (``step`` = the close step); for C6
    a close of either stream; ``noise_stddev`` is C6's exact sd, NaN for C9. Nothing between.

    Not guaranteed: late updates (step already released, on the public schedule:
    'GateLateRecords' in ``segmented.py``) are dead-lettered, not counted.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter; BudgetExceededError: over budget.
    """

    _metric = 'count'
    _bin_count = 1

    def __init__(self, *, budget: PrivacyBudget, construction: str = 'two_stream',
                 update_fn: Callable[[Any], Any] = _default_update,
                 partition_fraction: float = 0.5, beta: float = 0.1,
                 c_theta: float = PAPER_C_THETA, max_segment_ticks: Optional[int] = None,
                 monotone: bool = False, **kwargs):
        super().__init__(budget=budget, **kwargs)
        owner = self.owner
        if construction not in CONSTRUCTIONS:
            raise InvalidParamsError(f"{owner}: construction must be one of 'two_stream', "
                                     f"'fenwick', got {construction!r}.")
        shell.check_callable(owner, 'update_fn', update_fn)
        self._construction = construction
        self._update_fn = update_fn
        with self.params():
            if construction == 'two_stream':
                # One extra, never released bin counts the rejected updates (the driver).
                self._mechanism = TwoStreamCounter(budget.epsilon, partition_fraction, beta,
                                                   c_theta, self._bin_count + 1,
                                                   max_segment_ticks, monotone)
            else:
                self._mechanism = FullyDynamicCounter(
                    budget.epsilon, partition_fraction, beta, c_theta, self._bin_count,
                    max_segment_ticks, monotone, plugin=self._plugin())
        self.check_budget()

    @property
    def driver(self) -> DynamicDriver:
        selection = None if self._private is None else self._private.selection(1)
        m = self._mechanism
        width = getattr(m, 'answer_dimension', self._bin_count)
        return DynamicDriver(m, selection, self._construction, self._clock,
                             bins=self._bin_count, answer_dimension=width)

    def _plugin(self):
        return None

    def _parse(self, record):
        return (parse_update(*self._update_fn(record)),)

    def _mechanism_name(self) -> str:
        m = self._mechanism
        name = 'two_stream_c6' if self._construction == 'two_stream' else 'fenwick_c9'
        return (f'{name}/c_theta={m.c_theta:g}/partition_fraction={m.partition_fraction:g}')



def _default_label(record):
    return record[3]


@arguments.public(docs=arguments.SEGMENTED_DOCS)
class DynamicHistogramPerKey(DynamicCountPerKey):
    """As ``DynamicCountPerKey`` over public ``bins``: an insertion puts its record in the bin
    ``value_fn(record)`` (default ``record[3]``; a label not in ``bins`` is dead-lettered); a
    deletion removes the record from the bin it was inserted in (its own label is not read).
    The release of a key is the histogram of its live records (``Release.values``, one per bin;
    ``value`` their sum).

    Guarantee: as ``DynamicCountPerKey`` (one update event changes one bin by one: L1
    sensitivity 1); 'two_stream' (C6) runs each stream over the bins, 'fenwick' (C9) runs the
    per-node Laplace histogram of Algorithm 3 (Qiu & Yi, spec 001 §2.2 last row).
    """

    _metric = 'histogram'
    FIELD_ALIASES = {'value_fn': 'bin_field'}   # the bin is read by value_fn

    def __init__(self, *, bins: Sequence[str], value_fn: Callable[[Any], Any] = _default_label,
                 **kwargs):
        owner = type(self).__name__
        if isinstance(bins, str) or not bins or len(set(bins)) != len(bins):
            raise InvalidParamsError(f'{owner}: bins must be a non-empty list of distinct '
                                     f'labels, got {bins!r}.')
        shell.check_callable(owner, 'value_fn', value_fn)
        self._bins = list(bins)
        self._bin_count = len(self._bins)
        self._index = {b: i for i, b in enumerate(self._bins)}
        self._value_fn = value_fn
        super().__init__(**kwargs)

    def _bin_of(self, record) -> int:
        label = self._value_fn(record)
        try:
            return self._index[label]
        except (KeyError, TypeError):
            raise ValueError(f'bin {label!r:.80} is not in the public bin set') from None

    def _parse(self, record):
        rid, op = parse_update(*self._update_fn(record))
        return ((rid, op, self._bin_of(record) if op == 1 else 0),)

    def _mechanism_name(self) -> str:
        return super()._mechanism_name() + f'/bins={self._bin_count}'


LINEAR_DOCS = {
    **arguments.SEGMENTED_DOCS,
    'domain_size': 'N, the public domain {0, ..., N-1} of record values.',
    'queries': 'the public query class 𝒬: a sequence of ``LinearQuery`` over ``domain_size``.',
    'static_mechanism': "the static plug-in: 'pmw' (private multiplicative weights, default) or "
                        "'laplace_histogram'.",
    'alpha': "PMW's target accuracy as a fraction of a node's size, in (0, 1] (default 0.2).",
    'passes': 'PMW passes over 𝒬 per static release (free: the hard-query cap sets the cost).',
    'value_fn': 'record → its domain element, an int in [0, domain_size) (default '
                '``record[3]``; anything else is dead-lettered).',
}


@arguments.public(docs=LINEAR_DOCS, drop=('construction',))
class DynamicLinearQueriesPerKey(DynamicCountPerKey):
    """Continual answers to a fixed class of linear queries over the live records of an
    insert/delete stream: Qiu & Yi's black-box route (Theorem 11; spec 001 §13), a static
    mechanism plugged into C9.

    Each record is an update as in ``DynamicCountPerKey``; an insertion carries its domain
    element ``value_fn(record)``. The release of a key at a segment close is f(D_t) for every
    f ∈ 𝒬 (``Release.values`` in the order of ``queries``; ``value`` is their sum, not a
    statistic): unnormalised counts Σ_{x∈D_t} f(x).

    Privacy unit and neighbours: one more update event (event level), within valid streams, as
    ``DynamicCountPerKey`` ('fenwick').

    Guarantee: ε-DP (pure). The partitioner takes ε_p; the Fenwick tree's level ℓ takes
    6ε_tree/(π²ℓ²); each node runs Algorithm 3 with its four components per round (ñ, the
    plug-in's static release on the node's records, the plug-in's insertion-only counter
    (``beam_dp.mechanisms.plugin.PluginInsertionCounter``) on its deletions, the Laplace
    deletion count). The static plug-ins are ε-DP under add/remove of one record:
    'laplace_histogram' (noisy histogram, answers by post-processing) and 'pmw' (n̂ with a
    quarter of the ε, then Numeric-Sparse PMW over 𝒬 with its hard-query cap).

    Accuracy (Theorem 11): Õ(n_t^{2/3}) for PMW (δ = 0) in the CURRENT size n_t, not the number
    of updates; polylog factors are large (docs/partitioning.md gives what beam_dp measures).

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter; BudgetExceededError: over budget.
    """

    _metric = 'linear_queries'

    def __init__(self, *, domain_size: int, queries, static_mechanism: str = 'pmw',
                 alpha: float = 0.2, passes: int = 1,
                 value_fn: Callable[[Any], Any] = _default_label, **kwargs):
        owner = type(self).__name__
        if static_mechanism not in STATIC_MECHANISMS:
            raise InvalidParamsError(f"{owner}: static_mechanism must be one of "
                                     f"{STATIC_MECHANISMS}, got {static_mechanism!r}.")
        shell.check_callable(owner, 'value_fn', value_fn)
        try:
            if static_mechanism == 'pmw':
                self._static = StaticPMW(domain_size, queries, alpha=alpha, passes=passes)
            else:
                self._static = LaplaceHistogram(domain_size, queries)
        except InvalidParamsError as e:
            raise InvalidParamsError(f'{owner}: {e}') from None
        self._bin_count = self._static.domain_size
        self._value_fn = value_fn
        super().__init__(construction='fenwick', **kwargs)

    def _plugin(self):
        return self._static

    def loop_driver(self):
        return SegmentLoop(self.driver, self._metadata(), True)

    def _parse(self, record):
        rid, op = parse_update(*self._update_fn(record))
        item = 0
        if op == 1:
            item = self._value_fn(record)
            if (isinstance(item, bool) or not isinstance(item, numbers.Integral)
                    or not 0 <= item < self._bin_count):
                reason = (f'domain element must be an int in [0, {self._bin_count}), '
                          f'got {item!r:.80}')
                raise ValueError(reason)
            item = int(item)
        return ((rid, op, item),)

    def _mechanism_name(self) -> str:
        return (super()._mechanism_name()
                + f'/static={self._static.name}/queries={len(self._static.queries)}')
