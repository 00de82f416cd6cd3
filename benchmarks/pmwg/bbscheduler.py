"""Benchmark (c): BBScheduler with the Laplace query-vector black box — empirical error vs the
spec's predictions (§2.5, §6.4).

``BBScheduler(LaplaceQueryVector(k queries), ε = 1, β = 0.05, n)`` (eager mode) on a database
growing from n to ``growth``·n. Two workloads:

* ``spec``: the §6.4 simulation — N = 16, k = 10 random counting queries (each cell in w.p. ½),
  adversarial drift: a record arriving at clock u = t/t_end falls in the lower half of the
  universe w.p. 1 − u, in the upper half w.p. u (uniform within the half);
* ``taxi``: the PMWG benchmarks' taxi-trip stream (N = 128), k = 10 template queries.

At every epoch start t_i (right after the release) and at ``points`` log-spaced sizes, all k
queries are answered; the error is |answer − f(x_t)| on the *current* database. Predictions:

* the guarantee (Lemma 11 + §2.5): every answer within α_i + γ/(1+γ), α_i = γ(1+γ)^{2p},
  simultaneously w.p. ≥ 1 − β (``BBScheduler.guaranteed_error``);
* the box's α_i = g (ln(1/β_i)/(ε_i (1+γ)^i n))^p (``bbscheduler_alpha``, g = k(1+ln k)), a bound on
  the epoch's snapshot error w.p. 1 − β_i;
* the exact law of the box error: each answer is f(x_{t_i}) + Lap(b_i), b_i = k/(ε_i t_i), so the
  q-quantile of the max over k answers is −b_i ln(1 − q^{1/k}) (grid rounding ignored).

Reported over ``reps`` seeds: quantiles of the run's max error vs the guarantee, the fraction of
runs entirely within it (target ≥ 1 − β = 0.95, spec criterion 19), and per epoch the empirical
50 % / 95 % quantiles of the snapshot error vs the exact prediction and vs α_i.

Usage:
  python benchmarks/pmwg/bbscheduler.py [--ns 10000 100000 1000000] [--growth 10] [--reps 40]
      [--workloads spec taxi] [--workers 2]
Outputs benchmarks/pmwg/results/bbscheduler.json and bbscheduler.png.
"""

import argparse
import json
import math
import multiprocessing
import os
import time

import numpy as np

import workload as w
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import bbscheduler_gamma
from beam_dp.mechanisms.black_boxes import LaplaceQueryVector
from beam_dp.noise import seeded
from beam_dp.queries import LinearQuery

EPS, BETA, K = 1.0, 0.05, 10
SPEC_N = 16


