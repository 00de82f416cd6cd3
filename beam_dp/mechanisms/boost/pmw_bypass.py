"""Boost: PMW-Bypass (Alg. 1), tree-structured PMW-Bypass over time blocks (Alg. 2) and their
baselines, as one pure interactive mechanism (spec 002 §3.4-§3.10).

Privacy unit and relation: one row, **event-level**, replace-one (bounded) adjacency within a
block; block sizes n_i are public (time is public and rows are grouped by it; spec §1.3, trap
9.1 option (a)). A user who contributes rows to many blocks is protected only per row (trap 9.2).
Guarantee: every block's filter caps what was spent reading it at ``epsilon_budget`` (ε_G), so the
whole interactive run is ε_G-DP by block composition (Thm A.1, A.5) and Alg. 3 for the
concurrent SVs. ``privacy_cost()`` declares ε_G.

Per query on window [a, b] of sealed blocks (spec §5.4):

1. the whole-window exact-cache entry (canonical query, window, α, β) answers for free (EXACT);
2. the window is split into nodes: the minimal dyadic cover (``planner='mincuts'``, Alg. 2, in
   tree κ = ⌊a/T⌋ of the overlapping trees of Thm A.8) or the window itself (``'nocuts'``: one
   node, Alg. 1 when the dataset has one block);
3. ready nodes (heuristic; every node for vanilla PMW, none for Laplace-only) → the widest
   contiguous run I_SV gets one SV on its union (C3: β/2 in the tree, β for one node), the
   rest I_Lap one Laplace draw each (C4 over k = |I_Lap| nodes, β/2 if an SV runs else β;
   erratum 11);
4. admission: the worst case per block (3ε_SV if the SV must start, + ε_SV for a failure, + 3ε_SV
   for an eager reset, + ε_Lap) must fit every filter; otherwise the all-Laplace plan is tried,
   then the query is refused. The decision reads only public state (histograms, live SVs,
   filters): refusals never depend on data (trap 9.6), and a failing SV can always pay for
   its Laplace answer (trap 9.5);
5. SV part: pass → R1 = q(h) for free; fail → the SV halts (lazy) or is reset at once for
   3ε_SV more (eager, Alg. 1's 4ε; erratum 12), Penalize on the nodes of I_SV (erratum 9), and
   either (``sv_failure='r2'``, the seed) R2 = q(Data) + Lap(1/(ε_SV n_SV)) for ε_SV with a
   same-direction MW update of every node of I_SV, or (``'replan'``, the artifact's executor,
   default) the whole query is answered by the all-Laplace plan at the full β;
   Laplace part: per node, a cached result with a small enough noise scale is reused for free
   (``cache.reusable``), else R3 = q(Data_i) + Lap(1/(ε_Lap n_i)) charged to the node's blocks and
   an external update only when |R3 − q(h_i)| > τα (a bypass result never updates like R2:
   that would bias h);
6. R = the n-weighted mean of the parts; fresh results go into the exact cache.

Bypass calibration (erratum 7): C1 Laplace by default (``bypass_calibration='laplace'``); the
seed's literal Alg. 1 (the PMW ε for the bypass) with ``'pmw'``. Sign of updates: erratum 3.
``noise='gaussian'`` (C5/C6, ``boost.gaussian``): the Laplace answers become exact discrete
Gaussian ones (C5' calibration, purpose 'gaussian'), filters are ρ-zCDP (``ZCDPFilters``,
capacity ``rho_budget``) and the SV's pure 3ε enters them as (3ε)²/2.
Noise: ``grid_sv`` (exact discrete Laplace on a grid; calibrations use α(1 − GRID_SLACK)).
Every draw is addressed ``rng.derive(node or node-set, purpose)`` under the caller's
(dataset, query) stream, purposes 'sv_threshold', 'sv_test', 'laplace'.

Not guaranteed: accuracy of a cached answer beyond the query that first drew it (the same event);
convergence bounds (the experiment defaults violate Thm A.4's preconditions, spec §4.3).
"""

