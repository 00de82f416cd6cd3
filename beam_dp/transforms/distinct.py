"""Continual distinct-unit counts per key (docs/distinct_count.md; issue 25 item 1).

``ContinualDistinctCountPerKey`` is the keyed continual family (``continual``) run on the stream
of *new distinct units per key*: 'BoundContributions' (``distinct_units=True``) keeps only each
unit's first record of each of its ≤ K keys, so the count of kept records of a key up to step s
is exactly the number of distinct units (among their first K keys) with a record for the key up
to s. The same wiring, labels and release loop as ``ContinualCountPerKey`` (public or private
keys); only the bounding and the calibration differ.
"""

import dataclasses

from beam_dp.drivers.distinct_window import ActiveWindow
from beam_dp.drivers.distinct_window import ActiveWindowDriver
from beam_dp.drivers.distinct_window import ActiveWindowUnit
from beam_dp.errors import InvalidParamsError
from beam_dp.privacy_unit import UserLevel
from beam_dp.drivers.keyed import parse_output
from beam_dp.transforms import arguments
from beam_dp.transforms.contribution_bounding import ACTIVE_UNITS
from beam_dp.transforms.continual import _ContinualPerKey
from beam_dp.transforms.continual import _NOT_FOR_COUNTS

__all__ = [
    'ContinualDistinctCountPerKey',
    'active_unit',
    'active_window_unit',
    'distinct_unit',
]

COUNTS = ('new', 'active')

_DOCS = {
    **arguments.KEYED_DOCS,
    'privacy_unit': '``UserLevel(unit_fn, max_keys_per_unit=K)``: the unit whose distinct '
                    'occurrences are counted (required). Only K (and C, ``max_units``) apply: '
                    'a unit is counted at most once per key, so ``max_contributions_per_step`` '
                    'and ``max_steps_per_unit`` are replaced by 1 (with ``count=\'new\'``; '
                    'with ``count=\'active\'`` S = ``max_steps_per_unit`` applies: the steps a '
                    'unit is counted active per key).',
    'count': "'new' (default: each unit counted once per key, at its first record; "
             "cumulative releases are the distinct units so far) or 'active' (each unit "
             "counted once per key and step it has a record in, for at most "
             "``max_steps_per_unit`` = S steps per key: with ``output='per_step'`` the "
             "distinct units active in the step, e.g. daily active users; with "
             "``output=('window', W)`` the distinct units active in the last W steps, e.g. "
             "weekly active users; needs one of these two outputs).",
}


def distinct_unit(owner: str, privacy_unit) -> UserLevel:
    """The bound a distinct-unit count runs with: the user's K, C and N, with m = S = 1 (one
    record per unit and key over the whole horizon). Refuses anything but ``UserLevel``."""
    if not isinstance(privacy_unit, UserLevel):
        raise InvalidParamsError(
            f'{owner}: privacy_unit must be UserLevel(unit_fn, max_keys_per_unit=K): distinct '
            f'units need a unit id. At event level every record is its own unit, so the '
            f'distinct count is the record count: use ContinualCountPerKey; got '
            f'{privacy_unit!r}.')
    total = privacy_unit.max_total_contributions
    if total is not None and total >= privacy_unit.max_keys_per_unit:
        total = None                 # C ≥ K binds nothing once each key holds one record
    return dataclasses.replace(privacy_unit, max_contributions_per_step=1, max_steps_per_unit=1,
                               max_total_contributions=total)


def active_unit(owner: str, privacy_unit) -> UserLevel:
    """The bound an active-unit count runs with: the user's K, S, C and N, with m = 1 (one
    record per unit, key and step). Refuses anything but ``UserLevel``."""
    distinct_unit(owner, privacy_unit)          # the same refusal of event level
    total = privacy_unit.max_total_contributions
    if total is not None and \
            total >= privacy_unit.max_keys_per_unit * privacy_unit.max_steps_per_unit:
        total = None                 # C ≥ K·S binds nothing once each (key, step) holds one
    return dataclasses.replace(privacy_unit, max_contributions_per_step=1,
                               max_total_contributions=total)


