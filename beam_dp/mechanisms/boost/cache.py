"""The exact-match cache (spec 002 §3.5) and the persistent map that holds it.

A cached result is a DP output, so serving it again is post-processing: zero budget. Keys are
(canonical query, node, α, β): the canonical query is a digest of the dense query vector, so
semantically equal predicates (a range, a marginal cell, the same vector) hit the same entry; the
node (or window) is the data version, immutable once its blocks are sealed (spec §9.3); (α, β)
keeps a loosely calibrated result from serving a tighter request. Cache hits never train a
histogram (``external_update_on_cached_results = False``): reusing one noise draw repeatedly
would bias h.

Per-node reuse inside a tree (spec §3.5 [INF]): a cached node result r_i with noise scale b_i may
stand in for a fresh Laplace sub-result only if b_i ≤ the scale the fresh plan would give that
node. A sum of independent symmetric unimodal noises leaves a symmetric interval with smaller
probability when one scale shrinks (Anderson's inequality), so the plan's (α, β_L) tail still
holds. ``reusable`` is that check.

``PMap`` keeps mechanism states immutable without copying the whole cache per insert: 256 buckets
of plain dicts; an insert copies one bucket and the bucket tuple.
"""

import dataclasses
import hashlib
from typing import Any, Hashable, Iterator, Optional, Tuple

from beam_dp.queries import LinearQuery

__all__ = [
    'CachedResult',
    'PMap',
    'canonical_query_key',
    'node_cache_key',
    'reusable',
    'window_cache_key',
]

_BUCKETS = 256


class PMap:
    """An immutable mapping; ``set`` returns a new map sharing all untouched buckets."""

    __slots__ = ('_buckets', '_size')

    def __init__(self, buckets: Optional[Tuple[dict, ...]] = None, size: int = 0):
        self._buckets = buckets if buckets is not None else tuple({} for _ in range(_BUCKETS))
        self._size = size

    def _slot(self, key: Hashable) -> int:
        return hash(key) % _BUCKETS

    def get(self, key: Hashable, default: Any = None) -> Any:
        return self._buckets[self._slot(key)].get(key, default)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._buckets[self._slot(key)]

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Hashable]:
        for bucket in self._buckets:
            yield from bucket

    def items(self):
        for bucket in self._buckets:
            yield from bucket.items()

    def set(self, key: Hashable, value: Any) -> 'PMap':
        slot = self._slot(key)
        bucket = dict(self._buckets[slot])
        grew = key not in bucket
        bucket[key] = value
        buckets = self._buckets[:slot] + (bucket,) + self._buckets[slot + 1:]
        return PMap(buckets, self._size + int(grew))

    def __getstate__(self):
        return dict(self.items())

    def __setstate__(self, state):
        m = PMap()
        for k, value in state.items():
            m = m.set(k, value)
        self._buckets, self._size = m._buckets, m._size

    def __eq__(self, other):
        return isinstance(other, PMap) and dict(self.items()) == dict(other.items())

    def __repr__(self):
        return f'PMap(<{self._size} entries>)'


@dataclasses.dataclass(frozen=True)
class CachedResult:
    """A cached DP result: ``value`` (fraction), ``scale`` (its Laplace noise scale in fraction
    units; 0 for a histogram answer R1), ``path`` that produced it."""
    value: float
    scale: float
    path: str


def canonical_query_key(query: LinearQuery) -> str:
    """A digest of the dense query vector (kind and id do not matter)."""
    cached = query.__dict__.get('_boost_key')
    if cached is None:
        dense = query.dense()
        cached = hashlib.sha256(dense.tobytes() + str(dense.size).encode()).hexdigest()[:32]
        query.__dict__['_boost_key'] = cached
    return cached


def node_cache_key(qkey: str, node: Hashable, alpha: float, beta: float) -> tuple:
    return ('node', qkey, node, alpha, beta)


def window_cache_key(qkey: str, window: Tuple[int, int], alpha: float, beta: float) -> tuple:
    return ('window', qkey, window, alpha, beta)


def reusable(entry: Optional[CachedResult], fresh_scale: float) -> bool:
    """Whether a cached node result can replace a fresh Laplace draw of scale ``fresh_scale``."""
    return entry is not None and entry.scale > 0 and entry.scale <= fresh_scale * (1 + 1e-12)
