"""Named configurations of ``TreePMWBypass``: Boost and the paper's baselines (spec 002 §6.7).

| preset | what it is |
|---|---|
| ``pmw_bypass`` | Alg. 1: Exact-Cache + PMW-Bypass on the window as one node (lazy SV, C1 bypass) |
| ``vanilla_pmw`` | Alg. 1 with IsHistogramReady ≡ True, no cache, lr = α/8, lazy SV (the baseline) |
| ``laplace`` | direct Laplace on the window, no cache |
| ``exact_cache`` | Laplace on the window + exact cache (planner NoCuts) |
| ``tree_exact_cache`` | Laplace over the dyadic cover + per-node exact caches (MinCuts) |
| ``tree_pmw_bypass`` | Alg. 2: Exact-Cache + tree-structured PMW-Bypass |
| ``tree_pmw_bypass_warm`` | Alg. 2 with warm start |
| ``max_cuts`` | the flat baseline (Q5, planner MaxCuts): Exact-Cache + PMW-Bypass per leaf block |
"""

import dataclasses
import math

from beam_dp.mechanisms.boost.heuristic import LearningRate
from beam_dp.mechanisms.boost.heuristic import Readiness
from beam_dp.mechanisms.boost.pmw_bypass import TreePMWBypass

__all__ = [
    'PRESETS',
    'pmw_bypass',
    'preset',
]

PRESETS = {
    'pmw_bypass': dict(mode='bypass', planner='nocuts'),
    # The artifact's vanilla PMW: the theory's lr = α/8 (0.00625 at α = 0.05), lazy SV reset.
    # The seed's literal Alg. 1 prepays the next SV (sv_reset='eager', erratum 12).
    'vanilla_pmw': dict(mode='pmw', planner='nocuts', exact_cache=False, sv_reset='lazy',
                        sv_failure='r2',
                        readiness=Readiness(c0=0.0, s0=0.0, always=True),
                        learning_rate=LearningRate(((0, 0.05 / 8),))),
    'laplace': dict(mode='laplace', planner='nocuts', exact_cache=False,
                    readiness=Readiness(c0=math.inf)),
    'exact_cache': dict(mode='laplace', planner='nocuts', readiness=Readiness(c0=math.inf)),
    'tree_exact_cache': dict(mode='laplace', planner='mincuts', readiness=Readiness(c0=math.inf)),
    'tree_pmw_bypass': dict(mode='bypass', planner='mincuts'),
    'tree_pmw_bypass_warm': dict(mode='bypass', planner='mincuts', warm_start=True),
    'max_cuts': dict(mode='bypass', planner='maxcuts'),
}


def preset(name: str, domain_size: int, **overrides) -> TreePMWBypass:
    """The named configuration with ``overrides`` (any ``TreePMWBypass`` field)."""
    if name not in PRESETS:
        from beam_dp.errors import InvalidParamsError
        raise InvalidParamsError(f'boost.preset: name must be one of {sorted(PRESETS)}, '
                                 f'got {name!r}.')
    fields = dict(PRESETS[name])
    if name == 'vanilla_pmw' and 'alpha' in overrides and 'learning_rate' not in overrides:
        fields['learning_rate'] = LearningRate(((0, overrides['alpha'] / 8),))
    fields.update(overrides)
    return TreePMWBypass(domain_size=domain_size, **fields)


def pmw_bypass(domain_size: int, **overrides) -> TreePMWBypass:
    """Alg. 1 (PMW-Bypass + exact cache on a single node)."""
    return preset('pmw_bypass', domain_size, **overrides)


def replace(mechanism: TreePMWBypass, **changes) -> TreePMWBypass:
    return dataclasses.replace(mechanism, **changes)
