"""Continual counters: RMSE and max std vs horizon T = 2^4 … 2^20 for every counter under ρ-zCDP
and pure ε, against per-step noise summed and the square-root factorization (closed forms), the
pure-ε mean-variance gain over the VR binary tree, an empirical check of every closed form at
small T, state bytes per key, and jax_privacy's BLT side by side (from
results/jax_privacy_blt.json, written by jax_privacy_blt.py in a separate venv).

    python benchmarks/counters/run.py all            # closed forms, empirical, state, plot
    python benchmarks/counters/run.py closed --max-log2 16
"""

import argparse
import json
import math
import pathlib
import pickle
import re
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from beam_dp import noise  # noqa: E402
from beam_dp.accounting import PrivacyBudget  # noqa: E402
from beam_dp.analysis import expected_error  # noqa: E402
from beam_dp.mechanisms import BinaryTreeCounter  # noqa: E402
from beam_dp.mechanisms import InfiniteTreeCounter  # noqa: E402
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter  # noqa: E402
from beam_dp.mechanisms.blt import BLTCounter  # noqa: E402
from beam_dp.mechanisms.kary_tree import KaryTreeCounter  # noqa: E402
from beam_dp.mechanisms.kary_tree import _mean_variance  # noqa: E402
from beam_dp.mechanisms.per_step import PerStepCounter  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent / 'results'
RHO, EPSILON = 0.5, 1.0


def _table(report):
    """{name: errors}; the k-ary tree's k (chosen per T) moves into the row."""
    out = {}
    for e in report.estimates:
        name, k = re.subn(r'\[k=(\d+)\]', '', e.name)
        row = {'rmse': e.rmse, 'max_std': e.max_std, 'runnable': e.runnable}
        if k:
            row['k'] = int(re.search(r'k=(\d+)', e.name).group(1))
        out[name] = row
    return out


def closed(max_log2: int) -> dict:
    """Every counter's closed-form RMSE / max std per T, both notions, finite and unbounded."""
    out = {'rho': RHO, 'epsilon': EPSILON, 'horizons': {}}
    for e in range(4, max_log2 + 1):
        horizon = 2 ** e
        start = time.time()
        zcdp = expected_error(PrivacyBudget(rho=RHO), horizon)
        pure = expected_error(PrivacyBudget(epsilon=EPSILON), horizon)
        zcdp_unb = expected_error(PrivacyBudget(rho=RHO), None, evaluation_horizon=horizon)
        pure_unb = expected_error(PrivacyBudget(epsilon=EPSILON), None,
                                  evaluation_horizon=horizon)
        row = {'zcdp': _table(zcdp), 'pure': _table(pure), 'zcdp_unbounded': _table(zcdp_unb),
               'pure_unbounded': _table(pure_unb),
               'chosen': {'zcdp': zcdp.chosen.name, 'pure': pure.chosen.name,
                          'zcdp_unbounded': zcdp_unb.chosen.name,
                          'pure_unbounded': pure_unb.chosen.name}}
        ref = row['zcdp']['sqrt_factorization']['max_std']
        row['blt_max_std_over_sqrt'] = row['zcdp']['blt']['max_std'] / ref
        row['blt_unbounded_max_std_over_sqrt'] = row['zcdp_unbounded']['blt']['max_std'] / ref
        honaker = row['pure']['binary_tree[variance_reduced]']['rmse'] ** 2
        row['pure_best_mean_var_gain_over_vr_binary'] = honaker / pure.chosen.rmse ** 2
        row['pure_mean_var_gain_over_vr_binary'] = {
            name: honaker / row['pure'][name]['rmse'] ** 2
            for name in ('balanced_tree', 'kary_tree', 'per_step_summed')}
        out['horizons'][str(horizon)] = row
        print(f'T=2^{e}: BLT/sqrt {row["blt_max_std_over_sqrt"]:.4f} (unbounded '
              f'{row["blt_unbounded_max_std_over_sqrt"]:.4f}); pure {pure.chosen.name} '
              f'{row["pure_best_mean_var_gain_over_vr_binary"]:.2f}x vs VR binary '
              f'[{time.time() - start:.1f}s]', flush=True)
    return out


