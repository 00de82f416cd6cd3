"""Load test (issue 13 item 2): millions of events streamed through ``ContinualCountPerKey``
(user level, private keys) on Prism or Flink, the memory of every runner process sampled.

    python benchmarks/load_test/run.py --runner prism --events 10000000 --tag prism_10M

The pipeline (``workload.py``) runs in a child process (``--worker``); this process samples,
every ``--sample_seconds``, the RSS (``VmRSS``) and CPU time (utime + stime) of every process of
the run from ``/proc``: the child's whole process tree (the Python SDK harness, which runs in the
child with LOOPBACK, Prism's Go binary, the Flink job server JVM with ``--runner flink``), and
with ``--runner flink_cluster`` the cluster's JobManager, TaskManager and Python worker pool with
its SDK worker processes. It also reads how many impulses the generator has expanded so far
(``progress/`` files written by the workers). Writes ``results/samples_<tag>.csv`` (one row per
sample), ``results/summary_<tag>.json`` and ``results/memory_<tag>.png``.
"""

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(HERE, 'results')
sys.path.insert(0, ROOT)
from benchmarks.flink import cpu  # pylint: disable=wrong-import-position  (/proc process trees)
PAGE = os.sysconf('SC_PAGE_SIZE')
GROUPS = ('python', 'jvm', 'prism')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runner', choices=['prism', 'flink', 'flink_cluster'], default='prism')
    parser.add_argument('--events', type=int, default=1_000_000)
    parser.add_argument('--events_per_impulse', type=int, default=5_000)
    parser.add_argument('--impulse_seconds', type=float, default=0.5,
                        help='wall-clock (and event-time) seconds between impulses')
    parser.add_argument('--catch_up', action='store_true',
                        help='all impulses in the past, emitted as fast as the runner takes '
                        'them (Prism then runs the source and everything fused after it as ONE '
                        'bundle: see README)')
    parser.add_argument('--lead_seconds', type=float, default=30.0,
                        help='paced mode: the first impulse this long after launch (job start-up)')
    parser.add_argument('--step', type=int, default=10, help='release step, seconds')
    parser.add_argument('--keys', type=int, default=5_000)
    parser.add_argument('--units', type=int, default=50_000)
    parser.add_argument('--growth_fraction', type=float, default=0.25,
                        help='the key and unit sets grow over this fraction of the impulses')
    parser.add_argument('--max_keys_per_unit', type=int, default=4)
    parser.add_argument('--max_contributions_per_step', type=int, default=8)
    parser.add_argument('--max_steps_per_unit', type=int, default=4)
    parser.add_argument('--allowed_lateness', type=int, default=0)
    parser.add_argument('--seed', type=int, default=13)
    parser.add_argument('--parallelism', type=int, default=1, help='Flink only')
    parser.add_argument('--master', default='127.0.0.1:8081', help='--runner flink_cluster')
    parser.add_argument('--pool', default='127.0.0.1:50000', help='--runner flink_cluster')
    parser.add_argument('--cluster_run_dir',
                        default=os.path.expanduser('~/.cache/beam_dp/flink-cluster'),
                        help='pid files of .ci/flink_cluster.sh (--runner flink_cluster)')
    parser.add_argument('--sample_seconds', type=float, default=5.0)
    parser.add_argument('--tag', default='')
    parser.add_argument('--results_dir', default=RESULTS)
    parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--start', type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument('--progress_dir', default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


#: The portable runner opens the job's state stream with a gRPC deadline of
#: --job_server_timeout (default 300 s): a longer job then fails in wait_until_finish with
#: DEADLINE_EXCEEDED ("Stream removed") and its runner is torn down (seen on Prism at 305 s).
LONG_JOB = ['--job_server_timeout=86400']


def pipeline_options(args):
    from tests import runners  # pylint: disable=import-outside-toplevel
    if args.runner == 'prism':
        return runners.prism_options(streaming=True) + LONG_JOB
    if args.runner == 'flink':
        return runners.flink_options(streaming=True, parallelism=args.parallelism) + LONG_JOB
    options = [o for o in runners.flink_options(streaming=True, parallelism=args.parallelism,
                                                master=args.master)
               if not o.startswith('--environment_type')]
    return options + LONG_JOB + ['--environment_type=EXTERNAL', f'--environment_config={args.pool}',
                      f'--sdk_worker_parallelism={args.parallelism}', '--load_balance_bundles']


