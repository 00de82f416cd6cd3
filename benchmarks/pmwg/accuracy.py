"""Benchmark (a): PMWG accuracy vs α on a growing database, against the uniform histogram and
per-query Laplace.

For each privacy setting (pure: ε = 1, δ = 0; approximate: ε = 1, δ = 1e-6), initial size n, and
target α, one PMWG instance (``beam_dp.mechanisms.pmwg.PMWG``, Alg 3's ξ_t ∝ √t) is fed the
taxi-trip stream of ``workload.py`` (128 cells, drifting distribution) growing from n to
``growth``·n records, with ``queries`` template queries spread evenly over the growth. Per query:
|answer − f(x_t)|; refused ('halted') answers count as failures. Same data, same queries:

* uniform: the answer <f, uniform> (PMWG's starting histogram; what PMWG releases when every
  query is easy and nothing was learnt);
* Laplace (basic): each query answered with Lap(1/(ε_q t)), ε_q = ε/Q (basic composition over the
  Q queries of the run: total ε);
* Laplace (zCDP, δ > 0 only): ε_q solving ½Qε_q² + √(2Qε_q² ln(1/δ)) = ε (Theorem 4).

Reported per configuration, over ``reps`` repetitions (different seeds): max and mean error,
fraction of answers within α, success rate = fraction of runs where *every* answer was released
and within α (the theorem's event; target ≥ 1 − β = 0.95), hard answers, halts, ledger ε, and the
smallest α the accuracy theorems certify at this n (Theorem 14 / Theorem 24 with κ = 1) — P14:
vacuous (> 1) below n ≈ 10^8 (pure) / 10^7 (approx). Error over time: per run, queries split into
8 time bins by t/n.

Usage:
  python benchmarks/pmwg/accuracy.py [--ns 10000 100000 1000000 10000000]
      [--alphas 0.05 0.1 0.2 0.4] [--growth 8] [--queries 1000] [--reps 10] [--workers 2]
Outputs benchmarks/pmwg/results/accuracy.json and accuracy.png.
"""

import argparse
import json
import multiprocessing
import os
import time

import numpy as np

import workload as w
from beam_dp.mechanisms.pmwg import PMWG
from beam_dp.noise import seeded

PRIVACY = {'pure': (1.0, 0.0), 'approx': (1.0, 1e-6)}
BETA = 0.05
TIME_BINS = 8


