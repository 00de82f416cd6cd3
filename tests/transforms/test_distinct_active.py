"""``ContinualDistinctCountPerKey(count='active', output='per_step')``: the distinct units with a
record of the key in the step (noise free, TestStream on the DirectRunner in streaming mode),
repeats in a step dropped silently, a unit's (S+1)-th step of a key dead-lettered, a returning
unit counted again, the calibration L1 = K·S, the refusals, the per-unit state bound, and
seeded parity with ``beam_dp.testing.replay``."""

import pickle
import random

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualDistinctCountPerKey
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests import runners
from tests.helpers import NOISE_FREE
from tests.helpers import run_stream
from tests.runners import DIRECT_RUNNER
from tests.runners import prism_options
from tests.runners import requires_prism

pytestmark = pytest.mark.pipeline

STEP = 60
KEYS = ('a', 'b', 'c')


def _unit(k=2, s=2, **kwargs):
    return UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=k, max_steps_per_unit=s,
                     **kwargs)


def _active(**kwargs):
    return ContinualDistinctCountPerKey(public_keys=list(KEYS), start=0, step=STEP,
                                        output='per_step', count='active', **kwargs)


def exact_active(records, steps, k, s):
    """{(key, step): distinct units with a kept record of the key in the step}: each unit's
    first k keys and, per key, its first s steps (time order), as 'BoundContributions' keeps
    them when records arrive in time order."""
    keys, key_steps, active = {}, {}, set()
    for key, unit, seconds in sorted(records, key=lambda r: r[2]):
        step = seconds // STEP
        held = keys.setdefault(unit, [])
        if key not in held:
            if len(held) >= k:
                continue
            held.append(key)
        used = key_steps.setdefault((unit, key), [])
        if step not in used:
            if len(used) >= s:
                continue
            used.append(step)
        active.add((key, step, unit))
    return {(key, st): sum(1 for k2, s2, _ in active if (k2, s2) == (key, st))
            for key in KEYS for st in range(steps)}


def test_exact_active_units_repeats_silent_returning_units_counted_again():
    records = ([('a', 'u1', 1)] * 5 + [('a', 'u2', 2), ('a', 'u1', 70), ('a', 'u1', 75),
                                       ('b', 'u1', 71), ('a', 'u2', 130), ('b', 'u3', 125),
                                       ('b', 'u3', 126)]
               + [('a', 'u1', 140)]                        # u1's third step of 'a': over S = 2
               + [('c', 'u1', 80)])                        # u1's third key: over K = 2
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([TimestampedValue(r, r[2]) for r in records])
              .advance_watermark_to(300).advance_watermark_to_infinity())
    expected = exact_active(records, 3, 2, 2)
    assert [expected[('a', s)] for s in range(3)] == [2, 1, 1]   # u2 returns on step 2
    assert [expected[('b', s)] for s in range(3)] == [0, 1, 1]
    run_stream(stream, _active(end=180, budget=NOISE_FREE, privacy_unit=_unit(2, 2)),
               expected=[(k, s, float(v)) for (k, s), v in expected.items()],
               extract=lambda r: (r.key, r.step, round(r.value, 6)),
               runner=DIRECT_RUNNER,
               dead=[('BoundContributions', 'contribution bound: unit already contributed to '
                      'max_steps_per_unit=2 steps of this key'),
                     ('BoundContributions', 'contribution bound: unit already contributed to '
                      'max_keys_per_unit=2 keys')])


def test_calibration_is_k_times_s_with_fresh_noise_per_step():
    unit = UserLevel(unit_fn=len, max_keys_per_unit=3, max_contributions_per_step=5,
                     max_steps_per_unit=4, max_total_contributions=100)
    t = _active(end=600, budget=PrivacyBudget(epsilon=1.0), privacy_unit=unit)
    bound = t.driver.privacy_unit
    assert (bound.max_contributions_per_step, bound.max_steps_per_unit) == (1, 4)
    assert bound.max_total_contributions is None           # C = 100 ≥ K·S = 12
    assert t.driver.sensitivity()[0] == 12
    # the same calibration as the per-step count of one record per (unit, key, step)
    count = ContinualCountPerKey(public_keys=list(KEYS), start=0, step=STEP, end=600,
                                 output='per_step', budget=PrivacyBudget(epsilon=1.0),
                                 privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=3,
                                                        max_steps_per_unit=4))
    for s in (0, 5, 9):
        assert t.driver.noise_stddev(s) == pytest.approx(count.driver.noise_stddev(s))
    capped = _active(end=600, budget=PrivacyBudget(epsilon=1.0), privacy_unit=UserLevel(
        unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=4, max_total_contributions=5))
    assert capped.driver.sensitivity()[0] == 5
    # 'new' (the default) keeps m = S = 1: L1 = K
    new = ContinualDistinctCountPerKey(public_keys=['a'], start=0, step=STEP, end=600,
                                       output='per_step', budget=PrivacyBudget(epsilon=1.0),
                                       privacy_unit=unit)
    assert new.driver.sensitivity()[0] == 3


