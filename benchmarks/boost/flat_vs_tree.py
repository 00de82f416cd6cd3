"""Tree vs flat (spec 002 §6.8 "Tree vs flat (Q5)"): Boost's dyadic tree (planner MinCuts,
preset ``tree_pmw_bypass``) against the flat per-block baseline (planner MaxCuts, preset
``max_cuts``) on the Covid-shaped data of ``workload.py``, 50 static blocks, queries on the latest
P blocks with P ~ round(Normal(mean, std)) clipped to [1, 50], Zipf(k = 1) ranks over the
34,425-query pool. The paper: the tree wins when queries request ≥ 25 partitions on average, the
flat structure wins for small windows.

    .venv/bin/python benchmarks/boost/flat_vs_tree.py --data /tmp/boost_bench --queries 3000 \
        --out benchmarks/boost/results/flat_vs_tree.json

Needs ``workload.py``'s blocks.npy and pool.json in --data (it writes its own workload files
there). Metric: final average cumulative ε per block (as ``run.py``).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))

import run as ours  # noqa: E402  pylint: disable=wrong-import-position
from pipelines.boost_queries.sample_data import zipf_ranks  # noqa: E402  pylint: disable=wrong-import-position

BLOCKS = 50
POOL = 34425


def q5_workload(mean: float, std: float, queries: int, seed: int = 1):
    rng = np.random.default_rng([seed, int(mean * 10), int(std * 10)])
    ranks = zipf_ranks(1.0, POOL, queries, rng)
    sizes = np.clip(np.rint(rng.normal(mean, std, queries)), 1, BLOCKS).astype(int)
    return [(int(q), BLOCKS - int(p), BLOCKS - 1, BLOCKS) for q, p in zip(ranks, sizes)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', default='/tmp/boost_bench')
    ap.add_argument('--queries', type=int, default=3000)
    ap.add_argument('--means', type=float, nargs='+', default=[1, 5, 10, 25, 40, 50])
    ap.add_argument('--std', type=float, default=5.0)
    ap.add_argument('--systems', nargs='+', default=['tree_pmw_bypass', 'max_cuts'])
    ap.add_argument('--out', default='')
    args = ap.parse_args()
    rows = []
    for mean in args.means:
        setting = f'q5m{mean:g}s{args.std:g}'
        path = os.path.join(args.data, f'workload_{setting}_k1.json')
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(q5_workload(mean, args.std, args.queries), f)
        for system in args.systems:
            t0 = time.time()
            rec = ours.run(args.data, setting, 1, system, args.queries, stride=args.queries)
            row = dict(mean_window=mean, std=args.std, system=system, queries=args.queries,
                       epsilon_per_block=rec['final_avg_budget'],
                       seconds=round(time.time() - t0, 1))
            rows.append(row)
            print(row, flush=True)
    if args.out:
        with open(args.out, 'w', encoding='utf-8') as f:
            json.dump({'queries': args.queries, 'std': args.std, 'rows': rows}, f, indent=1)


if __name__ == '__main__':
    main()
