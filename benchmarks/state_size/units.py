"""Benchmark: bytes of user-level bounding state ('BoundPerUnit') per privacy unit, before and
after the compact usage record (issue 13).

The SAME stream is run through the 'BoundPerUnit' DoFn of this tree and through the DoFn of an
earlier revision (``--before``, read with ``git show``: the layout that kept every kept
(key, step, n) of a unit for ever), driven by hand exactly as Beam drives it: one bundle per
step, one bag per unit shard, and before each step the watermark passes the previous step's
release time (due 'released' timers fire; the earlier DoFn has none). Units follow four
patterns over ``--steps`` steps:

* heavy: 3 records to each of K keys every step: exhausts S (and m) after S steps;
* regular: active in a step with probability 0.2, 1-2 of its K keys, 1-2 records each;
* brief: active in its first 10 steps only, then idle for ever;
* capped: (only with ``--max-total``) like heavy, but stops at C records.

At a few checkpoints it measures, per pattern, the bytes per unit as STORED (the shard bag's
``PickleCoder`` encoding of a table holding that pattern's units, minus an empty table, over
the number of units) and IN MEMORY (what unpickling that table allocates, by ``tracemalloc``:
what Beam's state cache holds), plus the whole bags per unit.

Usage: python benchmarks/state_size/units.py [--units 1500] [--steps 200] [--before REV]
Writes benchmarks/state_size/results/units.json.
"""

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import time
import types

from apache_beam.coders import PickleCoder

from beam_dp import UserLevel
from beam_dp.drivers.clock import StepClock
from beam_dp.transforms import contribution_bounding as after_module

import families  # this directory: the shared in-memory measure
from beam_dp.transforms.shell import key_bytes

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.fuzz.harness import _Bag  # noqa: E402  the fake state cells the DoFn tests use
from tests.fuzz.harness import _Cell  # noqa: E402
from tests.fuzz.harness import _Timer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(HERE, 'results')
CODER = PickleCoder()
CLOCK = StepClock(start_micros=0, step_micros=60_000_000, allowed_lateness_micros=30_000_000)
PATTERNS = ('heavy', 'regular', 'brief', 'capped')


def load_before(rev: str) -> types.ModuleType:
    """The contribution_bounding module at ``rev`` (its own imports resolve in this tree)."""
    source = subprocess.run(['git', 'show', f'{rev}:beam_dp/transforms/contribution_bounding.py'],
                            cwd=ROOT, check=True, capture_output=True, text=True).stdout
    module = types.ModuleType('contribution_bounding_before')
    sys.modules[module.__name__] = module       # its tables must pickle (the header cancels out)
    exec(compile(source, f'{rev}:contribution_bounding.py', 'exec'), module.__dict__)  # pylint: disable=exec-used
    return module


def stream(units, steps, bound, max_total, seed):
    """Per step, the (unit, (key, step, payload)) records of that step; and each unit's
    pattern. Keys are public-key ids (ints), units 'rider-NNNNNNNN' strings."""
    rng = random.Random(seed)
    patterns = {}
    names = [f'rider-{i:08d}' for i in range(units)]
    for i, name in enumerate(names):
        patterns[name] = PATTERNS[i % (4 if max_total else 3)]
    keys_of = {u: rng.sample(range(500), bound.max_keys_per_unit) for u in names}
    per_step = []
    for step in range(steps):
        records = []
        for u in names:
            p = patterns[u]
            if p in ('heavy', 'capped'):
                picks = [(k, 3) for k in keys_of[u]]
            elif p == 'regular':
                picks = ([(k, rng.randint(1, 2)) for k in rng.sample(keys_of[u], rng.randint(
                    1, min(2, len(keys_of[u]))))] if rng.random() < 0.2 else [])
            else:
                picks = [(k, 1) for k in keys_of[u][:2]] if step < 10 else []
            for k, n in picks:
                records += [(u, (k, step, None)) for _ in range(n)]
        per_step.append(records)
    return per_step, patterns


