"""Issue 15 on real runners: the side-by-side's user-level branch (and, for ratios in the same
run, its fastest non-private branch and the event-level branch) on a local Flink session cluster
or on Prism, on the SAME rows as ``benchmarks/throughput_sidebyside/run.py``.

    BEAM_DP_WORKER_POOL=1 bash .ci/flink_cluster.sh start     # workers must be able to import
    python benchmarks/flink/sidebyside_user.py --runner flink_cluster --rows 1000000 \\
        --branches np_combine event user --tag flink_1M      # `benchmarks` (cwd = repo root)

Rows: the side-by-side's generator (``benchmarks.throughput.run.GenerateEvents``: 100 chunks,
numpy generator per (seed, chunk); key ~ Zipf(1.1) over 10k keys, user uniform over 100k,
timestamps uniform over 64 steps of 60 s), imported, not copied. Branches as there:
``np_combine`` (``Map`` to ((key, step), 1) + ``CombinePerKey(sum)``), ``event``
(``ContinualCountPerKey``, public keys, ε = 1) and ``user`` (the same with
``UserLevel(user, K=4, m=8, S=64)``); the side-by-side's ``build`` is not reused because it pins
``runner='FnApiRunner'``. Batch, like the side-by-side. Each branch is one job, run one after the
other; time = Flink's job duration (REST) on a cluster, else wall time of ``run()`` +
``wait_until_finish()``; CPU = the runner's processes (``cpu.TreeCpu``): the worker pool and its
SDK workers and the cluster JVMs on Flink, this process (SDK harness, LOOPBACK) and Prism on
Prism. Outputs are counted (Beam counters) and checked where the runner returns metrics.
"""

import argparse
import json
import os
import platform
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

import apache_beam as beam  # pylint: disable=wrong-import-position
from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=wrong-import-position

from benchmarks.flink.cpu import TreeCpu  # pylint: disable=wrong-import-position
from benchmarks.throughput import run as rows_module  # pylint: disable=wrong-import-position
from benchmarks.throughput_sidebyside import run as sbs  # pylint: disable=wrong-import-position
from beam_dp import ContinualCountPerKey, PrivacyBudget, UserLevel  # pylint: disable=wrong-import-position
from tests import runners  # pylint: disable=wrong-import-position

BRANCHES = ('np_combine', 'event', 'user')
#: The side-by-side's defaults (benchmarks/throughput_sidebyside/run.py): the same rows.
ROWS_DEFAULTS = (('rows', 1_000_000), ('keys', 10_000), ('users', 100_000), ('steps', 64),
                 ('seed', 7))


def options(args):
    long_job = ['--job_server_timeout=86400']   # see run.py: the state stream's gRPC deadline
    if args.runner == 'prism':
        return runners.prism_options(streaming=args.streaming) + long_job
    opts = [o for o in runners.flink_options(streaming=args.streaming,
                                             parallelism=args.parallelism, master=args.master)
            if not o.startswith('--environment_type')]
    return opts + long_job + ['--environment_type=EXTERNAL', f'--environment_config={args.pool}',
                              f'--sdk_worker_parallelism={args.parallelism}',
                              '--load_balance_bundles']


def build(branch, args):
    p = beam.Pipeline(options=PipelineOptions(options(args)))
    rows = (p | 'Chunks' >> beam.Create(list(range(rows_module.CHUNKS)))
            | 'Generate' >> beam.ParDo(rows_module.GenerateEvents(
                args.seed, args.rows, args.keys, args.users, args.steps)))
    expected = None
    if branch == 'np_combine':
        out = rows | 'KeyStep' >> beam.Map(sbs._step_of) | 'Sum' >> beam.CombinePerKey(sum)  # pylint: disable=protected-access
    else:
        kwargs = dict(public_keys=[f'k{i:05d}' for i in range(args.keys)], start=sbs.START,
                      step=sbs.STEP, end=sbs.START + args.steps * sbs.STEP,
                      budget=PrivacyBudget(epsilon=1.0))
        if branch == 'user':
            kwargs['privacy_unit'] = UserLevel(sbs._user, max_keys_per_unit=4,  # pylint: disable=protected-access
                                               max_contributions_per_step=8,
                                               max_steps_per_unit=args.steps)
        outs = rows | 'ContinualCount' >> ContinualCountPerKey(**kwargs)
        _ = outs.dead_letter | 'DeadSink' >> beam.ParDo(rows_module.CountingSink('dead_letter'))
        out = outs.releases
        expected = args.keys * args.steps
    _ = out | 'Sink' >> beam.ParDo(rows_module.CountingSink('outputs'))
    return p, expected


