"""Tables and plot of the Boost benchmark: ours (beam_dp) next to the authors' artifact.

    .venv/bin/python benchmarks/boost/report.py /tmp/boost_res benchmarks/boost/results

Copies the result jsons into the results folder (one ``results.json``), prints the markdown
tables of README.md and writes ``cumulative_budget.png`` (average cumulative budget per block vs
number of queries, one panel per setting and k_zipf, solid = beam_dp, dashed = artifact).
"""

import glob
import json
import os
import sys

BOOST = {'monoblock': 'pmw_bypass', 'static': 'tree_pmw_bypass',
         'streaming': 'tree_pmw_bypass_warm'}
BASELINES = ('laplace', 'exact_cache', 'tree_exact_cache', 'vanilla_pmw')
SETTINGS = ('monoblock', 'static', 'streaming')


def load(src):
    out = {}
    for path in sorted(glob.glob(os.path.join(src, '*.json'))):
        name = os.path.basename(path)
        if not name.startswith(('ours_', 'artifact_')):
            continue
        r = json.load(open(path))
        impl = r['implementation']
        out.setdefault((impl, r['setting'], r['k']), {})[r['system']] = r
    return out


def savings(runs, setting):
    """(best baseline name, its final budget / Boost's final budget)."""
    boost = runs.get(BOOST[setting])
    base = {s: r['final_avg_budget'] for s, r in runs.items() if s in BASELINES}
    if not boost or not base:
        return None, None
    best = min(base, key=base.get)
    return best, base[best] / boost['final_avg_budget']


def tables(results):
    lines = ['| setting | k | system | beam_dp ε/block | artifact ε/block | beam_dp ms/query '
             '(mechanism) | artifact ms/query |', '|---|---|---|---|---|---|---|']
    for setting in SETTINGS:
        for k in (0, 1):
            ours = results.get(('beam_dp', setting, k), {})
            art = results.get(('artifact', setting, k), {})
            for system in sorted(set(ours) | set(art)):
                o, a = ours.get(system), art.get(system)
                lines.append('| {} | {} | {} | {} | {} | {} | {} |'.format(
                    setting, k, system,
                    f"{o['final_avg_budget']:.4g}" if o else '-',
                    f"{a['final_avg_budget']:.4g}" if a else '-',
                    f"{o['latency_ms_mean']:.2f} ({o['mechanism_latency_ms_mean']:.2f})"
                    if o else '-', f"{a['latency_ms_mean']:.2f}" if a else '-'))
    lines += ['', '| setting | k | beam_dp: best baseline, saving | artifact: best baseline, '
              'saving |', '|---|---|---|---|']
    for setting in SETTINGS:
        for k in (0, 1):
            cells = []
            for impl in ('beam_dp', 'artifact'):
                best, ratio = savings(results.get((impl, setting, k), {}), setting)
                cells.append(f'{best}, {ratio:.2f}x' if best else '-')
            lines.append(f'| {setting} | {k} | {cells[0]} | {cells[1]} |')
    return '\n'.join(lines)


#: The artifact's savings over the best baseline quoted in issue 11 (their code, Covid-shaped
#: workload, paper-length runs: 300K queries partitioned), for the long-horizon comparison.
QUOTED = {('static', 0): 4.59, ('static', 1): 2.91, ('streaming', 0): 4.84,
          ('streaming', 1): 2.96}


def long_table(results):
    """Ours at the paper's horizon (300K queries) next to the artifact's quoted savings."""
    lines = ['| setting | k | exact_cache | tree_exact_cache | tree_pmw_bypass | '
             'tree_pmw_bypass_warm | beam_dp saving over best baseline | artifact (quoted) |',
             '|---|---|---|---|---|---|---|---|']
    for setting in ('static', 'streaming'):
        for k in (0, 1):
            runs = results.get(('beam_dp', setting, k), {})
            if not runs:
                continue
            cells = [f"{runs[s]['final_avg_budget']:.4g}" if s in runs else '-'
                     for s in ('exact_cache', 'tree_exact_cache', 'tree_pmw_bypass',
                               'tree_pmw_bypass_warm')]
            if setting == 'static' or 'tree_pmw_bypass_warm' not in runs:
                boost = runs.get('tree_pmw_bypass')
            else:
                boost = runs['tree_pmw_bypass_warm']
            base = [runs[s]['final_avg_budget'] for s in runs if s in BASELINES]
            saving = (f'{min(base) / boost["final_avg_budget"]:.2f}x' if boost and base
                      else '-')
            lines.append(f'| {setting} | {k} | ' + ' | '.join(cells) +
                         f' | {saving} | {QUOTED[(setting, k)]}x |')
    return '\n'.join(lines)


def plot(results, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    colours = {}
    for col, setting in enumerate(SETTINGS):
        for row, k in enumerate((0, 1)):
            ax = axes[row][col]
            for impl, style in (('beam_dp', '-'), ('artifact', '--')):
                for system, r in sorted(results.get((impl, setting, k), {}).items()):
                    curve = r['curve']
                    xs = [i * r['queries'] / max(1, len(curve) - 1) for i in range(len(curve))]
                    colour = colours.setdefault(system, f'C{len(colours)}')
                    ax.plot(xs, curve, style, color=colour, label=f'{system} ({impl})')
            ax.set_title(f'{setting}, k_zipf={k}')
            ax.set_xlabel('queries')
            ax.set_ylabel('avg cumulative ε per block')
            ax.set_yscale('log')
    seen = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    fig.legend(list(seen.values()), list(seen.keys()), loc='lower center', ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)


def main():
    if sys.argv[1] == '--long':
        results = load(sys.argv[2])
        print(long_table(results))
        if len(sys.argv) > 3:
            json.dump([r for runs in results.values() for r in runs.values()],
                      open(os.path.join(sys.argv[3], 'results_300k.json'), 'w'), indent=1)
            plot(results, os.path.join(sys.argv[3], 'cumulative_budget_300k.png'))
        return
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    results = load(src)
    flat = [r for runs in results.values() for r in runs.values()]
    json.dump(flat, open(os.path.join(dst, 'results.json'), 'w'), indent=1)
    print(tables(results))
    plot(results, os.path.join(dst, 'cumulative_budget.png'))


if __name__ == '__main__':
    main()