def worker(args):
    """Runs the pipeline in this process; prints one RESULT line (counters, times)."""
    import apache_beam as beam  # pylint: disable=import-outside-toplevel
    from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel
    # by its package name, so that SDK workers of a worker pool (cwd = repo root) unpickle it
    from benchmarks.load_test import workload  # pylint: disable=import-outside-toplevel
    p = beam.Pipeline(options=PipelineOptions(pipeline_options(args)))
    impulses = workload.build(p, args, args.start, args.progress_dir)
    t0 = time.time()
    result = p.run()
    result.wait_until_finish()
    counters = {}
    for c in result.metrics().query(beam.metrics.MetricsFilter())['counters']:
        if c.key.metric.namespace == 'load_test':
            counters[c.key.metric.name] = c.committed if c.committed is not None else c.attempted
    print('RESULT ' + json.dumps({'seconds': time.time() - t0, 'impulses': impulses,
                                  'counters': counters}), flush=True)


def group_of(pid):
    comm = cpu.comm(pid)
    if comm == 'java':
        return 'jvm'
    if comm.startswith('prism'):
        return 'prism'
    if comm.startswith('python'):
        return 'python'
    return None   # shells, nice


def rss_and_cpu(pid):
    """(RSS bytes, CPU seconds) of a live process, or None."""
    try:
        with open(f'/proc/{pid}/statm', encoding='ascii') as f:
            rss = int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return None
    seconds = cpu.cpu(pid)
    return None if seconds is None else (rss, seconds)


def cluster_roots(run_dir):
    roots = []
    for name in ('jobmanager', 'taskmanager', 'workerpool'):
        try:
            with open(os.path.join(run_dir, f'{name}.pid'), encoding='ascii') as f:
                roots.append(int(f.read().strip()))
        except (OSError, ValueError):
            pass
    return roots


def released_step(progress_dir):
    """The highest step any worker process has released (-1: none yet)."""
    best = -1
    for name in os.listdir(progress_dir):
        if name.startswith('released_') and not name.endswith('.tmp'):
            try:
                with open(os.path.join(progress_dir, name), encoding='ascii') as f:
                    best = max(best, int(f.read() or -1))
            except (OSError, ValueError):
                pass
    return best


def progress(progress_dir):
    total = 0
    for name in os.listdir(progress_dir):
        if name.isdigit():   # <pid>; <pid>.<thread>.tmp are being written
            try:
                with open(os.path.join(progress_dir, name), encoding='ascii') as f:
                    total += int(f.read() or 0)
            except (OSError, ValueError):
                pass
    return total


def sample(roots, t0, progress_dir, per_impulse, cpu_seen, due, lag):
    """One row: RSS and CPU per group over every process under ``roots``. ``cpu_seen`` keeps
    the last CPU time of every pid, so that exited processes' CPU stays counted."""
    row = {'t_seconds': round(time.monotonic() - t0, 1)}
    rss = dict.fromkeys(GROUPS, 0)
    procs = dict.fromkeys(GROUPS, 0)
    for root in roots:
        for pid in cpu.tree(root):
            group = group_of(pid)
            got = rss_and_cpu(pid) if group else None
            if got is None:
                continue
            rss[group] += got[0]
            procs[group] += 1
            cpu_seen[pid] = (group, got[1])
    impulses = progress(progress_dir)
    row['impulses_done'] = impulses
    row['impulses_due'] = due()   # paced mode: what the source has released by now
    row['released_step'] = released_step(progress_dir)
    row['release_lag_s'] = lag(row['released_step'])   # wall clock - end of the newest released step
    row['events_done'] = impulses * per_impulse
    for g in GROUPS:
        row[f'rss_mb_{g}'] = round(rss[g] / 2**20, 1)
        row[f'procs_{g}'] = procs[g]
        row[f'cpu_s_{g}'] = round(sum(c for gg, c in cpu_seen.values() if gg == g), 1)
    row['rss_mb_total'] = round(sum(rss.values()) / 2**20, 1)
    return row


