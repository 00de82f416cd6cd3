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
of plain dicts; an insert copies one bucket and the bucket tuple.  ``BoundedCache`` (the public
``cache_capacity`` rule) holds two generations of them: at most that many entries, about the most
recently used.
"""

import dataclasses
import hashlib
from typing import Any, Hashable, Iterator, Optional, Tuple

from beam_dp.queries import LinearQuery

__all__ = [
    'BoundedCache',
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

    def delete(self, key: Hashable) -> 'PMap':
        slot = self._slot(key)
        if key not in self._buckets[slot]:
            return self
        bucket = dict(self._buckets[slot])
        del bucket[key]
        return PMap(self._buckets[:slot] + (bucket,) + self._buckets[slot + 1:], self._size - 1)

    def promote(self, key: Hashable) -> 'PMap':
        """Marks ``key`` as recently used (a no-op: a plain map never evicts)."""
        del key
        return self

    def keep(self, predicate) -> 'PMap':
        """The entries whose key satisfies ``predicate`` (a new map)."""
        buckets = tuple({k: x for k, x in b.items() if predicate(k)} for b in self._buckets)
        return PMap(buckets, sum(len(b) for b in buckets))

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


class BoundedCache:
    """An immutable cache of at most ``capacity`` entries (approximately least recently used):
    two generations of ``PMap``. Inserts and promotions go to the young one; when it holds
    ⌊capacity/2⌋ entries it becomes the old one and the previous old one is dropped. A hit in
    the old generation is promoted back (``promote``). Eviction reads only the sequence of
    public cache keys, and evicting a DP result only costs budget later (the query is answered
    afresh), never privacy."""

    __slots__ = ('capacity', 'young', 'old')

    def __init__(self, capacity: int, young: Optional[PMap] = None, old: Optional[PMap] = None):
        self.capacity = capacity
        self.young = young if young is not None else PMap()
        self.old = old if old is not None else PMap()

    def get(self, key: Hashable, default: Any = None) -> Any:
        hit = self.young.get(key, _MISSING)
        return self.old.get(key, default) if hit is _MISSING else hit

    def __contains__(self, key: Hashable) -> bool:
        return key in self.young or key in self.old

    def __len__(self) -> int:
        return len(self.young) + len(self.old)

    def items(self):
        yield from self.young.items()
        yield from self.old.items()

    def __iter__(self):
        for key, _ in self.items():
            yield key

    def set(self, key: Hashable, value: Any) -> 'BoundedCache':
        young, old = self.young.set(key, value), self.old.delete(key)
        if len(young) >= max(1, self.capacity // 2):
            young, old = PMap(), young
        return BoundedCache(self.capacity, young, old)

    def promote(self, key: Hashable) -> 'BoundedCache':
        if key in self.young or key not in self.old:
            return self
        return self.set(key, self.old.get(key))

    def keep(self, predicate) -> 'BoundedCache':
        return BoundedCache(self.capacity, self.young.keep(predicate), self.old.keep(predicate))

    def __getstate__(self):
        return self.capacity, self.young, self.old

    def __setstate__(self, state):
        self.capacity, self.young, self.old = state

    def __eq__(self, other):
        return isinstance(other, BoundedCache) and self.capacity == other.capacity and dict(
            self.items()) == dict(other.items())

    def __repr__(self):
        return f'BoundedCache(<{len(self)} of {self.capacity} entries>)'


_MISSING = object()


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
