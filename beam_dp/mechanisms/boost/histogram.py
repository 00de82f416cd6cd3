"""One PMW-Bypass histogram node: the normalised histogram h in log space, the per-bin update
counters and thresholds of the readiness heuristic, and the warm-start constructors (spec 002
§3.1, §3.3, §3.8).

The multiplicative-weights step is the project's PMW one (``beam_dp.mechanisms.pmw.mw_update``,
log space, renormalised): Boost's Update(h, q, s) multiplies h(v) by e^{s·q(v)}, and PMW's step
y ∝ y·e^{-lr·(1-f)} (answer above estimate) equals y ∝ y·e^{+lr·f} after renormalisation, and
y ∝ y·e^{-lr·f} otherwise. Sign convention (erratum 3): s = +lr when the fresh noisy answer is
above q(h) -- the algorithm's rule, not the proof text's.

A node's h, counts and thresholds are functions of released DP outputs only: public.
"""

import dataclasses
from typing import Optional

import numpy as np

from beam_dp.mechanisms.boost import tree
from beam_dp.mechanisms.boost.heuristic import Readiness
from beam_dp.mechanisms.boost.heuristic import readonly as _readonly
from beam_dp.mechanisms.pmw import mw_update
from beam_dp.mechanisms.pmw import public_estimate
from beam_dp.mechanisms.pmw import uniform_log_histogram
from beam_dp.queries import LinearQuery

__all__ = [
    'NodeHistogram',
    'merge_children',
    'new_node',
    'query_support',
    'uniform_node',
    'warm_copy',
]


def query_support(query: LinearQuery) -> np.ndarray:
    """supp(q) = {v : q(v) > 0} (read-only, cached on the query object)."""
    cached = query.__dict__.get('_boost_support')
    if cached is None:
        cached = _readonly(np.flatnonzero(query.dense() > 0))
        query.__dict__['_boost_support'] = cached
    return cached


@dataclasses.dataclass(frozen=True)
class NodeHistogram:
    """Immutable node state. ``log_h``: normalised log histogram. ``count``/``thr``: per-bin
    update counters and readiness thresholds. ``updates``: MW updates applied (for convergence
    reports). All public."""
    log_h: np.ndarray
    count: np.ndarray
    thr: np.ndarray
    updates: int = 0

    def estimate(self, query: LinearQuery) -> float:
        """q(h) = Σ_v q(v) h(v)."""
        return public_estimate(self.log_h, query)

    def update(self, query: LinearQuery, s: float) -> 'NodeHistogram':
        """Update(h, q, s) and count[v] += q(v) on supp(q); s = 0 returns the node unchanged."""
        if s == 0:
            return self
        # mw_update moves weight up on supp(q) when answer > estimate: encode the sign that way.
        up = s > 0
        log_h = mw_update(self.log_h, query, abs(s), 1.0 if up else 0.0, 0.0 if up else 1.0)
        count = self.count + query.dense()
        return NodeHistogram(log_h, _readonly(count), self.thr, self.updates + 1)

    def with_thresholds(self, thr: np.ndarray) -> 'NodeHistogram':
        return dataclasses.replace(self, thr=thr)

    @property
    def h(self) -> np.ndarray:
        return np.exp(self.log_h)


def uniform_node(domain_size: int, readiness: Readiness) -> NodeHistogram:
    """h = 1/N, counts 0, thresholds C0."""
    return NodeHistogram(uniform_log_histogram(domain_size),
                         _readonly(np.zeros(domain_size)),
                         readiness.initial_threshold(domain_size))


def _mix_uniform(h: np.ndarray, gamma: float) -> np.ndarray:
    # Thm A.9: h0 = (1-γ)h + γ/N bounds λ by 1/γ (γ = 0 is the plain copy/mean).
    if gamma:
        h = (1.0 - gamma) * h + gamma / h.size
    return _readonly(np.log(h / h.sum()))


def warm_copy(previous: NodeHistogram, gamma: float = 0.0) -> NodeHistogram:
    """A new leaf warm-started from the previous leaf: a copy of h, counts and thresholds."""
    if not gamma:
        return dataclasses.replace(previous, updates=0)
    return NodeHistogram(_mix_uniform(previous.h, gamma), previous.count, previous.thr)


def merge_children(left: NodeHistogram, n_left: int, right: NodeHistogram, n_right: int,
                   gamma: float = 0.0) -> Optional[NodeHistogram]:
    """A new internal node: the n-weighted mean (n_L h_L + n_R h_R)/(n_L + n_R) of its children
    (spec §3.8 [INF]; the plain mean for equal blocks), counters and thresholds likewise."""
    total = n_left + n_right
    if total <= 0:
        return None
    wl, wr = n_left / total, n_right / total
    h = wl * left.h + wr * right.h
    count = _readonly(wl * left.count + wr * right.count)
    thr = _readonly(wl * left.thr + wr * right.thr)
    return NodeHistogram(_mix_uniform(h, gamma), count, thr)


def new_node(nodes, node, size_of, domain_size: int, readiness: Readiness,
             warm_gamma: Optional[float]) -> NodeHistogram:
    """A node's first histogram: uniform, or with ``warm_gamma`` not None (warm start, §3.8) in a
    tree κ ≥ 0, a leaf copies the most recent earlier leaf in ``nodes`` and an internal node
    merges its two children when both exist (``size_of``: node → public n)."""
    made = None
    kappa, a, b = node
    if warm_gamma is not None and kappa >= 0:
        if a == b:
            prev = tree.previous_leaf(list(nodes), node)
            made = None if prev is None else warm_copy(nodes[prev], warm_gamma)
        else:
            left, right = tree.children(node)
            if left in nodes and right in nodes:
                made = merge_children(nodes[left], size_of(left), nodes[right], size_of(right),
                                      warm_gamma)
    return made or uniform_node(domain_size, readiness)
