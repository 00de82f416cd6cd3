"""The jobs' privacy ledger options and the launch-time check (the rules are in
``beam_dp.accounting.ledger``; the storage in ``beam_dp.ledger_store``).

Every job takes ``--ledger`` (a local directory or a gs:// prefix, created once with
``python -m beam_dp.ledger_store init``), ``--resume`` and ``--lifetime_epsilon`` /
``--lifetime_delta`` / ``--lifetime_rho``. A job with a ``--stream_id`` (so every job with a
``--noise_key``) needs ``--ledger``, or ``--ledger=none`` to opt out explicitly (local
experiments; a warning says that restarts are then unchecked). After the graph is built (every
transform has spent its budget from its accountant, nothing has run) and before it is run or
submitted, ``guard_stream`` records the run, or exits with the ledger's refusal.
"""

import argparse
import logging
from typing import List, Mapping, Optional

from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting.ledger import LedgerRefusedError
from beam_dp.accounting.ledger import RunRecord
from beam_dp.accounting.ledger import key_fingerprint
from beam_dp.errors import InvalidParamsError
from beam_dp.ledger_store import open_ledger
from beam_dp.noise import NoiseKeyRef

__all__ = [
    'NO_LEDGER',
    'RESUME_FLAGS',
    'add_ledger_arguments',
    'check_ledger_arguments',
    'guard_stream',
    'lifetime_budget',
]

_LOG = logging.getLogger(__name__)
#: ``--ledger=none``: no ledger, explicitly.
NO_LEDGER = 'none'
#: Beam options that restore a running job's state: a run launched with one of them is a resume
#: (Dataflow's in-place update; a Flink job restored from a savepoint).
RESUME_FLAGS = ('--update', '--savepoint_path')


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value in ('true', '1', 'yes'):
        return True
    if value in ('false', '0', 'no', ''):
        return False
    raise argparse.ArgumentTypeError(f'expected true or false, got {text!r}')


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a positive number, got {text!r}') from None
    if not value > 0 or value == float('inf'):
        raise argparse.ArgumentTypeError(f'expected a positive number, got {text!r}')
    return value


def add_ledger_arguments(group) -> None:
    """--ledger, --resume and the lifetime budget (docs/privacy_model.md, "The privacy
    ledger")."""
    group.add_argument(
        '--ledger', default=None,
        help='The privacy ledger: a local directory or a gs:// prefix (create it once with '
             '`python -m beam_dp.ledger_store init PATH`). Each run of --stream_id is recorded '
             'there before it starts (start time, transforms and budgets, the release schedule, '
             "the noise key's fingerprint, never the key); a run that would spend the stream's "
             'lifetime budget again, or reuse the noise key over another stream start, is '
             "refused. Required with --stream_id (so with --noise_key); 'none' opts out.")
    group.add_argument(
        '--resume', type=_flag, nargs='?', const=True, default=None,
        help='This run continues the stream\'s latest recorded run (restored from a savepoint '
             'or checkpoint, or re-run after a launch that released nothing): it is recorded '
             'but not counted again, and must keep that run\'s start and budgets. Default: '
             'implied by Dataflow --update and Flink --savepoint_path; --resume=false records '
             'such a run as counted (e.g. the first recorded run of a job started before it '
             'had a ledger).')
    group.add_argument(
        '--lifetime_epsilon', type=_positive, default=None,
        help="The stream's lifetime ε over all its counted runs (with --lifetime_delta). "
             "Default: this run's own budget, so a second run from scratch over the same stream "
             'is refused unless this is raised explicitly.')
    group.add_argument('--lifetime_delta', type=float, default=None,
                       help="The stream's lifetime δ (with --lifetime_epsilon; default 0).")
    group.add_argument('--lifetime_rho', type=_positive, default=None,
                       help="The stream's lifetime ρ (zCDP), instead of --lifetime_epsilon.")


def check_ledger_arguments(parser: argparse.ArgumentParser, args) -> None:
    """Refuses inconsistent ledger options at parse time (parser.error)."""
    if args.lifetime_rho is not None and (args.lifetime_epsilon is not None
                                          or args.lifetime_delta is not None):
        parser.error('give either --lifetime_rho or --lifetime_epsilon/--lifetime_delta')
    if args.lifetime_delta is not None and args.lifetime_epsilon is None:
        parser.error('--lifetime_delta needs --lifetime_epsilon')
    try:
        lifetime_budget(args)
    except InvalidParamsError as e:
        parser.error(f'lifetime budget: {str(e).split(": ", 1)[-1]}')
    stream_id = getattr(args, 'stream_id', None)
    if args.ledger not in (None, NO_LEDGER) and not (stream_id and str(stream_id).strip()):
        parser.error('--ledger needs --stream_id (the identity of the stream whose runs it '
                     'records)')