def rest(master, path):
    with urllib.request.urlopen(f'http://{master}{path}', timeout=10) as response:
        return json.load(response)


def counters(result):
    try:
        found = result.metrics().query(beam.metrics.MetricsFilter())['counters']
    except Exception as e:  # pylint: disable=broad-except
        return {'error': repr(e)[:200]}
    return {c.key.metric.name: (c.committed if c.committed is not None else c.attempted)
            for c in found if c.key.metric.namespace == 'bench'}


def run_branch(branch, args):
    p, expected = build(branch, args)
    if args.runner == 'flink_cluster':
        roots = {name: int(open(os.path.join(args.cluster_run_dir, f'{name}.pid'),  # pylint: disable=consider-using-with
                                encoding='ascii').read())
                 for name in ('jobmanager', 'taskmanager', 'workerpool')}
        before = {j['jid'] for j in rest(args.master, '/jobs/overview')['jobs']}
        sampler = TreeCpu(roots)
    else:   # Prism: the SDK harness runs in this process (LOOPBACK), Prism is its child
        sampler = TreeCpu({'this_process_and_prism': os.getpid()})
    sampler.start()
    t0 = time.perf_counter()
    result = p.run()
    result.wait_until_finish()
    wall = time.perf_counter() - t0
    time.sleep(1)
    cpu = sampler.stop()
    seconds = wall
    if args.runner == 'flink_cluster':
        job = max((j for j in rest(args.master, '/jobs/overview')['jobs']
                   if j['jid'] not in before), key=lambda j: j['start-time'])
        seconds = job['duration'] / 1000.0
    got = counters(result)
    if expected is not None and got.get('outputs') not in (None, expected):
        raise AssertionError(f'{branch}: {got} outputs, expected {expected}')
    total_cpu = sum(v for k, v in cpu.items() if not k.endswith('_processes'))
    return {'branch': branch, 'label': sbs.LABELS[branch], 'seconds': round(seconds, 1),
            'wall_seconds_incl_submission': round(wall, 1),
            'rows_per_second': round(args.rows / seconds, 1), 'cpu_seconds': cpu,
            'rows_per_core_second': round(args.rows / total_cpu, 1) if total_cpu else None,
            'counters': got}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runner', choices=['flink_cluster', 'prism'], default='flink_cluster')
    for name, default in ROWS_DEFAULTS:
        parser.add_argument(f'--{name}', type=int, default=default)
    parser.add_argument('--branches', nargs='+', default=list(BRANCHES), choices=BRANCHES)
    parser.add_argument('--parallelism', type=int, default=1)
    parser.add_argument('--master', default='127.0.0.1:8081')
    parser.add_argument('--pool', default='127.0.0.1:50000')
    parser.add_argument('--cluster_run_dir',
                        default=os.path.expanduser('~/.cache/beam_dp/flink-cluster'))
    parser.add_argument('--streaming', action='store_true',
                        help='streaming mode (the bounded rows end with a watermark at +inf); '
                        'batch on the Flink session cluster stalled (see README)')
    parser.add_argument('--tag', default='')
    args = parser.parse_args()
    out_path = os.path.join(HERE, 'results', f'sidebyside_user_{args.tag or args.runner}.json')
    results = {'command': 'python benchmarks/flink/sidebyside_user.py ' + ' '.join(sys.argv[1:]),
               'machine': f'{os.cpu_count()} cores, {platform.platform()}',
               'loadavg_at_start': os.getloadavg(), 'args': vars(args), 'branches': {}}
    for branch in args.branches:
        r = run_branch(branch, args)
        results['branches'][branch] = r
        print(json.dumps(r), flush=True)
        t = {b: v['seconds'] for b, v in results['branches'].items()}
        results['ratios'] = {f'{b}_throughput_over_np_combine': round(t['np_combine'] / t[b], 3)
                             for b in t if 'np_combine' in t}
        with open(out_path, 'w', encoding='utf-8') as f:   # after every branch
            json.dump(results, f, indent=1)
    print(json.dumps(results['ratios'], indent=1))


if __name__ == '__main__':
    main()
