"""CPU µs per release per 1M-release slice, from ``run.py --progress FILE`` logs (issue 29).

    python benchmarks/throughput_sidebyside/horizon_slices.py LABEL=FILE [LABEL=FILE ...] \\
        [--out results/horizon_slices.png] [--json results/horizon_slices.json]

A progress log has one line per 1M outputs: 'UTC, CPU s of the worker process, outputs' (the
first line at 0 outputs, when the sink starts). A slice's cost is its CPU difference over 1M;
the first slice also carries the rows' entry stages and the pipeline's start-up. Prints, per
log, every slice, the median, min and max of the slices after the first, and the ratio of the
mean of the last quarter of those slices to the first quarter's: flat is ~1.
"""

import argparse
import json
import statistics


def slices(path):
    rows = []
    with open(path, encoding='utf-8') as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                rows.append((parts[0], float(parts[1]), int(parts[2])))
    out = []
    for (t0, c0, n0), (t1, c1, n1) in zip(rows, rows[1:]):
        wall = (_secs(t1) - _secs(t0)) % 86400
        out.append({'utc_end': t1, 'outputs_end': n1,
                    'us_per_release': (c1 - c0) / (n1 - n0) * 1e6,
                    'wall_us_per_release': wall / (n1 - n0) * 1e6})
    return out


def _secs(hms):
    h, m, s = map(int, hms.split(':'))
    return h * 3600 + m * 60 + s


def summary(sl):
    rest = [s['us_per_release'] for s in sl[1:]]
    if not rest:
        return {'slices': len(sl)}
    q = max(1, len(rest) // 4)
    head, tail = rest[:q], rest[-q:]
    fit = {}
    if len(rest) >= 5:
        # CPU per release against wall per release and position in the horizon: a runner that
        # polls burns CPU in proportion to wall time (load); the position's coefficient is the
        # growth with the horizon at equal wall time.
        import numpy as np   # pylint: disable=import-outside-toplevel
        x = np.array([[1.0, t['wall_us_per_release'], t['outputs_end'] / 1e6] for t in sl[1:]])
        coef = np.linalg.lstsq(x, np.array(rest), rcond=None)[0]
        n_end = sl[-1]['outputs_end'] / 1e6
        fit = {'fit_cpu_us_at_zero_wall': round(float(coef[0]), 3),
               'fit_cpu_us_per_wall_us': round(float(coef[1]), 4),
               'fit_cpu_us_per_million_releases_done': round(float(coef[2]), 4),
               'fit_growth_over_run_at_equal_wall': round(float(
                   coef[2] * (n_end - 1) / (coef[0] + coef[1] * np.median(x[:, 1]) + coef[2])), 3)}
    return {'slices': len(sl), 'first_slice_us': round(sl[0]['us_per_release'], 2),
            'median_us': round(statistics.median(rest), 2), 'min_us': round(min(rest), 2),
            'max_us': round(max(rest), 2),
            'last_quarter_over_first_quarter': round(statistics.mean(tail) / statistics.mean(head), 3),
            **fit}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('logs', nargs='+', metavar='LABEL=FILE')
    parser.add_argument('--out', help='PNG')
    parser.add_argument('--json', help='write the slices and summaries here')
    args = parser.parse_args()
    result = {}
    for item in args.logs:
        label, path = item.split('=', 1)
        sl = slices(path)
        result[label] = {'file': path, 'summary': summary(sl), 'slices': sl}
        print(label, json.dumps(result[label]['summary']))
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as f:
            json.dump(result, f, indent=1)
    if args.out:
        import matplotlib   # pylint: disable=import-outside-toplevel
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
        fig, ax = plt.subplots(figsize=(8, 3.6))
        for label, r in result.items():
            xs = [s['outputs_end'] / 1e6 for s in r['slices'][1:]]
            ys = [s['us_per_release'] for s in r['slices'][1:]]
            ax.plot(xs, ys, marker='.', lw=0.8, label=label)
        ax.set_xlabel('releases done (millions)')
        ax.set_ylabel('worker CPU µs per release (1M slice)')
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        ax.set_title('cost per release along the horizon (first slice, with the rows, left out)',
                     fontsize=9)
        fig.tight_layout()
        fig.savefig(args.out, dpi=110)


if __name__ == '__main__':
    main()