import dataclasses
from typing import List, Optional, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.accounting import SWAP_ONE
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms.boost import calibration as cal
from beam_dp.mechanisms.boost import tree
from beam_dp.mechanisms.boost import window_sv
from beam_dp.mechanisms.boost import retention
from beam_dp.mechanisms.boost.cache import BoundedCache
from beam_dp.mechanisms.boost.cache import CachedResult
from beam_dp.mechanisms.boost.cache import PMap
from beam_dp.mechanisms.boost.cache import canonical_query_key
from beam_dp.mechanisms.boost.cache import node_cache_key
from beam_dp.mechanisms.boost.cache import reusable
from beam_dp.mechanisms.boost.cache import window_cache_key
from beam_dp.mechanisms.boost.filters import BlockFilters
from beam_dp.mechanisms.boost.filters import ZCDPFilters
from beam_dp.mechanisms.boost.gaussian import check_noise
from beam_dp.mechanisms.boost.gaussian import gaussian_release
from beam_dp.mechanisms.boost.gaussian import node_std
from beam_dp.mechanisms.boost.heuristic import COVID_LEARNING_RATE
from beam_dp.mechanisms.boost.heuristic import LearningRate
from beam_dp.mechanisms.boost.heuristic import Readiness
from beam_dp.mechanisms.boost.histogram import new_node
from beam_dp.mechanisms.boost.histogram import query_support
from beam_dp.mechanisms.boost.grid_sv import GRID_SLACK
from beam_dp.mechanisms.boost.grid_sv import laplace_release
from beam_dp.mechanisms.boost.grid_sv import start_sv
from beam_dp.mechanisms.boost.grid_sv import sv_fails
from beam_dp.mechanisms.boost.state import BoostAnswer
from beam_dp.mechanisms.boost.state import BoostRequest
from beam_dp.mechanisms.boost.state import BoostState
from beam_dp.mechanisms.boost.state import node_size
from beam_dp.mechanisms.boost.state import readonly
from beam_dp.mechanisms.boost.state import refused
from beam_dp.mechanisms.boost.state import request_refusal
from beam_dp.mechanisms.boost.state import true_value
from beam_dp.mechanisms.boost.state import Run as _Run
from beam_dp.noise import RandomSource
from beam_dp.queries import LinearQuery

__all__ = [
    'MODES',
    'PATHS',
    'PLANNERS',
    'TreePMWBypass',
]

MODES = ('bypass', 'laplace', 'pmw')
PLANNERS = ('mincuts', 'nocuts', 'maxcuts')
#: κ of the flat planner's leaves (negative: no overlapping tree; retention keeps a leaf while
#: its block is live).
FLAT_TREE = -2
PATHS = ('EXACT', 'R1', 'R2', 'R3', 'MIXED')


