"""The dyadic tree over time blocks (spec 002 §3.6, §3.9): SplitQuery with the minimal cover,
LargestContiguousSubset, Aggregate, and the overlapping trees of Thm A.8 for unbounded streams.

Node keys are (κ, a, b): the dyadic interval [a, b] of absolute block ids inside tree κ, which
covers blocks [κT, (κ+2)T − 1] with depth m + 1 for the public window bound T = 2^m. A window
[a, b] with b − a + 1 ≤ T goes to tree κ = ⌊a/T⌋ (the rightmost tree containing it) and is split
there, so the same interval in two trees has two histograms (Thm A.8's per-tree convergence).
With a stream shorter than T every node lives in tree κ = 0 (the static Alg. 2 tree).
"""

from typing import List, Sequence, Tuple

from beam_dp.errors import InvalidRecordError

__all__ = [
    'Node',
    'aggregate',
    'children',
    'is_dyadic',
    'largest_contiguous_run',
    'previous_leaf',
    'split_query',
    'tree_split',
]

#: (κ, a, b): tree index and absolute block interval.
Node = Tuple[int, int, int]


def is_dyadic(a: int, b: int, origin: int = 0) -> bool:
    """[a, b] (relative to ``origin``) has length 2^k and starts at a multiple of 2^k."""
    length = b - a + 1
    return length >= 1 and length & (length - 1) == 0 and (a - origin) % length == 0


def split_query(a: int, b: int, origin: int = 0) -> List[Tuple[int, int]]:
    """The minimal dyadic cover of [a, b], left to right (greedy: from the cursor, the largest
    aligned interval that fits; at most 2⌈log₂(b − a + 1)⌉ intervals). [0, 49] →
    [(0, 31), (32, 47), (48, 49)]."""
    if a > b:
        raise InvalidRecordError(f'split_query: empty window [{a}, {b}].')
    out = []
    c = a
    while c <= b:
        size = 1
        while is_dyadic(c, c + 2 * size - 1, origin) and c + 2 * size - 1 <= b:
            size *= 2
        out.append((c, c + size - 1))
        c += size
    return out


def tree_split(a: int, b: int, window_bound: int) -> List[Node]:
    """Thm A.8: the cover of [a, b] inside tree κ = ⌊a/T⌋ (requires b − a + 1 ≤ T)."""
    if b - a + 1 > window_bound:
        raise InvalidRecordError(f'tree_split: window [{a}, {b}] is longer than the window bound '
                                 f'T={window_bound}.')
    kappa = a // window_bound
    return [(kappa, x, y) for x, y in split_query(a, b, kappa * window_bound)]


def children(node: Node) -> Tuple[Node, Node]:
    """The two halves of an internal node (κ, a, b), b > a."""
    kappa, a, b = node
    mid = a + (b - a + 1) // 2
    return (kappa, a, mid - 1), (kappa, mid, b)


def largest_contiguous_run(ready: Sequence[bool], widths: Sequence[int]) -> Tuple[int, int]:
    """[i, j) of the widest run of consecutive ready cover nodes (width = blocks covered;
    erratum 10), leftmost on ties; (0, 0) if none is ready. Cover nodes are consecutive
    intervals, so a run's union is one contiguous window (one SV per contiguous window)."""
    best, best_width = (0, 0), 0
    i = 0
    while i < len(ready):
        if not ready[i]:
            i += 1
            continue
        j, width = i, 0
        while j < len(ready) and ready[j]:
            width += widths[j]
            j += 1
        if width > best_width:
            best, best_width = (i, j), width
        i = j
    return best


def aggregate(values: Sequence[float], sizes: Sequence[int]) -> float:
    """Σ_i (n_i/Σ_j n_j) r_i: the n-weighted mean (preserves α-accuracy)."""
    total = sum(sizes)
    if total <= 0:
        raise InvalidRecordError('aggregate: the parts hold no rows.')
    return sum(r * n for r, n in zip(values, sizes)) / total


def previous_leaf(existing: Sequence[Node], node: Node):
    """Warm start of a new leaf (κ, t, t): the most recent earlier leaf that exists (largest
    t' < t; the same tree on ties), or None."""
    kappa, t, _ = node
    best = None
    for other in existing:
        k2, a2, b2 = other
        if a2 != b2 or a2 >= t:
            continue
        rank = (a2, k2 == kappa)
        if best is None or rank > best[0]:
            best = (rank, other)
    return None if best is None else best[1]
