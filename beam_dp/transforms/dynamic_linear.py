"""Continual answers to a fixed class of linear queries per key over a fully-dynamic stream:
``DynamicLinearQueriesPerKey``, Qiu & Yi's black-box route (a static mechanism plugged into the
Fenwick construction C9 of ``DynamicCountPerKey``, ``beam_dp.transforms.dynamic``, whose wiring
it runs).
"""

import numbers
from typing import Any, Callable

from beam_dp.drivers.dynamic import parse_update
from beam_dp.drivers.segmented import SegmentLoop
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.plugin import LaplaceHistogram
from beam_dp.mechanisms.plugin import StaticPMW
from beam_dp.transforms import arguments
from beam_dp.transforms import shell
from beam_dp.transforms.dynamic import DynamicCountPerKey
from beam_dp.transforms.dynamic import _default_label

__all__ = [
    'DynamicLinearQueriesPerKey',
]

STATIC_MECHANISMS = ('pmw', 'laplace_histogram')


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