@dataclasses.dataclass(frozen=True)
class TreePMWBypass:
    """Boost over sealed time blocks; see the module docstring.

    Args:
      domain_size: N ≥ 2 (bins of the data domain).
      alpha, beta: the per-query accuracy target (|R − R*| ≤ α w.p. ≥ 1 − β).
      epsilon_budget: ε_G, the capacity of every block's filter.
      mode: 'bypass' (PMW-Bypass), 'laplace' (no histograms) or 'pmw' (vanilla PMW: always
        ready, no bypass).
      planner: 'mincuts' (dyadic tree, Alg. 2), 'nocuts' (the window as one node) or
        'maxcuts' (the flat baseline of spec 002 §3.6/§6.7, Q5: one histogram per block, a
        window is split into its leaves; the SV runs on the widest contiguous run of ready
        leaves, the rest is Laplace, exactly as Alg. 2 on the tree's cover; no window bound).
      exact_cache: serve repeated (query, node/window, α, β) from the cache.
      readiness, learning_rate, tau: the heuristic (C0, S0), lr schedule and update margin τ.
      tight: tight (Thm A.3) or loose PMW/SV calibration.
      bypass_calibration: 'laplace' (C1/C4, recommended) or 'pmw' (the seed's Alg. 1; 'nocuts').
      sv_reset: 'lazy' or 'eager' (erratum 12).
      sv_failure: after a failed SV test, 'r2' releases r* + Lap(1/(ε_SV n_SV)) for ε_SV (the
        seed's Alg. 1/2) with a no-margin MW update; 'replan' (the artifact's executor [REF])
        answers with the all-Laplace plan at the full β (C1/C4, ε_Lap < ε_SV) and trains the
        nodes by the external-update rule. Privacy is the same (the SV's 3ε pays for "fail").
      warm_start, warm_gamma: warm-start new nodes (§3.8), mixing γ of uniform (Thm A.9).
      window_bound: T = 2^m, the longest window; trees overlap every T blocks (Thm A.8).
      cache_histogram_answers: also cache answers with an SV-validated histogram part (R1,
        spec §3.5 [INF] "harmless, optional"); False caches fresh-noise answers only, as the
        artifact does (a repeat is then re-tested by the live SV).
      cache_capacity, retention_blocks: public bounds on the state (``retention``): at most
        that many exact-cache entries (≥ 2; None: unbounded); windows may start at most R
        blocks back, older state is dropped (None: never).
      noise, rho_budget: 'laplace' (pure ε, ``epsilon_budget``) or 'gaussian' (the Laplace
        answers with discrete Gaussian noise; ρ-zCDP filters of capacity ``rho_budget``;
        needs sv_failure='replan' and bypass_calibration='laplace').
      sv_scope: 'run' (spec Alg. 2: one SV on the widest contiguous run of ready nodes) or
        'window' (the artifact's rule, ``window_sv``: one SV on the whole window tests the
        aggregate of the histogram and Laplace parts; needs mode='bypass', planner='mincuts',
        sv_failure='replan', sv_reset='lazy', noise='laplace').

    Raises:
      InvalidParamsError: on a bad parameter.
    """
    domain_size: int
    alpha: float = 0.05
    beta: float = 1e-3
    epsilon_budget: float = 10.0
    mode: str = 'bypass'
    planner: str = 'mincuts'
    exact_cache: bool = True
    readiness: Readiness = Readiness()
    learning_rate: LearningRate = COVID_LEARNING_RATE
    tau: float = 0.05
    tight: bool = True
    bypass_calibration: str = 'laplace'
    sv_reset: str = 'lazy'
    sv_failure: str = 'replan'
    warm_start: bool = False
    warm_gamma: float = 0.0
    window_bound: int = 64
    cache_histogram_answers: bool = True
    cache_capacity: Optional[int] = None
    retention_blocks: Optional[int] = None
    noise: str = 'laplace'
    rho_budget: Optional[float] = None
    sv_scope: str = 'run'

    def __post_init__(self):
        owner = type(self).__name__
        if v.check_positive_int(owner, 'domain_size', self.domain_size) < 2:
            v._fail(owner, f'domain_size must be at least 2, got {self.domain_size}.')
        v.check_probability(owner, 'alpha', self.alpha, allow_zero=False, allow_one=True)
        v.check_probability(owner, 'beta', self.beta, allow_zero=False)
        v.check_positive(owner, 'epsilon_budget', self.epsilon_budget, allow_inf=True)
        for name, choices in (('mode', MODES), ('planner', PLANNERS),
                              ('bypass_calibration', ('laplace', 'pmw')),
                              ('sv_reset', ('lazy', 'eager')), ('sv_failure', ('replan', 'r2'))):
            v.check_choice(owner, name, getattr(self, name), choices)
        if not isinstance(self.readiness, Readiness):
            v._fail(owner, f'readiness must be a Readiness, got {self.readiness!r}.')
        if not isinstance(self.learning_rate, LearningRate):
            v._fail(owner, f'learning_rate must be a LearningRate, got {self.learning_rate!r}.')
        v.check_non_negative(owner, 'tau', self.tau)
        if not 0 <= v.check_real(owner, 'warm_gamma', self.warm_gamma) < 1:
            v._fail(owner, f'warm_gamma must be in [0, 1), got {self.warm_gamma:g}.')
        t = v.check_positive_int(owner, 'window_bound', self.window_bound)
        if t & (t - 1):
            v._fail(owner, f'window_bound must be a power of two, got {t}.')
        for flag in ('exact_cache', 'tight', 'warm_start', 'cache_histogram_answers'):
            if not isinstance(getattr(self, flag), bool):
                v._fail(owner, f'{flag} must be a bool, got {getattr(self, flag)!r}.')
        retention.check_bounds(owner, self.cache_capacity, self.retention_blocks)
        if self.mode == 'pmw' and (self.planner != 'nocuts' or self.sv_failure != 'r2'):
            v._fail(owner, "mode='pmw' (vanilla PMW) needs planner='nocuts' and "
                           "sv_failure='r2'.")
        check_noise(owner, self)
        v.check_choice(owner, 'sv_scope', self.sv_scope, ('run', 'window'))
        if self.sv_scope == 'window' and (self.mode, self.planner, self.sv_failure, self.sv_reset,
                                          self.noise) != ('bypass', 'mincuts', 'replan', 'lazy',
                                                          'laplace'):
            v._fail(owner, "sv_scope='window' needs mode='bypass', planner='mincuts', "
                           "sv_failure='replan', sv_reset='lazy' and noise='laplace'.")

    # The mechanism contract ------------------------------------------------------------------

    def privacy_cost(self) -> PrivacyCost:
        """ε_G per block (event-level, replace-one; block composition). Declared ``swap_one``:
        the block sizes are public, so an accountant refuses to add it to add/remove costs
        unless they are converted explicitly (``PrivacyCost.as_swap_one``). Gaussian: ρ_G."""
        return (PrivacyCost(rho=self.rho_budget, relation=SWAP_ONE) if self._gaussian
                else PrivacyCost(epsilon=self.epsilon_budget, relation=SWAP_ONE))

    def init_state(self) -> BoostState:
        cache = PMap() if self.cache_capacity is None else BoundedCache(self.cache_capacity)
        filters = (ZCDPFilters(self.rho_budget) if self._gaussian
                   else BlockFilters(self.epsilon_budget))
        return BoostState(readonly(np.zeros((1, self.domain_size), dtype=np.int64)), (), {},
                          {}, cache, filters)

    def add_data(self, state: BoostState, counts, rng: RandomSource = None) -> BoostState:
        """Seals the next block (id ``state.num_blocks``) with its bin counts; a sealed block
        never changes. Raises InvalidRecordError on a bad count vector (state unchanged)."""
        del rng
        c = np.asarray(counts)
        if (c.shape != (self.domain_size,) or not np.issubdtype(c.dtype, np.integer)
                or (c.size and c.min() < 0)):
            raise InvalidRecordError(f'{type(self).__name__}: a block is {self.domain_size} '
                                     f'non-negative integer counts, got {c.shape} {c.dtype}.')
        cum = readonly(np.vstack([state.cum, state.cum[-1] + c.astype(np.int64)]))
        new = dataclasses.replace(state, cum=cum, sizes=state.sizes + (int(c.sum()),))
        if self.retention_blocks is None:
            return new
        return retention.expire(new, new.num_blocks - self.retention_blocks, self.window_bound)

    seal_block = add_data

    def answer(self, state: BoostState, request: BoostRequest,
               rng: RandomSource) -> Tuple[BoostAnswer, BoostState]:
        """Answers one request (see the module docstring); a refusal leaves the state as is."""
        refusal = request_refusal(state, request, self.domain_size,
                                  self.window_bound if self.planner == 'mincuts' else None)
        if refusal:
            return refused(request, refusal), state
        q, first, last = request.query, request.first, request.last
        qkey = canonical_query_key(q)
        wkey = window_cache_key(qkey, (first, last), self.alpha, self.beta)
        hit = state.cache.get(wkey) if self.exact_cache else None
        if hit is not None:
            new = dataclasses.replace(state, answered=state.answered + 1,
                                      cache=state.cache.promote(wkey))
            return BoostAnswer(request.query_id, 'ok', hit.value, 'EXACT', None, first,
                               last), new
        nodes = [n for n in self._cover(first, last) if self._size(state, n) > 0]
        if not nodes:
            return refused(request, 'empty_window'), state
        run = _Run(state, dict(state.nodes), dict(state.svs), state.cache, state.filters, [],
                   query_support(q))
        if self.mode != 'laplace':
            for node in nodes:
                self._ensure_node(run, node)
        out = (window_sv.answer(self, run, nodes, q, qkey, rng) if self.sv_scope == 'window'
               else self._answer_runs(run, nodes, q, qkey, rng))
        if out is None:
            return refused(request, 'budget_exhausted'), state
        value, paths = out
        path = paths[0] if len(paths) == 1 else 'MIXED'
        cache = run.cache
        if self.exact_cache and (self.cache_histogram_answers or 'R1' not in paths):
            cache = cache.set(wkey, CachedResult(value, 0.0, path))
        new = dataclasses.replace(state, nodes=run.nodes, svs=run.svs, cache=cache,
                                  filters=run.filters, answered=state.answered + 1)
        return BoostAnswer(request.query_id, 'ok', value, path, None, first, last,
                           tuple(run.charges)), new

    def _answer_runs(self, run: _Run, nodes, q: LinearQuery, qkey: str, rng: RandomSource):
        """(value, paths) by spec Alg. 2 (``sv_scope='run'``), or None if unaffordable."""
        plan = self._admit(run, nodes, qkey)
        if plan is None:
            return None
        sv_nodes, lap_nodes = plan
        parts, paths = [], []
        if sv_nodes:
            part = self._sv_part(run, sv_nodes, q, qkey, rng)
            if part is None:
                # sv_failure='replan': the failed test is paid by the SV; the answer is the
                # all-Laplace plan over the whole cover at the full β (its own (α, β) proof).
                sv_nodes, lap_nodes = [], list(nodes)
            else:
                parts.append(part)
                paths.append(part[2])
        if lap_nodes:
            parts.append(self._laplace_part(run, lap_nodes, bool(sv_nodes), q, qkey, rng))
            paths.append(parts[-1][2] if sv_nodes or not plan[0] else 'R2')
        return tree.aggregate([p[0] for p in parts], [p[1] for p in parts]), paths

    # Planning ---------------------------------------------------------------------------------

    def _cover(self, first: int, last: int) -> List[tuple]:
        if self.planner == 'nocuts':
            return [(-1, first, last)]
        if self.planner == 'maxcuts':
            return [(FLAT_TREE, t, t) for t in range(first, last + 1)]
        return tree.tree_split(first, last, self.window_bound)

    _size = staticmethod(node_size)
    _true_value = staticmethod(true_value)            # SECRET: only ever compared or noised

    def _ensure_node(self, run: _Run, node: tuple) -> None:
        if node not in run.nodes:
            run.nodes[node] = new_node(run.nodes, node, lambda n: self._size(run.state, n),
                                       self.domain_size, self.readiness,
                                       self.warm_gamma if self.warm_start else None)

    def _split_beta(self, with_sv: bool) -> Tuple[float, float]:
        """(β of the SV part, β of the Laplace part): Alg. 2 halves β; one node keeps it."""
        if self.planner == 'nocuts':
            return self.beta, self.beta
        return self.beta / 2.0, (self.beta / 2.0 if with_sv else self.beta)

    def _sv_epsilon(self, n_sv: int) -> float:
        return cal.calibrate_pmw(self._alpha_cal, self._split_beta(True)[0], n_sv, self.tight)

    @property
    def _gaussian(self) -> bool:
        return self.noise == 'gaussian'

    def _sv_fee(self, eps: float) -> float:
        """One SV start: 3ε (pure), or (3ε)²/2 in a zCDP filter (``cal.pure_to_zcdp``)."""
        return cal.pure_to_zcdp(3 * eps) if self._gaussian else 3 * eps

    def _lap_epsilon(self, n_lap: int, k: int, with_sv: bool) -> float:
        """The per-node cost of the noise part: ε_Lap (C1/C4), or ρ (C5', Gaussian)."""
        if self._gaussian:
            return cal.calibrate_gaussian(self._alpha_cal, self._split_beta(with_sv)[1], n_lap, k)
        if self.bypass_calibration == 'pmw':
            return cal.calibrate_pmw(self._alpha_cal, self.beta, n_lap, self.tight)
        return cal.calibrate_laplace(self._alpha_cal, self._split_beta(with_sv)[1], n_lap, k)

    @property
    def _alpha_cal(self) -> float:
        return self.alpha * (1.0 - GRID_SLACK)

    def _sv_key(self, sv_nodes) -> tuple:
        return ('sv', tuple(sv_nodes), self.alpha, self.beta)

    def _admit(self, run: _Run, nodes: List[tuple], qkey: str):
        """(I_SV, I_Lap) whose worst-case charges every block can pay, or None."""
        if self.mode == 'laplace':
            ready = [False] * len(nodes)
        elif self.mode == 'pmw':
            ready = [True] * len(nodes)
        else:
            ready = [self.readiness.is_ready(run.nodes[n].count, run.nodes[n].thr, run.support)
                     for n in nodes]
        i, j = tree.largest_contiguous_run(ready, [b - a + 1 for _, a, b in nodes])
        plans = [(nodes[i:j], nodes[:i] + nodes[j:])]
        if j > i and self.mode != 'pmw':
            plans.append(([], list(nodes)))
        for sv_nodes, lap_nodes in plans:
            if run.filters.affordable(self._worst_case(run, sv_nodes, lap_nodes, qkey)):
                return sv_nodes, lap_nodes
        return None

    def _worst_case(self, run: _Run, sv_nodes, lap_nodes, qkey: str) -> List[Tuple[int, float]]:
        """Per-block worst case: the SV fee(s), then the dearest of the answer branches."""
        per = {}
        replan = self.sv_failure == 'replan' and sv_nodes
        if sv_nodes:
            eps = self._sv_epsilon(sum(self._size(run.state, n) for n in sv_nodes))
            fees = (0 if run.filters.is_live(self._sv_key(sv_nodes)) else 3)
            fees += 3 if self.sv_reset == 'eager' else 0
            fail = 0 if replan else 1
            cost = (fees // 3) * self._sv_fee(eps) if self._gaussian else (fees + fail) * eps
            for _, a, z in sv_nodes:
                for b in range(a, z + 1):
                    per[b] = cost
        branches = [(lap_nodes, bool(sv_nodes))] + ([(sv_nodes + lap_nodes, False)] if replan
                                                    else [])
        extra = {}
        for nodes, with_sv in branches:
            if nodes:
                for node, eps in self._laplace_plan(run, nodes, with_sv, qkey):
                    for b in range(node[1], node[2] + 1):
                        extra[b] = max(extra.get(b, 0.0), eps)
        for b, eps in extra.items():
            per[b] = per.get(b, 0.0) + eps
        return [(b, eps) for b, eps in per.items() if eps]

    def _laplace_plan(self, run: _Run, lap_nodes, with_sv: bool, qkey: str):
        """[(node, ε_Lap or 0 when a cached result is reused)] (public: sizes and the cache)."""
        n_lap = sum(self._size(run.state, n) for n in lap_nodes)
        eps = self._lap_epsilon(n_lap, len(lap_nodes), with_sv)
        out = []
        for node in lap_nodes:
            fresh_scale = (node_std(eps, self._size(run.state, node)) if self._gaussian
                           else 1.0 / (eps * self._size(run.state, node)))
            entry = (run.cache.get(node_cache_key(qkey, node, self.alpha, self.beta))
                     if self.exact_cache else None)
            out.append((node, 0.0 if reusable(entry, fresh_scale) else eps))
        return out

    # Execution --------------------------------------------------------------------------------

    def _sv_part(self, run: _Run, sv_nodes, q: LinearQuery, qkey: str, rng: RandomSource):
        state = run.state
        sizes = [self._size(state, n) for n in sv_nodes]
        n_sv = sum(sizes)
        eps = self._sv_epsilon(n_sv)
        key = self._sv_key(sv_nodes)
        label = tuple(sv_nodes)
        blocks = [b for _, a, z in sv_nodes for b in range(a, z + 1)]
        if key not in run.svs or not run.filters.is_live(key):
            run.pay(blocks, 'sv_init', self._sv_fee(eps), start=key)
            run.svs[key] = start_sv(self._alpha_cal, eps, n_sv, str(label),
                                    rng.derive(label, 'sv_threshold'))
        r_h = tree.aggregate([run.nodes[n].estimate(q) for n in sv_nodes], sizes)
        r_true = self._true_value(state, sv_nodes, q)
        if not sv_fails(run.svs[key], r_true, r_h, rng.derive(label, 'sv_test')):
            return r_h, n_sv, 'R1'
        run.filters = run.filters.halt(key)
        del run.svs[key]
        support = run.support
        if self.sv_failure == 'r2':
            run.pay(blocks, 'sv_fail', eps)
        if self.sv_reset == 'eager':
            run.pay(blocks, 'sv_init', self._sv_fee(eps), start=key)
            run.svs[key] = start_sv(self._alpha_cal, eps, n_sv, str(label),
                                    rng.derive(label, 'sv_threshold_next'))
        if self.sv_failure == 'replan':
            for node in sv_nodes:           # Penalize (erratum 9); the caller re-plans
                h = run.nodes[node]
                run.nodes[node] = h.with_thresholds(
                    self.readiness.penalize(h.count, h.thr, support))
            return None
        value, scale = laplace_release(r_true, eps, n_sv, rng.derive(label, 'laplace'))
        lr = min(self.learning_rate.rate(run.nodes[n].count, support) for n in sv_nodes)
        s = lr if value > r_h else -lr
        for node in sv_nodes:
            h = run.nodes[node].update(q, s)
            run.nodes[node] = h.with_thresholds(self.readiness.penalize(h.count, h.thr, support))
        if self.exact_cache and len(sv_nodes) == 1:
            run.cache = run.cache.set(node_cache_key(qkey, sv_nodes[0], self.alpha, self.beta),
                                      CachedResult(value, scale, 'R2'))
        return value, n_sv, 'R2'

    def _laplace_part(self, run: _Run, lap_nodes, with_sv: bool, q: LinearQuery, qkey: str,
                      rng: RandomSource, plan=None):
        """``plan``: [(node, ε)] calibrated by the caller (``window_sv``), else C4 here."""
        values, sizes, fresh = [], [], 0
        for node, eps in plan or self._laplace_plan(run, lap_nodes, with_sv, qkey):
            n_i = self._size(run.state, node)
            ckey = node_cache_key(qkey, node, self.alpha, self.beta)
            if not eps:
                value = run.cache.get(ckey).value
                run.cache = run.cache.promote(ckey)
            else:
                fresh += 1
                kind = 'gaussian' if self._gaussian else 'laplace'
                run.pay(range(node[1], node[2] + 1), kind, eps)
                release = gaussian_release if self._gaussian else laplace_release
                value, scale = release(self._true_value(run.state, [node], q), eps, n_i,
                                       rng.derive(node, kind))
                if self.exact_cache:
                    run.cache = run.cache.set(ckey, CachedResult(value, scale, 'R3'))
                if self.mode == 'bypass':
                    self._external_update(run, node, q, value)
            values.append(value)
            sizes.append(n_i)
        return tree.aggregate(values, sizes), sum(sizes), ('R3' if fresh else 'EXACT')

    def _external_update(self, run: _Run, node, q: LinearQuery, value: float):
        h = run.nodes[node]
        gap = value - h.estimate(q)
        if abs(gap) > self.tau * self.alpha:
            lr = self.learning_rate.rate(h.count, run.support)
            run.nodes[node] = h.update(q, lr if gap > 0 else -lr)

