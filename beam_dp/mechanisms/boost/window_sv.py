"""The whole-window SV rule of tree-structured PMW-Bypass (``TreePMWBypass(sv_scope='window')``),
the rule of the authors' artifact (columbia/turbo-artifact @ eaefd86: ``MinCuts`` planner +
``Executor.run_sv_check`` in Hybrid mode) [REF].

Spec 002 §3.7 (Alg. 2, ``sv_scope='run'``, the default) tests only the widest contiguous run of
ready nodes, I_SV, with an SV on n_SV, and answers the other nodes with Laplace noise calibrated
for their own aggregate (C4 over n_Lap, k = |I_Lap|, β/2), so each part is α-accurate by
itself. When I_Lap is a small part of the window that Laplace part is dear (n_Lap ≪ n).

This rule instead, per query over the cover I of the window W (n_W = Σ n_i):

1. I_Lap = the nodes that are not ready or whose cached result is reusable, I_H = the rest
   (any subset; no contiguity needed since the SV covers all of W);
2. every node of I_Lap is answered at the **all-Laplace calibration of the window** (C4 over
   n_W, k = |I|, β/2; the artifact uses β), reusing a cached result when its noise is small
   enough; these are fresh DP releases, charged to their blocks and exact-cached;
3. R̂ = Aggregate(q(h_i) on I_H, the Laplace results on I_Lap), and one SV keyed by I (C3 over
   n_W, β/2, its 3ε_SV charged to every block of W when it starts) tests |q(Data_W) − R̂|;
4. pass → R̂ (α-accurate by the SV, whatever the Laplace parts' own accuracy); fail → the SV
   halts (lazy), Penalize on I_H, and the query is answered by the all-Laplace plan: the I_Lap
   results already drawn plus fresh Laplace on I_H (same calibration, so nothing is paid twice).
   With no ready node the query is the all-Laplace plan at the full β (erratum 11), no SV.

Privacy is that of Alg. 2 (spec §4.1): the test statistic |q(Data_W) − R̂| has sensitivity 1/n_W
in every block of W (R̂ is public state and already-paid releases), so it is an adaptive SV query
on W; every block pays the SV's 3ε_SV once per start and at most one Laplace ε per query (each
block lies in one node); concurrent SVs over different windows compose by Alg. 3 (the filters).
Accuracy: |R − R*| > α needs a passed test with error > α (≤ β/2, C3) or an all-Laplace draw
(the I_Lap results + the I_H ones a failure draws, one C4 draw at β/2) with error > α (≤ β/2):
≤ β per query. Conditioned on the path it is not: a failure selects large I_Lap noise, so an R2
answer alone may miss α more often than β (the union bound holds over all answers).
"""

from typing import List, Optional, Tuple

from beam_dp.mechanisms.boost import tree
from beam_dp.mechanisms.boost.grid_sv import start_sv
from beam_dp.mechanisms.boost.grid_sv import sv_fails


def _worst_case(mech, run, nodes, full, with_sv: bool) -> List[Tuple[int, float]]:
    """Per block: the SV's start fee (if one runs and is not live) + its node's Laplace ε (paid
    now on I_Lap or by the all-Laplace answer after a failure on I_H; never both)."""
    fee = 0.0
    if with_sv and not run.filters.is_live(mech._sv_key(nodes)):
        fee = mech._sv_fee(mech._sv_epsilon(sum(mech._size(run.state, n) for n in nodes)))
    per = {b: fee + eps for (_, a, z), eps in full for b in range(a, z + 1)}
    return [(b, eps) for b, eps in per.items() if eps]


def answer(mech, run, nodes, q, qkey, rng) -> Optional[Tuple[float, List[str]]]:
    """(value, paths) of one query over the cover ``nodes``, or None when no plan is affordable
    (``run`` is then unchanged). ``mech`` is the ``TreePMWBypass``; ``run`` its ``Run``."""
    full = mech._laplace_plan(run, nodes, True, qkey)          # [(node, ε or 0 if cached)]
    hist = [n for n, eps in full if eps and mech.readiness.is_ready(
        run.nodes[n].count, run.nodes[n].thr, run.support)]
    if not hist or not run.filters.affordable(_worst_case(mech, run, nodes, full, True)):
        full = mech._laplace_plan(run, nodes, False, qkey)     # no SV: the full β
        if not run.filters.affordable(_worst_case(mech, run, nodes, full, False)):
            return None
        value, _, path = mech._laplace_part(run, nodes, False, q, qkey, rng, plan=full)
        return value, [path]
    lap = [(n, eps) for n, eps in full if n not in hist]
    parts = [mech._laplace_part(run, [n for n, _ in lap], False, q, qkey, rng, plan=lap)
             ] if lap else []
    sizes = [mech._size(run.state, n) for n in hist]
    r_h = tree.aggregate([run.nodes[n].estimate(q) for n in hist], sizes)
    estimate = tree.aggregate([r_h] + [p[0] for p in parts], [sum(sizes)] + [p[1] for p in parts])
    n_w = sum(mech._size(run.state, n) for n in nodes)
    eps_sv = mech._sv_epsilon(n_w)
    key, label = mech._sv_key(nodes), tuple(nodes)
    if key not in run.svs or not run.filters.is_live(key):
        run.pay([b for _, a, z in nodes for b in range(a, z + 1)], 'sv_init',
                mech._sv_fee(eps_sv), start=key)
        run.svs[key] = start_sv(mech._alpha_cal, eps_sv, n_w, str(label),
                                rng.derive(label, 'sv_threshold'))
    r_true = mech._true_value(run.state, nodes, q)             # SECRET: only compared
    if not sv_fails(run.svs[key], r_true, estimate, rng.derive(label, 'sv_test')):
        return estimate, ['R1'] + [p[2] for p in parts]
    run.filters = run.filters.halt(key)
    del run.svs[key]
    for node in hist:                                          # Penalize (erratum 9)
        h = run.nodes[node]
        run.nodes[node] = h.with_thresholds(mech.readiness.penalize(h.count, h.thr, run.support))
    parts.append(mech._laplace_part(run, hist, False, q, qkey, rng,
                                    plan=[(n, eps) for n, eps in full if n in hist]))
    return tree.aggregate([p[0] for p in parts], [p[1] for p in parts]), ['R2']
