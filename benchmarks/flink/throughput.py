"""Throughput of ContinualCountPerKey on a real Flink session cluster at parallelism 1 and 2.

    bash .ci/flink_cluster.sh start            # with BEAM_DP_WORKER_POOL=1
    python benchmarks/flink/throughput.py --parallelism 1 2 --out benchmarks/flink/results.json

Workload: PeriodicImpulse in catch-up mode (impulses in the past: emitted at full speed),
Reshuffle (spreads the impulses over the workers), a generator of EVENTS_PER_IMPULSE ride events
per impulse, ContinualCountPerKey (user-level, 256 public keys, 8 shards, ε = 1, public end).
The time is Flink's own job duration (REST /jobs/<id>), so the job server's start-up and the
submission are not counted. One Python SDK process per Flink worker (EXTERNAL worker pool,
--sdk_worker_parallelism = parallelism): with LOOPBACK every worker shares one process (GIL).
"""

import argparse
import json
import os
import platform
import sys
import time
import urllib.request

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.transforms.window import TimestampedValue

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from beam_dp import ContinualCountPerKey  # pylint: disable=wrong-import-position
from beam_dp import EventLevel  # pylint: disable=wrong-import-position
from beam_dp import PrivacyBudget  # pylint: disable=wrong-import-position
from beam_dp import UserLevel  # pylint: disable=wrong-import-position
from tests import runners  # pylint: disable=wrong-import-position

KEYS = [f'station-{i:03d}' for i in range(256)]


def generate(t, start, per_impulse):
    i = int(round(t - start))
    return [TimestampedValue((KEYS[(i * 31 + j * 7) % len(KEYS)], f'rider-{i}-{j}'),
                             start + i + j / per_impulse) for j in range(per_impulse)]


def rest(master, path):
    with urllib.request.urlopen(f'http://{master}{path}', timeout=10) as response:
        return json.load(response)


def privacy_unit(name):
    if name == 'event':
        return EventLevel()
    return UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=1,
                     max_steps_per_unit=1)


def run_once(master, parallelism, impulses, per_impulse, pool, privacy):
    start = int(time.time()) - impulses - 120
    options = runners.flink_options(streaming=True, parallelism=parallelism, master=master)
    options = [o for o in options if not o.startswith('--environment_type')]
    options += ['--environment_type=EXTERNAL', f'--environment_config={pool}',
                f'--sdk_worker_parallelism={parallelism}']
    before = {j['jid'] for j in rest(master, '/jobs/overview')['jobs']}
    began = time.monotonic()
    with beam.Pipeline(options=PipelineOptions(options)) as p:
        _ = (p
             | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + impulses,
                               fire_interval=1)
             | beam.Reshuffle()
             | beam.FlatMap(generate, start, per_impulse).with_output_types(tuple[str, str])
             | ContinualCountPerKey(
                 public_keys=KEYS, start=start, step=10, end=start + impulses, num_shards=8,
                 budget=PrivacyBudget(epsilon=1.0),
                 privacy_unit=privacy_unit(privacy)))
    wall = time.monotonic() - began
    jobs = [j for j in rest(master, '/jobs/overview')['jobs'] if j['jid'] not in before]
    job = max(jobs, key=lambda j: j['start-time'])
    seconds = job['duration'] / 1000.0
    events = impulses * per_impulse
    return {'parallelism': parallelism, 'privacy': privacy, 'events': events, 'flink_job_seconds': seconds,
            'events_per_second': events / seconds, 'wall_seconds_incl_submission': wall,
            'state': job['state']}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--master', default='127.0.0.1:8081')
    parser.add_argument('--pool', default='127.0.0.1:50000')
    parser.add_argument('--parallelism', type=int, nargs='+', default=[1, 2])
    parser.add_argument('--impulses', type=int, default=200)
    parser.add_argument('--events_per_impulse', type=int, default=500)
    parser.add_argument('--privacy', choices=['user', 'event'], default='user')
    parser.add_argument('--out', default=None)
    args = parser.parse_args()
    results = []
    for p in args.parallelism:
        r = run_once(args.master, p, args.impulses, args.events_per_impulse, args.pool,
                     args.privacy)
        print(json.dumps(r), flush=True)
        results.append(r)
    by_p = {r['parallelism']: r['events_per_second'] for r in results}
    summary = {'machine': f'{os.cpu_count()} cores, {platform.platform()}',
               'runner': 'FlinkRunner 2.62.0 job server (thin) -> Flink 1.19.0 session cluster '
                         '(1 JobManager + 1 TaskManager JVM, 2 slots), Python SDK 2.77.0 '
                         'EXTERNAL worker pool',
               'results': results}
    if 1 in by_p and 2 in by_p:
        summary['speedup_p2_over_p1'] = by_p[2] / by_p[1]
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out, 'w', encoding='utf-8') as f:
            json.dump(summary, f, indent=2)


if __name__ == '__main__':
    main()
