"""The arguments of ``BoostQueries``: one description per argument (``BOOST_DOCS``, what
``arguments.public`` lists in its docstring), their checks (``check_arguments``) and the
construction of what it runs (``drivers``: the preset mechanism and one ``BoostDriver`` per
public dataset)."""

from typing import Dict, Optional, Sequence, Tuple

from beam_dp import _validation as v
from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.clock import StepClock
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset as boost_preset
from beam_dp.mechanisms.boost.presets import PRESETS
from beam_dp.transforms import arguments
from beam_dp.transforms import shell

__all__ = [
    'BOOST_DOCS',
    'check_arguments',
    'drivers',
]

#: Descriptions of every argument of ``BoostQueries`` (``arguments.public``).
BOOST_DOCS = {
    **arguments.COMMON_DOCS,
    'public_datasets': 'the dataset ids (strings), public: one stateful key each (atomic '
                       'check-and-charge); a row or query of another dataset is refused.',
    'shape': 'the public attribute domain sizes (d_1, ..., d_m): a row\'s attributes are a tuple '
             'of ints with 0 ≤ x_a < d_a; the bins are their mixed radix (N = Π d_a).',
    'budget': '``PrivacyBudget(epsilon=ε_G)``: the capacity of every block\'s privacy filter '
              '(each row is in one block; block composition). Pure ε with Laplace noise; with '
              "``noise='gaussian'`` ``PrivacyBudget(rho=ρ_G)`` or ``(epsilon, delta > 0)`` "
              '(ρ_G = the largest ρ converting to it; the ledger then reports ε at that δ).',
    'noise': "'laplace' (default: pure ε-DP) or 'gaussian': the noisy answers get exact "
             'discrete Gaussian noise and every block has a ρ-zCDP filter (the sparse vector '
             'keeps Laplace noise, charged (3ε)²/2); not with preset vanilla_pmw.',
    'cache_capacity': 'at most this many exact-cache entries (≥ 2; None: unbounded).',
    'retention_blocks': 'windows may start at most this many blocks back (older ones are '
                        "refused 'window_expired' and their state dropped; None: never).",
    'replay_retention': 'query ids are kept for at least this long (seconds or Duration) of '
                        "query event time; older queries are refused 'replay_window_expired' "
                        '(None: for ever).',
    'step': 'the length of a time block (seconds, a Beam Duration or a timedelta): block b holds '
            'the rows with event time in [start + b·step, start + (b+1)·step); it is sealed '
            'when the watermark passes its end plus ``allowed_lateness`` (empty blocks too).',
    'preset': "the mechanism: 'tree_pmw_bypass' (Boost, Alg. 2; default), "
              "'tree_pmw_bypass_warm', 'pmw_bypass', or a baseline ('vanilla_pmw', 'laplace', "
              "'exact_cache', 'tree_exact_cache', 'max_cuts': the flat per-block baseline).",
    'alpha': 'the accuracy target α of every answer (a fraction of the window size; default 0.05).',
    'beta': 'the failure probability β of the α target (default 1e-3).',
    'readiness': 'the histogram readiness heuristic ``Readiness(c0, s0)`` (default the '
                 'preset\'s).',
    'window_bound': 'T = 2^m, the longest window in blocks (trees overlap every T blocks).',
    'dataset_fn': 'row → dataset id (default ``row[0]``).',
    'attributes_fn': 'row → attribute tuple (default ``row[1]``).',
}


def check_arguments(owner: str, public_datasets, preset: str, dataset_fn,
                    attributes_fn) -> None:
    """The public dataset ids (distinct strings), the preset name and the extraction
    callables."""
    v.check_distinct_strings(owner, 'public_datasets', public_datasets)
    if preset not in PRESETS:
        raise InvalidParamsError(f'{owner}: preset must be one of {sorted(PRESETS)}, got '
                                 f'{preset!r}.')
    shell.check_callable(owner, 'dataset_fn', dataset_fn)
    shell.check_callable(owner, 'attributes_fn', attributes_fn)


def drivers(owner: str, datasets: Sequence[str], shape, clock: StepClock, budget_args: dict,
            replay_retention, *, preset: str, readiness: Optional[Readiness] = None,
            **preset_args) -> Tuple[object, Dict[str, BoostDriver]]:
    """(the preset's mechanism over the bins of ``shape``, {dataset: its BoostDriver}):
    ``budget_args`` from ``drivers.boost.budget_fields``; ``preset_args`` the preset's
    (alpha, beta, window_bound, cache_capacity, retention_blocks)."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)):
        raise InvalidParamsError(f'{owner}: shape must be a list of positive ints, got '
                                 f'{shape!r}.')
    n = 1
    for d in shape:
        n *= d if isinstance(d, int) and not isinstance(d, bool) and d > 0 else 0
    extra = {} if readiness is None else {'readiness': readiness}
    budget_args = dict(budget_args)
    ledger_delta = budget_args.pop('ledger_delta', 0.0)
    mechanism = boost_preset(preset, max(n, 2), **preset_args, **budget_args, **extra)
    replay = None if replay_retention is None else shell.to_micros(
        owner, 'replay_retention', replay_retention, allow_zero=False, duration=True)
    # One driver per dataset, differing only in ``dataset`` (the DoFn re-keys it).
    return mechanism, {d: BoostDriver(d, tuple(shape), mechanism, clock.start_micros,
                                      clock.step_micros, replay, ledger_delta,
                                      clock.allowed_lateness_micros) for d in datasets}
