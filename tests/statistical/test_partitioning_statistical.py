"""Statistical tier for private time partitioning (spec §18.2-4), with power.

The default run counts are below the spec's 10^4 to keep the suite fast on 2 cores; each test
states its count and keeps power (a wrong noise scale or arrival-only evaluation is rejected).
The ``spec_size`` variants run the spec's counts (README "Tests")."""

import numpy as np
import pytest
from scipy import stats

from beam_dp.mechanisms.time_partition import TimePartitioner
from beam_dp.noise import seeded
from tests.statistical import sizes

pytestmark = pytest.mark.statistical

# A fixed sparse arrival pattern on the finite C3 partitioner (deadline T = 40), with a small
# threshold so the first segment's halting tick is spread over arrival and empty ticks.
ARRIVALS = {3: 1, 7: 2, 12: 1, 20: 1}
HORIZON = 40
RUNS = 1500          # per mode (spec: 10^4); the ±30% scale check below shows the power.
SPEC_RUNS = 10_000


def _first_close(partitioner, seed_label, runs=RUNS):
    root = seeded(2024).derive(seed_label)
    ticks = []
    for run in range(runs):
        closes, _ = partitioner.run(ARRIVALS, HORIZON, root.derive(run))
        ticks.append(closes[0].close_tick)
    return np.asarray(ticks)


def _two_sample_pvalue(a, b):
    cells = np.union1d(a, b)
    table = np.array([[np.sum(a == c) for c in cells], [np.sum(b == c) for c in cells]])
    keep = table.sum(axis=0) >= 10
    table = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)])
    table = table[:, table.sum(axis=0) > 0]
    return stats.chi2_contingency(table).pvalue


def _partitioner(epsilon, skip):
    # c_θ scales with ε so the public threshold θ = (c_θ/ε)·ln(2T²/β) stays fixed and only the
    # noise scales (2/ε, 4/ε) change with ε.
    return TimePartitioner(epsilon, beta=0.1, c_theta=0.5 * epsilon, horizon=HORIZON,
                           skip_ahead=skip)


@sizes(RUNS, SPEC_RUNS, 'runs')
def test_skip_ahead_equivalent_to_per_tick_with_power(runs):
    per_tick = _first_close(_partitioner(1.0, False), 'per-tick', runs)
    skip = _first_close(_partitioner(1.0, True), 'skip', runs)
    assert _two_sample_pvalue(per_tick, skip) > 0.01
    # Halts at empty ticks happen (regression against arrival-only evaluation).
    empty = ~np.isin(skip, list(ARRIVALS))
    assert np.mean(empty & (skip < HORIZON)) > 0.05
    # Power: the same test rejects a skip-ahead whose noise scales are off by 30% either way
    # (same threshold θ).
    for factor in (0.7, 1.3):
        wrong = _first_close(_partitioner(1.0 / factor, True), f'wrong-{factor}', runs)
        # Level 0.01, the spec's own equivalence level (§18.2): at 1500 runs per mode a
        # 1e-4 level would need ~3x the runs.
        assert _two_sample_pvalue(per_tick, wrong) < 0.01


@pytest.mark.parametrize('epsilon', [0.5, 1.0])
@sizes(3000, SPEC_RUNS, 'runs')
def test_empty_stream_schedule(epsilon, runs):
    # Spec §18.3 with 3000 runs by default (spec: 10^4, the spec_size variant); predicted
    # failure rate 4.5e-4 (exact: see
    # test_time_partition.test_empty_stream_spurious_halt_probability_exact).
    p = TimePartitioner(epsilon, 0.1)
    root = seeded(77).derive(epsilon)
    failures = 0
    for run in range(runs):
        closes, _ = p.run({}, 65536, root.derive(run))
        failures += [c.close_tick for c in closes] != [2, 4, 16, 256, 65536]
    # The spec's criterion: ≥ 99.9% of runs follow the schedule. At 3000 runs, ≤ 5 failures
    # (P[Poisson(1.35) > 5] ≈ 0.3%); at 10^4, ≤ 10 (P[Poisson(4.5) > 10] ≈ 0.8%).
    assert failures <= (5 if runs <= 3000 else runs // 1000)


@sizes(12, 20, 'runs')
def test_dense_stream_partitioner_utility(runs):
    # Spec §18.4 with 12 runs by default (spec: [SIM] 20 runs, the spec_size variant): one
    # insertion per tick to t = 10^4.
    p = TimePartitioner(1.0, 0.1)
    root = seeded(99)
    good_count, all_bounds, first_three = 0, 0, 0
    for run in range(runs):
        closes, _ = p.run({t: 1 for t in range(1, 10_001)}, 10_000, root.derive(run))
        closed = [c for c in closes if c.close_tick <= 10_000]
        good_count += 57 <= len(closed) <= 61
        # The deadlines 2, 4, 16 always close a segment; that they are segments 1-3 holds
        # with high probability only: an SVT halt at tick 1 (noise ≥ θ₁ − 1 ≈ 28) is a valid
        # outcome (seed 99, run 18 of the 20-run spec_size variant: closes 1, 2, 4, 16).
        assert {2, 4, 16} <= {c.close_tick for c in closed}
        first_three += [c.close_tick for c in closed[:3]] == [2, 4, 16]
        ok = True
        for c in closed:
            size = c.close_tick - c.start_tick + 1          # one update per tick
            t_prev = c.start_tick - 1
            if size > p.segment_upper_bound(c.segment, t_prev) + 1:
                ok = False
            if not c.forced and size < p.segment_lower_bound(c.segment, t_prev):
                ok = False
        all_bounds += ok
    assert good_count >= 0.95 * runs
    assert first_three >= 0.95 * runs
    assert all_bounds >= 0.9 * runs
