"""Benchmark (a): variance of the released prefix counts, textbook tree vs variance-reduced.

For T in {2^10, 2^16}, for the finite ``BinaryTreeCounter`` (horizon T) and the unbounded
``InfiniteTreeCounter`` (released for steps 1..T), with ε = 1 (discrete Laplace), l1 = 1:

* closed form: ``release_variance(t)`` for every t = 1..T — mean and max over t;
* empirical: one pass of the mechanism over T steps with a ``dimension = d`` vector input (d
  independent counters in one pass, each bin an independent run), seeded noise
  (``beam_dp.noise.seeded``), a random Poisson(3) input stream; the per-t variance is the mean
  over the d bins of (release - true prefix)^2 (the estimators are unbiased; the mean bias is
  reported too). Mean over t and max over t of that per-t estimate are reported.

The baseline (textbook) and ours (variance_reduced) run side by side in the same invocation on the
same input; the headline number is the ratio textbook / ours (target: >= 1.5x lower mean
variance for ours).

Usage:
  python benchmarks/tree_variance/run.py [--dim-small 2000] [--dim-large 64] [--workers 2]
      [--empirical-steps-large 4096]
For T = 2^16 the empirical pass covers t = 1..--empirical-steps-large (default 4096) of the
T = 2^16 counters (ratios on those steps are reported next to the closed-form ones): a full
2^16-step pass costs 2^16 x 3-20 ms per step with the exact samplers, too slow for this run.
Outputs benchmarks/tree_variance/results/tree_variance.json and tree_variance.png.
"""

import argparse
import json
import multiprocessing
import os
import platform
import time

import numpy as np

from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.noise import seeded

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
ESTIMATORS = ('textbook', 'variance_reduced')
EPSILON = 1.0


def make_counter(kind, horizon, estimator, dimension):
    if kind == 'finite':
        return BinaryTreeCounter(horizon=horizon, epsilon=EPSILON, l1_sensitivity=1.0,
                                 dimension=dimension, estimator=estimator)
    return InfiniteTreeCounter(epsilon=EPSILON, l1_sensitivity=1.0, dimension=dimension,
                               estimator=estimator)


def closed_form(kind, horizon, estimator):
    counter = make_counter(kind, horizon, estimator, 1)
    return np.array([counter.release_variance(t) for t in range(1, horizon + 1)])


def empirical(args):
    """One config: returns (per-t empirical variance, mean bias, seconds)."""
    kind, horizon, estimator, dimension, seed, steps = args
    counter = make_counter(kind, horizon, estimator, dimension)
    rng = seeded(seed).derive('tree_variance', kind, horizon, estimator)
    data = np.random.default_rng(seed)   # Input data only (identical for both estimators).
    state = counter.init_state()
    prefix = np.zeros(dimension, dtype=np.int64)
    var_t = np.empty(steps)
    bias_sum = 0.0
    t0 = time.perf_counter()
    for t in range(steps):
        x = data.poisson(3.0, dimension).astype(np.int64)
        prefix += x
        release, state = counter.step(state, x, rng)
        err = np.asarray(release, dtype=np.float64) - prefix
        var_t[t] = float(np.mean(err * err))
        bias_sum += float(np.mean(err))
    return var_t, bias_sum / steps, time.perf_counter() - t0


