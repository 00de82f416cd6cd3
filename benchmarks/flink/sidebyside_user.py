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
Prism; also the peak resident memory of each. Outputs are counted (Beam counters) and checked
where the runner returns metrics.

``pipelinedp``: the side-by-side's PipelineDP branch (``sbs.build``'s parameters: batch DP COUNT
per key, public partitions, ≤ 4 keys and ≤ 8 per key per user, ε = 1, δ = 1e-6). It needs
``pipeline_dp`` importable here and in the SDK workers: run this script with the PipelineDP venv's
python (``throughput_sidebyside/run.py --pdp-venv``, default /tmp/pdp_sbs, which sees this
repository's Beam) and give that branch its own worker pool started from that venv
(``--pdp_pool``; its pid in ``<cluster_run_dir>/workerpool_pdp.pid`` for the CPU accounting).
"""

import argparse
import json
import os
import platform
import sys
import threading
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

BRANCHES = ('np_combine', 'event', 'user', 'pipelinedp')
#: The side-by-side's defaults (benchmarks/throughput_sidebyside/run.py): the same rows.
ROWS_DEFAULTS = (('rows', 1_000_000), ('keys', 10_000), ('users', 100_000), ('steps', 64),
                 ('seed', 7))


def options(args, pool=None):
    long_job = ['--job_server_timeout=86400']   # see run.py: the state stream's gRPC deadline
    if args.runner == 'prism':
        return runners.prism_options(streaming=args.streaming) + long_job
    opts = [o for o in runners.flink_options(streaming=args.streaming,
                                             parallelism=args.parallelism, master=args.master)
            if not o.startswith('--environment_type')]
    return opts + long_job + ['--environment_type=EXTERNAL', f'--environment_config={pool or args.pool}',
                              f'--sdk_worker_parallelism={args.parallelism}',
                              '--load_balance_bundles']


def build(branch, args):
    pool = args.pdp_pool if branch == 'pipelinedp' else None
    p = beam.Pipeline(options=PipelineOptions(options(args, pool)))
    rows = (p | 'Chunks' >> beam.Create(list(range(rows_module.CHUNKS)))
            | 'Generate' >> beam.ParDo(rows_module.GenerateEvents(
                args.seed, args.rows, args.keys, args.users, args.steps)))
    expected = None
    if branch == 'np_combine':
        out = rows | 'KeyStep' >> beam.Map(sbs._step_of) | 'Sum' >> beam.CombinePerKey(sum)  # pylint: disable=protected-access
    elif branch == 'pipelinedp':   # the side-by-side's PipelineDP branch, same parameters
        out = sbs.pipelinedp_count(rows, [f'k{i:05d}' for i in range(args.keys)])
        expected = args.keys
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


class HeapSampler(threading.Thread):
    """Peak JVM heap in use (live + not yet collected) of the cluster's TaskManager(s), from
    Flink's REST (refreshed by the JobManager every 10 s; polled every 2 s); RSS says little for
    a JVM started with -Xms = -Xmx."""

    def __init__(self, master):
        super().__init__(daemon=True)
        self.master, self.peak_mib, self.halt = master, 0, threading.Event()

    def run(self):
        while not self.halt.wait(2.0):
            try:
                for tm in rest(self.master, '/taskmanagers')['taskmanagers']:
                    used = rest(self.master, f"/taskmanagers/{tm['id']}")['metrics']['heapUsed']
                    self.peak_mib = max(self.peak_mib, round(used / 2**20))
            except Exception:  # pylint: disable=broad-except
                pass   # the TaskManager may be gone (e.g. out of heap): keep the peak seen

    def stop(self):
        self.halt.set()
        self.join()
        return self.peak_mib


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
        pool = 'workerpool_pdp' if branch == 'pipelinedp' else 'workerpool'
        roots = {name: int(open(os.path.join(args.cluster_run_dir, f'{pid_file}.pid'),  # pylint: disable=consider-using-with
                                encoding='ascii').read())
                 for name, pid_file in (('jobmanager', 'jobmanager'),
                                        ('taskmanager', 'taskmanager'), ('workerpool', pool))}
        before = {j['jid'] for j in rest(args.master, '/jobs/overview')['jobs']}
        # the job server: the java child of this process (translates and submits the job)
        sampler = TreeCpu(dict(roots, jobserver=os.getpid()), only={'jobserver': 'java'})
        heap = HeapSampler(args.master)
        heap.start()
    else:   # Prism: the SDK harness runs in this process (LOOPBACK), Prism is its child
        sampler, heap = TreeCpu({'this_process_and_prism': os.getpid()}), None
    sampler.start()
    t0 = time.perf_counter()
    result, error = p.run(), None
    try:
        result.wait_until_finish()
    except Exception as e:  # pylint: disable=broad-except
        error = repr(e)[:500]   # recorded (e.g. a TaskManager out of heap), not raised
    wall = time.perf_counter() - t0
    time.sleep(1)
    cpu = sampler.stop()
    heap_mib = heap.stop() if heap else None
    seconds, job_state = wall, str(result.state)
    if args.runner == 'flink_cluster':
        job = max((j for j in rest(args.master, '/jobs/overview')['jobs']
                   if j['jid'] not in before), key=lambda j: j['start-time'])
        seconds, job_state = job['duration'] / 1000.0, job['state']
    got = counters(result)
    if error is None and expected is not None and got.get('outputs') not in (None, expected):
        raise AssertionError(f'{branch}: {got} outputs, expected {expected}')
    total_cpu = sum(v for k, v in cpu.items()
                    if not k.endswith('_processes') and k != 'jobserver')
    return {'branch': branch, 'label': sbs.LABELS[branch], 'seconds': round(seconds, 1),
            'wall_seconds_incl_submission': round(wall, 1),
            'rows_per_second': round(args.rows / seconds, 1), 'cpu_seconds': cpu,
            'rows_per_core_second': round(args.rows / total_cpu, 1) if total_cpu else None,
            'core_seconds_excl_jobserver': round(total_cpu, 1),
            'peak_rss_mib': sampler.peak_rss_mb(), 'peak_taskmanager_heap_used_mib': heap_mib,
            'state': job_state, 'error': error,
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
    parser.add_argument('--pdp_pool', default='127.0.0.1:50001',
                        help='worker pool (started from the PipelineDP venv) for pipelinedp')
    parser.add_argument('--cluster_run_dir',
                        default=os.path.expanduser('~/.cache/beam_dp/flink-cluster'))
    parser.add_argument('--streaming', action='store_true',
                        help='streaming mode (the bounded rows end with a watermark at +inf); '
                        'batch on the Flink session cluster stalled (see README)')
    parser.add_argument('--tag', default='')
    parser.add_argument('--append', action='store_true',
                        help='add the branches to the results file of the same tag (e.g. '
                        'pipelinedp, run from its venv, beside branches run earlier on the same '
                        'cluster); ratios are recomputed over every branch in the file')
    args = parser.parse_args()
    out_path = os.path.join(HERE, 'results', f'sidebyside_user_{args.tag or args.runner}.json')
    results = {'command': 'python benchmarks/flink/sidebyside_user.py ' + ' '.join(sys.argv[1:]),
               'machine': f'{os.cpu_count()} cores, {platform.platform()}',
               'loadavg_at_start': os.getloadavg(), 'args': vars(args), 'branches': {}}
    if args.append and os.path.exists(out_path):
        with open(out_path, encoding='utf-8') as f:
            earlier = json.load(f)
        earlier['appended'] = earlier.get('appended', []) + [
            {k: results[k] for k in ('command', 'loadavg_at_start')}]
        results = earlier
    for branch in args.branches:
        load, began = os.getloadavg(), time.strftime('%H:%M', time.gmtime())
        r = dict(run_branch(branch, args), loadavg_at_start=load, loadavg_at_end=os.getloadavg(),
                 utc_start=began)
        results['branches'][branch] = r
        print(json.dumps(r), flush=True)
        done = {b: v for b, v in results['branches'].items() if not v.get('error')}
        t = {b: v['seconds'] for b, v in done.items()}   # failed jobs have no ratio
        c = {b: v['core_seconds_excl_jobserver'] for b, v in done.items()}
        results['ratios'] = {f'{b}_throughput_over_np_combine': round(t['np_combine'] / t[b], 3)
                             for b in t if 'np_combine' in t}
        results['ratios'].update({f'{b}_core_seconds_np_combine_over_branch':
                                  round(c['np_combine'] / c[b], 3) for b in c if 'np_combine' in c})
        with open(out_path, 'w', encoding='utf-8') as f:   # after every branch
            json.dump(results, f, indent=1)
    print(json.dumps(results['ratios'], indent=1))


if __name__ == '__main__':
    main()
