"""Throughput of ContinualCountPerKey on a real Flink session cluster at parallelism 1 and 2.

    bash .ci/flink_cluster.sh start            # with BEAM_DP_WORKER_POOL=1
    python benchmarks/flink/run.py --parallelism 1 2 --out benchmarks/flink/results/results.json

Workload: PeriodicImpulse in catch-up mode (impulses in the past: emitted at full speed),
Reshuffle (spreads the impulses over the workers), a generator of EVENTS_PER_IMPULSE ride events
per impulse, ContinualCountPerKey (user-level, 256 public keys, 8 shards, ε = 1, public end).
The time is Flink's own job duration (REST /jobs/<id>), so the job server's start-up and the
submission are not counted. One Python SDK process per Flink worker (EXTERNAL worker pool,
--sdk_worker_parallelism = parallelism): with LOOPBACK every worker shares one process (GIL).
``--privacy load_test`` runs the load test's job instead (benchmarks/load_test/workload.py).

Efficiency (issue 13 item 6): every run also reports the CPU of the worker pool with its SDK
worker processes and of the JVMs, sampled from /proc (``cpu.TreeCpu``), as CPU-seconds per
million events and events per core-second; the summary compares p2 with p1
(``efficiency``). The worker pool starts SDK workers with ``python`` from PATH: put the venv
first on PATH before starting the cluster.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.transforms.window import TimestampedValue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from beam_dp import ContinualCountPerKey  # pylint: disable=wrong-import-position
from beam_dp import EventLevel  # pylint: disable=wrong-import-position
from beam_dp import PrivacyBudget  # pylint: disable=wrong-import-position
from beam_dp import UserLevel  # pylint: disable=wrong-import-position
from tests import runners  # pylint: disable=wrong-import-position
from benchmarks.flink.cpu import TreeCpu  # pylint: disable=wrong-import-position

KEYS = [f'station-{i:03d}' for i in range(256)]


def generate(t, start, per_impulse):
    i = int(round(t - start))
    return [TimestampedValue((KEYS[(i * 31 + j * 7) % len(KEYS)], f'rider-{i}-{j}'),
                             start + i + j / per_impulse) for j in range(per_impulse)]


def rest(master, path):
    with urllib.request.urlopen(f'http://{master}{path}', timeout=10) as response:
        return json.load(response)


def rides_workload(p, start, impulses, per_impulse, privacy):
    """256 public keys, EVENTS_PER_IMPULSE ride events per impulse (1 s apart), 8 shards."""
    _ = (p
         | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + impulses,
                           fire_interval=1)
         | beam.Reshuffle()
         | beam.FlatMap(generate, start, per_impulse).with_output_types(tuple[str, str])
         | ContinualCountPerKey(
             public_keys=KEYS, start=start, step=10, end=start + impulses, num_shards=8,
             budget=PrivacyBudget(epsilon=1.0),
             privacy_unit=privacy_unit(privacy)))


def load_test_workload(p, start, impulses, per_impulse):
    """The load test's job (benchmarks/load_test/workload.py: user level, private keys, Zipf
    keys over 5k, 50k units, sets growing over the first quarter), impulses 1 s apart."""
    from benchmarks.load_test import workload  # pylint: disable=import-outside-toplevel
    params = argparse.Namespace(
        events=impulses * per_impulse, events_per_impulse=per_impulse, impulse_seconds=1.0,
        step=10, keys=5_000, units=50_000, growth_fraction=0.25, max_keys_per_unit=4,
        max_contributions_per_step=8, max_steps_per_unit=4, allowed_lateness=0, seed=13)
    workload.build(p, params, start)


def privacy_unit(name):
    if name == 'event':
        return EventLevel()
    return UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=1,
                     max_steps_per_unit=1)


def cpu_seconds(pids):
    """CPU seconds used so far by each process (utime + stime, plus reaped children's for the
    worker pool, whose SDK worker processes exit with the job)."""
    out = {}
    for name, pid in pids.items():
        try:
            with open(f'/proc/{pid}/stat', encoding='ascii') as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except (OSError, ValueError):
            continue
        ticks = int(fields[11]) + int(fields[12])
        if name == 'workerpool':
            ticks += int(fields[13]) + int(fields[14])
        out[name] = ticks / os.sysconf('SC_CLK_TCK')
    return out


def restart_cluster():
    """A fresh JobManager, TaskManager and worker pool for each run: after several jobs a
    session TaskManager's Beam classes (loaded per job) start failing with IllegalAccessError
    on netty classes of an already released class loader, and runs get slower or fail."""
    script = os.path.join(ROOT, '.ci', 'flink_cluster.sh')
    env = dict(os.environ, BEAM_DP_WORKER_POOL='1')
    subprocess.run(['bash', script, 'stop'], check=False, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(['bash', script, 'start'], check=True, env=env, stdout=subprocess.DEVNULL)
    time.sleep(5)


def cluster_pids(run_dir):
    pids = {}
    for name in ('jobmanager', 'taskmanager', 'workerpool'):
        try:
            with open(os.path.join(run_dir, f'{name}.pid'), encoding='ascii') as f:
                pids[name] = int(f.read().strip())
        except (OSError, ValueError):
            pass
    return pids


def run_once(master, parallelism, impulses, per_impulse, pool, privacy, pids, load_balance):
    start = int(time.time()) - impulses - 120
    options = runners.flink_options(streaming=True, parallelism=parallelism, master=master)
    options = [o for o in options if not o.startswith('--environment_type')]
    options += ['--environment_type=EXTERNAL', f'--environment_config={pool}',
                f'--sdk_worker_parallelism={parallelism}',
                # the job's state stream has a gRPC deadline of this (default 300 s): a longer
                # job fails in wait_until_finish with DEADLINE_EXCEEDED
                '--job_server_timeout=86400']
    if load_balance:
        options.append('--load_balance_bundles')
    before = {j['jid'] for j in rest(master, '/jobs/overview')['jobs']}
    cpu_before = cpu_seconds(pids)
    sampled = TreeCpu(dict(pids, jobserver=os.getpid()), only={'jobserver': 'java'})
    sampled.start()
    began = time.monotonic()
    with beam.Pipeline(options=PipelineOptions(options)) as p:
        if privacy == 'load_test':
            load_test_workload(p, start, impulses, per_impulse)
        else:
            rides_workload(p, start, impulses, per_impulse, privacy)
    wall = time.monotonic() - began
    time.sleep(2)  # let the worker pool reap the job's SDK workers (their CPU joins cutime)
    cpu_after = cpu_seconds(pids)
    tree_cpu = sampled.stop()
    jobs = [j for j in rest(master, '/jobs/overview')['jobs'] if j['jid'] not in before]
    job = max(jobs, key=lambda j: j['start-time'])
    seconds = job['duration'] / 1000.0
    events = impulses * per_impulse
    cpu = {name: round(cpu_after[name] - cpu_before[name], 1)
           for name in cpu_after if name in cpu_before}
    return {'parallelism': parallelism, 'privacy': privacy, 'load_balance_bundles': load_balance,
            'events': events,
            'flink_job_seconds': seconds, 'events_per_second': events / seconds,
            'wall_seconds_incl_submission': wall, 'cpu_seconds': cpu,
            'cores_busy_during_job': round(sum(cpu.values()) / wall, 2), 'state': job['state'],
            'tree_cpu_seconds': tree_cpu, 'efficiency': efficiency(events, tree_cpu)}


def efficiency(events, tree_cpu):
    """Issue 13 item 6: CPU seconds per million events, Python (the worker pool and its SDK
    worker processes, sampled from /proc) and the cluster's JVMs (JobManager + TaskManager)
    separately, and events per core-second (Python + cluster JVMs; the job server JVM, which
    only translates and submits the job, is reported in ``tree_cpu_seconds`` but not here)."""
    python = tree_cpu.get('workerpool', 0.0)
    jvm = sum(tree_cpu.get(n, 0.0) for n in ('jobmanager', 'taskmanager'))
    return {'python_cpu_s_per_million_events': round(python / events * 1e6, 2),
            'jvm_cpu_s_per_million_events': round(jvm / events * 1e6, 2),
            'events_per_core_second': round(events / (python + jvm), 1) if python + jvm else None,
            'sdk_worker_processes': tree_cpu.get('workerpool_processes', 0) - 1}


def efficiency_summary(results, parallelisms, biggest):
    """Medians per parallelism of the runs at the largest size, the p2/p1 ratio of Python
    CPU-seconds per million events (target ≤ 1.1), and, when there are two sizes, the marginal
    Python CPU per million events (extra CPU / extra events: the job's fixed start-up and
    shut-down CPU cancels)."""
    out = {}
    for p in parallelisms:
        mine = [r['efficiency'] for r in results if r['parallelism'] == p and r['events'] == biggest]
        out[p] = {k: statistics.median(e[k] for e in mine)
                  for k in ('python_cpu_s_per_million_events', 'jvm_cpu_s_per_million_events',
                            'events_per_core_second')}
        sizes = sorted({r['events'] for r in results if r['parallelism'] == p})
        if len(sizes) >= 2:
            def median_python(n, p=p):
                return statistics.median(r['tree_cpu_seconds'].get('workerpool', 0.0)
                                         for r in results
                                         if r['parallelism'] == p and r['events'] == n)
            out[p]['marginal_python_cpu_s_per_million_events'] = round(
                (median_python(sizes[-1]) - median_python(sizes[0]))
                / (sizes[-1] - sizes[0]) * 1e6, 2)
    if 1 in out and 2 in out:
        for k in ('python_cpu_s_per_million_events', 'marginal_python_cpu_s_per_million_events'):
            if k in out[1] and k in out[2]:
                out[f'p2_over_p1_{k}'] = round(out[2][k] / out[1][k], 3)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--master', default='127.0.0.1:8081')
    parser.add_argument('--pool', default='127.0.0.1:50000')
    parser.add_argument('--parallelism', type=int, nargs='+', default=[1, 2])
    parser.add_argument('--impulses', type=int, default=200)
    parser.add_argument('--events_per_impulse', type=int, default=500)
    parser.add_argument('--privacy', choices=['user', 'event', 'load_test'], default='user',
                        help='load_test: the job of benchmarks/load_test (user level, private '
                        'keys, its generator)')
    parser.add_argument('--scales', type=int, nargs='+', default=[1],
                        help='run each parallelism with impulses × each scale; with two scales '
                             'the marginal rate (extra events / extra job seconds) cancels the '
                             'fixed start-up and shut-down time of a job')
    parser.add_argument('--cluster_run_dir',
                        default=os.path.expanduser('~/.cache/beam_dp/flink-cluster'),
                        help='where .ci/flink_cluster.sh keeps its pid files (CPU accounting)')
    parser.add_argument('--no_load_balance', action='store_true',
                        help='omit --load_balance_bundles (then Flink pins each stage instance '
                             'to one SDK worker, round-robin in the order they open)')
    parser.add_argument('--repeats', type=int, default=1)
    parser.add_argument('--warmup_impulses', type=int, default=0,
                        help='run a small job first on each cluster (JIT warm-up, not recorded)')
    parser.add_argument('--fresh_cluster', action='store_true',
                        help='stop and start the cluster (.ci/flink_cluster.sh) first')
    parser.add_argument('--out', default=None)
    args = parser.parse_args()
    if args.fresh_cluster:
        restart_cluster()
    pids = cluster_pids(args.cluster_run_dir)
    if args.warmup_impulses:
        for p in args.parallelism:
            warm = run_once(args.master, p, args.warmup_impulses, args.events_per_impulse,
                            args.pool, args.privacy, pids, not args.no_load_balance)
            print(json.dumps(dict(warm, warmup=True)), flush=True)
    results = []
    for repeat in range(args.repeats):  # interleaved, so drift hits every parallelism alike
        for scale in args.scales:
            for p in args.parallelism:
                r = run_once(args.master, p, args.impulses * scale, args.events_per_impulse,
                             args.pool, args.privacy, pids, not args.no_load_balance)
                r['repeat'] = repeat
                print(json.dumps(r), flush=True)
                results.append(r)
    summary = {'machine': f'{os.cpu_count()} cores, {platform.platform()}',
               'runner': 'FlinkRunner 2.62.0 job server (thin) -> Flink 1.19.0 session cluster '
                         '(1 JobManager + 1 TaskManager JVM, 2 slots), Python SDK 2.77.0 '
                         'EXTERNAL worker pool',
               'args': vars(args), 'results': results}
    biggest = max(r['events'] for r in results)
    median_seconds = {p: statistics.median(r['flink_job_seconds'] for r in results
                                           if r['parallelism'] == p and r['events'] == biggest)
                      for p in args.parallelism}
    summary['median_job_seconds_at_largest_size'] = median_seconds
    summary['median_events_per_second'] = {p: biggest / t for p, t in median_seconds.items()}
    if 1 in median_seconds and 2 in median_seconds:
        summary['speedup_p2_over_p1'] = median_seconds[1] / median_seconds[2]
    summary['efficiency'] = efficiency_summary(results, args.parallelism, biggest)
    if len(args.scales) >= 2:
        marginal = {}
        for p in args.parallelism:
            by_size = {}
            for r in results:
                if r['parallelism'] == p:
                    by_size.setdefault(r['events'], []).append(r['flink_job_seconds'])
            small, big = min(by_size), max(by_size)
            marginal[p] = (big - small) / (statistics.median(by_size[big])
                                           - statistics.median(by_size[small]))
        summary['marginal_events_per_second'] = marginal
        if 1 in marginal and 2 in marginal:
            summary['marginal_speedup_p2_over_p1'] = marginal[2] / marginal[1]
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out, 'w', encoding='utf-8') as f:
            json.dump(summary, f, indent=2)


if __name__ == '__main__':
    main()
