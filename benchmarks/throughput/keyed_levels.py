"""One ``ContinualCountPerKey`` run, event or user level, batch (FnApiRunner) or streaming
(TestStream on the BundleBasedDirectRunner: the user-level bound then runs its released-chain
gate), on a fixed seeded input: the whole process is what a before/after comparison times.

    python benchmarks/throughput/keyed_levels.py --level event --mode batch --events 20000
    python benchmarks/throughput/keyed_levels.py --level user --mode stream --events 5000

Checks the number of releases against the public schedule (every key at every step), so that
a timed run is known to have done the whole work. Results: ``README.md`` ("The watermark gate").
"""

import argparse

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

import beam_dp

STEP = 60


def _events(args):
    rng = np.random.default_rng(args.seed)
    keys = rng.integers(0, args.keys, args.events).tolist()
    users = rng.integers(0, args.users, args.events).tolist()
    seconds = np.sort(rng.integers(0, args.steps * STEP, args.events)).tolist()
    return [(f'k{k:04d}', f'u{u}', s) for k, u, s in zip(keys, users, seconds)]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--level', choices=('event', 'user'), required=True)
    parser.add_argument('--mode', choices=('batch', 'stream'), default='batch')
    parser.add_argument('--events', type=int, default=20_000)
    parser.add_argument('--keys', type=int, default=100)
    parser.add_argument('--users', type=int, default=2_000)
    parser.add_argument('--steps', type=int, default=16)
    parser.add_argument('--seed', type=int, default=7)
    args = parser.parse_args()
    events = _events(args)
    unit = None
    if args.level == 'user':
        unit = beam_dp.UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=3,
                                 max_contributions_per_step=2, max_steps_per_unit=8)
    if args.mode == 'batch':
        pipeline = beam.Pipeline(runner='FnApiRunner')
        records = (pipeline | beam.Create(events)
                   | beam.Map(lambda r: TimestampedValue(r, r[2])))
    else:
        pipeline = beam.Pipeline(runner='BundleBasedDirectRunner',
                                 options=PipelineOptions(streaming=True))
        stream = TestStream().advance_watermark_to(0)
        for step in range(args.steps):
            batch = [TimestampedValue(r, r[2]) for r in events
                     if step * STEP <= r[2] < (step + 1) * STEP]
            stream = stream.add_elements(batch).advance_watermark_to((step + 1) * STEP)
        records = pipeline | stream.advance_watermark_to_infinity()
    out = records | beam_dp.ContinualCountPerKey(
        public_keys=[f'k{k:04d}' for k in range(args.keys)], start=0, step=STEP,
        end=args.steps * STEP, budget=beam_dp.PrivacyBudget(epsilon=1.0),
        privacy_unit=unit, key_fn=lambda r: r[0])
    expected = args.keys * args.steps
    counted = (out.releases | beam.WindowInto(beam.window.FixedWindows(10 ** 9))
               | 'CountReleases' >> beam.combiners.Count.Globally().without_defaults())
    assert_that(counted, equal_to([expected]))
    pipeline.run().wait_until_finish()
    print(f'releases {expected} (checked)')

if __name__ == '__main__':
    main()
