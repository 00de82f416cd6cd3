"""CLI: ``python -m beam_dp.analysis --rho 0.5 --horizon 65536 [--plot errors.png]``.

Prints every counter's expected RMSE and max std per step (per bin) for the given public
parameters, marks the one a transform would pick, and optionally plots std vs step.

``python -m beam_dp.analysis user-level --rho 0.5 --horizon 365 --K 4 --m 2 --S 52 [--C 300]
[--histogram hist.json] [--key-epsilon 1 --key-delta 1e-6 --key-units 300]`` predicts a
user-level count's noise, bounding bias and the probability a key is released
(``beam_dp.analysis.user_level``). A bad argument prints ``error: ...`` and exits with status 2.

``--final-share f`` (both commands; needs a known ``--horizon``) adds the prediction of a
release with ``final_share=f`` (``beam_dp.analysis.final_release``): the last step's sd and
what the steps before it pay, against the continual counter alone and one batch release.
"""

import argparse
import json
import math
import sys

import numpy as np

from beam_dp.accounting import PrivacyBudget
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.counter_selection import expected_error

#: The longest horizon the command line evaluates (its arrays are O(horizon)).
MAX_HORIZON = 1 << 24


class _Parser(argparse.ArgumentParser):
    """Exits with status 2 and a one-line message on any bad argument (never a traceback)."""

    def error(self, message):
        self.exit(2, f'{self.prog}: error: {message}\n')


def _user_level_parse(argv):
    p = _Parser(prog='python -m beam_dp.analysis user-level',
                description='Predicted noise, bounding bias and key release probability of a '
                            'user-level ContinualCountPerKey.')
    notion = p.add_mutually_exclusive_group(required=True)
    notion.add_argument('--epsilon', type=float, help='the release budget: pure ε (with --delta: '
                        'approximate DP)')
    notion.add_argument('--rho', type=float, help='the release budget: ρ for ρ-zCDP')
    p.add_argument('--delta', type=float, default=0.0)
    p.add_argument('--horizon', type=int, required=True, help='steps of the release')
    p.add_argument('--K', type=int, required=True, help='max_keys_per_unit')
    p.add_argument('--m', type=int, required=True, help='max_contributions_per_step')
    p.add_argument('--S', type=int, required=True, help='max_steps_per_unit')
    p.add_argument('--C', type=int, default=None, help='max_total_contributions (default none)')
    p.add_argument('--mechanism', default='auto', help="the release's mechanism= ('auto')")
    p.add_argument('--histogram', help='JSON file: a contribution histogram {statistic: {value: '
                   'units}} over keys_per_unit, contributions_per_step, steps_per_key, '
                   'total_contributions, or a BoundsRecommendation as a JSON object')
    p.add_argument('--key-share', type=float, default=0.1,
                   help='share of all records held by the key (for the bias)')
    p.add_argument('--key-epsilon', type=float, help='private key selection: ε')
    p.add_argument('--key-delta', type=float, help='private key selection: δ')
    p.add_argument('--key-units', type=int,
                   help='distinct units of the key (release probability), all of them there '
                        'from --first-step on: a key whose units arrive over the horizon is '
                        'selected later and less often than predicted')
    p.add_argument('--first-step', type=int, default=1,
                   help="the key's first step (1-based), when all its --key-units are there")
    p.add_argument('--final-share', type=float, default=None,
                   help="the count's final_share= (f in [0, 1): f of the budget on one release "
                        "of the total at the last step; default off)")
    p.add_argument('--key-final-share', type=float, default=None,
                   help="PrivateKeys(final_share=...) of the key selection (default: its "
                        "default, 0.9 with a known end)")
    p.add_argument('--json', action='store_true', help='print JSON instead of text')
    return p.parse_args(argv)


def _load_histogram(path):
    from beam_dp.io.bounds import BoundsRecommendation  # pylint: disable=import-outside-toplevel
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InvalidParamsError(f'--histogram: cannot read {path!r} as JSON ({e}).') from e
    if isinstance(data, dict) and 'bucket_edges' in data:
        try:
            return BoundsRecommendation(**data)
        except TypeError as e:
            raise InvalidParamsError(f'--histogram: not a BoundsRecommendation ({e}).') from e
    return data


def _user_level_main(argv) -> int:
    # pylint: disable=import-outside-toplevel
    from beam_dp.analysis.user_level import user_level_error
    from beam_dp.privacy_unit import UserLevel
    args = _user_level_parse(argv)
    budget = (PrivacyBudget(rho=args.rho) if args.rho is not None
              else PrivacyBudget(epsilon=args.epsilon, delta=args.delta))
    unit = UserLevel(unit_fn=str, max_keys_per_unit=args.K, max_contributions_per_step=args.m,
                     max_steps_per_unit=args.S, max_total_contributions=args.C)
    if (args.key_epsilon is None) != (args.key_delta is None):
        raise InvalidParamsError('give both --key-epsilon and --key-delta (private key '
                                 'selection) or neither.')
    selection = (None if args.key_epsilon is None
                 else PrivacyBudget(epsilon=args.key_epsilon, delta=args.key_delta))
    histograms = _load_histogram(args.histogram) if args.histogram else None
    out = user_level_error(unit, budget, args.horizon, histograms=histograms,
                           key_share=args.key_share, mechanism=args.mechanism,
                           key_selection=selection, key_units=args.key_units,
                           first_step=args.first_step, final_share=args.key_final_share,
                           release_final_share=args.final_share)
    if args.json:
        print(json.dumps({'bounds': unit.describe(), 'budget': str(budget),
                          'horizon': args.horizon, 'mechanism': out.mechanism,
                          'noise': out.noise, 'bias': out.bias, 'total': out.total,
                          'release_probability': out.release_probability,
                          'final_share': (out.final_share.as_dict() if out.final_share
                                          else None)}, indent=1))
        return 0
    print(f'{unit.describe()}, {budget}, {args.horizon} steps; counter: {out.mechanism}')
    print(f'noise sd of the last release: {out.noise:.4g}')
    if out.final_share is not None:
        _print_final_share(out.final_share)
    if out.bias is not None:
        print(f'bounding bias (key holding {args.key_share:g} of the records): {out.bias:.4g}')
        print(f'total error: {out.total:.4g}')
    if out.release_probability is not None:
        print(f'P[a key with {args.key_units} units is released by step {args.horizon}]: '
              f'{out.release_probability:.4g}')
    return 0


