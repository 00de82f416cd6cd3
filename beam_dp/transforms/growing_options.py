"""The arguments of the growing-database transforms (``WindowedPMWG``, ``BBSchedulerQueries``,
``BBImproverQueries``): their descriptions (``arguments.public``), what to write instead of the
arguments of the Beam-window version, and the check that the inputs are in the global window."""

from apache_beam.transforms.window import GlobalWindows

from beam_dp.errors import InvalidParamsError
from beam_dp.transforms import arguments

__all__ = [
    'GROWING_DOCS',
    'GROWING_HINTS',
    'check_global_window',
]

#: Descriptions of the growing-database arguments (``arguments.public``).
GROWING_DOCS = {
    **arguments.COMMON_DOCS,
    'budget': '``PrivacyBudget(epsilon=ε)`` (pure ε) or ``PrivacyBudget(epsilon=ε, '
              'delta=δ)``: the whole release of every instance (each record is in one '
              'instance: parallel composition over keys). Not ``rho``.',
    'privacy_unit': 'only ``EventLevel()`` (the default): one record, swap-one (the database '
                    'size is public). User level is refused: bound each user to one record '
                    'upstream, and event level is then user level.',
    'start': 'event time of the start of step 0 (seconds since the epoch, a Beam Timestamp or '
             'a timezone-aware datetime): records and queries before it are dead-lettered.',
    'step': 'the length of a step (seconds, a Beam Duration or a timedelta): the records and '
            'queries of a step are processed, and the answers released, when the watermark '
            'passes its end plus ``allowed_lateness``.',
    'allowed_lateness': 'how long (seconds) a step waits for late records and queries after '
                        "its end; later records are dead-lettered, later queries refused 'LATE' "
                        '(default 0).',
    'domain_fn': 'record → its domain element, an integer in [0, domain_size).',
    'data_key_fn': 'record → key (one key = one database; None, the default: one database).',
    'query_key_fn': 'query → key (None, the default: one database).',
    'period': 'None (default): each key\'s database grows for ever. A duration (seconds, a Beam '
              'Duration or a timedelta): one independent database per key and fixed event-time '
              'period (periods aligned on the epoch, as Beam\'s FixedWindows: the instance key '
              'is (key, period index), or the period index without ``data_key_fn``), whose '
              'state is cleared once the last step of its period is released (the state held '
              'stays bounded over a long job).',
    'n': 'the initial size: queries before an instance has n records are refused '
         "'NOT_STARTED'.",
    'domain_size': 'N, the size of the public data domain {0, ..., N-1}.',
    'alpha': "the accuracy target α of PMWG's answers.",
    'p': 'PMWG: the failure probability (default 1/N); the BB transforms: as their mechanism.',
    'mechanism': 'the static black box (``LaplaceQueryVector``, ``StaticPMWBox``, '
                 '``CallableBlackBox``), pure ε_i-DP for sensitivity 1/t.',
    'beta': 'the failure probability of the accuracy bound of each run.',
    'g': 'BBScheduler: the epoch growth γ ∈ (0, 1) (default the mechanism\'s).',
    'lazy': 'BBScheduler: False (default) runs the box eagerly at each epoch start; True at '
            "the first query of an epoch. BBImprover: only True.",
    'c': 'BBImprover: the decay exponent c of ε_t (default 0.1).',
    'p1': 'BBImprover: as ``BBImprover`` (default the mechanism\'s).',
    'p2': 'BBImprover: as ``BBImprover`` (default 0).',
}

#: What to write instead of the arguments of the Beam-window version.
GROWING_HINTS = {
    'timer_granularity': 'answers are released at the end of each step of the public clock: '
                         'pass step=<seconds> (and start=, end=) instead',
    'window': 'Beam windows are not read: pass period=<seconds> for an independent database '
              'per period (its state cleared once the period is released)',
    'unit_fn': 'only privacy_unit=EventLevel() is supported',
}


def check_global_window(owner: str, *pcolls) -> None:
    """Refuses inputs in Beam windows other than the global window (the step clock replaced
    them).

    Raises:
      InvalidParamsError: saying what to write instead.
    """
    for pcoll in pcolls:
        fn = pcoll.windowing.windowfn
        if not isinstance(fn, GlobalWindows):
            raise InvalidParamsError(
                f'{owner}: the inputs must be in the global window, got {type(fn).__name__}: '
                f'Beam windows are not read (the public step clock start=/step=/end= decides '
                f'when answers are released). For an independent database per period, pass '
                f'period=<seconds> (each record is in one instance: parallel composition).')