def run(args):
    tag = args.tag or f'{args.runner}_{args.events}'
    os.makedirs(args.results_dir, exist_ok=True)
    progress_dir = tempfile.mkdtemp(prefix='beam_dp_load_')
    impulses = args.events // args.events_per_impulse
    if args.catch_up:   # all impulses in the past: caught up at full speed
        start = int(time.time() - impulses * args.impulse_seconds) - 3600
    else:
        start = int(time.time() + args.lead_seconds)
    cmd = [sys.executable, os.path.abspath(__file__), '--worker', '--start', str(start),
           '--progress_dir', progress_dir] + [a for a in sys.argv[1:]]

    def due():
        return min(impulses, max(0, int((time.time() - start) / args.impulse_seconds) + 1))

    def lag(step):   # None before the first release
        return None if step < 0 else round(time.time() - (start + (step + 1) * args.step), 1)
    log_path = os.path.join(args.results_dir, f'worker_{tag}.log')
    csv_path = os.path.join(args.results_dir, f'samples_{tag}.csv')
    version = code_version()
    t0 = time.monotonic()
    cpu_seen, rows = {}, []
    with open(log_path, 'w', encoding='utf-8') as log, \
            open(csv_path, 'w', newline='', encoding='utf-8') as out:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        roots = [child.pid] + (cluster_roots(args.cluster_run_dir)
                               if args.runner == 'flink_cluster' else [])
        writer = None
        while child.poll() is None:
            row = sample(roots, t0, progress_dir, args.events_per_impulse, cpu_seen, due, lag)
            rows.append(row)
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(row))
                writer.writeheader()
            writer.writerow(row)
            out.flush()
            time.sleep(args.sample_seconds)
        stdout = child.stdout.read()
    wall = time.monotonic() - t0
    result = None
    for line in stdout.splitlines():
        if line.startswith('RESULT '):
            result = json.loads(line[len('RESULT '):])
    summary = summarize(args, tag, rows, result, wall, child.returncode)
    summary['code_at_start'] = version
    with open(os.path.join(args.results_dir, f'summary_{tag}.json'), 'w', encoding='utf-8') as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != 'args'}, indent=1))
    if rows:
        from benchmarks.load_test import plot  # pylint: disable=import-outside-toplevel
        plot.plot(csv_path, summary, os.path.join(args.results_dir, f'memory_{tag}.png'))
    return summary


def code_version():
    """HEAD and the beam_dp files that differ from it (the tree is shared and edited while a
    long run goes on: the worker imports beam_dp once, at its start)."""
    def git(*cmd):
        return subprocess.run(['git', '-C', ROOT, *cmd], capture_output=True, text=True,
                              check=False).stdout.strip()
    return {'head': git('rev-parse', '--short', 'HEAD'),
            'beam_dp_uncommitted': git('status', '--short', '--', 'beam_dp').splitlines()}


def _fit(xs, ys):
    """Least-squares slope of ys against xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0


def memory_verdict(rows, grown, total):
    """RSS while streaming after the key and unit sets stopped growing (``grown`` events
    generated, the stream not yet at its end): mean of the first and last third of those
    samples and the least-squares slope in MiB per million events, per group; and the peak after
    the last event (end of input: the last releases)."""
    streaming = [r for r in rows if grown <= r['events_done'] < total]
    out = {}
    if len(streaming) >= 6:
        third = len(streaming) // 3
        out['after_growth'] = {
            'samples': len(streaming),
            'events_from_to': (streaming[0]['events_done'], streaming[-1]['events_done']),
            'rss_mb': {g: {'first_third_mean': round(sum(r[f'rss_mb_{g}'] for r in
                                                         streaming[:third]) / third, 1),
                           'last_third_mean': round(sum(r[f'rss_mb_{g}'] for r in
                                                        streaming[-third:]) / third, 1),
                           'max': max(r[f'rss_mb_{g}'] for r in streaming),
                           'slope_mb_per_million_events': round(_fit(
                               [r['events_done'] / 1e6 for r in streaming],
                               [r[f'rss_mb_{g}'] for r in streaming]), 1)}
                       for g in GROUPS + ('total',)}}
    ended = [r for r in rows if r['events_done'] >= total]
    if ended:
        out['after_last_event'] = {
            'samples': len(ended),
            'peak_rss_mb': {g: max(r[f'rss_mb_{g}'] for r in ended) for g in GROUPS + ('total',)}}
    return out


def summarize(args, tag, rows, result, wall, returncode):
    """Totals, throughput and the memory verdict (``memory_verdict``)."""
    events = (result or {}).get('impulses', 0) * args.events_per_impulse
    summary = {'tag': tag, 'command': 'python benchmarks/load_test/run.py ' + ' '.join(sys.argv[1:]),
               'machine': f'{os.cpu_count()} cores, {platform.platform()}',
               'loadavg_at_end': os.getloadavg(), 'returncode': returncode,
               'events': events, 'wall_seconds': round(wall, 1), 'result': result,
               'args': vars(args)}
    if result:
        summary['events_per_second_wall'] = round(events / wall, 1)
    if rows:
        last = rows[-1]
        summary['cpu_seconds'] = {g: last[f'cpu_s_{g}'] for g in GROUPS}
        summary['peak_rss_mb'] = {g: max(r[f'rss_mb_{g}'] for r in rows)
                                  for g in GROUPS + ('total',)}
        summary.update(memory_verdict(rows, args.growth_fraction * args.events, args.events))
    return summary


def main():
    args = parse_args()
    if args.worker:
        worker(args)
    else:
        run(args)


if __name__ == '__main__':
    main()
