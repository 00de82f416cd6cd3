"""Prints the README's markdown tables from benchmarks/pmwg/results/*.json.

Usage: python benchmarks/pmwg/tables.py [accuracy|budget|bbscheduler ...]
"""

import json
import os
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')


def _load(name):
    with open(os.path.join(RESULTS, name)) as f:
        return json.load(f)


def _g(x, fmt='.3g'):
    return '–' if x is None else format(x, fmt)


def accuracy():
    d = _load('accuracy.json')
    print(f"growth ×{d['args']['growth']}, {d['args']['queries']} queries/run, "
          f"{d['args']['reps']} reps, wall {d['wall_seconds']:.0f} s\n")
    print('| privacy | n | α | theorem min α | ξ_n | hard (mean) | halted runs | PMWG max err '
          '(median) | PMWG mean err | PMWG within α | PMWG success | uniform max err | uniform '
          'within α | Laplace max err | Laplace within α | Laplace success |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    for r in d['table']:
        lap_name = 'laplace_zcdp' if 'laplace_zcdp' in r else 'laplace_basic'
        lap = r[lap_name]
        tag = 'zCDP' if lap_name == 'laplace_zcdp' else 'basic'
        print(f"| {r['privacy']} (δ={r['delta']:g}) | {r['n']:.0e} | {r['alpha']} | "
              f"{r['theorem_min_alpha']:.3g} | {r['xi_n']:.3g} | {r['hard_mean']:.0f} | "
              f"{r['halted_runs']} | {_g(r['pmwg']['max_median'])} | "
              f"{_g(r['pmwg']['mean_error'])} | {r['pmwg']['within_alpha']:.3f} | "
              f"{r['pmwg']['success_rate']:.2f} | {_g(r['uniform']['max_median'])} | "
              f"{r['uniform']['within_alpha']:.3f} | {_g(lap['max_median'])} ({tag}) | "
              f"{lap['within_alpha']:.3f} | {lap['success_rate']:.2f} |")
    print('\nPMWG fraction within α per time bin (t/n from 1 to growth, 8 bins), approx, '
          'median-free mean over reps:\n')
    print('| privacy | n | α | ' + ' | '.join(f'bin {i}' for i in range(8)) + ' |')
    print('|---|---|---|' + '---|' * 8)
    for r in d['table']:
        print(f"| {r['privacy']} | {r['n']:.0e} | {r['alpha']} | "
              + ' | '.join(f'{x:.3f}' for x in r['pmwg']['bin_within']) + ' |')


def budget():
    d = _load('queries_within_budget.json')
    print(f"args {d['args']}, wall {d['wall_seconds']:.0f} s\n")
    for s in d['summaries']:
        print(f"**{s['privacy']} ε={s['epsilon']:g} δ={s['delta']:g}, n={s['n']:.0e} → "
              f"{s['t_end']:.0e}, α={s['alpha']}** (ξ_n = {s['xi_n']:.3g}; hard cap "
              f"{s['cap_at_n']:.0f} at n, {s['cap_at_t_end']:.0f} at t_end; PMWG hard answers "
              f"{s['pmwg_hard_total']:.0f} of {s['grid'][-1]}, halted runs "
              f"{s['pmwg_halted_runs']}, ledger ε {s['pmwg_ledger_mean']:.3g}; fixed-ε_q Laplace "
              f"answered {s['laplace_fixed_answered']:.0f} queries before the budget ran out; "
              f"crossover vs ε/Q split: **{s['crossover_vs_split']}**, vs fixed ε_q: "
              f"**{s['crossover_vs_fixed']}**)\n")
        z = 'laplace_zcdp_within' in s
        print('| Q | PMWG within α | Laplace ε/Q measured | Laplace ε/Q expected | Laplace fixed '
              'ε_q | ' + ('Laplace zCDP split | ' if z else '') + 'uniform | PMWG hard (cum.) | '
              'PMWG max err | Laplace ε/Q max err |')
        print('|---|---|---|---|---|' + ('---|' if z else '') + '---|---|---|---|')
        for i, q in enumerate(s['grid']):
            zc = f"{s['laplace_zcdp_within'][i]:.0f} | " if z else ''
            print(f"| {q} | {s['pmwg_within'][i]:.0f} | {s['laplace_split_within'][i]:.0f} | "
                  f"{s['laplace_split_expected'][i]:.0f} | {s['laplace_fixed_within'][i]:.0f} | "
                  f"{zc}{s['uniform_within'][i]:.0f} | {s['pmwg_hard_at'][i]:.0f} | "
                  f"{s['pmwg_max_err_median'][i]:.3g} | {s['laplace_split_max_err_median'][i]:.3g} |")
        print()


def bbscheduler():
    d = _load('bbscheduler.json')
    print(f"ε={d['epsilon']}, β={d['beta']}, k={d['k']}, args {d['args']}, wall "
          f"{d['wall_seconds']:.0f} s\n")
    print('| workload | n → t_end | γ | epochs | ε spent | α_i (box) | staleness γ/(1+γ) | '
          'guarantee | run max err: median | 95 % | max | runs within guarantee |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for s in d['summaries']:
        print(f"| {s['workload']} | {s['n']:.0e} → {s['t_end']:.0e} | {s['gamma']:.4f} | "
              f"{s['epochs']} | {s['epsilon_spent']:.4f} | {s['alpha_box']:.3f} | "
              f"{s['staleness']:.3f} | {s['guaranteed_error']:.3f} | {s['max_err_q50']:.4f} | "
              f"{s['max_err_q95']:.4f} | {s['max_err_max']:.4f} | {s['runs_within_bound']:.3f} |")
    print('\nPer epoch, snapshot (box) error max over k answers at t_i, quantiles over reps vs '
          'the exact Laplace prediction (selected epochs):\n')
    print('| workload | n | epoch | t_i | ε_i | α_i | empirical 50 % | predicted 50 % | '
          'empirical 95 % | predicted 95 % | within α_i |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for s in d['summaries']:
        pe = s['per_epoch']
        for p in [pe[0], pe[len(pe) // 2], pe[-1]]:
            print(f"| {s['workload']} | {s['n']:.0e} | {p['epoch']} | {p['t_i']} | "
                  f"{p['epsilon_i']:.4g} | {p['alpha_i']:.3g} | {p['empirical_q50']:.4g} | "
                  f"{p['predicted_q50']:.4g} | {p['empirical_q95']:.4g} | "
                  f"{p['predicted_q95']:.4g} | {p['within_alpha_i']:.2f} |")
        ratio50 = [p['empirical_q50'] / p['predicted_q50'] for p in pe]
        ratio95 = [p['empirical_q95'] / p['predicted_q95'] for p in pe]
        print(f"| {s['workload']} | {s['n']:.0e} | all {len(pe)} | | | | ratio emp/pred "
              f"median {sorted(ratio50)[len(ratio50) // 2]:.3f} | | ratio median "
              f"{sorted(ratio95)[len(ratio95) // 2]:.3f} | | |")


if __name__ == '__main__':
    which = sys.argv[1:] or ['accuracy', 'budget', 'bbscheduler']
    for name in which:
        {'accuracy': accuracy, 'budget': budget, 'bbscheduler': bbscheduler}[name]()
        print()
