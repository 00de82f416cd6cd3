"""A continual hierarchical histogram: a B-ary tree of bucket counters over a bucketed value
domain, with the consistency post-processing of Hay, Rastogi, Miklau, Suciu (VLDB 2010).

``HierarchicalHistogramCounter`` wraps any vector counter of this package (BLT, k-ary tree,
per-step, ...). Its input at each step is the *leaf* histogram of each key (M = B**D buckets);
it adds the node counts of every level (root, B nodes, ..., the M leaves: N = (B**(D+1) − 1) /
(B − 1) nodes per key), runs the wrapped counter over the N node counts, and returns the
*consistent* leaf estimates: the least-squares fit of leaf counts to the noisy tree (Hay et
al., Theorem 3: one bottom-up and one top-down pass). A range of leaves then sums their
consistent estimates; that is the BLUE of the range (Gauss–Markov: node noises are independent
with equal variance), so its variance is at most that of any decomposition into tree nodes.

One record touches one node per level: D + 1 nodes. Its L1 sensitivity is D + 1 and its L2
sensitivity √(D + 1) (the wrapped counter must be calibrated for that: the caller passes the
sensitivities, ``tree_sensitivity``).

``prefix_variance_factors`` gives, in closed form from the linear map, for the prefix of the
first j + 1 leaves: a[j] = ||w_j||², b[j] = w_j · w_M and c = ||w_M||², where w_j are the
weights of the prefix estimate on the node noises. The estimate of (prefix_j − p · total) then
has variance σ² (a[j] − 2p b[j] + p² c), σ² the counter's per-node release variance. The flat
layout (leaves only, no tree) has a[j] = b[j] = j + 1, c = M.
"""

import dataclasses
import math
from typing import Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.errors import InvalidParamsError

__all__ = [
    'HierarchicalHistogramCounter',
    'MAX_TREE_LEAVES',
    'consistent_leaves',
    'flat_prefix_factors',
    'node_counts',
    'num_nodes',
    'prefix_variance_factors',
]

_MAX_LEAVES = 2 ** 20   # leaves of any layout (the node vector is keys × N ≤ 2M per key)
MAX_TREE_LEAVES = 1024   # the closed-form factors hold an (N × M) matrix once at construction


def num_nodes(branching: int, depth: int) -> int:
    """Nodes of a B-ary tree with ``depth`` levels below the root (root included)."""
    return (branching ** (depth + 1) - 1) // (branching - 1)


def node_counts(leaves: np.ndarray, branching: int, depth: int) -> np.ndarray:
    """(..., M) leaf counts → (..., N) node counts, root first, level by level, leaves last.

    Exact for integer and object (Python int) arrays."""
    leaves = np.asarray(leaves)
    lead = leaves.shape[:-1]
    parts = []
    for level in range(depth + 1):
        width = branching ** level
        parts.append(leaves.reshape(*lead, width, -1).sum(axis=-1))
    return np.concatenate(parts, axis=-1)


def consistent_leaves(nodes: np.ndarray, branching: int, depth: int) -> np.ndarray:
    """(..., N) noisy node counts (root first, level by level) → (..., M) consistent leaf
    estimates (Hay et al. 2010, Theorem 3, equal node variances)."""
    nodes = np.asarray(nodes, dtype=np.float64)
    lead = nodes.shape[:-1]
    k = branching
    offsets = [num_nodes(k, level - 1) if level else 0 for level in range(depth + 1)]
    levels = [nodes[..., offsets[level]:offsets[level] + k ** level]
              for level in range(depth + 1)]
    # Bottom-up: z at the leaves (height 1) is the noisy count.
    z = [None] * (depth + 1)
    z[depth] = levels[depth]
    for level in range(depth - 1, -1, -1):
        height = depth - level + 1
        children = z[level + 1].reshape(*lead, k ** level, k).sum(axis=-1)
        kl, kl1 = k ** height, k ** (height - 1)
        z[level] = ((kl - kl1) / (kl - 1)) * levels[level] + ((kl1 - 1) / (kl - 1)) * children
    # Top-down.
    h = z[0]
    for level in range(1, depth + 1):
        child_sum = z[level].reshape(*lead, k ** (level - 1), k).sum(axis=-1)
        correction = (h - child_sum) / k
        h = z[level] + np.repeat(correction, k, axis=-1)
    return h


