"""Plot the Flink parallelism-1 vs 2 runs recorded by throughput.py.

    python benchmarks/flink/plot.py benchmarks/flink/results/results_event.json \
        benchmarks/flink/results/results_user.json --out benchmarks/flink/results/speedup.png
"""

import argparse
import json

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=wrong-import-position


def plot_efficiency(paths, out):
    """Issue 13 item 6: CPU-seconds per million events (Python SDK workers, cluster JVMs) at
    parallelism 1 and 2, one panel per results file, one bar pair per job size."""
    fig, axes = plt.subplots(1, len(paths), figsize=(5.5 * len(paths), 4), squeeze=False)
    for ax, path in zip(axes[0], paths):
        with open(path, encoding='utf-8') as f:
            summary = json.load(f)
        runs = [r for r in summary['results'] if not r.get('warmup')]
        sizes = sorted({r['events'] for r in runs})
        for i, n in enumerate(sizes):
            for p, colour in ((1, 'tab:blue'), (2, 'tab:orange')):
                mine = [r['efficiency'] for r in runs if r['events'] == n and r['parallelism'] == p]
                if not mine:
                    continue
                py = sum(e['python_cpu_s_per_million_events'] for e in mine) / len(mine)
                jvm = sum(e['jvm_cpu_s_per_million_events'] for e in mine) / len(mine)
                x = i + (p - 1.5) * 0.38
                ax.bar(x, py, 0.36, color=colour, label=f'p{p} Python' if i == 0 else None)
                ax.bar(x, jvm, 0.36, bottom=py, color=colour, alpha=0.35, hatch='//',
                       label=f'p{p} JVM (JM + TM)' if i == 0 else None)
                ax.text(x, py + jvm, f'{py:.1f}', ha='center', va='bottom', fontsize=8)
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([f'{n / 1e6:g}M events' for n in sizes])
        eff = summary.get('efficiency', {})
        ratio = eff.get('p2_over_p1_python_cpu_s_per_million_events')
        name = {'load_test': 'user level + private keys', 'event': 'event level'}.get(
            runs[0]['privacy'], runs[0]['privacy'])
        ax.set_title(f"{name}: Python CPU p2/p1 = {ratio:.2f} at "
                     f"{sizes[-1] / 1e6:g}M (target ≤ 1.1)", fontsize=10)
        ax.set_ylabel('CPU seconds per million events')
        ax.legend(fontsize=8)
    fig.suptitle('ContinualCountPerKey on a local Flink 1.19 cluster: CPU per million events')
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f'wrote {out}')


def plot_sidebyside(paths, out):
    """Issue 15 on real runners (sidebyside_user.py results): per branch, rows/s (job time) and
    rows per core-second (Python + cluster JVMs, or Prism), one panel per results file (runner,
    rows); labels: the ratio to ``np_combine`` (time / CPU). Failed jobs are left out."""
    fig, axes = plt.subplots(1, len(paths), figsize=(5.6 * len(paths), 3.8), squeeze=False)
    order = ('np_combine', 'pipelinedp', 'event', 'user')
    for ax, path in zip(axes[0], paths):
        with open(path, encoding='utf-8') as f:
            summary = json.load(f)
        branches = summary['branches']
        names = [b for b in order if b in branches and not branches[b].get('error')]
        xs = list(range(len(names)))
        wall = [branches[b]['rows_per_second'] for b in names]
        core = [branches[b].get('rows_per_core_second') or 0 for b in names]
        ax.bar([x - 0.2 for x in xs], wall, width=0.4, color='tab:blue', label='rows / s (time)')
        ax.bar([x + 0.2 for x in xs], core, width=0.4, color='tab:orange',
               label='rows / core-second')
        base = names.index('np_combine') if 'np_combine' in names else None
        for x, w, c in zip(xs, wall, core):
            if base is not None:   # same rows: ratios of rates are ratios of times / CPU
                ax.text(x - 0.2, w, f'{w / wall[base]:.2f}x', ha='center', va='bottom',
                        fontsize=8)
                if c and core[base]:
                    ax.text(x + 0.2, c, f'{c / core[base]:.2f}x', ha='center', va='bottom',
                            fontsize=8)
        ax.set_xticks(xs)
        ax.set_xticklabels(names)
        args = summary['args']
        mode = 'streaming' if args.get('streaming') else 'batch'
        ax.set_title(f"{args['runner']} ({mode}), {args['rows']:,} rows\n{args.get('tag', '')}",
                     fontsize=9)
        ax.set_ylabel('labels: vs np_combine')
        ax.legend(fontsize=7)
    fig.suptitle('Side-by-side branches on real runners (issue 15)')
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f'wrote {out}')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('results', nargs='+')
    parser.add_argument('--out', required=True)
    parser.add_argument('--efficiency', action='store_true',
                        help='CPU per million events (results of run.py with tree CPU sampling)')
    parser.add_argument('--sidebyside', action='store_true',
                        help='rows/s per branch (results of sidebyside_user.py)')
    args = parser.parse_args()
    if args.sidebyside:
        plot_sidebyside(args.results, args.out)
        return
    if args.efficiency:
        plot_efficiency(args.results, args.out)
        return
    fig, axes = plt.subplots(1, len(args.results), figsize=(5.5 * len(args.results), 4),
                             squeeze=False)
    for ax, path in zip(axes[0], args.results):
        with open(path, encoding='utf-8') as f:
            summary = json.load(f)
        runs = [r for r in summary['results'] if not r.get('warmup')]
        for p, colour in ((1, 'tab:blue'), (2, 'tab:orange')):
            mine = [r for r in runs if r['parallelism'] == p]
            ax.scatter([r.get('repeat', 0) for r in mine],
                       [r['events_per_second'] for r in mine], color=colour,
                       label=f'parallelism {p}')
            median = summary['median_events_per_second'][str(p)]
            ax.axhline(median, color=colour, linestyle='--', linewidth=1)
        events = max(r['events'] for r in runs)
        ax.set_title(f"{runs[0]['privacy']}-level, {events:,} events: "
                     f"p2/p1 = {summary['speedup_p2_over_p1']:.2f}x (medians)")
        ax.axhline(1.6 * summary['median_events_per_second']['1'], color='grey',
                   linestyle=':', linewidth=1, label='1.6 x p1 (target)')
        ax.set_xticks(sorted({r.get('repeat', 0) for r in runs}))
        ax.set_xlabel('repeat (interleaved p1, p2)')
        ax.set_ylabel('events / s (Flink job time)')
        ax.set_ylim(bottom=0)
        ax.legend(loc='lower right', fontsize=8)
    fig.suptitle('ContinualCountPerKey on a local Flink 1.19 session cluster, 2 cores')
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
