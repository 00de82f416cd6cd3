"""Plot a load test's samples: RSS per process group against events streamed and against time.

    python benchmarks/load_test/plot.py results/samples_<tag>.csv results/summary_<tag>.json \
        --out results/memory_<tag>.png
"""

import argparse
import csv
import json

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=wrong-import-position

GROUPS = (('python', 'Python (SDK harness / workers)'), ('jvm', 'JVM (Flink)'),
          ('prism', 'Prism (Go)'), ('total', 'total'))


def plot(csv_path, summary, out):
    with open(csv_path, encoding='utf-8') as f:
        rows = [{k: float(v) if v not in ('', 'None') else None for k, v in r.items()}
                for r in csv.DictReader(f)]
    args = summary['args']
    lagged = [r for r in rows if r.get('release_lag_s') is not None]
    fig, axes = plt.subplots(1, 3 if lagged else 2, figsize=(17 if lagged else 12, 4.2))
    if lagged:   # does the whole pipeline keep up, not only the source?
        axes[2].plot([r['t_seconds'] for r in lagged], [r['release_lag_s'] for r in lagged],
                     color='tab:red')
        axes[2].axhline(args['step'], color='grey', linestyle=':', label='one step')
        axes[2].set_xlabel('time since start (s)')
        axes[2].set_ylabel('wall clock − end of newest released step (s)')
        axes[2].set_ylim(bottom=0)
        axes[2].grid(alpha=0.3)
        axes[2].legend(fontsize=8)
    for ax, x_name, label in ((axes[0], 'events_done', 'events generated (millions)'),
                              (axes[1], 't_seconds', 'time since start (s)')):
        scale = 1e6 if x_name == 'events_done' else 1
        xs = [r[x_name] / scale for r in rows]
        for g, name in GROUPS:
            ys = [r[f'rss_mb_{g}'] for r in rows]
            if max(ys) > 0:
                ax.plot(xs, ys, label=name, linewidth=2 if g == 'total' else 1)
        if x_name == 'events_done':
            ax.axvline(args['growth_fraction'] * args['events'] / 1e6, color='grey',
                       linestyle=':', label='key and unit sets stop growing')
        ax.set_xlabel(label)
        ax.set_ylabel('RSS (MiB)')
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc='lower right')
    rate = summary.get('events_per_second_wall')
    fig.suptitle(f"ContinualCountPerKey (UserLevel K={args['max_keys_per_unit']}, "
                 f"m={args['max_contributions_per_step']}, S={args['max_steps_per_unit']}; "
                 f"PrivateKeys) on {args['runner']}: {summary['events']:,} events, "
                 f"{args['keys']:,} Zipf keys, {args['units']:,} units"
                 + (f', {rate:,.0f} events/s' if rate else ''), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f'wrote {out}')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('samples')
    parser.add_argument('summary')
    parser.add_argument('--out', required=True)
    args = parser.parse_args()
    with open(args.summary, encoding='utf-8') as f:
        summary = json.load(f)
    plot(args.samples, summary, args.out)


if __name__ == '__main__':
    main()
