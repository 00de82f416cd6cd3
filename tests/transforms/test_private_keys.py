"""Continual private key selection as the ``keys=`` option of the step transforms: selection
before release, no back-fill, single-unit keys never released (exact bound and empirically),
parity with the pure shard state machine, user-level distinct-unit counting, budgets."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.transforms.window import TimestampedValue

from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp import noise
from beam_dp import PrivateKeys
from tests.helpers import NOISE_FREE
from tests.helpers import run_stream
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

STEP = 60
SELECT = PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2)


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def test_releases_begin_at_selection_without_back_fill_and_single_unit_keys_never_appear():
    # 'big' gets 40 records per step: selected once its distinct count passes the (noisy)
    # threshold; its first release counts everything since start. 20 single-record keys never.
    stream = TestStream().advance_watermark_to(0)
    for s in range(4):
        stream = stream.add_elements([tv(('big', None), s * STEP + 1)] * 40)
    stream = stream.add_elements([tv((f'solo{i}', None), 5) for i in range(20)])
    stream = stream.advance_watermark_to(300).advance_watermark_to_infinity()
    t = ContinualCountPerKey(keys=SELECT, start=0, step=STEP, end=240, budget=NOISE_FREE,
                             testing_seed=4, label='PK')
    spec = t.driver
    shard_machine = spec.private_shard
    state, chosen = shard_machine.init_state(), []
    rng = noise.seeded(4).derive('PK')
    for s in range(4):
        contributions = {'big': ((40,), 40)}
        if s == 0:
            contributions.update({f'solo{i}': ((1,), 1) for i in range(20)})
        out, state = shard_machine.release_step(state, contributions, rng)
        chosen += [(k, s, round(v[0], 6)) for k, v, _ in out]
    assert chosen and all(k == 'big' for k, *_ in chosen)
    first = chosen[0]
    assert first[2] == 40.0 * (first[1] + 1)          # everything since start, released once
    assert [s for _, s, _ in chosen] == list(range(first[1], 4))   # sticky, no back-fill
    run_stream(stream, t, expected=chosen)


def test_parity_with_the_pure_state_machine_under_a_seed_histogram():
    bins = ['x', 'y']
    t = ContinualHistogramPerKey(keys=PrivateKeys(PrivacyBudget(epsilon=2.0, delta=1e-3),
                                                  num_shards=3),
                                 bins=bins, start=0, step=STEP, end=300,
                                 budget=PrivacyBudget(epsilon=1.0), testing_seed=9, label='H')
    events = [(f'k{i % 4}', 'xy'[i % 2], (7 * i) % 290) for i in range(400)]
    spec = t.driver
    shard_machine = spec.private_shard
    per_shard = {}
    for key, b, ts in events:
        shard = spec.private_keys.shard_of(key)
        step_map = per_shard.setdefault(shard, {}).setdefault(ts // STEP, {})
        vec, units = step_map.get(key, ((0, 0), 0))
        vec = tuple(v + (1 if bins[j] == b else 0) for j, v in enumerate(vec))
        step_map[key] = (vec, units + 1)
    expected = []
    for shard in range(3):
        state = shard_machine.init_state()
        for s in range(5):
            out, state = shard_machine.release_step(
                state, per_shard.get(shard, {}).get(s, {}), noise.seeded(9).derive('H'))
            expected += [(k, s, tuple(v)) for k, v, _ in out]
    assert expected
    stream = TestStream().advance_watermark_to(0)
    for chunk in (events[200:], events[:200]):
        stream = stream.add_elements([tv((k, b), ts) for k, b, ts in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    run_stream(stream, t, expected=expected, extract=lambda r: (r.key, r.step, tuple(r.values)))


def test_user_level_counts_distinct_units_once_per_key():
    # One unit with 200 records on 'heavy' (bounded to 2 per step, 5 steps) is ONE unit: never
    # selected. 'crowd' has 150 distinct units: selected.
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=2,
                     max_steps_per_unit=5)
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(('heavy', 'u0'), 1 + i % 50) for i in range(200)]
                            + [tv(('crowd', f'u{i + 1}'), 2) for i in range(150)])
              .advance_watermark_to(200).advance_watermark_to_infinity())
    t = ContinualCountPerKey(keys=SELECT, start=0, step=STEP, end=180, budget=NOISE_FREE,
                             privacy_unit=unit, testing_seed=1)
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream | t
        assert_that(out.releases | beam.Map(lambda r: r.key),
                    lambda keys: _only(keys, 'crowd'))


def _only(keys, name):
    assert keys and set(keys) == {name}, keys


def test_single_unit_key_probability_exact_bound_and_empirical():
    sel = SELECT.selection(1)
    assert sel.failure_probability <= SELECT.budget.delta
    # Empirical with a deliberately large δ (so the bound is testable) over many seeds: the
    # frequency of ever selecting a single-unit key over 40 steps stays within the bound.
    loose = PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=0.2))
    sel = loose.selection(1)
    t = ContinualCountPerKey(keys=loose, start=0, step=STEP, budget=PrivacyBudget(epsilon=1.0))
    spec = t.driver
    shard_machine = spec.private_shard
    hits, runs = 0, 300
    for seed in range(runs):
        state = shard_machine.init_state()
        rng = noise.seeded(seed).derive('X')
        selected = False
        for s in range(40):
            out, state = shard_machine.release_step(state, {'one': ((1,), 1)} if s == 0 else {},
                                                   rng)
            selected |= bool(out)
        hits += selected
    bound = sel.failure_probability
    assert hits / runs <= bound + 3 * np.sqrt(bound / runs), (hits, bound)


def test_budget_covers_selection_plus_release():
    acc = BudgetAccountant(PrivacyBudget(epsilon=2.0, delta=1e-6))
    with pytest.raises(BudgetExceededError, match='asks for'):
        ContinualCountPerKey(keys=PrivateKeys(PrivacyBudget(epsilon=1.5, delta=1e-6)), start=0,
                             step=STEP, budget=PrivacyBudget(epsilon=1.0), accountant=acc)
    assert acc.ledger == ()
    t = ContinualCountPerKey(keys=PrivateKeys(PrivacyBudget(epsilon=0.5, delta=1e-6)), start=0,
                             step=STEP, end=2 * STEP, budget=PrivacyBudget(epsilon=1.0),
                             accountant=acc, label='C')
    p = beam.Pipeline(runner=BATCH_RUNNER)
    _ = p | beam.Create([]) | t
    assert [e.label for e in acc.ledger] == ['C/SelectKeys', 'C']
    assert t.privacy_cost().epsilon == pytest.approx(1.5) and t.privacy_cost().delta == 1e-6


@pytest.mark.parametrize('kwargs, match', [
    ({'keys': PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6)), 'public_keys': ['a']},
     'either public_keys or keys'),
    ({'keys': PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6)), 'num_shards': 2},
     r'set PrivateKeys\(num_shards=...\), not num_shards'),
])
def test_transform_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        ContinualCountPerKey(start=0, step=STEP, budget=PrivacyBudget(epsilon=1.0), **kwargs)


@pytest.mark.parametrize('kwargs, match', [
    ({'budget': 1.0}, 'PrivateKeys: budget must be a PrivacyBudget'),
    ({'budget': PrivacyBudget(epsilon=1.0)}, 'PrivateKeys: budget must have epsilon > 0 and delta > 0'),
    ({'budget': PrivacyBudget(rho=1.0)}, 'PrivateKeys: budget must have epsilon > 0 and delta > 0'),
    ({'budget': PrivacyBudget(epsilon=1.0, delta=1e-6), 'num_shards': 0},
     'PrivateKeys: num_shards must be a positive integer'),
])
def test_private_keys_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        PrivateKeys(**kwargs)