def prefix_variance_factors(branching: int, depth: int
                            ) -> Tuple[np.ndarray, np.ndarray, float]:
    """(a, b, c) of the consistent tree (module docstring), exact from the linear map."""
    n = num_nodes(branching, depth)
    weights = consistent_leaves(np.eye(n), branching, depth)   # row i: leaves from node i
    prefix = np.cumsum(weights, axis=1)                       # (N, M): w_j as columns
    a = np.einsum('ij,ij->j', prefix, prefix)
    b = prefix.T @ prefix[:, -1]
    return a, b, float(a[-1])


def flat_prefix_factors(leaves: int) -> Tuple[np.ndarray, np.ndarray, float]:
    """(a, b, c) of the flat layout: independent leaf noises, a prefix sums j + 1 of them."""
    j = np.arange(1, leaves + 1, dtype=np.float64)
    return j, j.copy(), float(leaves)


def tree_sensitivity(depth: int) -> Tuple[float, float]:
    """(L1, L2) of one record in the tree: one node per level."""
    return float(depth + 1), math.sqrt(depth + 1)


@dataclasses.dataclass(frozen=True)
class HierarchicalHistogramCounter:
    """A vector counter over keys × M leaf buckets that runs ``inner`` over keys × N tree nodes
    and releases the consistent leaf estimates (module docstring).

    Args:
      inner: a vector counter of this package, calibrated for one record touching depth + 1
        nodes (its ``dimension`` is replaced by keys × N).
      branching: B ≥ 2. depth: D ≥ 1 levels below the root (M = B**D leaves).
      dimension: keys × M (the leaf vector this counter takes and returns).
    """
    inner: object
    branching: int
    depth: int
    dimension: int

    def __post_init__(self):
        owner = type(self).__name__
        v.check_positive_int(owner, 'branching', self.branching)
        v.check_positive_int(owner, 'depth', self.depth)
        v.check_positive_int(owner, 'dimension', self.dimension)
        for name in ('branching', 'depth', 'dimension'):    # numpy ints → Python ints
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.branching < 2:
            raise InvalidParamsError(f'{owner}: branching must be at least 2, got '
                                     f'{self.branching}.')
        # B**D is computed only once it is known to be small (a huge B or D would take the
        # process with it: found by the parameter fuzz); the wrapped counter holds keys × N.
        if self.depth * math.log2(self.branching) > math.log2(_MAX_LEAVES) + 1e-9:
            raise InvalidParamsError(f'{owner}: branching**depth must be at most {_MAX_LEAVES} '
                                     f'leaves, got branching={self.branching}, '
                                     f'depth={self.depth}.')
        if self.dimension % self.leaves:
            raise InvalidParamsError(f'{owner}: dimension {self.dimension} is not a multiple of '
                                     f'the {self.leaves} leaves.')
        keys = self.dimension // self.leaves
        if not dataclasses.is_dataclass(self.inner) or isinstance(self.inner, type) or not any(
                f.name == 'dimension' for f in dataclasses.fields(self.inner)):
            raise InvalidParamsError(f'{owner}: inner must be a vector counter of '
                                     f'beam_dp.mechanisms (with a dimension), got '
                                     f'{self.inner!r:.80}.')
        try:
            inner = dataclasses.replace(
                self.inner, dimension=keys * num_nodes(self.branching, self.depth))
        except (OverflowError, MemoryError) as e:
            raise InvalidParamsError(f'{owner}: a counter over {keys} keys × '
                                     f'{self.nodes} nodes cannot be built ({e}).') from None
        object.__setattr__(self, '_inner', inner)

    @property
    def leaves(self) -> int:
        return self.branching ** self.depth

    @property
    def nodes(self) -> int:
        return num_nodes(self.branching, self.depth)

    def privacy_cost(self):
        return self._inner.privacy_cost()

    def release_variance(self, steps: int, *final_steps) -> float:
        """The per-node noise variance after ``steps`` steps (the wrapped counter's;
        ``final_steps`` passed on to a ``FinalReleaseCounter``)."""
        return self._inner.release_variance(steps, *final_steps)

    @property
    def final_steps(self):
        """The wrapped counter's one-shot step (``FinalReleaseCounter``); absent otherwise."""
        return self._inner.final_steps

    def init_state(self, **final_steps):
        return self._inner.init_state(**final_steps)

    def step(self, state, value, rng):
        keys = self.dimension // self.leaves
        leaves = np.asarray(value).reshape(keys, self.leaves)
        nodes = node_counts(leaves, self.branching, self.depth).reshape(-1)
        estimate, new_state = self._inner.step(state, nodes, rng)
        consistent = consistent_leaves(np.asarray(estimate, dtype=np.float64).reshape(
            keys, self.nodes), self.branching, self.depth)
        return consistent.reshape(-1), new_state
