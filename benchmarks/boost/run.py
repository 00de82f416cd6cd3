"""Our Boost (beam_dp.drivers.boost + beam_dp.mechanisms.boost) on the workload of
``workload.py``: the same data, query pool, Zipf ranks and windows as ``artifact_runner.py``.

    .venv/bin/python benchmarks/boost/run.py --data /tmp/boost_bench --setting static --k 1 \
        --system tree_pmw_bypass --queries 10000 --out /tmp/boost_res/ours_static_k1_x.json

Each query goes through the pure driver (``BoostDriver.submit``: query parsing, deterministic
order, replay set, the mechanism, ledger rows); blocks enter as pre-aggregated histograms and are
sealed by the event-time watermark (streaming: block t is sealed when the workload first asks for
t + 1 blocks). Budget = the mean over blocks of the ε consumed per block (static, monoblock) or
the sum over blocks / 50 (streaming), as in the artifact runner. Latency: wall time of
``submit`` per query (driver + mechanism) and of ``TreePMWBypass.answer`` alone.
"""

import argparse
import collections
import json
import time

import numpy as np

from beam_dp import noise
from beam_dp.drivers.boost import BoostDriver
from beam_dp.io.boost import BoostAnswerRecord
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset
from beam_dp.mechanisms.boost.pmw_bypass import TreePMWBypass
from progress import Recorder  # benchmarks/boost/progress.py

SHAPE = (2, 2, 4, 8)
SYSTEMS = ('pmw_bypass', 'vanilla_pmw', 'laplace', 'exact_cache', 'tree_exact_cache',
           'tree_pmw_bypass', 'tree_pmw_bypass_warm', 'tree_pmw_bypass_wsv',
           'tree_pmw_bypass_warm_wsv', 'max_cuts')
#: '<preset>_wsv': the preset with sv_scope='window' (the artifact's whole-window SV rule).
WSV = '_wsv'


def mechanism(system: str, c0: float = 100, s0: float = 5,
              beta: float = 1e-3) -> TreePMWBypass:
    extra = {} if system in ('vanilla_pmw', 'laplace', 'exact_cache', 'tree_exact_cache') else {
        'readiness': Readiness(c0=c0, s0=s0)}
    if system.endswith(WSV):
        system, extra['sv_scope'] = system[:-len(WSV)], 'window'
    return preset(system, 128, alpha=0.05, beta=beta, epsilon_budget=10.0, tau=0.05, **extra)


class _Timed:
    """Wraps the mechanism's ``answer`` to time it (the driver calls it once per query)."""

    def __init__(self):
        self.times = []

    def wrap(self, mech):
        original = TreePMWBypass.answer
        timer = self

        def answer(self, state, request, rng):
            t0 = time.perf_counter()
            out = original(self, state, request, rng)
            timer.times.append(time.perf_counter() - t0)
            return out
        TreePMWBypass.answer = answer
        return mech


def run(data: str, setting: str, k: int, system: str, queries: int, seed: int = 0,
        c0: float = 100, s0: float = 5, out: str = '', stride: int = 1000,
        checkpoint: int = 0, beta: float = 1e-3) -> dict:
    counts = np.load(f'{data}/blocks.npy')
    subsets = json.load(open(f'{data}/pool.json'))
    tasks = json.load(open(f'{data}/workload_{setting}_k{k}.json'))[:queries]
    num_blocks = 1 if setting == 'monoblock' else max(t[3] for t in tasks)
    timer = _Timed()
    driver = BoostDriver('covid', SHAPE, timer.wrap(mechanism(system, c0, s0, beta)), 0, 1)
    state = driver.init_state()
    rng = noise.seeded(seed)

    def seal(through):
        nonlocal state
        for b in range(state.mech.num_blocks, through):
            state, _ = driver.add_block_counts(state, b, counts[b])
        state, _ = driver.seal_until(state, through, rng)

    paths = collections.Counter()

    def extra():
        mech_lat = np.array(timer.times) * 1e3
        return {'mechanism_latency_ms_mean': float(mech_lat.mean()),
                'mechanism_latency_ms_p50': float(np.median(mech_lat)),
                'paths': dict(paths), 'seed': seed, 'c0': c0, 's0': s0, 'beta': beta}

    recorder = Recorder(out, {'system': system, 'setting': setting, 'k': k,
                              'implementation': 'beam_dp'}, len(tasks), stride, checkpoint,
                        extra)
    seal(1 if setting != 'static' else num_blocks)
    for i, (q, first, last, available) in enumerate(tasks):
        if available > state.mech.num_blocks:
            seal(available)
        record = BoostQueryRecord(str(i), 'covid', [list(s) for s in subsets[q]], [], first,
                                  last, 0)
        t0 = time.perf_counter()
        state, result = driver.submit(state, [record], rng)
        latency = time.perf_counter() - t0
        result = result[0]
        if isinstance(result, BoostAnswerRecord):
            paths[result.path] += 1
        else:
            paths['refused:' + result.reason] += 1
        consumed = state.mech.filters.consumed
        recorder.add(sum(consumed.values()) / num_blocks, latency,
                     isinstance(result, BoostAnswerRecord))
    return recorder.write() if out else recorder.record()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--data', default='/tmp/boost_bench')
    p.add_argument('--setting', required=True)
    p.add_argument('--k', type=int, required=True)
    p.add_argument('--system', required=True, choices=SYSTEMS)
    p.add_argument('--queries', type=int, default=5000)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--c0', type=float, default=100)
    p.add_argument('--s0', type=float, default=5)
    p.add_argument('--out', required=True)
    p.add_argument('--stride', type=int, default=1000, help='curve_points every N queries')
    p.add_argument('--checkpoint', type=int, default=0, help='write the json every N queries')
    p.add_argument('--beta', type=float, default=1e-3)
    args = p.parse_args()
    run(args.data, args.setting, args.k, args.system, args.queries, args.seed, args.c0, args.s0,
        args.out, args.stride, args.checkpoint, args.beta)


if __name__ == '__main__':
    main()
