"""Whether a job's local summary may show figures computed from the raw input (issue 21, item 5).

A job's output is private by default: after a local run it prints, plots and logs only what it
released (the values in its release files, and what follows from them by post-processing) and
public parameters (ε, bounds, the schedule, output paths). It may say that dead letters were
written and where, never how many. The truth, the bias, the error against the truth, dead-letter
counts, non-private baselines or models are **evaluation**: exact figures computed from the raw
input, not differentially private.

The rule (``resolve``):

* ``--evaluate`` turns evaluation on, on any input (NOT private: the user asks to see exact
  figures of the data they gave);
* on the job's embedded demo data (no input option given: the sample shipped in the repository,
  public, so its truth reveals nobody's data) evaluation is on by default, and ``--no_evaluate``
  turns it off;
* on any other input it is off.

Every summary starts with ``banner(args)``, which says which of the three applies, e.g.
"evaluation on: demo data".

Nothing here is DP logic: it only decides what the launchers print.
"""

import argparse

__all__ = [
    'DEMO',
    'FLAG',
    'OFF',
    'add_evaluate_arguments',
    'banner',
    'resolve',
]

#: ``args.evaluation`` values: why evaluation is on, or that it is off.
DEMO = 'demo data'
FLAG = '--evaluate'
OFF = 'off'

_EVALUATE_HELP = (
    'NOT PRIVATE: after a local run, also print (and plot) exact figures computed from the raw '
    'input: the true values, the error and bias of the releases against them, dead-letter '
    'counts, non-private baselines. These figures are not differentially private; use it only '
    'on data you may see in the clear. Default: off on your input; on for the embedded demo '
    'data (public), where --no_evaluate turns it off. Without it the job prints and plots only '
    'released values and public parameters.')


def add_evaluate_arguments(group) -> None:
    """--evaluate (NOT private) and --no_evaluate on ``group`` (a parser or argument group)."""
    exclusive = group.add_mutually_exclusive_group()
    exclusive.add_argument('--evaluate', dest='evaluate', action='store_const', const=True,
                           default=None, help=_EVALUATE_HELP)
    exclusive.add_argument('--no_evaluate', dest='evaluate', action='store_const', const=False,
                           help='Print and plot only released values and public parameters, '
                                'also on the embedded demo data.')


def resolve(args: argparse.Namespace, demo_data: bool) -> str:
    """Sets and returns ``args.evaluation``: ``FLAG``, ``DEMO`` or ``OFF`` (the module's rule).

    Args:
      demo_data: the job reads only its embedded sample (no input option was given).
    """
    choice = getattr(args, 'evaluate', None)
    if choice is True:
        args.evaluation = FLAG
    elif choice is None and demo_data:
        args.evaluation = DEMO
    else:
        args.evaluation = OFF
    args.evaluate = args.evaluation != OFF
    return args.evaluation


def banner(args: argparse.Namespace) -> str:
    """The first line of a summary: whether it shows exact figures of the input, and why."""
    evaluation = getattr(args, 'evaluation', OFF)
    if evaluation == DEMO:
        return ('evaluation on: demo data (the embedded public sample; the exact figures below '
                'are computed from it; --no_evaluate hides them)')
    if evaluation == FLAG:
        return ('evaluation on: --evaluate (NOT private: the figures marked below are exact, '
                'computed from the raw input)')
    return ('evaluation off: only released values and public parameters are shown '
            '(--evaluate adds exact figures of the input; NOT private)')
