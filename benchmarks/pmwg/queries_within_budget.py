"""Benchmark (b): queries answered within budget and within α — PMWG vs per-query Laplace.

One workload per setting (privacy, n, α): the taxi-trip database of ``workload.py`` grows from n
to ``growth``·n records while Q_max template queries (ranges / marginals / bins / cells, 128 cells)
arrive in bursts of ``burst`` queries at the same size. For a prefix of Q queries (Q on a grid up
to Q_max), each method's count A(Q) of answers *released and within α* of f(x_t):

* PMWG: one online run over all Q_max queries (it need not know Q); its privacy cost depends only
  on its hard answers (capped at (36/α²)(ln N + Σ b_τ), spec §5.4), so A(Q) is read off the prefix;
* Laplace, basic split: Q known in advance, every query gets ε/Q (basic composition), i.e.
  Lap(Q/(εt)) — one fresh run per Q; also its expectation Σ_j (1 − exp(−α ε t_j / Q)) on a dense
  Q grid (the continuous-Laplace formula);
* Laplace, fixed ε_q: every query gets ε_q(t) = ln(1/β)/(α t) (each answer within α w.p. ≥ 1 − β,
  β = 0.05) until basic composition exhausts the budget, then refuses;
* Laplace, zCDP split (δ > 0 only; not requested, reported because it is the strongest simple
  baseline): ε_q solving ½Qε_q² + √(2Qε_q² ln(1/δ)) = ε (Theorem 4);
* uniform histogram (no privacy cost; what PMWG says before learning anything).

The crossover Q* is the smallest Q from which PMWG's A(Q) exceeds the basic-split Laplace
expectation (dense grid) and stays above up to Q_max; also against the fixed-ε_q Laplace.

Usage:
  python benchmarks/pmwg/queries_within_budget.py [--setting approx:100000:0.2 ...]
      [--queries 20000] [--growth 2] [--burst 20] [--reps 3] [--workers 2]
Outputs benchmarks/pmwg/results/queries_within_budget.json and queries_within_budget.png.
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


def q_grid(q_max: int):
    grid = [q for q in (100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000,
                        200_000) if q < q_max]
    return grid + [q_max]


def _one(job):
    setting, rep, q_max, growth, burst = job
    privacy, n, alpha = setting
    eps, delta = PRIVACY[privacy]
    seed = (1_000_003 * rep + 7919 * int(round(alpha * 1000)) + n
            + (0 if privacy == 'pure' else 17) + 99991) % (2 ** 31)
    gen = np.random.default_rng(seed)
    t_end = growth * n
    _, queries, matrix = w.query_stream(gen, q_max)
    times = w.query_times(n, t_end, q_max, burst)
    mech = PMWG(epsilon=eps, alpha=alpha, n=n, domain_size=w.N, delta=delta)
    rng = seeded(seed)
    started = time.monotonic()
    run = w.run_pmwg_stream(mech, gen, rng.derive('pmwg'), n, t_end, queries, times, matrix)
    pmwg_seconds = time.monotonic() - started
    true = run['true']
    answered = run['status'] <= 1
    ok_pmwg = answered & (np.abs(run['value'] - true) <= alpha)
    hard_cum = np.cumsum(run['status'] == 1)
    ok_uniform = np.abs(matrix.mean(axis=1) - true) <= alpha

    grid = q_grid(q_max)
    res = {'setting': list(setting), 'rep': rep, 'seed': seed, 'pmwg_seconds': pmwg_seconds,
           'hard_total': run['hard'], 'halted': run['halted'], 'ledger': run['ledger'],
           'grid': grid, 'pmwg': [], 'uniform': [], 'laplace_split': [], 'laplace_zcdp': [],
           'hard_at': [], 'pmwg_max_err': [], 'laplace_split_max_err': []}
    err_p = np.where(answered, np.abs(run['value'] - true), np.inf)
    for q in grid:
        res['pmwg'].append(int(ok_pmwg[:q].sum()))
        res['uniform'].append(int(ok_uniform[:q].sum()))
        res['hard_at'].append(int(hard_cum[q - 1]))
        res['pmwg_max_err'].append(float(err_p[:q].max()))
        lap = w.laplace_answers(rng.derive('split', q), true[:q], times[:q], eps / q)
        err = np.abs(lap - true[:q])
        res['laplace_split'].append(int((err <= alpha).sum()))
        res['laplace_split_max_err'].append(float(err.max()))
        if delta > 0:
            eq = w.cdp_split_epsilon(eps, delta, q)
            lapz = w.laplace_answers(rng.derive('zcdp', q), true[:q], times[:q], eq)
            res['laplace_zcdp'].append(int((np.abs(lapz - true[:q]) <= alpha).sum()))
    # Fixed per-query ε until the budget (basic composition) runs out.
    eps_fixed = np.log(1 / BETA) / (alpha * times.astype(np.float64))
    k_fixed = w.laplace_fixed_epsilon_counts(eps_fixed, eps)
    lapf = w.laplace_answers(rng.derive('fixed'), true[:k_fixed], times[:k_fixed],
                             eps_fixed[:k_fixed])
    ok_fixed = np.zeros(q_max, dtype=bool)
    ok_fixed[:k_fixed] = np.abs(lapf - true[:k_fixed]) <= alpha
    res['laplace_fixed_answered'] = k_fixed
    res['laplace_fixed'] = [int(ok_fixed[:q].sum()) for q in grid]
    # Dense curves (every query index) for the crossover.
    res['pmwg_cum_ok'] = np.cumsum(ok_pmwg).tolist()
    res['fixed_cum_ok'] = np.cumsum(ok_fixed).tolist()
    res['hard_cum'] = hard_cum.tolist()
    res['times'] = times.tolist()
    return res


def expected_split(times: np.ndarray, alpha: float, eps: float, qs) -> np.ndarray:
    """E[A(Q)] for the basic-split Laplace: Σ_{j ≤ Q} (1 − exp(−α ε t_j / Q))."""
    t = times.astype(np.float64)
    return np.array([np.sum(1 - np.exp(-alpha * eps * t[:q] / q)) for q in qs])


def crossover(qs, ours, theirs):
    """Smallest Q with ours > theirs from there on (None if never)."""
    above = np.asarray(ours) > np.asarray(theirs)
    if not above[-1]:
        return None
    k = len(above) - 1
    while k > 0 and above[k - 1]:
        k -= 1
    return int(qs[k])


def summarize(runs, setting, q_max):
    rs = [r for r in runs if tuple(r['setting']) == setting]
    privacy, n, alpha = setting
    eps, delta = PRIVACY[privacy]
    grid = rs[0]['grid']
    times = np.asarray(rs[0]['times'])
    mean = lambda key: np.mean([r[key] for r in rs], axis=0)  # noqa: E731
    dense_q = np.unique(np.round(np.geomspace(10, q_max, 400)).astype(int))
    pmwg_dense = np.mean([np.asarray(r['pmwg_cum_ok'])[dense_q - 1] for r in rs], axis=0)
    fixed_dense = np.mean([np.asarray(r['fixed_cum_ok'])[dense_q - 1] for r in rs], axis=0)
    split_dense = expected_split(times, alpha, eps, dense_q)
    mech = PMWG(epsilon=eps, alpha=alpha, n=n, domain_size=w.N, delta=delta)
    out = {
        'privacy': privacy, 'epsilon': eps, 'delta': delta, 'n': n, 'alpha': alpha,
        't_end': int(times[-1]), 'reps': len(rs), 'grid': grid,
        'pmwg_within': mean('pmwg').tolist(), 'uniform_within': mean('uniform').tolist(),
        'laplace_split_within': mean('laplace_split').tolist(),
        'laplace_fixed_within': mean('laplace_fixed').tolist(),
        'laplace_split_expected': expected_split(times, alpha, eps, grid).tolist(),
        'pmwg_hard_at': mean('hard_at').tolist(),
        'pmwg_max_err_median': np.median([r['pmwg_max_err'] for r in rs], axis=0).tolist(),
        'laplace_split_max_err_median':
            np.median([r['laplace_split_max_err'] for r in rs], axis=0).tolist(),
        'laplace_fixed_answered': float(np.mean([r['laplace_fixed_answered'] for r in rs])),
        'pmwg_hard_total': float(np.mean([r['hard_total'] for r in rs])),
        'pmwg_halted_runs': int(sum(r['halted'] for r in rs)),
        'pmwg_ledger_mean': float(np.mean([r['ledger'] for r in rs])),
        'pmwg_seconds_mean': float(np.mean([r['pmwg_seconds'] for r in rs])),
        'cap_at_n': mech.cap_at(n), 'cap_at_t_end': mech.cap_at(int(times[-1])),
        'xi_n': mech.xi(n),
        'dense_q': dense_q.tolist(), 'pmwg_dense': pmwg_dense.tolist(),
        'laplace_split_dense': split_dense.tolist(), 'laplace_fixed_dense': fixed_dense.tolist(),
        'crossover_vs_split': crossover(dense_q, pmwg_dense, split_dense),
        'crossover_vs_fixed': crossover(dense_q, pmwg_dense, fixed_dense),
        # Laplace-split's own break-even: the Q at which its expected within-α fraction drops to
        # PMWG's overall within-α fraction.
        'pmwg_within_fraction_total': float(pmwg_dense[-1] / dense_q[-1]),
    }
    if delta > 0:
        out['laplace_zcdp_within'] = mean('laplace_zcdp').tolist()
    return out


def plot(summaries, path):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, axes = plt.subplots(2, len(summaries), figsize=(6.5 * len(summaries), 9), squeeze=False)
    for col, s in enumerate(summaries):
        ax = axes[0, col]
        q = np.asarray(s['dense_q'])
        ax.plot(q, np.asarray(s['pmwg_dense']), 'b-', label='PMWG (one online run)')
        ax.plot(q, np.asarray(s['laplace_split_dense']), 'r--',
                label='Laplace, ε/Q per query (expected)')
        ax.plot(s['grid'], s['laplace_split_within'], 'rx', label='Laplace, ε/Q (measured)')
        ax.plot(q, np.asarray(s['laplace_fixed_dense']), 'm-.',
                label='Laplace, fixed ε_q until budget out')
        if 'laplace_zcdp_within' in s:
            ax.plot(s['grid'], s['laplace_zcdp_within'], 'g^:', label='Laplace, zCDP split')
        ax.plot(s['grid'], s['uniform_within'], 'k:', label='uniform histogram')
        ax.plot(q, q, color='0.8', lw=0.8, label='all Q')
        for key, style in (('crossover_vs_split', 'r'), ('crossover_vs_fixed', 'm')):
            if s[key]:
                ax.axvline(s[key], color=style, lw=0.7)
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('number of queries Q')
        ax.set_ylabel('answers released and within α')
        ax.set_title(f"{s['privacy']} ε={s['epsilon']:g} δ={s['delta']:g}, n={s['n']:.0e}"
                     f"→{s['t_end']:.0e}, α={s['alpha']}\ncrossover vs ε/Q split: "
                     f"{s['crossover_vs_split']}, vs fixed ε_q: {s['crossover_vs_fixed']}",
                     fontsize=9)
        ax.legend(fontsize=7)
        ax = axes[1, col]
        ax.plot(s['grid'], s['pmwg_hard_at'], 'bo-', label='PMWG hard answers (cumulative)')
        ax.plot(s['grid'], s['grid'], 'r--', label='Laplace: every query pays')
        ax.axhline(s['cap_at_t_end'], color='b', ls=':', lw=0.8,
                   label=f"hard cap at t_end = {s['cap_at_t_end']:.0f}")
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('number of queries Q')
        ax.set_ylabel('queries that consume budget')
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _parse_setting(text):
    privacy, n, alpha = text.split(':')
    if privacy not in PRIVACY:
        raise argparse.ArgumentTypeError(f'privacy must be one of {list(PRIVACY)}')
    return privacy, int(float(n)), float(alpha)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--setting', type=_parse_setting, action='append',
                        help='privacy:n:alpha (repeatable); default approx:100000:0.2 and '
                             'pure:1000000:0.4')
    parser.add_argument('--queries', type=int, default=20_000)
    parser.add_argument('--growth', type=int, default=2)
    parser.add_argument('--burst', type=int, default=20)
    parser.add_argument('--reps', type=int, default=3)
    parser.add_argument('--workers', type=int, default=2)
    args = parser.parse_args()
    settings = args.setting or [('approx', 100_000, 0.2), ('pure', 1_000_000, 0.4)]
    jobs = [(s, r, args.queries, args.growth, args.burst) for s in settings
            for r in range(args.reps)]
    started = time.monotonic()
    runs = []
    with multiprocessing.Pool(args.workers) as pool:
        for k, r in enumerate(pool.imap_unordered(_one, jobs), 1):
            runs.append(r)
            print(f"[{k}/{len(jobs)}] {r['setting']} rep={r['rep']} "
                  f"{r['pmwg_seconds']:.1f}s", flush=True)
    wall = time.monotonic() - started
    summaries = [summarize(runs, tuple(s), args.queries) for s in settings]
    results = w.ensure_results()
    out = {'benchmark': 'pmwg_queries_within_budget', 'beta': BETA,
           'args': {k: v for k, v in vars(args).items() if k != 'setting'},
           'settings': [list(s) for s in settings], 'machine': w.machine_info(),
           'wall_seconds': wall, 'summaries': summaries}
    with open(os.path.join(results, 'queries_within_budget.json'), 'w') as f:
        json.dump(out, f, indent=1)
    plot(summaries, os.path.join(results, 'queries_within_budget.png'))
    for s in summaries:
        print(f"\n{s['privacy']} n={s['n']} alpha={s['alpha']} t_end={s['t_end']} "
              f"xi_n={s['xi_n']:.3g} cap(t_end)={s['cap_at_t_end']:.0f} "
              f"hard={s['pmwg_hard_total']:.0f} halted_runs={s['pmwg_halted_runs']} "
              f"ledger={s['pmwg_ledger_mean']:.3g} fixed_eps_answers="
              f"{s['laplace_fixed_answered']:.0f} crossover_split={s['crossover_vs_split']} "
              f"crossover_fixed={s['crossover_vs_fixed']}")
        print('Q | PMWG | Lap split (meas) | Lap split (exp) | Lap fixed | zCDP | uniform | '
              'PMWG hard | PMWG maxerr | split maxerr')
        for i, q in enumerate(s['grid']):
            z = s.get('laplace_zcdp_within', [None] * len(s['grid']))[i]
            print(f"{q} | {s['pmwg_within'][i]:.0f} | {s['laplace_split_within'][i]:.0f} | "
                  f"{s['laplace_split_expected'][i]:.0f} | {s['laplace_fixed_within'][i]:.0f} | "
                  f"{'-' if z is None else f'{z:.0f}'} | {s['uniform_within'][i]:.0f} | "
                  f"{s['pmwg_hard_at'][i]:.0f} | {s['pmwg_max_err_median'][i]:.3g} | "
                  f"{s['laplace_split_max_err_median'][i]:.3g}")
    print(f'wall {wall:.0f} s')


if __name__ == '__main__':
    main()