@pytest.mark.parametrize('kwargs, match', [
    (dict(count='active'), "needs output='per_step'"),
    (dict(count='daily', output='per_step'), "count must be 'new' or 'active'"),
])
def test_refusals_name_the_argument(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        ContinualDistinctCountPerKey(public_keys=['a'], start=0, step=STEP, end=600,
                                     budget=NOISE_FREE, privacy_unit=_unit(), **kwargs)


def test_per_unit_state_is_bounded_by_k_keys_and_s_live_steps():
    """A unit's record in the active mode: ≤ K keys, each with its released-step count and its
    ≤ S unreleased steps; once its S steps are released a key collapses to ``(key,)``
    (measured: pickled bytes stop growing)."""
    bound = UserLevel(unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=4)
    record, sizes, rng = (), [], random.Random(0)
    for i in range(3000):
        released = i // 10 - 2
        usage = UnitUsage.decode(bound, record, released, keep_keys=True, keep_steps=True)
        key, step = f'key{rng.randrange(50)}', i // 10
        if not usage.counted(key, step):
            usage.offer(key, step)
        record = usage.record()
        sizes.append(len(pickle.dumps(record)))
        for k, entry in usage.keys.items():
            assert entry.live is None or len(entry.live) <= 4
    assert len(record) == 1 + 3 and all(len(e) == 1 for e in record[1:])
    assert max(sizes) <= 200, max(sizes)
    assert sizes[-1] <= 80


def test_counted_is_exact_while_the_step_is_live():
    bound = UserLevel(unit_fn=len, max_keys_per_unit=2, max_steps_per_unit=1)
    usage = UnitUsage.decode(bound, (), keep_keys=True, keep_steps=True)
    assert usage.offer('a', 3) == (None, True)
    usage = UnitUsage.decode(bound, usage.record(), keep_keys=True, keep_steps=True)
    assert usage.counted('a', 3) and not usage.counted('a', 4) and not usage.counted('b', 3)
    assert usage.offer('a', 4)[0].endswith('max_steps_per_unit=1 steps of this key')
    # without keep_steps the key is full at once and the repeat could not be told apart
    plain = UnitUsage.decode(bound, usage.record(), keep_keys=True)
    assert not plain.counted('a', 3)


def test_seeded_parity_with_replay():
    rng = random.Random(3)
    records = []
    for u in range(60):
        for key in rng.sample(KEYS, 2):                     # ≤ K keys per unit
            for step in rng.sample(range(5), 2):            # ≤ S steps per key
                records += [(key, f'u{u}', step * STEP + rng.randrange(STEP))] * \
                    rng.randint(1, 3)
    t = _active(end=300, budget=PrivacyBudget(epsilon=1.0), privacy_unit=_unit(2, 2),
                testing_seed=7, label='Active')
    cells = sorted({(k, s // STEP, u) for k, u, s in records})
    expected = release_table(replay(t.driver.loop_driver(), keyed_events(
        t.driver, [(k, s, None) for k, s, _ in cells], steps=5),
        label='Active', seed=7, end_input=False).releases)
    shuffled = list(records)
    rng.shuffle(shuffled)
    stream = TestStream().advance_watermark_to(0)
    for chunk in (shuffled[::2], shuffled[1::2]):
        stream = stream.add_elements([TimestampedValue(r, r[2]) for r in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    run_stream(stream, t, extract=lambda r: (r.key, r.step, r.value), runner=DIRECT_RUNNER,
               expected=[(k, s, v[0]) for (k, s), v in expected.items()])


def test_private_keys_select_on_distinct_units_and_release_active_units():
    # 'heavy': one unit active on every step → never selected; 'crowd': 150 units active on
    # steps 0 and 2 (the same units): selected, its step-2 value 150 (not 300, not 0)
    records = ([(('heavy', 'u0'), 1 + 60 * s) for s in range(3) for _ in range(50)]
               + [(('crowd', f'u{i + 1}'), 60 * s + 2 + i % 50) for s in (0, 2)
                  for i in range(150)])
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([TimestampedValue(r, t) for r, t in records])
              .advance_watermark_to(400).advance_watermark_to_infinity())
    t = ContinualDistinctCountPerKey(
        keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2), start=0,
        step=STEP, end=180, budget=NOISE_FREE, privacy_unit=_unit(1, 3), output='per_step',
        count='active', testing_seed=1)
    run_stream(stream, t, runner=DIRECT_RUNNER,
               expected=_only_step_2([('crowd', 2, 150.0)]), dead=[],
               extract=lambda r: (r.key, r.step, round(r.value, 6)) if r.step == 2 else None)


def _only_step_2(expected):
    def match(got):
        assert [g for g in got if g is not None] == expected, got
    return match


@pytest.mark.prism
@requires_prism
def test_on_prism():
    records = [('a', 'u1', 1), ('a', 'u1', 2), ('a', 'u2', 61), ('b', 'u2', 62), ('a', 'u1', 65),
               ('a', 'u1', 66)]
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([TimestampedValue(r, r[2]) for r in records])
              .advance_watermark_to(200).advance_watermark_to_infinity())
    t = ContinualDistinctCountPerKey(public_keys=['a', 'b'], start=0, step=STEP, end=120,
                                     output='per_step', count='active', budget=NOISE_FREE,
                                     privacy_unit=_unit(2, 2))
    def run():
        with beam.Pipeline(argv=prism_options(streaming=True)) as p:
            out = p | stream | t
            assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, round(r.value, 6))),
                        equal_to([('a', 0, 1.0), ('b', 0, 0.0), ('a', 1, 2.0), ('b', 1, 1.0)]))
            assert_that(out.dead_letter, equal_to([]), label='no dead letters')

    runners.on_prism_with_one_rerun(run)
