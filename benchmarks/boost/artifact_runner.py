"""Runs the authors' artifact (columbia/turbo-artifact @ eaefd86, its in-memory "mock" mode) on
the workload written by ``workload.py``. Our code only: it imports their modules from a checkout
given by PYTHONPATH and is run with their virtualenv (never committed; see README.md):

    PYTHONPATH=/tmp/turbo /tmp/turbo-venv/bin/python benchmarks/boost/artifact_runner.py \
        --data /tmp/boost_bench --setting static --k 1 --system tree_pmw_bypass --queries 5000

It builds the same objects as their ``Simulator`` (MockPSQL, MockBudgetAccountant, MockCache,
planner, QueryProcessor) but feeds our task sequence directly instead of their simpy/Zipf task
generator, so both systems see identical data, queries and windows. Blocks are their
``SparseHistogram`` of our counts; block sizes are public metadata (``block_size``). Streaming
adds block t when the workload first asks for t + 1 blocks (their ``LatestBlocks`` policy).
"""

import argparse
import json
import math
import random
import time

import numpy as np
import torch
from omegaconf import OmegaConf

from turbo.budget_accountant import MockBudgetAccountant
from turbo.cache.cache import MockCache
from turbo.cache.histogram import SparseHistogram
from turbo.cache.histogram import get_flat_bin_index
from turbo.planner.min_cuts import MinCuts
from turbo.planner.no_cuts import NoCuts
from turbo.psql import Block
from turbo.psql import MockPSQL
from turbo.query_processor import QueryProcessor
from turbo.task import Task
from turbo.utils.utils import DEFAULT_CONFIG_FILE

from progress import Recorder  # benchmarks/boost/progress.py (ours)

SHAPE = [2, 2, 4, 8]
COVID_LR = '0:2_50:0.5_100:0.2'
#: Our system names → the artifact's (mechanism, planner, exact cache, heuristic, lr, warm start).
SYSTEMS = {
    'pmw_bypass': ('Hybrid', 'NoCuts', True, 'bin_visits:100-5', COVID_LR, False),
    'vanilla_pmw': ('PMW', 'NoCuts', False, '', 0.2, False),
    'laplace': ('Laplace', 'NoCuts', False, '', 0.2, False),
    'exact_cache': ('Laplace', 'NoCuts', True, '', 0.2, False),
    'tree_exact_cache': ('Laplace', 'MinCuts', True, '', 0.2, False),
    'tree_pmw_bypass': ('Hybrid', 'MinCuts', True, 'bin_visits:100-5', COVID_LR, False),
    'tree_pmw_bypass_warm': ('Hybrid', 'MinCuts', True, 'bin_visits:100-5', COVID_LR, True),
}


def make_config(system: str, num_blocks: int, block_size: int):
    mech, planner, cache, heuristic, lr, warm = SYSTEMS[system]
    override = {
        'mock': True, 'puredp': True, 'enable_random_seed': False, 'global_seed': 64,
        'exact_match_caching': cache, 'variance_reduction': False, 'alpha': 0.05,
        'beta': 0.001,
        'mechanism': {'type': mech, 'probabilistic_cfg': {
            'learning_rate': lr, 'heuristic': heuristic, 'bootstrapping': warm, 'tau': 0.05,
            'external_update_on_cached_results': False}},
        'planner': {'method': planner, 'monte_carlo': False},
        'budget_accountant': {'epsilon': 10, 'delta': 1e-07},
        'blocks': {'initial_num': 1, 'max_num': num_blocks},
        'logs': {'validation_interval': 0, 'mlflow': False, 'print_pid': False},
    }
    config = OmegaConf.merge(OmegaConf.load(DEFAULT_CONFIG_FILE), OmegaConf.create(override))
    metadata = {'domain_size': math.prod(SHAPE), 'attribute_names': ['positive', 'gender',
                                                                     'age', 'ethnicity'],
                'attributes_domain_sizes': SHAPE, 'block_size': block_size,
                'blocks': {str(i): {'size': block_size} for i in range(num_blocks)}}
    metadata.update(pmw_attribute_names=metadata['attribute_names'],
                    pmw_attributes_domain_sizes=SHAPE, pmw_domain_size=metadata['domain_size'])
    config.update({'blocks_metadata': metadata})
    return config