def _one(job):
    privacy, n, alpha, rep, growth, num_queries = job
    eps, delta = PRIVACY[privacy]
    seed = (1_000_003 * rep + 7919 * int(round(alpha * 1000)) + n % 1_000_000_007
            + (0 if privacy == 'pure' else 17)) % (2 ** 31)
    gen = np.random.default_rng(seed)
    t_end = growth * n
    _, queries, matrix = w.query_stream(gen, num_queries)
    times = w.query_times(n, t_end, num_queries)
    mech = PMWG(epsilon=eps, alpha=alpha, n=n, domain_size=w.N, delta=delta)
    rng = seeded(seed)
    started = time.monotonic()
    run = w.run_pmwg_stream(mech, gen, rng.derive('pmwg'), n, t_end, queries, times, matrix)
    seconds = time.monotonic() - started
    true = run['true']
    answered = run['status'] <= 1
    err_pmwg = np.where(answered, np.abs(run['value'] - true), np.inf)
    err_uniform = np.abs(matrix.mean(axis=1) - true)
    errs = {'pmwg': err_pmwg, 'uniform': err_uniform}
    errs['laplace_basic'] = np.abs(
        w.laplace_answers(rng.derive('lap'), true, times, eps / num_queries) - true)
    if delta > 0:
        eps_q = w.cdp_split_epsilon(eps, delta, num_queries)
        errs['laplace_zcdp'] = np.abs(
            w.laplace_answers(rng.derive('lapz'), true, times, eps_q) - true)
    bins = np.minimum(((times - n) * TIME_BINS) // (t_end - n + 1), TIME_BINS - 1)
    out = {'privacy': privacy, 'n': n, 'alpha': alpha, 'rep': rep, 'seed': seed,
           'seconds': seconds, 'hard': run['hard'], 'halted': run['halted'],
           'ledger': run['ledger'], 'refused': int((~answered).sum()), 'methods': {}}
    for name, e in errs.items():
        finite = e[np.isfinite(e)]
        out['methods'][name] = {
            'max': float(e.max()), 'mean': float(finite.mean()) if finite.size else None,
            'within': float(np.mean(e <= alpha)), 'all_within': bool(np.all(e <= alpha)),
            'bin_max': [float(e[bins == b].max()) for b in range(TIME_BINS)],
            'bin_within': [float(np.mean(e[bins == b] <= alpha)) for b in range(TIME_BINS)],
        }
    return out


def aggregate(runs, ns, alphas):
    table = []
    for privacy in PRIVACY:
        eps, delta = PRIVACY[privacy]
        for n in ns:
            for alpha in alphas:
                rs = [r for r in runs if r['privacy'] == privacy and r['n'] == n
                      and r['alpha'] == alpha]
                if not rs:
                    continue
                mech = PMWG(epsilon=eps, alpha=alpha, n=n, domain_size=w.N, delta=delta)
                row = {'privacy': privacy, 'epsilon': eps, 'delta': delta, 'n': n, 'alpha': alpha,
                       'reps': len(rs), 'xi_n': mech.xi(n),
                       'theorem_min_alpha': w.pmwg_min_alpha(n, eps, delta, BETA),
                       'hard_mean': float(np.mean([r['hard'] for r in rs])),
                       'halted_runs': int(sum(r['halted'] for r in rs)),
                       'ledger_mean': float(np.mean([r['ledger'] for r in rs])),
                       'seconds_mean': float(np.mean([r['seconds'] for r in rs]))}
                for name in rs[0]['methods']:
                    ms = [r['methods'][name] for r in rs]
                    row[name] = {
                        'max_median': float(np.median([m['max'] for m in ms])),
                        'max_worst': float(np.max([m['max'] for m in ms])),
                        'mean_error': float(np.mean([m['mean'] for m in ms
                                                     if m['mean'] is not None]))
                        if any(m['mean'] is not None for m in ms) else None,
                        'within_alpha': float(np.mean([m['within'] for m in ms])),
                        'success_rate': float(np.mean([m['all_within'] for m in ms])),
                        'bin_max_median': np.median([m['bin_max'] for m in ms], axis=0).tolist(),
                        'bin_within': np.mean([m['bin_within'] for m in ms], axis=0).tolist(),
                    }
                table.append(row)
    return table


def plot(table, path, growth):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    alphas = sorted({r['alpha'] for r in table})
    ns = sorted({r['n'] for r in table})
    colors = dict(zip(alphas, plt.cm.viridis(np.linspace(0, 0.85, len(alphas)))))
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    for col, privacy in enumerate(PRIVACY):
        ax = axes[0, col]
        for alpha in alphas:
            rows = [r for r in table if r['privacy'] == privacy and r['alpha'] == alpha]
            x = [r['n'] for r in rows]
            ax.plot(x, [r['pmwg']['success_rate'] for r in rows], '-o', color=colors[alpha],
                    label=f'PMWG α={alpha}')
            ax.plot(x, [r['pmwg']['within_alpha'] for r in rows], ':', color=colors[alpha])
            lap = 'laplace_zcdp' if privacy == 'approx' else 'laplace_basic'
            ax.plot(x, [r[lap]['success_rate'] for r in rows], '--x', color=colors[alpha],
                    alpha=0.6)
        ax.axhline(1 - BETA, color='red', lw=0.8, label='1 − β = 0.95')
        ax.set_xscale('log')
        ax.set_xlabel('initial size n (grows to %d·n)' % growth)
        ax.set_ylabel('success rate (all answers within α)')
        eps, delta = PRIVACY[privacy]
        ax.set_title(f'{privacy}: ε={eps:g}, δ={delta:g}. solid: PMWG success, dotted: PMWG '
                     f'fraction within α,\n dashed: Laplace '
                     f'({"zCDP" if privacy == "approx" else "basic"} split) success',
                     fontsize=9)
        ax.legend(fontsize=7)
        ax = axes[1, col]
        for alpha in alphas:
            rows = [r for r in table if r['privacy'] == privacy and r['alpha'] == alpha]
            ax.plot([r['n'] for r in rows], [r['pmwg']['max_median'] for r in rows], '-o',
                    color=colors[alpha], label=f'PMWG α={alpha}')
            ax.axhline(alpha, color=colors[alpha], lw=0.6, ls='--')
        rows = [r for r in table if r['privacy'] == privacy and r['alpha'] == alphas[0]]
        ax.plot([r['n'] for r in rows], [r['uniform']['max_median'] for r in rows], 'k:',
                label='uniform histogram')
        ax.plot([r['n'] for r in rows], [r['laplace_basic']['max_median'] for r in rows], 'k--',
                label='Laplace, basic split')
        ax.plot(ns, [r['theorem_min_alpha'] for r in rows], 'r-.', label='theorem min α')
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('initial size n')
        ax.set_ylabel('max |error| over the run (median over reps)')
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--ns', type=int, nargs='+',
                        default=[10_000, 100_000, 1_000_000, 10_000_000])
    parser.add_argument('--alphas', type=float, nargs='+', default=[0.05, 0.1, 0.2, 0.4])
    parser.add_argument('--growth', type=int, default=8)
    parser.add_argument('--queries', type=int, default=1000)
    parser.add_argument('--reps', type=int, default=10)
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--privacy', nargs='+', default=list(PRIVACY), choices=list(PRIVACY))
    args = parser.parse_args()
    jobs = [(p, n, a, r, args.growth, args.queries) for p in args.privacy for n in args.ns
            for a in args.alphas for r in range(args.reps)]
    started = time.monotonic()
    runs = []
    with multiprocessing.Pool(args.workers) as pool:
        for k, r in enumerate(pool.imap_unordered(_one, jobs), 1):
            runs.append(r)
            print(f"[{k}/{len(jobs)}] {r['privacy']} n={r['n']} alpha={r['alpha']} "
                  f"rep={r['rep']} {r['seconds']:.1f}s", flush=True)
    wall = time.monotonic() - started
    table = aggregate(runs, args.ns, args.alphas)
    results = w.ensure_results()
    out = {'benchmark': 'pmwg_accuracy', 'args': vars(args), 'beta': BETA,
           'machine': w.machine_info(), 'wall_seconds': wall, 'table': table}
    with open(os.path.join(results, 'accuracy.json'), 'w') as f:
        json.dump(out, f, indent=1)
    plot(table, os.path.join(results, 'accuracy.png'), args.growth)
    hdr = ('privacy', 'n', 'alpha', 'thm_min_a', 'xi_n', 'hard', 'halt', 'pmwg_max', 'pmwg_mean',
           'pmwg_within', 'pmwg_succ', 'unif_max', 'lap_max', 'lap_succ')
    print(' | '.join(hdr))
    for r in table:
        lap = r.get('laplace_zcdp', r['laplace_basic'])
        print(' | '.join(str(x) for x in (
            r['privacy'], r['n'], r['alpha'], f"{r['theorem_min_alpha']:.3g}", f"{r['xi_n']:.3g}",
            f"{r['hard_mean']:.0f}", r['halted_runs'], f"{r['pmwg']['max_median']:.3g}",
            f"{r['pmwg']['mean_error']:.3g}", f"{r['pmwg']['within_alpha']:.3f}",
            f"{r['pmwg']['success_rate']:.2f}", f"{r['uniform']['max_median']:.3g}",
            f"{lap['max_median']:.3g}", f"{lap['success_rate']:.2f}")))
    print(f'wall {wall:.0f} s')


if __name__ == '__main__':
    main()
