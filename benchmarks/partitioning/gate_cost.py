"""The lateness gate's cost on one sparse pipeline (issue 13): CPU seconds of
``SparseContinualCountPerKey`` on the same unbounded input with the gate ('GateLateRecords',
as committed) and without it (the gate replaced by a pass-through: what 'ReleaseSegments'
did before), alternating in ONE process.

Input: ``--events`` (100k) records from a fixed numpy seed, key uniform over ``--keys`` (100
public keys), timestamp uniform in its step; a TestStream adds each step's records and then
advances the watermark past the step's release time (``--steps`` 64 steps of 60 s), so no
record is late. Runner: BundleBasedDirectRunner (streaming, in-process). CPU =
``time.process_time`` around pipeline construction and run; the outputs are counted and
checked equal between the variants (seeded noise: the same releases, value for value).

Usage: python benchmarks/partitioning/gate_cost.py [--events 100000] [--repeats 2] [--shards N]
Writes benchmarks/partitioning/results/results_gate_cost[_shardsN].json.
"""

import argparse
import functools
import json
import os
import platform
import time

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import PrivacyBudget
from beam_dp.noise.testing import allow_seeded_noise
from beam_dp.transforms import lateness
from beam_dp.transforms import segmented
from beam_dp.transforms.sparse_continual import SparseContinualCountPerKey

HERE = os.path.dirname(os.path.abspath(__file__))
START, STEP = 1_700_000_000, 60


class _PassThrough(beam.PTransform):
    """The 'before' variant: no gate (the records go straight to 'ReleaseSegments')."""

    def __init__(self, *unused_args, **unused_kw):
        super().__init__()

    def expand(self, pcoll):
        empty = pcoll.pipeline | 'NoDeadLetters' >> beam.Create([])
        return lateness.GateOutputs(pcoll, empty)


def _stream(events, keys, steps, seed=0):
    rng = np.random.default_rng(seed)
    step_of = np.sort(rng.integers(0, steps, events))
    key_of = rng.integers(0, keys, events)
    offset = rng.uniform(0, STEP, events)
    stream = TestStream().advance_watermark_to(START)
    for s in range(steps):
        idx = np.nonzero(step_of == s)[0]
        stream = stream.add_elements([TimestampedValue(
            (f'k{key_of[i]}', 1), START + s * STEP + offset[i]) for i in idx])
        stream = stream.advance_watermark_to(START + (s + 1) * STEP + 1)
    return stream.advance_watermark_to_infinity()


def run_once(gated, args):
    saved = segmented.LatenessGate
    if not gated:
        segmented.LatenessGate = _PassThrough
    elif args.shards:    # the gate with another shard count (what the timer firings cost)
        segmented.LatenessGate = functools.partial(saved, shards=args.shards)
    try:
        cpu = time.process_time()
        options = PipelineOptions([])
        options.view_as(StandardOptions).streaming = True
        p = beam.Pipeline(runner='BundleBasedDirectRunner', options=options)
        out = (p | _stream(args.events, args.keys, args.steps)
               | _sparse(args))
        for name, pcoll in (('releases', out.releases), ('dead_letter', out.dead_letter)):
            _ = pcoll | name >> beam.Map(_count, name)
        p.run().wait_until_finish()
        cpu = time.process_time() - cpu
    finally:
        segmented.LatenessGate = saved
    releases, dead = sorted(COUNTS.pop('releases', [])), COUNTS.pop('dead_letter', [])
    return {'gate': gated, 'cpu_seconds': round(cpu, 2), 'releases': len(releases),
            'dead_letter': len(dead)}, releases


def _sparse(args):
    """Seeded noise (a benchmark on the test runner): both variants must release the same."""
    with allow_seeded_noise():
        return SparseContinualCountPerKey(
            public_keys=[f'k{i}' for i in range(args.keys)], start=START, step=STEP,
            end=START + args.steps * STEP, budget=PrivacyBudget(epsilon=1.0), testing_seed=7)


#: Outputs counted in this process (the DirectRunner runs the DoFns in-process; ``_count`` is
#: pickled by reference when this file is imported as the module ``gate_cost``, see the end).
COUNTS = {}


def _count(element, name):
    COUNTS.setdefault(name, []).append(
        (element.key, element.step, element.value) if name == 'releases' else element.reason)
    return element


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--events', type=int, default=100_000)
    parser.add_argument('--keys', type=int, default=100)
    parser.add_argument('--steps', type=int, default=64)
    parser.add_argument('--repeats', type=int, default=2)
    parser.add_argument('--shards', type=int, default=None,
                        help='gate shards (default: lateness.GATE_SHARDS, as committed)')
    args = parser.parse_args()
    runs, outputs = [], []
    for _ in range(args.repeats):
        for gated in (False, True):
            run, releases = run_once(gated, args)
            runs.append(run)
            outputs.append(releases)
            print(run, flush=True)
    without = [r for r in runs if not r['gate']]
    with_ = [r for r in runs if r['gate']]
    assert all(r['dead_letter'] == 0 for r in runs), runs
    assert all(o == outputs[0] for o in outputs), 'the variants released different values'
    result = {'benchmark': 'lateness gate cost (sparse)', 'events': args.events,
              'keys': args.keys, 'steps': args.steps,
              'gate_shards': args.shards or lateness.GATE_SHARDS,
              'command': f'python benchmarks/partitioning/gate_cost.py --events {args.events} '
                         f'--repeats {args.repeats}'
                         + (f' --shards {args.shards}' if args.shards else ''),
              'runner': 'BundleBasedDirectRunner (streaming, TestStream), one process',
              'machine': {'cpus': os.cpu_count(), 'python': platform.python_version(),
                          'loadavg_at_end': os.getloadavg()},
              'runs': runs,
              'cpu_seconds_without_gate': sorted(r['cpu_seconds'] for r in without),
              'cpu_seconds_with_gate': sorted(r['cpu_seconds'] for r in with_)}
    tag = f'_shards{args.shards}' if args.shards else ''
    with open(os.path.join(HERE, 'results', f'results_gate_cost{tag}.json'), 'w') as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == '__main__':
    import sys
    sys.path.insert(0, HERE)
    import gate_cost    # pylint: disable=import-self  (so that the DoFns pickle by reference)
    gate_cost.main()
