"""Continual per-key counts and histograms on private TIME segments (Qiu & Yi C5 = C4 + C2).

Wiring, state and timers: ``SegmentedPerKey`` (``segmented.py``; labels 'GlobalWindow',
'ExtractAndValidate', 'GateLateRecords', 'KeySeeds', 'ReleaseSegments'); the per-key logic is
``CounterDriver`` (``beam_dp.drivers.segmented``), the mechanism ``SparseCounter``.
"""

import operator
from typing import Any, Callable, Optional, Sequence

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.segmented import CounterDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.sparse_counter import SparseCounter
from beam_dp.mechanisms.time_partition import PAPER_C_THETA
from beam_dp.transforms import arguments
from beam_dp.transforms.segmented import SegmentedPerKey

__all__ = [
    'SparseContinualCountPerKey',
    'SparseContinualHistogramPerKey',
]


_BINS_HINT = 'bins are for SparseContinualHistogramPerKey(bins=..., value_fn=...)'


@arguments.public(docs=arguments.SEGMENTED_DOCS, drop=('bins', 'value_fn'),
                  hints={'bins': _BINS_HINT, 'value_fn': _BINS_HINT})
class SparseContinualCountPerKey(SegmentedPerKey):
    """Continual per-key counts on private time segments (C5), for sparse streams.

    Per key, the C4 partitioner (SVT on the segment's running count, exact skip-ahead over
    empty steps, θ̂ drawn once per segment and kept in state) cuts event time into segments; at
    each close the C2 counter takes one step with the segment's exact total. Between closes
    nothing is released.

    Privacy unit and neighbours: event level (add/remove one record); keys are parallel (each
    record goes to one key). Guarantee: ε-DP with ``budget=PrivacyBudget(epsilon=ε)``, split
    ε_p = ``partition_fraction``·ε for the boundaries (Qiu & Yi Thm 6) and the rest for C2
    (Thm 8); with ``keys=PrivateKeys(...)`` plus the selection's (ε_s, δ).

    Released: one ``Release`` per key and segment close (``step`` = the close step), value = the
    C5 answer (noisy count up to the close), ``noise_stddev`` = C2's exact sd (the open
    segment's lag is not included). Accuracy (Thm 8): C2 error at the segment count plus the
    open segment's lag ≤ θ_j + (6/ε_p)·ln(2/β_j) w.p. 1-β; ``c_theta`` (privacy-neutral, 7 =
    paper) trades lag for segments; measured errors: docs/partitioning.md.

    Not guaranteed: records for a released step are dead-lettered (late: decided by the
    public schedule, 'GateLateRecords' in ``segmented.py``, never by the key's other records);
    a key's releases are as fresh as its segments (``max_segment_ticks`` caps staleness publicly).

    Cite: Qiu & Yi, "Differential privacy on dynamic data", Algorithm 2, Theorem 8.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``.

    Raises:
      InvalidParamsError: on a bad parameter; BudgetExceededError: over budget.
    """

    _metric = 'count'
    _driver_class = CounterDriver

    def __init__(self, *, budget: PrivacyBudget, partition_fraction: float = 0.5,
                 beta: float = 0.1, c_theta: float = PAPER_C_THETA,
                 max_segment_ticks: Optional[int] = None, monotone: bool = False,
                 bins: Sequence[str] = (), value_fn: Optional[Callable[[Any], Any]] = None,
                 **kwargs):
        super().__init__(budget=budget, **kwargs)
        self._bins = tuple(bins)
        self._value_fn = value_fn
        with self.params():
            self._mechanism = SparseCounter(budget.epsilon, partition_fraction, beta, c_theta,
                                            max(1, len(self._bins)), max_segment_ticks,
                                            monotone)
        self.check_budget()

    def _parse(self, record):
        return (1,)

    def _mechanism_name(self) -> str:
        m = self._mechanism
        return (f'sparse_counter_c5/c_theta={m.c_theta:g}/partition_fraction='
                f'{m.partition_fraction:g}')


@arguments.public(docs=arguments.SEGMENTED_DOCS)
class SparseContinualHistogramPerKey(SparseContinualCountPerKey):
    """As ``SparseContinualCountPerKey`` over public ``bins``: one record adds 1 to the bin
    ``value_fn(record)`` (default ``record[1]``; other labels are dead-lettered); the
    partitioner counts all records of the key (L1 sensitivity 1 either way)."""

    _metric = 'histogram'
    FIELD_ALIASES = {'value_fn': 'bin_field'}   # the bin is read by value_fn

    def __init__(self, *, bins: Sequence[str],
                 value_fn: Callable[[Any], Any] = operator.itemgetter(1),
                 **kwargs):
        owner = type(self).__name__
        if isinstance(bins, str) or not bins or len(set(bins)) != len(bins):
            raise InvalidParamsError(f'{owner}: bins must be a non-empty list of distinct '
                                     f'labels, got {bins!r}.')
        if not callable(value_fn):
            raise InvalidParamsError(f'{owner}: value_fn must be callable, got {value_fn!r}.')
        super().__init__(bins=bins, value_fn=value_fn, **kwargs)
        self._index = {b: i for i, b in enumerate(self._bins)}

    def _parse(self, record):
        label = self._value_fn(record)
        if label not in self._index:
            raise ValueError(f'bin {label!r:.80} is not in the public bin set')
        vec = [0] * len(self._bins)
        vec[self._index[label]] = 1
        return tuple(vec)