def lifetime_budget(args) -> Optional[PrivacyBudget]:
    """The explicit lifetime budget, or None (this run's own budget)."""
    if args.lifetime_rho is not None:
        return PrivacyBudget(rho=args.lifetime_rho)
    if args.lifetime_epsilon is not None:
        return PrivacyBudget(epsilon=args.lifetime_epsilon, delta=args.lifetime_delta or 0.0)
    return None


def _resume_flag(beam_args: List[str]) -> Optional[str]:
    for arg in beam_args:
        name, _, value = arg.partition('=')
        if name in RESUME_FLAGS and value.lower() not in ('false', '0'):
            return name
    return None


def guard_stream(args, beam_args: List[str], *, job: str,
                 accountants: Mapping[str, BudgetAccountant], start: Optional[float],
                 end: Optional[float], dry_run: bool = False) -> Optional[RunRecord]:
    """Records this run in the ledger, or exits with the ledger's refusal. Call it after the
    graph is built (the accountants hold every transform's cost) and before it runs.

    Returns the recorded run (None without a ledger). With ``dry_run`` the run is checked but
    not recorded (nothing is submitted).

    Raises:
      SystemExit: a refusal, a missing/unreadable ledger, a --stream_id without --ledger, or a
        noise key the launcher cannot read (its fingerprint is recorded).
    """
    stream_id = getattr(args, 'stream_id', None)
    implied = _resume_flag(beam_args) if args.resume is None else None
    resume = bool(args.resume) or implied is not None
    if args.ledger is None:
        if stream_id:
            raise SystemExit(
                'error: --stream_id needs --ledger=<local directory or gs://bucket/prefix> (the '
                "privacy ledger that keeps the stream's lifetime budget across restarts; create "
                'it once with `python -m beam_dp.ledger_store init PATH`), or --ledger=none to '
                'run without one (restarts are then not checked).')
        if args.resume or lifetime_budget(args) is not None:
            raise SystemExit('error: --resume and --lifetime_* need --ledger and --stream_id.')
        return None
    if args.ledger == NO_LEDGER:
        _LOG.warning('No privacy ledger (--ledger=none): nothing stops a restart of stream %r '
                     "from scratch from spending the stream's budget again.", stream_id)
        return None
    fingerprint = None
    if args.noise_key is not None:
        try:
            fingerprint = key_fingerprint(NoiseKeyRef(args.noise_key, stream_id).master_key())
        except Exception as e:  # pylint: disable=broad-except
            # InvalidParamsError (unset variable, unreadable file, short key) or the secret
            # manager's own error (e.g. PermissionDenied).
            reason = (str(e).split(': ', 1)[-1] if isinstance(e, InvalidParamsError)
                      else f'{type(e).__name__}: {e}')
            raise SystemExit(
                "error: the privacy ledger records the noise key's fingerprint, so the launcher "
                f'reads the key once and could not: {reason}') from None
    run = RunRecord.new(stream_id, job, accountants, start=start, end=end,
                        key_fingerprint=fingerprint, lifetime_budget=lifetime_budget(args))
    ledger = open_ledger(args.ledger)
    try:
        run = ledger.prepare(run, resume)
        if dry_run:
            ledger.check(run)
            _LOG.info('Privacy ledger %s: this run of stream %r would be accepted (dry run: not '
                      'recorded).', ledger.root, stream_id)
            return run
        ledger.begin_run(run)
    except LedgerRefusedError as e:
        hint = ''
        if implied and 'nothing_to_resume' in e.reasons:
            hint = (f'\n  ({implied} implies --resume; if this is the first run of the stream '
                    f'that the ledger sees, pass --resume=false to record it as counted.)')
        raise SystemExit(f'error: {e}{hint}') from None
    how = (f'a resume of run {run.resume_of[:8]} (not counted'
           + (f'; implied by {implied})' if implied else ')')) if run.resume_of else 'counted'
    _LOG.info('Privacy ledger %s: recorded run %s of stream %r, %s.', ledger.root,
              run.run_id[:8], stream_id, how)
    return run
