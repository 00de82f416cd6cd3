"""Continual per-key counts over a fully-dynamic stream (insertions AND deletions with record ids).

Wiring, state and timers: ``SegmentedPerKey`` (labels 'GlobalWindow', 'ExtractAndValidate',
'GateLateRecords', 'KeySeeds', 'ReleaseSegments'); the per-key logic, including the live-id registry and the
validity rule that decides the sensitivity (docs/partitioning.md), is ``DynamicDriver``
(``beam_dp.drivers.dynamic``): an invalid update is dead-lettered but still COUNTED by the
partitioner. ``DynamicLinearQueriesPerKey`` (the black-box route of linear queries) is in
``dynamic_linear`` (importable from here too).
"""

from typing import Any, Callable, Optional, Sequence

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.dynamic import CONSTRUCTIONS
from beam_dp.drivers.dynamic import DynamicDriver
from beam_dp.drivers.dynamic import parse_update
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.time_partition import PAPER_C_THETA
from beam_dp.transforms import arguments
from beam_dp.transforms import shell
from beam_dp.transforms.segmented import SegmentedPerKey

__all__ = [
    'DynamicCountPerKey',
    'DynamicHistogramPerKey',
    'DynamicLinearQueriesPerKey',
]


def __getattr__(name):
    # ``DynamicLinearQueriesPerKey`` lives in ``dynamic_linear`` (it subclasses
    # ``DynamicCountPerKey``): read on first use, so that either module may be imported first.
    if name == 'DynamicLinearQueriesPerKey':
        from beam_dp.transforms.dynamic_linear import DynamicLinearQueriesPerKey
        return DynamicLinearQueriesPerKey
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')

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
