"""Diagnostic: where ours' budget goes, by (answer path, ledger purpose), mean ε per block,
printed every 10,000 queries (the pure mechanism, no driver; noise seed 0):

    .venv/bin/python benchmarks/boost/ledger.py /tmp/boost_bench_300k static 0 tree_pmw_bypass 60000

SYSTEM is a run.py system (``*_wsv``: sv_scope='window').
"""
import collections
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import mechanism  # noqa: E402  pylint: disable=wrong-import-position
from beam_dp import noise  # noqa: E402  pylint: disable=wrong-import-position
from beam_dp.drivers.boost import rectangle_query  # noqa: E402  pylint: disable=wrong-import-position
from beam_dp.mechanisms.boost.state import BoostRequest  # noqa: E402  pylint: disable=wrong-import-position
SHAPE = (2, 2, 4, 8)


def main(data, setting, k, system, queries):
    counts = np.load(f'{data}/blocks.npy')
    subsets = json.load(open(f'{data}/pool.json'))
    tasks = json.load(open(f'{data}/workload_{setting}_k{k}.json'))[:queries]
    num_blocks = max(t[3] for t in tasks)
    mech = mechanism(system)
    state, rng = mech.init_state(), noise.seeded(0)
    total, paths = collections.Counter(), collections.Counter()
    for i, (q, first, last, available) in enumerate(tasks):
        while state.num_blocks < (num_blocks if setting == 'static' else available):
            state = mech.add_data(state, counts[state.num_blocks])
        query = rectangle_query(SHAPE, [list(s) for s in subsets[q]])
        ans, state = mech.answer(state, BoostRequest(query, first, last, str(i)),
                                 rng.derive('covid', str(i)))
        paths[ans.path] += 1
        for _, purpose, eps in ans.charges:
            total[(ans.path, purpose)] += eps / num_blocks
        if (i + 1) % 10000 == 0:
            print(i + 1, round(sum(total.values()), 5), dict(paths),
                  {f'{p}/{u}': round(v, 5) for (p, u), v in sorted(total.items())}, flush=True)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
