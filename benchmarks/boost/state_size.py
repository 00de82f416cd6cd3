"""State size of one Boost dataset vs the number of blocks and queries, without and with the
public bounds (exact-cache capacity, block retention, replay retention).

    .venv/bin/python benchmarks/boost/state_size.py --data /tmp/boost_bench --blocks 200 \
        --per_block 100 --out benchmarks/boost/results/state_size.json

A stream of ``--blocks`` Covid-shaped blocks (the benchmark's 50 blocks, cycled), each followed
by ``--per_block`` Zipf(1) queries over the latest P ≤ T blocks (T = 16), through the pure
driver (``BoostDriver.submit`` with each query's event time). Reported after every 25 blocks:
the pickled driver state (what the Beam state cell holds), exact-cache entries, histogram
nodes, kept query ids and block prefix-sum rows.
"""

import argparse
import json

import numpy as np

from beam_dp import noise
from beam_dp.drivers.boost import BoostDriver
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.retention import state_bytes

SHAPE = (2, 2, 4, 8)
T = 16
BLOCK_MICROS = 10 ** 6


def run(data: str, blocks: int, per_block: int, bounded: bool, seed: int = 0) -> list:
    counts = np.load(f'{data}/blocks.npy')
    subsets = json.load(open(f'{data}/pool.json'))
    bounds = dict(cache_capacity=4096, retention_blocks=2 * T) if bounded else {}
    mech = preset('tree_pmw_bypass_warm', 128, window_bound=T,
                  readiness=Readiness(c0=100, s0=5), **bounds)
    driver = BoostDriver('covid', SHAPE, mech, 0, BLOCK_MICROS,
                         replay_retention_micros=8 * BLOCK_MICROS if bounded else None)
    state, rng = driver.init_state(), noise.seeded(seed)
    pick = np.random.default_rng(seed)
    ranks = np.arange(1, len(subsets) + 1, dtype=float)
    zipf = (1 / ranks) / (1 / ranks).sum()
    rows = []
    for t in range(blocks):
        state, _ = driver.add_block_counts(state, t, counts[t % len(counts)])
        state, _ = driver.seal_until(state, (t + 1) * BLOCK_MICROS, rng)
        for j in range(per_block):
            q = int(pick.choice(len(subsets), p=zipf))
            latest = int(pick.integers(1, min(T, t + 1) + 1))
            record = BoostQueryRecord(f'{t}-{j}', 'covid', [list(s) for s in subsets[q]], [],
                                      0, 0, latest)
            now = (t + 1) * BLOCK_MICROS + j
            state, _ = driver.submit(state, [record], rng, now_micros=now)
        if (t + 1) % 25 == 0:
            m = state.mech
            rows.append({'blocks': t + 1, 'queries': (t + 1) * per_block,
                         'state_bytes': state_bytes(state), 'cache_entries': len(m.cache),
                         'nodes': len(m.nodes), 'query_ids': len(state.processed) + len(
                             state.processed_old), 'count_rows': int(m.cum.shape[0])})
            print('bounded' if bounded else 'unbounded', rows[-1], flush=True)
    return rows


def plot(out: dict, path: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, rows in out.items():
        ax.plot([r['blocks'] for r in rows], [r['state_bytes'] / 1e6 for r in rows], marker='o',
                label=name)
    ax.set_xlabel('sealed blocks (40 queries each)')
    ax.set_ylabel('pickled state, MB')
    ax.set_title('Boost state per dataset (tree_pmw_bypass_warm, T = 16)')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--data', default='/tmp/boost_bench')
    p.add_argument('--blocks', type=int, default=200)
    p.add_argument('--per_block', type=int, default=100)
    p.add_argument('--out', required=True)
    p.add_argument('--plot', help='from an existing --out file: write this PNG')
    args = p.parse_args()
    if args.plot:
        plot(json.load(open(args.out)), args.plot)
        return
    out = {'unbounded': run(args.data, args.blocks, args.per_block, False),
           'bounded': run(args.data, args.blocks, args.per_block, True)}
    json.dump(out, open(args.out, 'w'), indent=1)


if __name__ == '__main__':
    main()
