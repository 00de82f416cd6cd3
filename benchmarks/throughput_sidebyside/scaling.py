"""Scaling in rows, keys and steps (issue 29 item 5): event-level ``ContinualCountPerKey`` and
the numpy-combined non-private count, side by side at every point, FnApiRunner.

    python benchmarks/throughput_sidebyside/scaling.py [--repeats 1] [--tag scaling] [--plot-only]

Each point is one ``run.py`` invocation (its own fresh processes, both branches in the same run,
the same rows); the axes vary one of rows (250k, 1M, 4M), keys (1k, 10k, 100k) and steps (16, 64,
256, 1,024) around 1M rows × 10k keys × 64 steps. Writes ``results/<tag>.json`` (every point's
best CPU and wall seconds, outputs, and the CPU ratio count ÷ event) and ``results/<tag>.png``
(CPU seconds against each axis, log-log).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
BASE = {'rows': 1_000_000, 'keys': 10_000, 'steps': 64}
AXES = {'rows': (250_000, 1_000_000, 4_000_000), 'keys': (1_000, 10_000, 100_000),
        'steps': (16, 64, 256, 1_024)}
BRANCHES = ('np_combine', 'event')


def points():
    seen = []
    for axis, values in AXES.items():
        for v in values:
            point = dict(BASE, **{axis: v})
            if point not in seen:
                seen.append(point)
    return seen


def run_point(point, repeats, tag):
    name = f'{tag}_r{point["rows"]}_k{point["keys"]}_s{point["steps"]}'
    subprocess.run([sys.executable, os.path.join(HERE, 'run.py'), '--rows', str(point['rows']),
                    '--keys', str(point['keys']), '--steps', str(point['steps']),
                    '--repeats', str(repeats), '--branches', *BRANCHES, '--tag', name],
                   check=True)
    with open(os.path.join(RESULTS, f'sidebyside_{name}.json')) as f:
        result = json.load(f)
    out = dict(point, load_at_start=result['machine']['loadavg_at_start'][0])
    for b in BRANCHES:
        s = result['branches'][b]
        out[b] = {'cpu_s': s['best_cpu_seconds'], 'wall_s': s['best_seconds'],
                  'outputs': s['outputs']}
    out['event_cpu_us_per_release'] = (out['event']['cpu_s'] * 1e6 /
                                       (point['keys'] * point['steps']))
    out['cpu_ratio_count_over_event'] = out['np_combine']['cpu_s'] / out['event']['cpu_s']
    return out


def plot(rows, path):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (axis, values) in zip(axes, AXES.items()):
        line = [r for r in rows if all(r[a] == BASE[a] for a in BASE if a != axis)]
        line.sort(key=lambda r: r[axis])
        for b, style in zip(BRANCHES, ('s--', 'o-')):
            ax.plot([r[axis] for r in line], [r[b]['cpu_s'] for r in line], style,
                    label={'np_combine': 'non-private count (numpy combine)',
                           'event': 'ContinualCountPerKey, event level'}[b])
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xticks(values)
        ax.set_xticklabels([f'{v // 1_000_000}M' if v >= 1_000_000 and v % 1_000_000 == 0
                            else f'{v // 1000}k' if v >= 1000 and v % 1000 == 0 else f'{v:,}'
                            for v in values])
        ax.minorticks_off()
        ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500)
                 if min(r[b]['cpu_s'] for r in line for b in BRANCHES) / 2 <= t
                 <= max(r[b]['cpu_s'] for r in line for b in BRANCHES) * 2]
        ax.set_yticks(ticks)
        ax.set_yticklabels([str(t) for t in ticks])
        ax.set_xlabel(axis + ' (others: 1M rows, 10k keys, 64 steps)')
        ax.set_ylabel('CPU s')
        ax.grid(True, which='both', alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle('Scaling in rows, keys and steps; FnApiRunner, batch')
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=1)
    parser.add_argument('--tag', default='scaling')
    parser.add_argument('--plot-only', action='store_true',
                        help='redraw results/<tag>.png from results/<tag>.json')
    args = parser.parse_args()
    if args.plot_only:
        with open(os.path.join(RESULTS, f'{args.tag}.json')) as f:
            plot(json.load(f)['points'], os.path.join(RESULTS, f'{args.tag}.png'))
        return
    rows = []
    for point in points():
        rows.append(run_point(point, args.repeats, args.tag))
        with open(os.path.join(RESULTS, f'{args.tag}.json'), 'w') as f:
            json.dump({'command': 'python benchmarks/throughput_sidebyside/scaling.py '
                                  + ' '.join(sys.argv[1:]), 'points': rows}, f, indent=1)
    plot(rows, os.path.join(RESULTS, f'{args.tag}.png'))
    for r in rows:
        print(f'{r["rows"]:>9,} rows {r["keys"]:>7,} keys {r["steps"]:>5} steps: event '
              f'{r["event"]["cpu_s"]:7.2f} CPU s ({r["event_cpu_us_per_release"]:.2f} µs per '
              f'release), count {r["np_combine"]["cpu_s"]:7.2f} CPU s, ratio '
              f'{r["cpu_ratio_count_over_event"]:.2f}')


if __name__ == '__main__':
    main()
