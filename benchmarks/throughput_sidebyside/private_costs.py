"""Where the CPU of ``ContinualCountPerKey(keys=PrivateKeys(...))`` at event level goes, per
record, without the runner and without a profiler (issue 15): the entry DoFns driven directly
on bundles, and the private-keys shard state machine (``PrivateKeysShard.release_step``) on
the same rows pre-aggregated per (shard, step, key), with the OS random source, split into its
parts by ``process_time`` around the coarse calls (group counters, ``_advance``, inline tests;
the timing wrapper adds ~0.3 µs per call to the part it wraps), plus the pickling of the shard
state that the state cell's coder does after every step.

Rows as ``run.py``'s pipelines draw them (Zipf(1.1) keys, uniform times over the steps), from
one generator. ``--code DIR`` measures the beam_dp of another source tree (e.g. a
``git archive`` of an earlier commit): parts it does not have are skipped.

  python benchmarks/throughput_sidebyside/private_costs.py --rows 1000000 [--code DIR]
"""

import argparse
import collections
import dataclasses
import json
import pickle
import sys
import time

import numpy as np

START, STEP = 1_700_000_000, 60
BUNDLE = 100_000


class _Stamp:
    __slots__ = ('micros',)

    def __init__(self, micros):
        self.micros = micros


def rows(args):
    rng = np.random.default_rng(args.seed)
    p = np.arange(1, args.keys + 1, dtype=np.float64) ** -1.1
    ks = np.minimum(np.searchsorted(np.cumsum(p / p.sum()), rng.random(args.rows)),
                    args.keys - 1)
    micros = (START * 10**6 + rng.integers(0, args.steps * STEP * 10**6, args.rows)).tolist()
    names = [f'k{i:05d}' for i in range(args.keys)]
    return [(names[k], 'u') for k in ks.tolist()], [_Stamp(m) for m in micros]


def entry_costs(t, records, stamps):
    """µs per record of 'ExtractAndValidate' + 'DropUnit' + 'PreAggregate' (per record, and
    aggregating if this tree has it)."""
    from beam_dp.transforms import continual_extract as ce
    from beam_dp.transforms import continual_private_keys as cpk
    d, n = t.driver, len(records)
    args = (d, 'L', t._key_fn, None, None)   # pylint: disable=protected-access

    def drop(e):
        return e[1][0], e[1][1], e[1][2][:4] + (1,)

    def bundles(entry, stage, aggregating):
        entry.setup()
        for lo in range(0, n, BUNDLE):
            entry.start_bundle()
            stage.start_bundle()
            for r, ts in zip(records[lo:lo + BUNDLE], stamps[lo:lo + BUNDLE]):
                for out in entry.process(r, ts) or ():
                    stage.process(drop(out))
            for wv in entry.finish_bundle() or ():
                stage.process(wv.value[1])
            list(stage.finish_bundle())
    out = {}
    t0 = time.process_time()
    bundles(ce._ExtractFn(*args), cpk._PreAggregateFn(d), False)
    out['entry, per record (Extract + DropUnit + PreAggregate)'] = (time.process_time() - t0) / n
    if hasattr(ce, '_ExtractAndAggregatePrivateFn'):
        t0 = time.process_time()
        bundles(ce._ExtractAndAggregatePrivateFn(*args), cpk._MergePrivatePartialsFn(d), True)
        out['entry, aggregating (Extract summing the bundle + merge)'] = \
            (time.process_time() - t0) / n
    return out