def never_above_per_step(max_log2: int) -> dict:
    """Best k-ary and negative-digit trees vs per-step noise summed, mean variance (pure ε),
    for every T ≤ 4096 and 256 log-spaced T up to 2^max_log2 (the selector also lists per-step,
    so it never does worse; this checks how each tree alone does)."""
    horizons = sorted(set(range(1, 4097)) | set(
        np.unique(np.geomspace(4096, 2 ** max_log2, 256).astype(int)).tolist()))
    trees = {'kary_tree': lambda h: _mean_variance(KaryTreeCounter(horizon=h, epsilon=EPSILON)),
             'balanced_tree': lambda h: BalancedTreeCounter(horizon=h,
                                                            epsilon=EPSILON).mean_variance()}
    out = {'horizons_checked': len(horizons)}
    for name, mean_variance in trees.items():
        worst, first_better = 0.0, None
        for horizon in horizons:
            tree = mean_variance(horizon)
            per_step = PerStepCounter(epsilon=EPSILON).step_noise.variance() * (horizon + 1) / 2
            worst = max(worst, tree / per_step)
            if first_better is None and tree < per_step * (1 - 1e-9):
                first_better = horizon
        out[name] = {'max_tree_over_per_step': worst, 'first_T_tree_strictly_better': first_better}
    return out


def _empirical_counters(horizon, runs):
    d = runs
    return {
        'binary_tree[variance_reduced]': BinaryTreeCounter(horizon=horizon, epsilon=EPSILON,
                                                           dimension=d),
        'binary_tree[textbook]/zcdp': BinaryTreeCounter(horizon=horizon, rho=RHO,
                                                        estimator='textbook', dimension=d),
        'infinite_tree[variance_reduced]': InfiniteTreeCounter(epsilon=EPSILON, dimension=d),
        'kary_tree[k=5]': KaryTreeCounter(horizon=horizon, epsilon=EPSILON, k=5, dimension=d),
        'kary_tree[k=4]/zcdp': KaryTreeCounter(horizon=horizon, rho=RHO, k=4, dimension=d),
        'balanced_tree[k=7]': BalancedTreeCounter(horizon=horizon, epsilon=EPSILON, k=7,
                                                  dimension=d),
        'balanced_tree[k=5]/zcdp': BalancedTreeCounter(horizon=horizon, rho=RHO, k=5,
                                                       dimension=d),
        'per_step_summed': PerStepCounter(epsilon=EPSILON, dimension=d),
        'per_step_summed/zcdp': PerStepCounter(rho=RHO, dimension=d),
        'blt': BLTCounter(rho=RHO, horizon=horizon, dimension=d),
        'blt_unbounded': BLTCounter(rho=RHO, design_horizon=horizon, dimension=d),
    }


def empirical(horizon: int, runs: int, seed: int = 0) -> dict:
    """Empirical variance of the release error at every t vs each closed form."""
    out = {'horizon': horizon, 'runs': runs, 'counters': {}}
    for name, m in _empirical_counters(horizon, runs).items():
        state, rng = m.init_state(), noise.seeded(seed)
        ratios = []
        for t in range(1, horizon + 1):
            release, state = m.step(state, np.ones(runs, np.int64), rng)
            err = np.asarray(release, dtype=float) - t
            ratios.append(float(err.var(ddof=1) / m.release_variance(t)))
        ratios = np.array(ratios)
        # With n runs the ratio's sd is ≈ sqrt(2/n)·sqrt(kurtosis factor): ~3-4% at n = 2000.
        out['counters'][name] = {'mean_ratio': float(ratios.mean()),
                                 'max_abs_dev': float(np.max(np.abs(ratios - 1))),
                                 'ratio_at_T': float(ratios[-1])}
        print(f'empirical {name:32s} mean emp/closed {ratios.mean():.4f}, max |dev| '
              f'{np.max(np.abs(ratios - 1)):.3f}', flush=True)
    return out


def state_sizes(steps: int) -> dict:
    """Pickled state bytes per key (d = 1) after ``steps`` steps, counters built for T = 2^20."""
    horizon = 2 ** 20
    counters = {
        'binary_tree[variance_reduced]': BinaryTreeCounter(horizon=horizon, epsilon=EPSILON),
        'infinite_tree[variance_reduced]': InfiniteTreeCounter(epsilon=EPSILON),
        'kary_tree[k=17]': KaryTreeCounter(horizon=horizon, epsilon=EPSILON),
        'balanced_tree[k=19]': BalancedTreeCounter(horizon=horizon, epsilon=EPSILON),
        'per_step_summed': PerStepCounter(epsilon=EPSILON),
        'blt': BLTCounter(rho=RHO, horizon=horizon),
        'blt_unbounded': BLTCounter(rho=RHO),
    }
    out = {'steps': steps}
    for name, m in counters.items():
        state, rng = m.init_state(), noise.seeded(1)
        for _ in range(steps):
            _, state = m.step(state, 1000, rng)
        out[name] = {'pickled_bytes': len(pickle.dumps(state)), 'nbytes': state.nbytes()}
        print(f'state {name:32s} {out[name]}', flush=True)
    return out