def curve(values, points=512):
    """Block means of a per-t curve (for the JSON; the plot uses the full curve)."""
    n = len(values)
    if n <= points:
        return [float(v) for v in values]
    edges = np.unique(np.geomspace(1, n, points).astype(int))
    edges = np.concatenate([[0], edges])
    return {'t_end': edges[1:].tolist(),
            'mean': [float(values[a:b].mean()) for a, b in zip(edges[:-1], edges[1:]) if b > a]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dim-small', type=int, default=2000,
                        help='independent runs (vector dimension) for T = 2^10')
    parser.add_argument('--dim-large', type=int, default=64,
                        help='independent runs (vector dimension) for T = 2^16')
    parser.add_argument('--empirical-steps-large', type=int, default=4096,
                        help='for T = 2^16 only the first this many steps are run empirically '
                        '(the exact samplers cost ~3-20 ms per step; 0 = all T steps)')
    parser.add_argument('--log2-horizons', type=int, nargs='+', default=[10, 16])
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--seed', type=int, default=20261122)
    parser.add_argument('--out', default=os.path.join(RESULTS, 'tree_variance.json'))
    parser.add_argument('--plot', default=os.path.join(RESULTS, 'tree_variance.png'))
    args = parser.parse_args()
    os.makedirs(RESULTS, exist_ok=True)

    jobs = []
    for log2 in args.log2_horizons:
        horizon = 1 << log2
        dim = args.dim_small if log2 <= 12 else args.dim_large
        steps = horizon if log2 <= 12 or not args.empirical_steps_large else min(
            horizon, args.empirical_steps_large)
        for kind in ('finite', 'infinite'):
            for est in ESTIMATORS:
                jobs.append((kind, horizon, est, dim, args.seed, steps))
    # Longest jobs first so the pool stays busy.
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i][1])
    t0 = time.perf_counter()
    with multiprocessing.Pool(args.workers) as pool:
        outs = pool.map(empirical, [jobs[i] for i in order], chunksize=1)
    emp = {jobs[i][:3]: out for i, out in zip(order, outs)}
    wall = time.perf_counter() - t0

    results = {'benchmark': 'tree_variance', 'epsilon': EPSILON, 'noise': 'discrete_laplace',
               'l1_sensitivity': 1.0, 'seed': args.seed, 'wall_seconds': wall,
               'machine': machine(), 'configs': []}
    curves = {}
    for log2 in args.log2_horizons:
        horizon = 1 << log2
        for kind in ('finite', 'infinite'):
            row = {'horizon': horizon, 'log2_horizon': log2, 'counter': kind}
            for est in ESTIMATORS:
                cf = closed_form(kind, horizon, est)
                var_t, bias, secs = emp[(kind, horizon, est)]
                n = len(var_t)   # empirical steps: t = 1..n
                curves[(log2, kind, est)] = (cf, var_t)
                row[est] = {
                    'closed_form_mean': float(cf.mean()), 'closed_form_max': float(cf.max()),
                    'empirical_mean': float(var_t.mean()), 'empirical_max': float(var_t.max()),
                    'empirical_steps': n,
                    'closed_form_mean_on_empirical_steps': float(cf[:n].mean()),
                    'closed_form_max_on_empirical_steps': float(cf[:n].max()),
                    'empirical_over_closed_form_mean': float(var_t.mean() / cf[:n].mean()),
                    'empirical_mean_bias': bias,
                    'dimension': args.dim_small if log2 <= 12 else args.dim_large,
                    'empirical_seconds': secs,
                    'closed_form_curve': curve(cf), 'empirical_curve': curve(var_t)}
            tb, vr = row['textbook'], row['variance_reduced']
            row['ratio_textbook_over_ours'] = {
                'closed_form_mean': tb['closed_form_mean'] / vr['closed_form_mean'],
                'closed_form_max': tb['closed_form_max'] / vr['closed_form_max'],
                'closed_form_mean_on_empirical_steps': (tb['closed_form_mean_on_empirical_steps']
                                                        / vr['closed_form_mean_on_empirical_steps']),
                'empirical_mean': tb['empirical_mean'] / vr['empirical_mean'],
                'empirical_max': tb['empirical_max'] / vr['empirical_max']}
            row['target_1_5x_met'] = row['ratio_textbook_over_ours']['closed_form_mean'] >= 1.5
            results['configs'].append(row)
    with open(args.out, 'w') as f:
        json.dump(results, f, indent=1)
    plot(curves, args.log2_horizons, args.plot)
    print_table(results)


def machine():
    load = os.getloadavg() if hasattr(os, 'getloadavg') else None
    cpu = ''
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(l.split(':', 1)[1].strip() for l in f if l.startswith('model name'))
    except (OSError, StopIteration):
        pass
    return {'cpu': cpu, 'cpus': os.cpu_count(), 'python': platform.python_version(),
            'platform': platform.platform(), 'loadavg_at_end': load}


def print_table(results):
    print('| T | counter | estimator | closed-form mean | closed-form max | empirical mean '
          '| empirical max | d | emp. steps | emp/closed (same steps) |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for row in results['configs']:
        for est in ESTIMATORS:
            r = row[est]
            print(f"| 2^{row['log2_horizon']} | {row['counter']} | {est} | "
                  f"{r['closed_form_mean']:.1f} | {r['closed_form_max']:.1f} | "
                  f"{r['empirical_mean']:.1f} | {r['empirical_max']:.1f} | {r['dimension']} | "
                  f"{r['empirical_steps']} | "
                  f"{r['empirical_over_closed_form_mean']:.3f} |")
    print()
    print('| T | counter | ratio mean (closed) | ratio max (closed) | ratio mean (closed, emp. '
          'steps) | ratio mean (emp) | ratio max (emp) | >= 1.5x |')
    print('|---|---|---|---|---|---|---|---|')
    for row in results['configs']:
        r = row['ratio_textbook_over_ours']
        print(f"| 2^{row['log2_horizon']} | {row['counter']} | {r['closed_form_mean']:.2f} | "
              f"{r['closed_form_max']:.2f} | {r['closed_form_mean_on_empirical_steps']:.2f} | "
              f"{r['empirical_mean']:.2f} | "
              f"{r['empirical_max']:.2f} | {'yes' if row['target_1_5x_met'] else 'NO'} |")


def plot(curves, log2s, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(log2s), 2, figsize=(12, 4.2 * len(log2s)), squeeze=False)
    colors = {'textbook': 'tab:red', 'variance_reduced': 'tab:blue'}
    for i, log2 in enumerate(log2s):
        for j, kind in enumerate(('finite', 'infinite')):
            ax = axes[i][j]
            for est in ESTIMATORS:
                cf, var_t = curves[(log2, kind, est)]
                t = np.arange(1, len(cf) + 1)
                window = max(1, len(var_t) // 256)
                smooth = np.convolve(var_t, np.ones(window) / window, mode='same')
                ax.plot(t[:len(var_t)], smooth, color=colors[est], alpha=0.35, lw=0.8,
                        label=f'{est} empirical (moving avg {window})')
                ax.plot(t, cf, color=colors[est], lw=1.0, label=f'{est} closed form')
            ax.set_xscale('log')
            ax.set_title(f'{kind} counter, T = 2^{log2}, eps = {EPSILON:g} (discrete Laplace)')
            ax.set_xlabel('t (steps)')
            ax.set_ylabel('variance of released prefix count')
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == '__main__':
    main()
