"""Per-query trace of monoblock PMW-Bypass, ours and the artifact's, on the SAME noise.

Both implementations draw their Laplace noise from one table of standard Laplace variates
indexed by (task, purpose) -- purposes sv_threshold, sv_test, laplace -- scaled by each side's
own noise scale, so their paths stay identical until a rule differs. Each query is traced as:
path (EXACT / R1 / FAIL / R3), whether an SV was started, the external-update sign, the
heuristic state on supp(q) (min count, min/max threshold), q(h) before, and the ε charged.
Diagnostic only (never in the released pipeline); the artifact side runs in its virtualenv:

    .venv/bin/python benchmarks/boost/trace.py --impl ours --k 1 --queries 20000 --out /tmp/t_o
    PYTHONPATH=/tmp/turbo /tmp/turbo-venv/bin/python benchmarks/boost/trace.py --impl artifact \
        --k 1 --queries 20000 --out /tmp/t_a
    .venv/bin/python benchmarks/boost/trace.py --diff /tmp/t_o /tmp/t_a
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
PURPOSES = ('sv_threshold', 'sv_test', 'laplace')
CTX = {'task': 0, 'purpose': 'laplace', 'events': []}


def noise_table(queries: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).laplace(size=(queries, 2 * len(PURPOSES)))


def _draw(table, scale):
    """One standard-Laplace variate of (task, purpose) times ``scale`` (a second draw of the
    same purpose in one task -- the artifact's Laplace after a failed SV -- takes column + 3)."""
    col = PURPOSES.index(CTX['purpose'])
    used = CTX.setdefault('used', set())
    if (CTX['task'], col) in used:
        col += len(PURPOSES)
    used.add((CTX['task'], col))
    return float(scale * table[CTX['task'], col])


def trace_ours(data, k, queries, table, exact_alpha, no_r1_cache=False):
    from run import mechanism  # benchmarks/boost/run.py
    from beam_dp import noise
    from beam_dp.drivers.boost import rectangle_query
    from beam_dp.mechanisms.boost import pmw_bypass as pb
    from beam_dp.mechanisms.boost.state import BoostRequest
    if exact_alpha:
        pb.GRID_SLACK = 0.0

    class SV:
        def __init__(self, threshold, epsilon, n):
            self.threshold, self.epsilon, self.n = threshold, epsilon, n

    def start_sv(alpha, epsilon, n, started_by, rng):
        CTX['purpose'] = 'sv_threshold'
        CTX['events'].append('sv_init')
        return SV(alpha / 2 + _draw(table, 1 / (epsilon * n)), epsilon, n)

    def sv_fails(sv, true_value, estimate, rng):
        CTX['purpose'] = 'sv_test'
        fail = abs(true_value - estimate) + _draw(table, 1 / (sv.epsilon * sv.n)) >= sv.threshold
        CTX['events'].append('sv_fail' if fail else 'sv_pass')
        return fail

    def laplace_release(true_value, epsilon, n, rng):
        CTX['purpose'] = 'laplace'
        CTX['events'].append('laplace')
        return true_value + _draw(table, 1 / (epsilon * n)), 1 / (epsilon * n)

    pb.start_sv, pb.sv_fails, pb.laplace_release = start_sv, sv_fails, laplace_release
    mech = mechanism('pmw_bypass')
    if no_r1_cache:
        import dataclasses
        mech = dataclasses.replace(mech, cache_histogram_answers=False)
    counts = np.load(f'{data}/blocks.npy')
    subsets = json.load(open(f'{data}/pool.json'))
    tasks = json.load(open(f'{data}/workload_monoblock_k{k}.json'))[:queries]
    state = mech.add_data(mech.init_state(), counts[0])
    n = state.sizes[0]
    consts = {'x_sv': mech._sv_epsilon(n) * n * 0.05, 'x_lap': mech._lap_epsilon(n, 1, False)
              * n * 0.05, 'alpha_threshold': mech._alpha_cal / 2}
    rng = noise.seeded(0)
    rows = []
    for i, (q, first, last, _) in enumerate(tasks):
        CTX.update(task=i, events=[])
        query = rectangle_query((2, 2, 4, 8), [list(s) for s in subsets[q]])
        node = state.nodes.get((-1, 0, 0))
        before = _node_view(node.count, node.thr, node.log_h, query.dense()) if node else None
        spent = state.filters.spent(0)
        answer, state = mech.answer(state, BoostRequest(query, 0, 0, str(i)), rng)
        after = state.nodes.get((-1, 0, 0))
        upd = 0 if node is None and after is None else (
            (after.updates - (node.updates if node else 0)))
        rows.append(_row(i, q, CTX['events'], answer.path, upd, before,
                         state.filters.spent(0) - spent))
    return consts, rows


def _node_view(count, thr, log_h, dense):
    s = dense > 0
    return {'min_count': float(count[s].min()), 'min_thr': float(thr[s].min()),
            'max_thr': float(thr[s].max()), 'estimate': float((np.exp(log_h) * dense).sum())}


def _row(i, q, events, path, updates, before, charged):
    kind = ('FAIL' if 'sv_fail' in events else 'R1' if 'sv_pass' in events else
            'R3' if 'laplace' in events else 'EXACT')
    return {'i': i, 'q': int(q), 'kind': kind, 'path': path, 'events': list(events),
            'updates': int(updates), 'before': before, 'charged': charged}


def trace_artifact(data, k, queries, table):
    import artifact_runner as ar
    import torch
    from turbo.budget_accountant import MockBudgetAccountant
    from turbo.cache.cache import MockCache
    from turbo.cache import histogram_cache as hc
    from turbo.cache.sparse_vectors import SparseVector
    from turbo.executor import Executor
    from turbo.planner.no_cuts import NoCuts
    from turbo.psql import Block, MockPSQL
    from turbo.query_processor import QueryProcessor
    from turbo.task import Task
    from turbo.cache.histogram import SparseHistogram, get_flat_bin_index
    from turbo.utils.utility_theorems import get_sv_epsilon

    if table is not None:
        np.random.laplace = lambda loc=0.0, scale=1.0, size=None: loc + _draw(table, scale)
    elif CTX.get('sequential'):  # one fresh stream, drawn in call order (no addressing)
        gen = np.random.default_rng(CTX['native_seed'])
        np.random.laplace = lambda loc=0.0, scale=1.0, size=None: loc + scale * gen.laplace()
    else:                       # the artifact's own noise (global_seed, as artifact_runner)
        np.random.seed(CTX["native_seed"])
    for cls, name, purpose in ((SparseVector, 'initialize', 'sv_threshold'),
                               (SparseVector, 'check', 'sv_test'),
                               (Executor, 'run_laplace', 'laplace')):
        def wrap(orig, purpose=purpose):
            def f(*a, **kw):
                CTX['purpose'] = purpose
                out = orig(*a, **kw)
                if purpose == 'sv_test':
                    CTX['events'].append('sv_pass' if out else 'sv_fail')
                elif purpose == 'sv_threshold':
                    CTX['events'].append('sv_init')
                elif out[1].get('hit', 0) == 0:
                    CTX['events'].append('laplace')
                return out
            return f
        setattr(cls, name, wrap(getattr(cls, name)))
    orig_update = hc.HistogramCache.update_entry_histogram

    def update(self, *a, **kw):
        out = orig_update(self, *a, **kw)
        if out:
            CTX['upd'] += 1
        return out
    hc.HistogramCache.update_entry_histogram = update

    counts = np.load(f'{data}/blocks.npy')
    pool = np.load(f'{data}/pool.npy')
    tasks = json.load(open(f'{data}/workload_monoblock_k{k}.json'))[:queries]
    n = int(counts[0].sum())
    config = ar.make_config('pmw_bypass', 1, n)
    db, accountant, cache = MockPSQL(config), MockBudgetAccountant(config), MockCache(config)
    processor = QueryProcessor(db, cache, NoCuts(cache, accountant, config), accountant, config)
    bins = [tuple(int(x) for x in np.unravel_index(i, ar.SHAPE)) for i in range(128)]
    perm = [get_flat_bin_index(b, ar.SHAPE) for b in bins]
    nz = np.flatnonzero(counts[0])
    db.blocks[0] = Block(n, SparseHistogram([bins[i] for i in nz], counts[0][nz].tolist(),
                                            ar.SHAPE))
    db.blocks_count = 1
    accountant.add_new_block_budget()
    consts = {'x_sv': get_sv_epsilon(0.05, 1e-3, n) * n * 0.05, 'x_lap': np.log(1000),
              'alpha_threshold': 0.025}
    rows = []
    for i, (q, _, _, _) in enumerate(tasks):
        CTX.update(task=i, events=[], upd=0)
        dense = np.zeros(128)
        dense[perm] = pool[q]
        query = torch.tensor(dense, dtype=torch.float64).reshape(1, -1)
        entry = cache.histogram_cache.read_entry((0, 0))
        ours_order = pool[q]            # our flat order, to compare states bin for bin
        before = None
        if entry is not None:
            before = _node_view(entry.bin_updates.numpy()[0][perm],
                                entry.bin_thresholds.numpy()[0][perm],
                                np.log(entry.histogram.tensor.numpy()[0][perm]), ours_order)
        spent = 10 - accountant.get_block_budget(0).epsilon
        task = Task(id=i, query_id=int(q), query_type='linear', query=query,
                    query_db_format=query, blocks=(0, 0), n_blocks=1, utility=0.05,
                    utility_beta=0.001, name=str(i))
        processor.try_run_task(task)
        rows.append(_row(i, q, CTX['events'], None, CTX['upd'], before,
                         10 - accountant.get_block_budget(0).epsilon - spent))
    return consts, rows


def diff(a_path, b_path):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    print('constants', a['consts'], b['consts'])
    for name, t in (('A', a), ('B', b)):
        kinds = {}
        for r in t['rows']:
            kinds[r['kind']] = kinds.get(r['kind'], 0) + 1
        print(name, kinds, 'updates', sum(r['updates'] for r in t['rows']),
              'charged', round(sum(r['charged'] for r in t['rows']), 5))
    for ra, rb in zip(a['rows'], b['rows']):
        benign = ({ra['kind'], rb['kind']} == {'EXACT', 'R1'} and not ra['updates']
                  and not rb['updates'])     # a cached R1 vs a passed re-test: same state
        if not benign and (ra['kind'] != rb['kind'] or ra['updates'] != rb['updates']):
            print('first divergence at query', ra['i'])
            print(' A', ra)
            print(' B', rb)
            return ra['i']
    print('no divergence')
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--impl', choices=('ours', 'artifact'))
    p.add_argument('--data', default='/tmp/boost_bench')
    p.add_argument('--k', type=int, default=1)
    p.add_argument('--queries', type=int, default=20000)
    p.add_argument('--noise_seed', type=int, default=0)
    p.add_argument('--exact_alpha', action='store_true')
    p.add_argument('--no_r1_cache', action='store_true')
    p.add_argument('--sequential', action='store_true', help='with --native: default_rng draws')
    p.add_argument('--native', action='store_true', help="the artifact's own np.random noise")
    p.add_argument('--out')
    p.add_argument('--diff', nargs=2)
    args = p.parse_args()
    if args.diff:
        diff(*args.diff)
        return
    CTX['native_seed'], CTX['sequential'] = args.noise_seed, args.sequential
    table = None if args.native else noise_table(args.queries, args.noise_seed)
    if args.impl == 'ours':
        consts, rows = trace_ours(args.data, args.k, args.queries, table, args.exact_alpha,
                                  args.no_r1_cache)
    else:
        consts, rows = trace_artifact(args.data, args.k, args.queries, table)
    json.dump({'consts': consts, 'rows': rows}, open(args.out, 'w'))


if __name__ == '__main__':
    main()
