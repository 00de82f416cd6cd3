"""CLI: ``python -m beam_dp.analysis --rho 0.5 --horizon 65536 [--plot errors.png]``.

Prints every counter's expected RMSE and max std per step (per bin) for the given public
parameters, marks the one a transform would pick, and optionally plots std vs step.
"""

import argparse
import json
import math
import sys

import numpy as np

from beam_dp.accounting import PrivacyBudget
from beam_dp.mechanisms.counter_selection import expected_error


def _parse(argv):
    p = argparse.ArgumentParser(prog='python -m beam_dp.analysis', description=__doc__.split(
        '\n\n')[1] if '\n\n' in __doc__ else None)
    notion = p.add_mutually_exclusive_group(required=True)
    notion.add_argument('--epsilon', type=float, help='pure ε (with --delta: approximate DP)')
    notion.add_argument('--rho', type=float, help='ρ for ρ-zCDP')
    p.add_argument('--delta', type=float, default=0.0)
    p.add_argument('--horizon', default='none',
                   help="number of steps, or 'none' for an unbounded stream")
    p.add_argument('--evaluation-horizon', type=int, default=None,
                   help='steps to average over when the horizon is unbounded (default 2^20)')
    p.add_argument('--l1', type=float, default=1.0, help='L1 contribution bound of one unit')
    p.add_argument('--l2', type=float, default=None, help='L2 contribution bound (Gaussian)')
    p.add_argument('--dimension', type=int, default=1)
    p.add_argument('--objective', choices=('rmse', 'max_std'), default='rmse')
    p.add_argument('--plot', help='save a plot of std vs step to this file (needs matplotlib)')
    p.add_argument('--json', action='store_true', help='print JSON instead of a table')
    return p.parse_args(argv)


def _plot(report, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    steps = report.evaluated_steps
    # RMS over ~60 log-spaced bins of steps (tree counters' variance jumps from step to step).
    edges = np.unique(np.geomspace(1, steps + 1, 60).astype(int))
    centres = np.sqrt(edges[:-1] * np.maximum(edges[1:] - 1, edges[:-1]))
    for est in report.estimates[:8]:
        curve = report.curves[est.name]
        rms = [math.sqrt(float(np.mean(curve[a - 1:b - 1]))) for a, b in zip(edges[:-1],
                                                                            edges[1:])]
        style = '--' if not est.runnable else '-'
        width = 2.5 if est is report.chosen else 1.2
        ax.plot(centres, rms, style, lw=width, label=f'{est.name} (RMSE {est.rmse:.3g})')
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('step t')
    ax.set_ylabel('noise std of the release (RMS over log bins of t)')
    ax.set_title(f'{report.budget}, horizon {report.horizon or "unbounded"}; '
                 f'picked: {report.chosen.name}')
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    args = _parse(argv)
    if args.rho is not None:
        budget = PrivacyBudget(rho=args.rho)
    else:
        budget = PrivacyBudget(epsilon=args.epsilon, delta=args.delta)
    horizon = None if args.horizon.lower() == 'none' else int(args.horizon)
    report = expected_error(budget, horizon, dimension=args.dimension, l1_sensitivity=args.l1,
                            l2_sensitivity=args.l2, evaluation_horizon=args.evaluation_horizon,
                            objective=args.objective)
    if args.json:
        print(json.dumps({'budget': str(budget), 'horizon': horizon,
                          'evaluated_steps': report.evaluated_steps, 'chosen': report.chosen.name,
                          'counters': [{'name': e.name, 'notion': e.notion, 'rmse': e.rmse,
                                        'max_std': e.max_std, 'runnable': e.runnable}
                                       for e in report.estimates]}, indent=1))
    else:
        print(f'{budget}, horizon={horizon or "unbounded"}, evaluated over t=1..'
              f'{report.evaluated_steps}, per bin, objective={report.objective}')
        print(f'{"counter":34s} {"notion":6s} {"RMSE":>10s} {"max std":>10s}')
        for e in report.estimates:
            mark = '  <- picked' if e is report.chosen else ('  (reference)' if not e.runnable
                                                            else '')
            print(f'{e.name:34s} {e.notion:6s} {e.rmse:10.4g} {e.max_std:10.4g}{mark}')
    if args.plot:
        _plot(report, args.plot)
        print(f'plot saved to {args.plot}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
