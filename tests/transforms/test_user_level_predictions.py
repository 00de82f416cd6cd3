"""Issue 23 item 4: what ``beam_dp.analysis.user_level_error`` predicts — the noise, the bounding
bias (from an exact contribution histogram) and the probability a key is released — is within
10% of what ``ContinualCountPerKey`` then does, run as a Beam job (TestStream, streaming, the
BundleBasedDirectRunner) on synthetic user-level streams."""

import collections
import math

import pytest

from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel
from beam_dp.analysis import release_probability
from beam_dp.analysis import user_level_error
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.bounds import unit_statistics
from tests import helpers
from tests.helpers import collect
from tests.helpers import collected

pytestmark = pytest.mark.pipeline

STEP = 60


def _run(transform, records, steps, name):
    """The job's releases of the last step {key: value}, and every key released at all."""
    source = helpers.stream([((k, u), t) for k, u, t in records], steps * STEP + 1)
    with helpers.pipeline() as p:
        out = p | source | transform
        collect(out.releases, name)
    rows = collected()[name]
    last = {r.key: r.value for r in rows if r.step == steps - 1}
    return last, {r.key for r in rows}, rows


def _units(keys, steps):
    """Unit j of 'heavy' kind h = j % 4 sends on 1 + h keys, 1 + h steps per key, 1 + h records
    per (key, step): the statistics are comonotone (as the bias model couples them)."""
    records = []
    for j in range(6 * keys):
        h = j % 4
        for a in range(1 + h):
            key = f'k{(j * 7 + a * 13) % keys:03d}'
            for s in range(min(1 + h, steps)):
                records += [(key, f'u{j}', s * STEP + 1 + r) for r in range(1 + h)]
    return records


def test_noise_and_bias_predictions_are_within_10_percent_of_the_transform():
    """Keys 'k…' get the comonotone heavy units (bounded: the bias); keys 'n…' get 5 units of
    one record each, within the bounds (their error is the noise alone)."""
    keys, steps = 400, 4
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2, max_contributions_per_step=2,
                     max_steps_per_unit=3, max_total_contributions=10)
    budget = PrivacyBudget(rho=0.5)
    records = _units(keys, steps) + [(f'n{i:03d}', f'v{i}_{j}', 1 + j) for i in range(keys)
                                     for j in range(5)]
    public = [f'k{i:03d}' for i in range(keys)] + [f'n{i:03d}' for i in range(keys)]
    transform = ContinualCountPerKey(public_keys=public, start=0, step=STEP, end=steps * STEP,
                                     budget=budget, privacy_unit=unit, testing_seed=3,
                                     label='Pred')
    last, _, _ = _run(transform, records, steps, 'pred')
    assert len(last) == 2 * keys
    truth = collections.Counter(k for k, _, _ in records)
    cells = collections.defaultdict(collections.Counter)            # the exact histogram
    for key, u, t in records:
        cells[u][(key, t // STEP)] += 1
    hist = {n: collections.Counter() for n in STATISTICS}
    for counts in cells.values():
        for n, value in zip(STATISTICS, unit_statistics(dict(counts))):
            hist[n][value] += 1
    predicted = user_level_error(unit, budget, steps, histograms=hist, key_share=1.0)
    assert predicted.mechanism == transform.driver.mechanism_name
    assert predicted.noise == pytest.approx(transform.driver.noise_stddev(steps - 1), rel=1e-12)
    lost = sum(truth.values()) - sum(last.values())     # ± the noise of 800 keys (≈ 250 here)
    assert lost > 20_000
    assert predicted.bias == pytest.approx(lost, rel=0.10)
    errors = [last[k] - truth[k] for k in last if k.startswith('n')]
    sd = math.sqrt(sum(e * e for e in errors) / len(errors))
    assert sd == pytest.approx(predicted.noise, rel=0.10)


def test_release_probability_is_within_10_percent_of_the_transform():
    keys, units, steps = 500, 34, 4
    selection = PrivacyBudget(epsilon=2.0, delta=1e-6)
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=1,
                     max_steps_per_unit=1)
    records = [(f'k{i:03d}', f'u{i}_{j}', 1 + j % 50) for i in range(keys) for j in range(units)]
    # the continual SVT alone (final_share=0): with the known end's final test (the default)
    # a key of 34 units is released with probability ~1 (tests/drivers/test_private_keys_horizon)
    transform = ContinualCountPerKey(keys=PrivateKeys(selection, num_shards=4, final_share=0),
                                     start=0,
                                     step=STEP, end=steps * STEP, budget=PrivacyBudget(rho=0.5),
                                     privacy_unit=unit, testing_seed=5, label='Sel')
    _, released, rows = _run(transform, records, steps, 'sel')
    predicted = user_level_error(unit, PrivacyBudget(rho=0.5), steps, key_selection=selection,
                                 key_units=units, final_share=0)
    assert predicted.release_probability == release_probability(selection, 1, units, steps,
                                                                final_share=0)
    assert 0.5 < predicted.release_probability < 0.8            # the informative range
    assert len(released) / keys == pytest.approx(predicted.release_probability, rel=0.10)
    # and the noise it predicts is the job's for a key selected at its first step
    first = {r.key: r for r in rows if r.step == 0}
    assert first and all(r.noise_stddev == pytest.approx(
        transform.driver.counter_noise_stddev(1), rel=1e-12) for r in first.values())
    assert predicted.noise == pytest.approx(transform.driver.counter_noise_stddev(steps),
                                            rel=1e-12)
