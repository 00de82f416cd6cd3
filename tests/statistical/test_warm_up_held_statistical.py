"""Statistical tier (issue 23 item 1, online, 'held'): the warm-up steps held until the
warm-up's end and released together by ``WarmUpShardLoop`` (one firing at the warm-up's end +
1 µs), and the steps after them, carry exactly the noise they report
(``Release.noise_stddev``), with power: each check passes at the reported variance and fails
30% off in either direction (``FUDGE_FACTOR``), on the same samples. The samples are 4,000
public keys of one shard (the counter's independent dimensions), each counting one record
per step."""

import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import ShardPartial
from beam_dp.drivers.protocol import NoiseRoot
from beam_dp.drivers.warm_up import WarmUpBounds
from beam_dp.drivers.warm_up import WarmUpPlan
from beam_dp.drivers.warm_up import WarmUpShardLoop
from tests.statistical import FUDGE_FACTOR
from tests.statistical import P_THRESHOLD
from tests.statistical.stats import variance_pvalue

pytestmark = pytest.mark.statistical

KEYS = [f'k{i}' for i in range(4000)]
W, STEPS = 6, 12
CLOCK = StepClock(0, 1_000_000, 0, STEPS - 1)


def _held_releases(mechanism, bounds, seed):
    """{step: (errors over the keys, reported sd)}: one record per key and step, the bounds
    arriving after the warm-up's partials, the held steps released at the warm-up's end."""
    plan = WarmUpPlan(PrivacyBudget(rho=0.5), CLOCK, W, KeyLayout.of(KEYS, 1),
                      warm_up_release='held', mechanism=mechanism)
    loop = WarmUpShardLoop(plan)
    root = NoiseRoot(noise.seeded(seed), 'T')
    ones = np.ones(len(KEYS), dtype=np.int64)
    positions = np.arange(len(KEYS), dtype=np.int64)
    state = loop.start(0, root).state
    for step in range(W):                       # held: in before the bounds
        state = loop.fold(state, 0, ShardPartial(step, positions, ones)).state
    armed = loop.fold(state, 0, WarmUpBounds(*bounds))
    out = loop.close(armed.state, 0, armed.timer_micros, (), root)
    releases = list(out.releases)
    assert sorted({r.step for r in releases}) == list(range(W))
    state, timer = out.state, out.timer_micros
    for step in range(W, STEPS):
        state = loop.fold(state, 0, ShardPartial(step, positions, ones)).state
        res = loop.close(state, 0, timer, (), root)
        state, timer = res.state, res.timer_micros
        releases += res.releases
    table = {}
    for r in releases:
        table.setdefault(r.step, ([], set()))[0].append(r.value - (r.step + 1))
        table[r.step][1].add(r.noise_stddev)
    return {s: (np.array(e), sds) for s, (e, sds) in table.items()}


@pytest.mark.parametrize('mechanism, bounds', [('auto', (2, 1, 12, 0)),
                                               ('per_cell', (1, 1, 4, 3)),
                                               ('blt', (1, 2, 12, 0))])
def test_held_releases_have_the_reported_noise_with_power(mechanism, bounds):
    table = _held_releases(mechanism, bounds, seed=31)
    for step in (0, W - 1, W, STEPS - 1):
        errors, sds = table[step]
        assert len(sds) == 1 and len(errors) == len(KEYS)
        var = next(iter(sds)) ** 2
        assert abs(errors.mean()) < 5 * math.sqrt(var / errors.size), step
        assert variance_pvalue(errors, var) > P_THRESHOLD, (step, var, errors.var())
        for factor in ((1 - FUDGE_FACTOR) ** 2, (1 + FUDGE_FACTOR) ** 2):
            assert variance_pvalue(errors, var * factor) < P_THRESHOLD, (step, factor)