def _charge_kind(charged: float, n: int) -> str:
    """The charge of one task in units of the one-block C1 Laplace ε (monoblock: 0 = free,
    1 = a fresh Laplace answer, ≈6.8 = an SV start, ≈7.8 = an SV start and a Laplace answer)."""
    unit = math.log(1000) / (0.05 * n)
    return f'{charged / unit:.1f}'


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--data', default='/tmp/boost_bench')
    p.add_argument('--setting', required=True)
    p.add_argument('--k', type=int, required=True)
    p.add_argument('--system', required=True, choices=sorted(SYSTEMS))
    p.add_argument('--queries', type=int, default=5000)
    p.add_argument('--seed', type=int, default=64)
    p.add_argument('--out', required=True)
    p.add_argument('--stride', type=int, default=1000, help='curve_points every N queries')
    p.add_argument('--checkpoint', type=int, default=0, help='write the json every N queries')
    args = p.parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    counts = np.load(f'{args.data}/blocks.npy')
    pool = np.load(f'{args.data}/pool.npy')
    tasks = json.load(open(f'{args.data}/workload_{args.setting}_k{args.k}.json'))[:args.queries]
    num_blocks = max(t[3] for t in tasks) if args.setting != 'monoblock' else 1
    block_size = int(counts[0].sum())
    config = make_config(args.system, num_blocks, block_size)
    db, accountant, cache = MockPSQL(config), MockBudgetAccountant(config), MockCache(config)
    planner = (MinCuts if config.planner.method == 'MinCuts' else NoCuts)(cache, accountant,
                                                                          config)
    processor = QueryProcessor(db, cache, planner, accountant, config)
    bins = [tuple(int(x) for x in np.unravel_index(i, SHAPE)) for i in range(len(counts[0]))]
    perm = [get_flat_bin_index(b, SHAPE) for b in bins]     # our flat index -> theirs

    def add_block(t):
        nz = np.flatnonzero(counts[t])
        hist = SparseHistogram([bins[i] for i in nz], counts[t][nz].tolist(), SHAPE)
        db.blocks[db.blocks_count] = Block(block_size, hist)
        db.blocks_count += 1
        accountant.add_new_block_budget()

    add_block(0)
    if args.setting == 'static':
        for t in range(1, num_blocks):
            add_block(t)
    paths, previous = {}, [0.0]
    recorder = Recorder(args.out, {'system': args.system, 'setting': args.setting, 'k': args.k,
                                   'implementation': 'artifact'}, len(tasks), args.stride,
                        args.checkpoint, lambda: {'paths': dict(paths), 'seed': args.seed})
    for i, (q, first, last, available) in enumerate(tasks):
        while db.blocks_count < available:
            add_block(db.blocks_count)
        dense = np.zeros(len(perm))
        dense[perm] = pool[q]
        query = torch.tensor(dense, dtype=torch.float64).reshape(1, -1)
        task = Task(id=i, query_id=int(q), query_type='linear', query=query,
                    query_db_format=query, blocks=(first, last), n_blocks=last - first + 1,
                    utility=0.05, utility_beta=0.001, name=str(i))
        t0 = time.perf_counter()
        info = processor.try_run_task(task)
        latency = time.perf_counter() - t0
        spent = sum(10.0 - accountant.get_block_budget(b).epsilon
                    for b in range(db.blocks_count))
        kind = _charge_kind(spent - previous[0], block_size)
        previous[0] = spent
        paths[kind] = paths.get(kind, 0) + 1
        recorder.add(spent / num_blocks, latency, info is not None)
    recorder.write()


if __name__ == '__main__':
    main()