def _workload(name, gen):
    """(domain size, queries, matrix, grow(t_from, t_to, t_end) -> indices)."""
    if name == 'spec':
        matrix = (gen.random((K, SPEC_N)) < 0.5).astype(np.float64)
        matrix[matrix.sum(axis=1) == 0, 0] = 1.0
        queries = [LinearQuery.from_vector(row) for row in matrix]

        def grow(t_from, t_to, t_end):
            u = (t_from + t_to) / 2 / t_end
            p = np.concatenate([np.full(SPEC_N // 2, (1 - u)), np.full(SPEC_N // 2, u)])
            counts = gen.multinomial(t_to - t_from, p / p.sum())
            return np.repeat(np.arange(SPEC_N), counts)
        return SPEC_N, queries, matrix, grow
    _, queries, matrix = w.query_stream(gen, K)
    return w.N, queries, matrix, lambda a, b, e: w.grow(gen, a, b, e)


def _one(job):
    name, n, rep, growth, points = job
    seed = (1_000_003 * rep + n + (0 if name == 'spec' else 31)) % (2 ** 31)
    gen = np.random.default_rng(seed)
    domain, queries, matrix, grow = _workload(name, gen)
    t_end = growth * n
    sched = BBScheduler(LaplaceQueryVector(tuple(queries)), epsilon=EPS, beta=BETA, n=n,
                        domain_size=domain)
    starts = []
    i = 0
    while sched.start(i) <= t_end:
        starts.append(sched.start(i))
        i += 1
    grid = np.unique(np.round(np.geomspace(n, t_end, points)).astype(np.int64))
    checkpoints = np.unique(np.concatenate([starts, grid]))
    rng = seeded(seed)
    state = sched.init_state()
    t = 0
    epochs = {}
    max_err_at = []
    started = time.monotonic()
    for cp in checkpoints:
        cp = int(cp)
        # Fill in the records in pieces so the drift follows the clock.
        pieces = np.unique(np.linspace(t, cp, 9).astype(np.int64))
        for a, b in zip(pieces[:-1], pieces[1:]):
            state = sched.add_data(state, grow(int(a), int(b), t_end), rng)
        t = cp
        true = matrix @ state.counts / state.t
        values = []
        for q in queries:
            ans, state = sched.answer(state, q, rng)
            values.append(ans.value)
        err = np.abs(np.asarray(values, dtype=np.float64) - true)
        max_err_at.append((cp, float(err.max()), state.epoch))
        rel = state.release
        if rel is not None and rel.t == cp and rel.epoch not in epochs:
            epochs[rel.epoch] = {'t': rel.t, 'epsilon': rel.epsilon, 'alpha': rel.alpha,
                                 'snapshot_max_err': float(err.max())}
    return {'workload': name, 'n': n, 'rep': rep, 'seed': seed, 'gamma': sched.gamma,
            'bound': sched.guaranteed_error(), 'epsilon_spent': sched.epsilon_spent(state),
            'runs': state.runs, 'seconds': time.monotonic() - started,
            'max_err_at': max_err_at, 'epochs': epochs}


def predicted_quantile(epsilon_i, t_i, q):
    b = K / (epsilon_i * t_i)
    return -b * math.log(1 - q ** (1 / K))


def summarize(runs, name, n):
    rs = [r for r in runs if r['workload'] == name and r['n'] == n]
    maxes = np.array([max(e for _, e, _ in r['max_err_at']) for r in rs])
    bound = rs[0]['bound']
    gamma = rs[0]['gamma']
    epochs = sorted(set().union(*[set(r['epochs']) for r in rs]), key=int)
    per_epoch = []
    for i in epochs:
        es = [r['epochs'][i] for r in rs if i in r['epochs']]
        errs = np.array([e['snapshot_max_err'] for e in es])
        e0 = es[0]
        per_epoch.append({
            'epoch': int(i), 't_i': e0['t'], 'epsilon_i': e0['epsilon'], 'alpha_i': e0['alpha'],
            'count': len(es),
            'empirical_q50': float(np.quantile(errs, 0.5)),
            'empirical_q95': float(np.quantile(errs, 0.95)),
            'predicted_q50': predicted_quantile(e0['epsilon'], e0['t'], 0.5),
            'predicted_q95': predicted_quantile(e0['epsilon'], e0['t'], 0.95),
            'within_alpha_i': float(np.mean(errs <= e0['alpha'])),
        })
    times = [t for t, _, _ in rs[0]['max_err_at']]
    at = np.array([[e for _, e, _ in r['max_err_at']] for r in rs])
    return {
        'workload': name, 'n': n, 't_end': times[-1], 'reps': len(rs), 'gamma': gamma,
        'gamma_check': bbscheduler_gamma(EPS, 0.0, BETA, n, 1.0, K * (1 + math.log(K))),
        'alpha_box': gamma * (1 + gamma) ** 2, 'staleness': gamma / (1 + gamma),
        'guaranteed_error': bound, 'epochs': len(per_epoch),
        'epsilon_spent': float(np.mean([r['epsilon_spent'] for r in rs])),
        'max_err_q50': float(np.quantile(maxes, 0.5)), 'max_err_q95': float(np.quantile(maxes,
                                                                                        0.95)),
        'max_err_max': float(maxes.max()), 'runs_within_bound': float(np.mean(maxes <= bound)),
        'seconds_mean': float(np.mean([r['seconds'] for r in rs])),
        'per_epoch': per_epoch, 'times': times,
        'err_q50_at': np.quantile(at, 0.5, axis=0).tolist(),
        'err_q95_at': np.quantile(at, 0.95, axis=0).tolist(),
    }


def plot(summaries, path):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    names = sorted({s['workload'] for s in summaries})
    fig, axes = plt.subplots(2, len(names), figsize=(6.5 * len(names), 9), squeeze=False)
    colors = plt.cm.plasma(np.linspace(0, 0.8, len({s['n'] for s in summaries})))
    for col, name in enumerate(names):
        ss = [s for s in summaries if s['workload'] == name]
        for s, c in zip(ss, colors):
            x = np.asarray(s['times']) / s['n']
            ax = axes[0, col]
            ax.plot(x, s['err_q50_at'], '-', color=c, label=f"n={s['n']:.0e}: median")
            ax.plot(x, s['err_q95_at'], ':', color=c, label='95 %')
            ax.axhline(s['guaranteed_error'], color=c, ls='--', lw=0.8,
                       label=f"guarantee {s['guaranteed_error']:.3f}")
            ax = axes[1, col]
            pe = s['per_epoch']
            ti = [p['t_i'] / s['n'] for p in pe]
            ax.plot(ti, [p['empirical_q95'] for p in pe], 'o', color=c, ms=3,
                    label=f"n={s['n']:.0e}: empirical 95 %")
            ax.plot(ti, [p['predicted_q95'] for p in pe], '-', color=c, lw=0.8,
                    label='exact Laplace 95 %')
            ax.plot(ti, [p['alpha_i'] for p in pe], '--', color=c, lw=0.8, label='α_i (box bound)')
        for row, title in ((0, 'max error over k answers on the current x_t, over reps'),
                           (1, 'box error at each epoch start (snapshot), 95 % over reps')):
            ax = axes[row, col]
            ax.set_xscale('log')
            ax.set_yscale('log')
            ax.set_xlabel('t / n')
            ax.set_title(f'{name}: {title}', fontsize=9)
            ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--ns', type=int, nargs='+', default=[10_000, 100_000, 1_000_000])
    parser.add_argument('--growth', type=int, default=10)
    parser.add_argument('--points', type=int, default=60)
    parser.add_argument('--reps', type=int, default=40)
    parser.add_argument('--workloads', nargs='+', default=['spec', 'taxi'])
    parser.add_argument('--workers', type=int, default=2)
    args = parser.parse_args()
    jobs = [(wl, n, r, args.growth, args.points) for wl in args.workloads for n in args.ns
            for r in range(args.reps)]
    started = time.monotonic()
    with multiprocessing.Pool(args.workers) as pool:
        runs = pool.map(_one, jobs, chunksize=1)
    wall = time.monotonic() - started
    summaries = [summarize(runs, wl, n) for wl in args.workloads for n in args.ns]
    results = w.ensure_results()
    with open(os.path.join(results, 'bbscheduler.json'), 'w') as f:
        json.dump({'benchmark': 'pmwg_bbscheduler', 'epsilon': EPS, 'beta': BETA, 'k': K,
                   'args': vars(args), 'machine': w.machine_info(), 'wall_seconds': wall,
                   'summaries': summaries}, f, indent=1)
    plot(summaries, os.path.join(results, 'bbscheduler.png'))
    print('workload | n | gamma | epochs | eps spent | guarantee | max err q50 | q95 | max | '
          'runs within')
    for s in summaries:
        print(f"{s['workload']} | {s['n']} | {s['gamma']:.4f} | {s['epochs']} | "
              f"{s['epsilon_spent']:.4f} | {s['guaranteed_error']:.3f} | {s['max_err_q50']:.4f} | "
              f"{s['max_err_q95']:.4f} | {s['max_err_max']:.4f} | {s['runs_within_bound']:.3f}")
    print('\nper epoch (n = middle value): epoch | t_i | eps_i | alpha_i | emp q50 | pred q50 | '
          'emp q95 | pred q95')
    for s in summaries:
        if s['n'] != args.ns[len(args.ns) // 2]:
            continue
        print(f"-- {s['workload']}")
        for p in s['per_epoch']:
            print(f"{p['epoch']} | {p['t_i']} | {p['epsilon_i']:.4g} | {p['alpha_i']:.3g} | "
                  f"{p['empirical_q50']:.4g} | {p['predicted_q50']:.4g} | "
                  f"{p['empirical_q95']:.4g} | {p['predicted_q95']:.4g}")
    print(f'wall {wall:.0f} s')


if __name__ == '__main__':
    main()
