"""C7: Qiu & Yi's online interval tree (§4.1) in its closed Fenwick (binary indexed tree) form.

Node v_k covers insertion segments (k - lowbit(k), k] and sits at level
ℓ(k) = trailing_zeros(k) + 1; a record inserted in segment i can only ever be stored in the
update chain i, i + lowbit(i), ... (one node per level), and a query after segment q visits the
prefix chain q, q & (q-1), ..., whose ranges partition [1, q] (Lemma 9). Only the prefix chain
is ever live: when segment k closes, the nodes of chain(k-1) above k - lowbit(k) retire and
their live records, with segment k's surviving insertions, build node k. Everything here is
public arithmetic on segment indices (Python ints, no size limit).
"""

from typing import List

__all__ = [
    'covers',
    'lowbit',
    'node_level',
    'node_range',
    'prefix_chain',
    'retiring_nodes',
]


def lowbit(k: int) -> int:
    """k & -k (k ≥ 1)."""
    return k & -k


def node_level(k: int) -> int:
    """ℓ(k) = trailing_zeros(k) + 1 (leaves, the odd k, are level 1)."""
    return lowbit(k).bit_length()


def node_range(k: int) -> range:
    """The insertion segments node k covers: (k - lowbit(k), k]."""
    return range(k - lowbit(k) + 1, k + 1)


def covers(k: int, segment: int) -> bool:
    return k - lowbit(k) < segment <= k


def prefix_chain(q: int) -> List[int]:
    """q, q & (q-1), ... > 0: the active nodes after segment q, highest index first."""
    chain = []
    while q > 0:
        chain.append(q)
        q &= q - 1
    return chain


def retiring_nodes(k: int) -> List[int]:
    """Nodes of chain(k-1) that are not in chain(k) (they merge into node k)."""
    keep = k - lowbit(k)
    return [a for a in prefix_chain(k - 1) if a > keep]