def active_window_unit(owner: str, privacy_unit, window: int) -> ActiveWindowUnit:
    """The bound an active-units window runs with: bounding as ``active_unit`` (K, S, C, N,
    m = 1), calibrated to the unit's ±1 membership stream of the window of ``window`` steps
    (L1 = 2·K·S, or 2C: ``beam_dp.drivers.distinct_window``)."""
    unit = active_unit(owner, privacy_unit)
    fields = {f.name: getattr(unit, f.name) for f in dataclasses.fields(UserLevel)}
    return ActiveWindowUnit(**fields, window=window)


@arguments.public(docs=_DOCS, drop=('value_fn', 'lower', 'upper', 'grid_bits', 'bins'),
                  required=('privacy_unit',), hints=_NOT_FOR_COUNTS)
class ContinualDistinctCountPerKey(_ContinualPerKey):
    """Continual counts of distinct privacy units per key.

    Releases, for every key (public, or selected privately with ``keys=PrivateKeys(...)``) and
    every step, a noisy count of the distinct privacy units (``privacy_unit.unit_fn``) with at
    least one record of that key from ``start`` up to the end of the step (cumulative). It is
    ``ContinualCountPerKey`` run on the stream of new distinct units per key: the first record
    of each (unit, key) counts 1 at its step, every later record of that (unit, key) counts 0
    and is dropped silently (it is not an error; it is not a dead letter).

    Privacy unit and neighbours: ``UserLevel(unit_fn, max_keys_per_unit=K)`` (required; event
    level is refused: there each record is its own unit and the distinct count is the record
    count, ``ContinualCountPerKey``). Add/remove one unit. A unit's records for keys beyond its
    first K (in arrival order at the bounding stage) are dead-lettered (``contribution bound:
    ... max_keys_per_unit``). Over the WHOLE (unbounded) horizon one unit therefore adds 1 to
    the new-units stream of at most K keys, once each: L1 = K, L2 = √K (``max_steps_per_unit``
    and ``max_contributions_per_step`` do not apply and are set to 1; C < K caps the L1 at C).
    The counter (``mechanism='auto'``) is calibrated to that participation: one step, one
    record per key; ``Release.noise_stddev`` is the exact sd of each release.

    State (measured in ``tests/transforms/test_distinct.py``): per unit one record holding at
    most K key ids (``min(K, C)``) for ever — the unit's "seen" set, needed so that a later
    record of a held key is not counted again and a record of a new key beyond K is refused.
    It never holds more than K keys per unit; it holds one record per unit that ever kept a
    record. ``UserLevel(max_units=N)`` bounds the units too: each of the 64 unit shards admits
    at most ⌈N/64⌉ units (first come), records of other units are dead-lettered (``unit cap:
    shard full ...``), and the calibration doubles (a neighbouring change then moves two units'
    kept records, each within K keys once: ``UserLevel``'s docstring has the argument).

    Guarantee: the whole sequence of releases is ε-DP (``PrivacyBudget(epsilon=ε)``) or ρ-zCDP
    (``rho=ρ``) for the unit; with ``keys=PrivateKeys(budget=(ε_s, δ))`` plus the selection's
    (ε_s, δ): the selection already counts distinct units once per key (sensitivity K).

    Not guaranteed: which K keys of a unit are kept when it has more (the first to arrive); a
    unit's first record of a key arriving after the step was released is dead-lettered as late
    (the unit is then not counted for that key; a later record of that key counts it at the
    later step).

    Active units (``count='active'``, ``output='per_step'``): the release of key k at step s
    is the noisy number of distinct units with at least one record of k in step s (daily
    active users with ``step=DAY``). 'BoundContributions' keeps each unit's first record of
    each (key, step), for at most K keys and S = ``max_steps_per_unit`` steps per key; later
    records of the same (unit, key, step) are dropped silently, a record of an (S+1)-th step of
    a key is dead-lettered (``contribution bound: ... max_steps_per_unit``). One unit then adds
    at most 1 to at most S per-step values of each of at most K keys: L1 = K·S (C < K·S caps
    it at C), L2 = √(K·S), and the per-step releases get fresh noise calibrated to it
    (``WindowCounter`` with W = 1, as ``ContinualCountPerKey(output='per_step')`` with m = 1):
    ``noise_stddev`` is its exact sd. S is a public bound the analyst picks: a unit active on
    more than S steps of a key is counted on its first S only (the bias is the analyst's
    choice, the noise grows linearly in S). Per-unit state: its ≤ K keys with, per key, the
    count of its released active steps and its ≤ S unreleased steps. ``count='active'`` with
    a cumulative output is refused (a sum of per-step active counts counts a unit once per
    active step, not once).

    Active units in a window (``count='active'``, ``output=('window', W)``, W ≥ 2): the
    release of key k at step s is the noisy number of distinct units with a kept record of k
    in one of the steps s−W+1 … s (weekly active users with ``step=DAY``, W = 7). The same
    bounding as per step; 'BoundContributions' emits, per kept active step, the change of the
    unit's window-membership stream (+1 where a run of its coverage [t, t + W) starts, −1
    where it ends: ≤ 2S non-zero steps per key), and a continual prefix counter over that
    stream (chosen as for a cumulative count) releases the window values: L1 = 2·K·S (2C with
    C < K·S), L2 and the factorization counters' participation pattern accordingly
    (``beam_dp.drivers.distinct_window``); or fresh noise per window value on the exact window
    values, L1 = K·S·W. ``mechanism='auto'`` runs whichever has the lower worst sd over the
    known horizon (fresh noise without one; ``Release.mechanism`` names it); a forced
    ``mechanism`` runs that prefix counter. ``noise_stddev`` is the exact sd of every release. Per-unit state: as per step,
    plus per key its latest released active step. Private keys work as for a cumulative count
    (a key's first release after its selection holds its exact window value plus noise).
    ``final_share`` is refused.

    Returns:
      ``ContinualOutputs(releases, dead_letter)``; ``Release.value`` is the distinct count.

    Raises:
      InvalidParamsError: on a bad parameter, naming it (event level included).
      BudgetExceededError: if ``accountant`` cannot pay for ``budget``.
    """
    _metric = 'count'
    _distinct_units = True

    def __init__(self, *, privacy_unit=None, count='new', **kwargs):
        owner = 'ContinualDistinctCountPerKey'
        if count not in COUNTS:
            raise InvalidParamsError(f"{owner}: count must be 'new' or 'active', got {count!r}.")
        if count == 'active':
            output = parse_output(owner, kwargs.get('output', 'cumulative'))
            if output == 'per_step':
                self._distinct_units = ACTIVE_UNITS
                privacy_unit = active_unit(owner, privacy_unit)
            elif output == 'cumulative':
                raise InvalidParamsError(
                    f"{owner}: count='active' needs output='per_step' (the distinct units "
                    f"active in each step) or output=('window', W) (active in the last W "
                    f"steps); got output={output!r}. A cumulative sum of per-step active units "
                    f"counts unit-steps, not units (the distinct units so far: count='new').")
            else:
                if kwargs.get('final_share'):
                    raise InvalidParamsError(
                        f"{owner}: count='active' with output={output!r} runs a prefix "
                        f"counter over the window-membership stream: final_share does not "
                        f"apply; got final_share={kwargs['final_share']!r}.")
                window = output[1]
                self._distinct_units = ActiveWindow(window)
                privacy_unit = active_window_unit(owner, privacy_unit, window)
                kwargs['output'] = 'cumulative'     # the prefix sums of the ±1 stream
        else:
            privacy_unit = distinct_unit(owner, privacy_unit)
        super().__init__(privacy_unit=privacy_unit, **kwargs)

    def _make_driver(self, *args, **kwargs):
        driver = super()._make_driver(*args, **kwargs)
        if isinstance(self._distinct_units, ActiveWindow):     # the window's counter choice
            driver = ActiveWindowDriver(**{f.name: getattr(driver, f.name)
                                           for f in dataclasses.fields(driver)})
        return driver