def driver_costs(t, records, stamps, steps, batched):
    """CPU per record of ``release_step`` over every shard and step, and its parts."""
    from beam_dp.drivers import private_keys as pk
    from beam_dp.noise import secure_rng
    d = t.driver
    contributions = collections.defaultdict(lambda: collections.defaultdict(int))
    for (key, _), ts in zip(records, stamps):
        step = (ts.micros // 10**6 - START) // STEP
        contributions[(d.private_keys.shard_of(key), step)][key] += 1
    payloads = {cell: {k: ((c,), c) for k, c in per.items()} for cell, per in contributions.items()}
    shard = d.private_shard
    if batched is not None:
        shard = dataclasses.replace(shard, batched=batched)
    parts = collections.Counter()

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0 = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                parts[name] += time.process_time() - t0
                parts[name + ' calls'] += 1
        return wrapper

    group_counter = pk.PrivateKeysShard.group_counter

    class _Timed:
        def __init__(self, counter):
            self._counter = counter

        def init_state(self):
            return self._counter.init_state()

        def step(self, *a):
            return timed('counters (group steps, exact noise)', self._counter.step)(*a)
    saved = [(pk.PrivateKeysShard, 'group_counter', group_counter),
             (pk.PrivateKeysShard, '_advance', pk.PrivateKeysShard._advance)]
    pk.PrivateKeysShard.group_counter = lambda self, k: _Timed(group_counter(self, k))
    pk.PrivateKeysShard._advance = timed('_advance (first visits, lazy draws, scalar tests)',
                                         pk.PrivateKeysShard._advance)
    if hasattr(pk, 'dlap_tail_tick'):
        saved.append((pk, 'dlap_tail_tick', pk.dlap_tail_tick))
        pk.dlap_tail_tick = timed('inline tests (dlap_tail_tick)', pk.dlap_tail_tick)
    try:
        src = secure_rng()
        states = [shard.init_state() for _ in range(d.num_shards)]
        released, encoding = 0, 0.0
        t0 = time.process_time()
        for step in range(steps):
            for s in range(d.num_shards):
                out, states[s] = shard.release_step(states[s], payloads.get((s, step), {}),
                                                    src.derive('L'))
                released += len(out)
                t1 = time.process_time()          # what PickleCoder does to the state cell
                pickle.dumps(states[s], pickle.HIGHEST_PROTOCOL)
                encoding += time.process_time() - t1
        total = time.process_time() - t0 - encoding
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
    n = len(records)
    out = {'release_step total': total / n}
    named = [k for k in parts if not k.endswith(' calls')]
    for k in named:
        out[k] = parts[k] / n
    out['rest of the loop (visits, state, wake index, releases)'] = \
        (total - sum(parts[k] for k in named)) / n
    out['shard state encoded per step (pickle, outside release_step)'] = encoding / n
    calls = {k: parts[k] for k in parts if k.endswith(' calls')}
    return out, calls, released


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rows', type=int, default=1_000_000)
    parser.add_argument('--keys', type=int, default=10_000)
    parser.add_argument('--steps', type=int, default=64)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--code', help='source tree whose beam_dp to measure')
    parser.add_argument('--json', help='write the numbers here')
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, args.code)
    import beam_dp
    from beam_dp import ContinualCountPerKey, PrivacyBudget, PrivateKeys
    records, stamps = rows(args)
    t = ContinualCountPerKey(keys=PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6)),
                             start=START, step=STEP, end=START + args.steps * STEP,
                             budget=PrivacyBudget(epsilon=1.0))
    result = {'beam_dp': beam_dp.__file__, 'rows': args.rows, 'entry': entry_costs(
        t, records, stamps)}
    has_batched = 'batched' in {f.name for f in dataclasses.fields(t.driver.private_shard)}
    for batched in ((True, False) if has_batched else (None,)):
        costs, calls, released = driver_costs(t, records, stamps, args.steps, batched)
        result[f'driver, batched={batched}'] = {'us_per_record': costs, 'calls': calls,
                                                'released': released}
    print(f"beam_dp: {result['beam_dp']}")
    for name, us in result['entry'].items():
        print(f'{name:62s} {us * 1e6:6.2f} µs/record (CPU)')
    for key, value in result.items():
        if key.startswith('driver'):
            print(f"{key} ({value['released']} releases; calls {value['calls']})")
            for name, us in value['us_per_record'].items():
                print(f'  {name:60s} {us * 1e6:6.2f} µs/record (CPU)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
