"""Tables (results.md) and the plot (accuracy.png) from benchmarks/erm/results.json.

    .venv/bin/python -m benchmarks.erm.report
"""

import json
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
# rows of the tables that the plot leaves out (variants of a plotted method)
DECOMPOSITION = ('continual+ivw', 'continual (B=4·b0, ½/½, one μ)', 'ftrl_laplace_balanced',
                 'ftrl_laplace_auto (16/step)', 'ftrl_laplace_infinite')


def _eps_label(e: str) -> str:
    return '∞' if e == 'inf' else f'{float(e):g}'


def table(rows: dict, key: str, title: str) -> str:
    eps = list(next(iter(rows.values())).keys())
    lines = [f'**{title}** (median over seeds of the {key} accuracy)', '',
             '| method | ' + ' | '.join(f'ε={_eps_label(e)}' for e in eps) + ' |',
             '|---|' + '---|' * len(eps)]
    for method, per in rows.items():
        cells = []
        for e in eps:
            runs = [r for r in per.get(e, ()) if key in r]
            cells.append('—' if not runs else f'{np.median([r[key] for r in runs]):.3f}')
        lines.append(f'| {method} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def dominance(rows: dict, first: str, second: str, keys, title: str) -> str:
    """Per ε and metric: the two methods' medians and which is at least as accurate."""
    eps = [e for e in rows[first] if e in rows.get(second, {})]
    lines = [f'**{title}: {first} vs {second}** (medians; ≥ marks the at-least-as-accurate '
             'one)', '', '| metric | ' + ' | '.join(f'ε={_eps_label(e)}' for e in eps) + ' |',
             '|---|' + '---|' * len(eps)]
    for key in keys:
        cells = []
        for e in eps:
            a = np.median([r[key] for r in rows[first][e]])
            b = np.median([r[key] for r in rows[second][e]])
            cells.append(f"{a:.3f} {'≥' if a >= b else '<'} {b:.3f}")
        lines.append(f'| {key} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def block_table(blocks: dict) -> str:
    lines = ['**digits, accuracy vs block size b0** (B = 8·b0, ¾ of ε to the bases, update '
             'μ = 1; median final / mean accuracy)', '',
             '| b0 | method | ε=10 | ε=100 |', '|---|---|---|---|']
    for b0, rows in blocks.items():
        for method, per in rows.items():
            cells = [f"{np.median([r['final'] for r in per[e]]):.3f} / "
                     f"{np.median([r['mean'] for r in per[e]]):.3f}" for e in ('10.0', '100.0')]
            lines.append(f'| {b0} | {method} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def monotonicity(rows: dict, key: str, title: str, tol: float = 0.02) -> str:
    """Per method: the largest drop of the median accuracy from one ε to a larger one."""
    lines = [f'**accuracy non-decreasing in ε? ({title}, {key}; drop = max over ε < ε\' of '
             f'median(ε) − median(ε\'); spec tolerance {tol})**', '',
             '| method | largest drop | non-decreasing within tolerance |', '|---|---|---|']
    for method, per in rows.items():
        eps = sorted(per, key=float)
        med = [np.median([r[key] for r in per[e]]) for e in eps]
        drop = max([a - b for i, a in enumerate(med) for b in med[i + 1:]] + [0.0])
        lines.append(f"| {method} | {drop:.3f} | {'yes' if drop <= tol else 'NO'} |")
    return '\n'.join(lines) + '\n'


def arithmetic_table(arith: dict) -> str:
    """The final release's noise budget: every job of its centre chain."""
    lines = ['**digits, ε = 100, seed 0: noise of the final release and of the centres it '
             'rests on** (E‖ν‖ = d·b, d = 650, b = 2L/(μ·n·eps_noise); ‖w‖ of the same '
             'release at ε = ∞)', '',
             '| config | job | n | eps_noise | μ | n·eps_noise | E‖ν‖ | ‖w‖ at ε=∞ |',
             '|---|---|---|---|---|---|---|---|']
    for name, row in arith.items():
        for i, job in enumerate(row['chain']):
            norm = f"{row['weight_norm_eps_inf']:.2f}" if i == 0 else ''
            lines.append(f"| {name if i == 0 else ''} | {job['job']} | {job['n']} | "
                         f"{job['eps_noise']:g} | {job['mu']:g} | "
                         f"{job['n'] * job['eps_noise']:.0f} | {job['noise_norm']:.2f} | "
                         f"{norm} |")
    return '\n'.join(lines) + '\n'


def plot(results: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for ax, (name, key, title) in zip(axes[:2], [
            ('digits_eps', 'final', 'digits: final release'),
            ('gauss_eps', 'mean_common', 'stationary mixture: mean over releases at blocks ≥ 7')]):
        ax.set_prop_cycle(color=plt.cm.tab20.colors)
        rows = results[name]
        for method, per in rows.items():
            if method in DECOMPOSITION:
                continue
            eps = [e for e in per if e != 'inf']
            xs = [float(e) for e in eps]
            if key not in per[eps[0]][0]:
                continue
            ys = [np.median([r[key] for r in per[e]]) for e in eps]
            line, = ax.plot(xs, ys, marker='o', label=method)
            if 'inf' in per:
                ax.axhline(np.median([r[key] for r in per['inf']]), color=line.get_color(),
                           ls=':', lw=0.8)
        ax.set_xscale('log')
        ax.set_xlabel('ε (dotted: ε = ∞)')
        ax.set_ylabel('test accuracy')
        ax.set_title(title)
        ax.legend(fontsize=7)
    ax = axes[2]
    ax.set_prop_cycle(color=plt.cm.tab10.colors)
    for method in ('continual', 'sliding', 'independent', 'ftrl_laplace_auto',
                   'ftrl_gauss_zcdp'):
        for eps, style in (('inf', '-'), ('100.0', '--')):
            runs = results['drift_eps'].get(method, {}).get(eps)
            if not runs:
                continue
            curve = np.median([[a for _, a in r['curve']] for r in runs], axis=0)
            blocks = [b for b, _ in runs[0]['curve']]
            ax.plot(blocks, curve, style, label=f'{method} ε={_eps_label(eps)}')
    ax.axvline(20, color='k', lw=0.8)
    ax.set_xlabel('block')
    ax.set_ylabel('test accuracy (current concept)')
    ax.set_title('concept drift at block 20 (median over seeds)')
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    results = json.loads((HERE / 'results.json').read_text())
    cfg = ('digits stream (x/8 − 1), b0=64, B=8·b0, μ=0.01, update μ=1, ¾ of ε to the bases '
           '(continual/sliding)')
    common = 'mean_common'
    parts = [table(results['digits_eps'], 'final', cfg),
             table(results['digits_eps'], 'mean', cfg),
             table(results['digits_eps'], common, cfg + '; releases at blocks ≥ 7, where '
                   'every method has released'),
             dominance(results['digits_eps'], 'ftrl_laplace_auto', 'continual',
                       ('final', 'mean', common), 'digits'),
             monotonicity(results['digits_eps'], 'final', 'digits'),
             arithmetic_table(results['digits_arith']),
             table(results['digits_oneshot_ref'], 'final',
                   'digits, one PSGD on the whole stream (spec §12 C15 setting, μ=2e-3)'),
             block_table(results['digits_block']),
             table(results['gauss_eps'], 'mean', 'stationary 4-class mixture, b0=512, B=8·b0'),
             table(results['gauss_eps'], common, 'stationary 4-class mixture, releases at '
                   'blocks ≥ 7'),
             table(results['gauss_eps'], 'final', 'stationary 4-class mixture'),
             dominance(results['gauss_eps'], 'ftrl_laplace_auto', 'continual',
                       ('final', 'mean', common), 'stationary mixture'),
             table(results['drift_eps'], 'mean',
                   'drifting mixture, releases at blocks ≥ drift + 2w (34..43)'),
             dominance(results['drift_eps'], 'continual', 'independent', ('mean', 'final'),
                       'drifting mixture (blocks 34..43)')]
    text = '\n'.join(parts) + f"\nTotal run time: {results['seconds']:.0f} s.\n"
    (HERE / 'results.md').write_text(text)
    plot(results, HERE / 'accuracy.png')
    print(text)


if __name__ == '__main__':
    main()