def _print_final_share(pred):
    """The text lines of a ``FinalShareError``."""
    steps = pred.steps
    print(f'final_share={pred.final_share:g}: noise sd of the last release (counter step {steps}) '
          f'{pred.final_stddev:.4g}; without final_share {pred.without_final_stddev:.4g}; '
          f'one batch release at the whole budget {pred.batch_stddev:.4g}')
    if steps > 1:
        print(f'steps 1..{steps - 1}: noise sd RMSE {pred.other_rmse:.4g}, max '
              f'{pred.other_max_std:.4g} (without final_share: RMSE '
              f'{pred.without_other_rmse:.4g})')


def _parse(argv):
    p = _Parser(prog='python -m beam_dp.analysis', description=__doc__.split(
        '\n\n')[1] if '\n\n' in __doc__ else None,
        epilog='User level (K, m, S, C, a contribution histogram, key selection): '
               'python -m beam_dp.analysis user-level --help')
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
    p.add_argument('--final-share', type=float, default=None,
                   help='also predict a release with final_share=f (f in [0, 1); needs a '
                        'known --horizon): the last step\'s sd and the other steps\'')
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
    """Runs the command line; a bad argument prints ``error: ...`` and returns 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ['user-level']:
            return _user_level_main(argv[1:])
        return _counters_main(argv)
    except (InvalidParamsError, ValueError, OverflowError, ArithmeticError) as e:
        print(f'python -m beam_dp.analysis: error: {e}', file=sys.stderr)
        return 2


def _counters_main(argv) -> int:
    args = _parse(argv)
    if args.l2 is not None and args.l1 is not None and args.l2 > args.l1:
        raise InvalidParamsError(
            f'--l2 {args.l2:g} exceeds --l1 {args.l1:g} (--l1 defaults to 1): a unit\'s L2 '
            f'sensitivity is at most its L1. Give --l1 too, or for user-level bounds (K keys, m '
            f'per step, S steps, C in all) run `python -m beam_dp.analysis user-level --rho '
            f'... --horizon ... --K ... --m ... --S ...`.')
    for name in ('evaluation_horizon', 'dimension'):
        value = getattr(args, name)
        if value is not None and not 1 <= value <= MAX_HORIZON:
            raise InvalidParamsError(f'--{name.replace("_", "-")} must be in 1..{MAX_HORIZON}, '
                                     f'got {value}.')
    if args.rho is not None:
        budget = PrivacyBudget(rho=args.rho)
    else:
        budget = PrivacyBudget(epsilon=args.epsilon, delta=args.delta)
    try:
        horizon = None if args.horizon.lower() == 'none' else int(args.horizon)
    except ValueError as e:
        raise InvalidParamsError(f"--horizon must be a positive integer or 'none', got "
                                 f'{args.horizon!r}.') from e
    if horizon is not None and not 1 <= horizon <= MAX_HORIZON:
        raise InvalidParamsError(f'--horizon must be in 1..{MAX_HORIZON} (or none), got '
                                 f'{horizon}.')
    report = expected_error(budget, horizon, dimension=args.dimension, l1_sensitivity=args.l1,
                            l2_sensitivity=args.l2, evaluation_horizon=args.evaluation_horizon,
                            objective=args.objective)
    final = None
    if args.final_share is not None:
        if horizon is None:
            raise InvalidParamsError('--final-share needs a known last step: give --horizon N '
                                     '(the steps from start to end).')
        from beam_dp.analysis.final_release import final_share_error  # pylint: disable=C0415
        final = final_share_error(budget, horizon, args.final_share, dimension=args.dimension,
                                  l1_sensitivity=args.l1, l2_sensitivity=args.l2)
    if args.json:
        print(json.dumps({'budget': str(budget), 'horizon': horizon,
                          'evaluated_steps': report.evaluated_steps, 'chosen': report.chosen.name,
                          'counters': [{'name': e.name, 'notion': e.notion, 'rmse': e.rmse,
                                        'max_std': e.max_std, 'runnable': e.runnable}
                                       for e in report.estimates],
                          'final_share': final.as_dict() if final else None}, indent=1))
    else:
        print(f'{budget}, horizon={horizon or "unbounded"}, evaluated over t=1..'
              f'{report.evaluated_steps}, per bin, objective={report.objective}')
        print(f'{"counter":34s} {"notion":6s} {"RMSE":>10s} {"max std":>10s}')
        for e in report.estimates:
            mark = '  <- picked' if e is report.chosen else ('  (reference)' if not e.runnable
                                                            else '')
            print(f'{e.name:34s} {e.notion:6s} {e.rmse:10.4g} {e.max_std:10.4g}{mark}')
        if final is not None:
            print(f'with final_share={final.final_share:g}: {final.mechanism}')
            _print_final_share(final)
    if args.plot:
        _plot(report, args.plot)
        print(f'plot saved to {args.plot}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
