"""Tables (results.md) and the plot (accuracy.png) from benchmarks/erm/results.json.

    .venv/bin/python -m benchmarks.erm.report
"""

import json
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


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
            runs = per.get(e)
            cells.append('—' if not runs else f'{np.median([r[key] for r in runs]):.3f}')
        lines.append(f'| {method} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def block_table(blocks: dict) -> str:
    lines = ['**digits, accuracy vs block size b0** (B = 4·b0; median final / mean accuracy)', '',
             '| b0 | method | ε=10 | ε=100 |', '|---|---|---|---|']
    for b0, rows in blocks.items():
        for method, per in rows.items():
            cells = [f"{np.median([r['final'] for r in per[e]]):.3f} / "
                     f"{np.median([r['mean'] for r in per[e]]):.3f}" for e in ('10.0', '100.0')]
            lines.append(f'| {b0} | {method} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def plot(results: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for ax, (name, key, title) in zip(axes[:2], [
            ('digits_eps', 'final', 'digits: final release'),
            ('gauss_eps', 'mean', 'stationary mixture: mean over releases')]):
        rows = results[name]
        for method, per in rows.items():
            eps = [e for e in per if e != 'inf']
            xs = [float(e) for e in eps]
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
    for method in ('continual', 'sliding', 'independent', 'ftrl_gauss_zcdp'):
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
    parts = [table(results['digits_eps'], 'final', 'digits stream, b0=64, B=4·b0, μ=0.01'),
             table(results['digits_eps'], 'mean', 'digits stream, b0=64, B=4·b0, μ=0.01'),
             table(results['digits_oneshot_ref'], 'final',
                   'digits, one PSGD on the whole stream (spec §12 C15 setting, μ=2e-3)'),
             block_table(results['digits_block']),
             table(results['gauss_eps'], 'mean', 'stationary 4-class mixture, b0=512, B=8·b0'),
             table(results['drift_eps'], 'mean',
                   'drifting mixture, releases at blocks ≥ drift + 2w (34..43)')]
    text = '\n'.join(parts) + f"\nTotal run time: {results['seconds']:.0f} s.\n"
    (HERE / 'results.md').write_text(text)
    plot(results, HERE / 'accuracy.png')
    print(text)


if __name__ == '__main__':
    main()
