"""Benchmark: bytes of state per key, per candidate key and per instance for every transform
family, and how each grows with time (issue 13's state budget; docs/state.md).

Each family's pure driver is driven exactly as its DoFn drives it and the state its DoFn keeps
in ONE cell is measured as stored (``PickleCoder().encode``, the cells' coder) at several
times. Per-key figures are differences between states with and without the extra keys,
divided by their number. (The public keyed counters are measured by ``run.py``; user-level
bounding per unit by ``units.py``.)

* private keys (``ContinualCountPerKey(keys=PrivateKeys(...))``): one shard state
  (``PrivateKeysShardState``) with N never-selected candidates and with S selected keys;
* sparse (``SparseContinualCountPerKey``) and dynamic (``DynamicCountPerKey``): one key's
  ``KeyState`` (a public key, a private candidate) after t steps; dynamic also per live record;
* PMWG and BBScheduler (``WindowedPMWG``, ``BBSchedulerQueries``): one instance's mechanism
  state after n records;
* Boost (``BoostQueries``): the ``BoostDriverState`` after b sealed blocks;
* ERM (``ContinualERM``): the ``StreamState`` after b released blocks.

Each row also has ``in_memory_bytes``: what decoding the stored cell allocates (tracemalloc).

Usage: python benchmarks/state_size/families.py   (about a minute)
Writes benchmarks/state_size/results/families.json.
"""

import json
import os
import time
import traceback
import tracemalloc

import numpy as np
from apache_beam.coders import PickleCoder

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.privacy_unit import EventLevel

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
CODER = PickleCoder()


def size(state) -> int:
    return len(CODER.encode(state))


def in_memory(state) -> int:
    """What decoding the stored cell allocates (``tracemalloc``): what Beam's cache holds."""
    encoded = CODER.encode(state)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    decoded = CODER.decode(encoded)
    allocated = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del decoded
    return allocated


def private_keys():
    driver = KeyedReleaseDriver(
        metric='count', budget=PrivacyBudget(epsilon=1.0), privacy_unit=EventLevel(),
        clock=StepClock(0, 60), private_keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6),
                                                         num_shards=1))
    shard = driver.private_shard
    rows = []
    for n_candidates, steps in ((0, 1), (200, 1), (200, 100), (200, 300)):
        state = shard.init_state()
        rng = noise.seeded(1)
        for step in range(steps):
            contributions = {f'station-{i:05d}': ((1,), 1) for i in range(n_candidates)} \
                if step == 0 else {}
            _, state = shard.release_step(state, contributions, rng)
        rows.append({'family': 'private keys', 'what': 'never-selected candidate',
                     'candidates': len(state.candidates), 'steps': steps,
                     'shard_bytes': size(state), 'in_memory_bytes': in_memory(state)})
    base = rows[0]['shard_bytes']
    for r in rows[1:]:
        r['bytes_per_candidate'] = (r['shard_bytes'] - base) / r['candidates']
    for steps in (10, 100, 1000):
        state = shard.init_state()
        rng = noise.seeded(2)
        for step in range(steps):
            _, state = shard.release_step(state, {f'big-{i}': ((500,), 500) for i in range(8)},
                                          rng)
        rows.append({'family': 'private keys', 'what': 'selected key', 'steps': steps,
                     'selected': len(state.selected), 'shard_bytes': size(state), 'in_memory_bytes': in_memory(state),
                     'bytes_per_selected_key': (size(state) - base) / max(1, len(state.selected))})
    return rows


def _one_pass(driver, key, label, seed, events, until, private=False):
    """The driver's one pass over ``events`` up to step ``until`` (``KeyDriver.process``), at
    the transform's noise addresses (``SegmentLoop`` does it timer by timer)."""
    base = noise.seeded(seed)
    rng, sel_rng = base.derive(label, key), base.derive(label, 'select', key)
    first = min((s for s, _ in events), default=None)
    return driver.process(driver.init_state(first, rng, private), events, until, rng, sel_rng)


