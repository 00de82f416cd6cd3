"""Issue 29 item 5: the side-by-side's ratios on Prism and on a Flink session cluster, branches
INTERLEAVED (A B C A B C ...), CPU per row.

Every run is one fresh process that runs one branch with ``benchmarks/flink/sidebyside_user.py``
(``build`` + ``run_branch``: the side-by-side's rows and branches, CPU of the runner's process
trees sampled from /proc: on Prism this process (LOOPBACK SDK harness) and Prism; on Flink the
JobManager, TaskManager and the worker pool with its SDK workers; the job server, which only
translates and submits, is recorded apart). ``pipelinedp`` runs with the PipelineDP venv's
python (``run.py --pdp-venv``) and, on Flink, on its own worker pool (``--pdp_pool``).

    # Prism (batch, LOOPBACK)
    python benchmarks/throughput_sidebyside/runners_ratios.py --runner prism --rows 1000000 \\
        --branches np_combine event user pipelinedp --repeats 2 --tag prism_1M
    # Flink session cluster (streaming), parallelism 1 and 2; cluster + pools started as in
    # benchmarks/flink/README.md ("10M rows on Flink")
    python benchmarks/throughput_sidebyside/runners_ratios.py --runner flink_cluster $EFF \\
        --rows 1000000 --parallelism 1 2 --branches np_combine event user pipelinedp \\
        --repeats 2 --tag flink_1M

Writes results/runners_ratios_<tag>.json (every run, the per-repeat ratios of CPU and time
against ``np_combine`` and of ``user`` against ``pipelinedp``, their medians). ``--plot F ...
--out PNG`` plots the median CPU ratios of such files (the files of one runner pooled).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(HERE, 'results')
PDP_PYTHON = '/tmp/pdp_sbs/bin/python'


def one(args):
    """In the child: one branch, one JSON line."""
    sys.path.insert(0, ROOT)
    from benchmarks.flink import sidebyside_user as su  # pylint: disable=import-outside-toplevel
    ns = argparse.Namespace(runner=args.runner, rows=args.rows, keys=args.keys,
                            users=args.users, steps=args.steps, seed=args.seed,
                            parallelism=args.one_parallelism, master=args.master, pool=args.pool,
                            pdp_pool=args.pdp_pool, cluster_run_dir=args.cluster_run_dir,
                            streaming=args.runner == 'flink_cluster')
    seen = {}
    build = su.build

    def unchecked_build(branch, a):   # the count is checked here, after the measurement
        p, seen['expected'] = build(branch, a)
        return p, None

    su.build = unchecked_build
    r = su.run_branch(args.one, ns)
    if seen.get('expected') is not None:
        r['expected_outputs'] = seen['expected']
        r['count_ok'] = r['counters'].get('outputs') == seen['expected']
    print('RESULT ' + json.dumps(r), flush=True)


def child(args, branch, parallelism):
    python = args.pdp_python if branch == 'pipelinedp' else sys.executable
    cmd = [python, os.path.abspath(__file__), '--one', branch, '--one-parallelism',
           str(parallelism)] + [f'--{k}={v}' for k, v in (
               ('runner', args.runner), ('rows', args.rows), ('keys', args.keys),
               ('users', args.users), ('steps', args.steps), ('seed', args.seed),
               ('master', args.master), ('pool', args.pool), ('pdp_pool', args.pdp_pool),
               ('cluster_run_dir', args.cluster_run_dir))]
    env = dict(os.environ, PYTHONPATH=ROOT)
    load0, t0 = os.getloadavg(), time.strftime('%H:%M:%S', time.gmtime())
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if line.startswith('RESULT '):
            r = json.loads(line[len('RESULT '):])
            r.update(utc_start=t0, loadavg_at_start=load0, loadavg_at_end=os.getloadavg(),
                     parallelism=parallelism)
            return r
    return {'branch': branch, 'parallelism': parallelism, 'utc_start': t0,
            'error': proc.stderr[-3000:]}


def summarise(runs, rows):
    """Per (parallelism, repeat): ratios; then medians over repeats."""
    out = {}
    for (par, rep), group in _groups(runs).items():
        ok = {r['branch']: r for r in group if not r.get('error')}
        ratios = {}
        if 'np_combine' in ok:
            base = ok['np_combine']
            for b, r in ok.items():
                ratios[f'{b}_vs_np_combine_cpu'] = round(
                    base['core_seconds_excl_jobserver'] / r['core_seconds_excl_jobserver'], 3)
                ratios[f'{b}_vs_np_combine_time'] = round(base['seconds'] / r['seconds'], 3)
        if 'pipelinedp' in ok and 'user' in ok:
            ratios['user_vs_pipelinedp_cpu'] = round(
                ok['pipelinedp']['core_seconds_excl_jobserver']
                / ok['user']['core_seconds_excl_jobserver'], 3)
            ratios['user_vs_pipelinedp_time'] = round(
                ok['pipelinedp']['seconds'] / ok['user']['seconds'], 3)
        for b, r in ok.items():
            ratios[f'{b}_cpu_us_per_row'] = round(r['core_seconds_excl_jobserver'] / rows * 1e6, 2)
        out.setdefault(f'p{par}', []).append(ratios)
    medians = {}
    for par, reps in out.items():
        names = sorted({k for r in reps for k in r})
        medians[par] = {k: round(statistics.median(r[k] for r in reps if k in r), 3)
                        for k in names}
    return {'per_repeat': out, 'median': medians}


def _groups(runs):
    g = {}
    for r in runs:
        g.setdefault((r['parallelism'], r['repeat']), []).append(r)
    return g


def plot(paths, out):
    import matplotlib   # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    merged = {}   # runner -> (rows, runs): files of one runner are pooled, repeats renumbered
    for path in paths:
        with open(path, encoding='utf-8') as f:
            res = json.load(f)
        rows, runs = merged.setdefault(res['args']['runner'], (res['args']['rows'], []))
        offset = 1 + max((r['repeat'] for r in runs), default=-1)
        runs.extend(dict(r, repeat=r['repeat'] + offset) for r in res['runs'])
    series = []
    for runner, (rows, runs) in merged.items():
        for par, med in summarise(runs, rows)['median'].items():
            series.append(('Prism' if runner == 'prism' else f'Flink {par}', med))
    labels = ['event_vs_np_combine_cpu', 'user_vs_np_combine_cpu', 'user_vs_pipelinedp_cpu']
    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / max(1, len(series))
    for i, (name, med) in enumerate(series):
        xs = [j + i * width for j in range(len(labels))]
        vals = [med.get(k, 0) for k in labels]
        ax.bar(xs, vals, width, label=name)
        for x, v in zip(xs, vals):
            if v:
                ax.text(x, v, f'{v:.2f}', ha='center', va='bottom', fontsize=7)
    ax.axhline(1.0, color='grey', lw=0.8)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels(['event / np_combine', 'user / np_combine', 'user / PipelineDP'])
    ax.set_ylabel('CPU ratio (higher: beam_dp cheaper)')
    ax.legend(fontsize=8)
    ax.set_title('issue 29 item 5: CPU ratios, median of interleaved repeats', fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runner', choices=['prism', 'flink_cluster'], default='prism')
    parser.add_argument('--rows', type=int, default=1_000_000)
    parser.add_argument('--keys', type=int, default=10_000)
    parser.add_argument('--users', type=int, default=100_000)
    parser.add_argument('--steps', type=int, default=64)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--branches', nargs='+',
                        default=['np_combine', 'event', 'user', 'pipelinedp'])
    parser.add_argument('--parallelism', type=int, nargs='+', default=[1])
    parser.add_argument('--repeats', type=int, default=2)
    parser.add_argument('--master', default='127.0.0.1:8081')
    parser.add_argument('--pool', default='127.0.0.1:50000')
    parser.add_argument('--pdp_pool', default='127.0.0.1:50001')
    parser.add_argument('--cluster_run_dir',
                        default=os.path.expanduser('~/.cache/beam_dp/flink-cluster'))
    parser.add_argument('--pdp-python', default=PDP_PYTHON)
    parser.add_argument('--tag', default='')
    parser.add_argument('--plot', nargs='+', metavar='JSON', help='plot these results files')
    parser.add_argument('--out', help='with --plot: the PNG')
    parser.add_argument('--one', help=argparse.SUPPRESS)
    parser.add_argument('--one-parallelism', type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args)
        return
    if args.plot:
        plot(args.plot, args.out)
        return
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f'runners_ratios_{args.tag or args.runner}.json')
    results = {'command': 'python benchmarks/throughput_sidebyside/runners_ratios.py '
                          + ' '.join(sys.argv[1:]),
               'args': vars(args), 'cpus': os.cpu_count(), 'runs': []}
    for rep in range(args.repeats):
        for par in (args.parallelism if args.runner == 'flink_cluster' else [1]):
            for branch in args.branches:
                r = dict(child(args, branch, par), repeat=rep)
                results['runs'].append(r)
                print(json.dumps({k: r.get(k) for k in (
                    'branch', 'parallelism', 'repeat', 'seconds', 'core_seconds_excl_jobserver',
                    'utc_start', 'loadavg_at_start', 'counters', 'error')}), flush=True)
                results['summary'] = summarise(results['runs'], args.rows)
                with open(path, 'w', encoding='utf-8') as f:
                    json.dump(results, f, indent=1)
    print(json.dumps(results['summary']['median'], indent=1))


if __name__ == '__main__':
    main()