def plot(results: dict, path: pathlib.Path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    by_t = {int(h): row for h, row in results['closed']['horizons'].items()}
    horizons = sorted(by_t)
    rows = [by_t[h] for h in horizons]
    fig, axes = plt.subplots(3, 2, figsize=(13, 13))
    panels = [(axes[r][c], notion, metric, f'{title}: {label}')
              for r, (metric, label) in enumerate((('max_std', 'max std over t ≤ T'),
                                                   ('rmse', 'RMSE over t ≤ T')))
              for c, (notion, title) in enumerate((('zcdp', f'ρ = {RHO} zCDP'),
                                                   ('pure', f'pure ε = {EPSILON}')))]
    jax_rows = results.get('jax_privacy', {}).get('horizons', {})
    for ax, notion, metric, title in panels:
        names = sorted(rows[-1][notion], key=lambda n: rows[-1][notion][n][metric])
        for name in names:
            if name.endswith('(pure)'):
                continue
            ys = [r[notion][name][metric] for r in rows]
            ax.plot(horizons, ys, '--' if name == 'sqrt_factorization' else '-o', ms=3,
                    label=name)
        if notion == 'zcdp':
            ys = [r['zcdp_unbounded']['blt'][metric] for r in rows]
            ax.plot(horizons, ys, ':', label='blt (unbounded, design T)')
        if notion == 'zcdp' and metric == 'max_std' and jax_rows:
            hs = sorted(int(h) for h in jax_rows)
            ax.plot(hs, [jax_rows[str(h)]['max_std'] for h in hs], 'x', color='k',
                    label='jax_privacy BLT (optimize)')
        ax.set_xscale('log', base=2)
        ax.set_yscale('log')
        ax.set_xlabel('horizon T')
        ax.set_ylabel('release noise std (per bin)')
        ax.set_title(title)
        ax.legend(fontsize=7)
    _plot_pure_gains(axes[2], horizons, rows)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _plot_pure_gains(axes, horizons, rows):
    """Pure ε: mean-variance gain over the VR binary tree (target 3× at 2^16), and each
    counter's mean variance over per-step noise summed (never above 1)."""
    gain_ax, per_step_ax = axes
    for name in ('balanced_tree', 'kary_tree', 'per_step_summed'):
        gains = [r['pure_mean_var_gain_over_vr_binary'][name] for r in rows]
        gain_ax.plot(horizons, gains, '-o', ms=3, label=name)
        per_step_ax.plot(horizons, [r['pure'][name]['rmse'] ** 2
                                    / r['pure']['per_step_summed']['rmse'] ** 2 for r in rows],
                         '-o', ms=3, label=name)
    gain_ax.axhline(3.0, color='k', ls=':', lw=1, label='target 3x at 2^16')
    gain_ax.axvline(2 ** 16, color='grey', ls=':', lw=1)
    gain_ax.set_ylabel('mean variance of VR binary tree / counter')
    per_step_ax.axhline(1.0, color='k', ls=':', lw=1)
    per_step_ax.set_yscale('log')
    per_step_ax.set_ylabel('mean variance / per-step noise summed')
    for ax, title in ((gain_ax, f'pure ε = {EPSILON}: gain over the VR binary tree'),
                      (per_step_ax, f'pure ε = {EPSILON}: vs per-step noise summed')):
        ax.set_xscale('log', base=2)
        ax.set_xlabel('horizon T')
        ax.set_title(title)
        ax.legend(fontsize=7)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('what', choices=('all', 'closed', 'empirical', 'state', 'plot'))
    p.add_argument('--max-log2', type=int, default=20)
    p.add_argument('--empirical-horizon', type=int, default=64)
    p.add_argument('--runs', type=int, default=2000)
    p.add_argument('--state-steps', type=int, default=4096)
    p.add_argument('--out', default=str(RESULTS / 'counters.json'))
    args = p.parse_args(argv)
    out_path = pathlib.Path(args.out)
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    if args.what in ('all', 'closed'):
        results['closed'] = closed(args.max_log2)
        results['never_above_per_step'] = never_above_per_step(args.max_log2)
        print(results['never_above_per_step'])
    if args.what in ('all', 'empirical'):
        results['empirical'] = empirical(args.empirical_horizon, args.runs)
    if args.what in ('all', 'state'):
        results['state'] = state_sizes(args.state_steps)
    jax_path = RESULTS / 'jax_privacy_blt.json'
    if jax_path.exists():
        results['jax_privacy'] = json.loads(jax_path.read_text())
    RESULTS.mkdir(exist_ok=True)
    out_path.write_text(json.dumps(results, indent=1, sort_keys=True))
    if 'closed' in results:
        plot(results, RESULTS / 'counters.png')
    print(f'wrote {out_path}')


if __name__ == '__main__':
    main()