def run(module, per_step, bound, clock, checkpoints, patterns):
    """Drives module's group + bound DoFns; at each checkpoint measures the stored records."""
    group_fn = module._GroupByUnitInBundleFn('T')   # pylint: disable=protected-access
    group_fn.setup()
    has_clock = hasattr(module._BoundContributionsFn, 'RELEASED_TIMER')   # pylint: disable=protected-access
    bound_fn = (module._BoundContributionsFn(bound, 'T', False, clock) if has_clock   # pylint: disable=protected-access
                else module._BoundContributionsFn(bound, 'T', False))   # pylint: disable=protected-access
    bags = collections.defaultdict(_Bag)
    cells = collections.defaultdict(_Cell)
    timers = collections.defaultdict(_Timer)
    ends = collections.defaultdict(_Timer)
    seeded = hasattr(module._BoundContributionsFn, 'END_TIMER')   # pylint: disable=protected-access
    out = {}
    t0 = time.process_time()
    kept = 0
    for shard in range(module.UNIT_SHARDS if seeded else 0):   # launch seeds: every clock starts
        list(bound_fn.process((shard, None), bags[shard], cells[shard], timers[shard], ends[shard]))
    for step, records in enumerate(per_step):
        watermark = clock.release_time_micros(step - 1)
        for shard, timer in timers.items():
            while timer.micros is not None and timer.micros <= watermark:
                timer.micros = None
                bound_fn.advance_released(cells[shard], timer)
        group_fn.start_bundle()
        for element in records:
            list(group_fn.process(element, types.SimpleNamespace(micros=step * 60_000_000)))
        for wv in group_fn.finish_bundle():
            shard = wv.value[0]
            args = (bags[shard], cells[shard], timers[shard]) if has_clock else (bags[shard],)
            args += (ends[shard],) if seeded else ()
            for o in bound_fn.process(wv.value, *args):
                kept += not hasattr(o, 'tag')
        if step + 1 in checkpoints:
            out[step + 1] = measure(module, bags, patterns)
    return out, {'cpu_seconds': time.process_time() - t0, 'kept_records': kept}


def measure(module, bags, patterns):
    latest = {}
    for bag in bags.values():
        for table in bag.items:
            latest.update(table)
    by_pattern = collections.defaultdict(dict)
    for name, pattern in patterns.items():
        encoded = key_bytes(name)
        if encoded in latest:
            by_pattern[pattern][encoded] = latest[encoded]
    empty = len(CODER.encode(module._UnitTable()))   # pylint: disable=protected-access
    rows = {}
    for pattern, records in sorted(by_pattern.items()):
        table = module._UnitTable(records)           # pylint: disable=protected-access
        encoded = CODER.encode(table)
        in_memory = families.in_memory(table)
        sample = next(iter(records.values()))
        rows[pattern] = {'units': len(records),
                         'stored_bytes_per_unit': (len(encoded) - empty) / len(records),
                         'in_memory_bytes_per_unit': in_memory / len(records),
                         'example_record': repr(sample)[:160]}
    bag_bytes = sum(len(CODER.encode(t)) for bag in bags.values() for t in bag.items)
    rows['all'] = {'units': len(latest), 'stored_bytes_per_unit': bag_bytes / max(1, len(latest)),
                   'bag_tables': sum(len(b.items) for b in bags.values())}
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--units', type=int, default=1500)
    parser.add_argument('--steps', type=int, default=200)
    parser.add_argument('--before', default='ca62e6d^',
                        help='git revision of the layout to compare with')
    parser.add_argument('--out', default=os.path.join(RESULTS, 'units.json'))
    args = parser.parse_args()
    checkpoints = sorted({c for c in (10, 50, 100, args.steps) if c <= args.steps})
    configs = [
        ('K=3 m=2 S=48 (README)', UserLevel(unit_fn=len, max_keys_per_unit=3,
                                            max_contributions_per_step=2, max_steps_per_unit=48)),
        ('K=3 m=2 S=1000 C=120', UserLevel(unit_fn=len, max_keys_per_unit=3,
                                           max_contributions_per_step=2, max_steps_per_unit=1000,
                                           max_total_contributions=120)),
    ]
    before_module = load_before(args.before)
    results = {'benchmark': 'state_size/units', 'units': args.units, 'steps': args.steps,
               'before_revision': args.before, 'clock': CLOCK.describe(),
               'python': sys.version.split()[0], 'configs': []}
    for name, bound in configs:
        per_step, patterns = stream(args.units, args.steps, bound,
                                    bound.max_total_contributions, seed=1)
        entry = {'config': name}
        for label, module in (('before', before_module), ('after', after_module)):
            rows, stats = run(module, per_step, bound, CLOCK, checkpoints, patterns)
            entry[label] = {'checkpoints': rows, **stats}
        assert entry['before']['kept_records'] == entry['after']['kept_records'], \
            'same stream, same kept records'
        results['configs'].append(entry)
        print(f'\n## {name}  (kept: before {entry["before"]["kept_records"]}, '
              f'after {entry["after"]["kept_records"]})')
        print('| step | pattern | units | stored B/unit before | after | in memory before | after |')
        print('|---|---|---|---|---|---|---|')
        for c in checkpoints:
            b, a = entry['before']['checkpoints'][c], entry['after']['checkpoints'][c]
            for pattern in [p for p in PATTERNS if p in a] + ['all']:
                print(f"| {c} | {pattern} | {a[pattern]['units']} | "
                      f"{b[pattern]['stored_bytes_per_unit']:.1f} | "
                      f"{a[pattern]['stored_bytes_per_unit']:.1f} | "
                      f"{b[pattern].get('in_memory_bytes_per_unit', float('nan')):.1f} | "
                      f"{a[pattern].get('in_memory_bytes_per_unit', float('nan')):.1f} |")
    os.makedirs(RESULTS, exist_ok=True)
    with open(args.out, 'w') as f:
        json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
