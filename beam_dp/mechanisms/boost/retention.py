"""Bounded state for long streams (public retention rules of ``TreePMWBypass``).

Without bounds the exact cache, the node histograms, the live SVs, the filters and the prefix
sums of the block counts grow with every new query and block. Two public rules bound them:

* ``cache_capacity`` (entries): the exact cache keeps about the most recently used entries
  (``cache.BoundedCache``). Evicting a cached DP result costs budget later (the query is
  answered afresh, and charged), never privacy; the rule reads only public cache keys.
* ``retention_blocks`` R: once block t is sealed, blocks < t + 1 − R are **expired**. A
  window that starts in an expired block is refused ('window_expired': a public rule on the
  public block ids). Every state that only such windows could use is dropped: the nodes whose
  interval starts before the horizon (in particular every node of a retired tree κ of Thm A.8,
  κ < ⌊horizon/T⌋: tree κ only serves windows starting in [κT, (κ+1)T)), the live SVs on those
  nodes (halted), their cache entries, the filters of expired blocks (nothing can charge them
  again) and the count prefix sums before the horizon. A warm-started leaf whose previous leaf
  expired starts uniform (needs R ≥ 2 to copy).

With both rules the state is O(cache_capacity + R·N + R) (N bins), independent of the number
of queries and blocks, except ``sizes`` (one public int per block).
"""

import dataclasses
import pickle

from beam_dp import _validation as v
from beam_dp.mechanisms.boost.heuristic import readonly

__all__ = [
    'check_bounds',
    'expire',
    'state_bytes',
]


def check_bounds(owner: str, cache_capacity, retention_blocks) -> None:
    """InvalidParamsError unless each bound is None or a valid public bound."""
    if cache_capacity is not None and v.check_positive_int(
            owner, 'cache_capacity', cache_capacity) < 2:
        v._fail(owner, f'cache_capacity must be at least 2, got {cache_capacity}.')
    if retention_blocks is not None:
        v.check_positive_int(owner, 'retention_blocks', retention_blocks)


def _node_live(node, horizon: int, window_bound: int) -> bool:
    # A window starting at a ≥ horizon is split in tree ⌊a/T⌋ ≥ ⌊horizon/T⌋, inside [a, b].
    kappa, a, _ = node
    return a >= horizon and (kappa < 0 or kappa >= horizon // window_bound)


def expire(state, horizon: int, window_bound: int):
    """The state with everything only windows starting before ``horizon`` could use dropped
    (nodes (κ, a, b); κ = -1 for the window-as-one-node planner)."""
    if horizon <= state.cum_base:
        return state

    def node_ok(node):
        return _node_live(node, horizon, window_bound)

    def sv_ok(key):
        return not isinstance(key, tuple) or key[0] != 'sv' or all(map(node_ok, key[1]))

    def cache_ok(key):
        return key[2][0] >= horizon if key[0] == 'window' else node_ok(key[2])

    nodes = {n: h for n, h in state.nodes.items() if node_ok(n)}
    svs = {k: sv for k, sv in state.svs.items() if sv_ok(k)}
    filters = state.filters
    live = {k: b for k, b in filters.live.items() if sv_ok(k)}
    consumed = {b: eps for b, eps in filters.consumed.items() if b >= horizon}
    filters = dataclasses.replace(filters, consumed=consumed, live=live)
    cache = state.cache.keep(cache_ok)
    cum = readonly(state.cum[horizon - state.cum_base:].copy())
    return dataclasses.replace(state, nodes=nodes, svs=svs, filters=filters, cache=cache,
                               cum=cum, cum_base=horizon)


def state_bytes(state) -> int:
    """The pickled size of a state (what a Beam state cell stores)."""
    return len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