def segmented():
    from beam_dp.drivers.dynamic import DynamicDriver
    from beam_dp.drivers.segmented import CounterDriver
    from beam_dp.mechanisms.dynamic import FullyDynamicCounter
    from beam_dp.mechanisms.sparse_counter import SparseCounter
    selection = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6)).selection(1)
    rows = []
    sparse = CounterDriver(SparseCounter(1.0), None)
    sparse_private = CounterDriver(SparseCounter(1.0), selection)
    for until in (10, 100, 1000, 10000):
        events = [(s, (1,)) for s in range(0, until, max(1, until // 20))]
        _, state = _one_pass(sparse, 'k', 'L', 0, events, until)
        rows.append({'family': 'sparse', 'what': 'public key', 'steps': until,
                     'data_steps': len(events), 'key_bytes': size(state), 'in_memory_bytes': in_memory(state)})
        _, state = _one_pass(sparse_private, 'k', 'L', 0, [(0, (1,))], until,
                                      private=True)
        rows.append({'family': 'sparse', 'what': 'candidate (one record)', 'steps': until,
                     'key_bytes': size(state), 'in_memory_bytes': in_memory(state)})
    dynamic = DynamicDriver(FullyDynamicCounter(1.0), None, 'fully_dynamic')
    for live in (0, 100, 1000):
        events = [(i % 50, ((f'record-{i:07d}', 1),)) for i in range(live)]
        _, state = _one_pass(dynamic, 'k', 'L', 0, events, 100)
        rows.append({'family': 'dynamic', 'what': 'public key, live records', 'steps': 100,
                     'live_records': live, 'key_bytes': size(state), 'in_memory_bytes': in_memory(state)})
    base = rows[-3]['key_bytes']
    for r in rows[-2:]:
        r['bytes_per_live_record'] = (r['key_bytes'] - base) / r['live_records']
    return rows


def growing():
    from beam_dp.drivers.growing import BBEngine
    from beam_dp.drivers.growing import PMWGEngine
    from beam_dp.mechanisms.bb_scheduler import BBScheduler
    from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
    from beam_dp.mechanisms.pmwg import PMWG
    from beam_dp.queries import LinearQuery
    rows = []
    for domain in (8, 64, 1024):
        pmwg = PMWGEngine(PMWG(epsilon=1.0, alpha=0.1, n=1000, domain_size=domain))
        queries = tuple(LinearQuery.range(domain, 0, b) for b in range(1, 5))
        bb = BBEngine(BBScheduler(mechanism=LaplaceQueryVector(queries), epsilon=1.0, beta=0.05,
                                  n=100, domain_size=domain), 'bb')
        for engine, name in ((pmwg, 'PMWG'), (bb, 'BBScheduler')):
            for n in (0, 1000, 10000):
                state = engine.init_state()
                data = np.arange(n, dtype=np.int64) % domain
                if n:
                    _, state = engine.add(state, data, noise.seeded(3))
                rows.append({'family': name, 'what': 'instance (key, window)',
                             'domain_size': domain, 'records': n, 'instance_bytes': size(state), 'in_memory_bytes': in_memory(state)})
    return rows


def boost():
    from beam_dp.drivers.boost import BoostDriver
    from beam_dp.mechanisms.boost import Readiness
    from beam_dp.mechanisms.boost import preset
    rows = []
    mech = preset('tree_pmw_bypass', 8, readiness=Readiness(c0=2, s0=1))
    driver = BoostDriver('d', (2, 4), mech, start_micros=0, block_micros=100)
    for blocks in (1, 10, 100, 1000):
        state = driver.init_state()
        rng = np.random.default_rng(0)
        rows_in = [(b * 100 + int(rng.integers(100)), (int(rng.integers(2)), int(rng.integers(4))))
                   for b in range(blocks) for _ in range(5)]
        state, _ = driver.add_rows(state, rows_in)
        state, _ = driver.seal_until(state, blocks * 100, noise.seeded(0))
        rows.append({'family': 'Boost', 'what': 'dataset (no queries)', 'blocks': blocks,
                     'state_bytes': size(state), 'in_memory_bytes': in_memory(state)})
    return rows


def erm():
    from beam_dp.drivers.erm import ERMStreamDriver
    from beam_dp.mechanisms.erm import PSGD
    from beam_dp.mechanisms.erm import ContinualReleaseSchedule
    from beam_dp.mechanisms.erm import ERMRelease
    from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
    mech = ERMRelease(ContinualReleaseSchedule(2, 1.0), PSGD(loss, mu=0.5, passes=1,
                                                             batch_size=2), 6, 5)
    driver = ERMStreamDriver(mech, 4, StepClock(0, 1000, 0))
    rows = []
    for blocks in (1, 8, 64):
        rng = np.random.default_rng(0)
        state = driver.init_state()
        records = [(b * 1000 + int(rng.integers(1000)), rng.normal(size=4).tolist(),
                    int(rng.integers(3))) for b in range(blocks) for _ in range(5)]
        state, _ = driver.add(state, records)
        _, state = driver.close_through(state, blocks - 1, noise.seeded(0), 's')
        rows.append({'family': 'ERM (continual)', 'what': 'stream', 'blocks': blocks,
                     'state_bytes': size(state), 'in_memory_bytes': in_memory(state)})
    return rows


def main():
    results = {'benchmark': 'state_size/families', 'coder': 'PickleCoder', 'rows': [],
               'errors': {}}
    t0 = time.process_time()
    for fn in (private_keys, segmented, growing, boost, erm):
        try:
            rows = fn()
        except Exception:  # pylint: disable=broad-except
            results['errors'][fn.__name__] = traceback.format_exc(limit=3)
            print(f'{fn.__name__}: FAILED\n{results["errors"][fn.__name__]}')
            continue
        results['rows'] += rows
        for r in rows:
            print(r)
    results['cpu_seconds'] = time.process_time() - t0
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, 'families.json'), 'w') as f:
        json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
