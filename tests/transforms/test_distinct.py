"""``ContinualDistinctCountPerKey``: exact distinct units per key (noise free), repeats dropped
silently and keys beyond K dead-lettered, the calibration (m = S = 1), event level refused, the
bounded per-unit state, seeded parity with ``beam_dp.testing.replay``, private keys counting a
heavy unit once, and a run on Prism."""

import pickle
import random

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualDistinctCountPerKey
from beam_dp import EventLevel
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel
from beam_dp.drivers.bounding import UnitUsage
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests.helpers import NOISE_FREE
from tests.helpers import run_stream
from tests.runners import DIRECT_RUNNER
from tests.runners import prism_options
from tests.runners import requires_prism
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

STEP = 60


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def _unit(k=2, **kwargs):
    return UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=k, max_steps_per_unit=1, **kwargs)


def _exact(records, steps, k):
    """{(key, step): cumulative distinct units} with each unit's first k keys (time order)."""
    held, firsts = {}, []
    for key, unit, seconds in sorted(records, key=lambda r: r[2]):
        keys = held.setdefault(unit, [])
        if key in keys or len(keys) >= k:
            continue
        keys.append(key)
        firsts.append((key, seconds // STEP))
    return {(key, s): sum(1 for k2, s2 in firsts if k2 == key and s2 <= s)
            for key in ('a', 'b', 'c') for s in range(steps)}


def test_exact_distinct_counts_repeats_silent_and_keys_over_k_dead_lettered():
    records = ([('a', 'u1', 1)] * 5 + [('a', 'u2', 70), ('b', 'u1', 70), ('a', 'u1', 130),
                                       ('b', 'u3', 125), ('b', 'u3', 126)]
               + [('c', 'u1', 80)])                         # u1's third key: over K = 2
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(r, r[2]) for r in records])
              .advance_watermark_to(300).advance_watermark_to_infinity())
    t = ContinualDistinctCountPerKey(public_keys=['a', 'b', 'c'], start=0, step=STEP, end=180,
                                     budget=NOISE_FREE, privacy_unit=_unit(2))
    expected = _exact(records, 3, 2)
    assert expected[('a', 2)] == 2 and expected[('b', 2)] == 2 and expected[('c', 2)] == 0
    run_stream(stream, t, expected=[(k, s, float(v)) for (k, s), v in expected.items()],
               extract=lambda r: (r.key, r.step, round(r.value, 6)),
               dead=[('BoundContributions', 'contribution bound: unit already contributed to '
                      'max_keys_per_unit=2 keys')])


def test_calibration_is_k_keys_once_and_m_s_are_replaced():
    t = ContinualDistinctCountPerKey(
        public_keys=['a'], start=0, step=STEP, end=600, budget=PrivacyBudget(epsilon=1.0),
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=3, max_contributions_per_step=5,
                               max_steps_per_unit=40, max_total_contributions=7))
    unit = t.driver.privacy_unit
    assert (unit.max_contributions_per_step, unit.max_steps_per_unit) == (1, 1)
    assert unit.max_total_contributions is None          # C = 7 ≥ K = 3 binds nothing
    assert t.driver.sensitivity()[0] == 3
    capped = ContinualDistinctCountPerKey(
        public_keys=['a'], start=0, step=STEP, end=600, budget=PrivacyBudget(epsilon=1.0),
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=1,
                               max_total_contributions=2))
    assert capped.driver.sensitivity()[0] == 2
    # the same budget and unit on ContinualCountPerKey (m·S·K = 600) is 200× noisier in L1
    count = ContinualCountPerKey(
        public_keys=['a'], start=0, step=STEP, end=600, budget=PrivacyBudget(epsilon=1.0),
        privacy_unit=UserLevel(unit_fn=len, max_keys_per_unit=3, max_contributions_per_step=5,
                               max_steps_per_unit=40))
    assert count.driver.sensitivity()[0] == 600
    assert t.driver.noise_stddev(9) < count.driver.noise_stddev(9) / 50


@pytest.mark.parametrize('unit', [None, EventLevel()])
def test_event_level_is_refused_with_a_pointer(unit):
    with pytest.raises(InvalidParamsError, match='ContinualCountPerKey'):
        ContinualDistinctCountPerKey(public_keys=['a'], start=0, step=STEP, end=60,
                                     budget=NOISE_FREE, privacy_unit=unit)


def test_value_arguments_are_refused_by_name():
    with pytest.raises(InvalidParamsError, match='lower'):
        ContinualDistinctCountPerKey(public_keys=['a'], start=0, step=STEP, end=60,
                                     budget=NOISE_FREE, privacy_unit=_unit(), lower=0)


def test_per_unit_state_holds_at_most_k_keys_for_ever():
    """The "seen" record of a unit: ≤ K key ids, whatever it sends (measured: entries and
    pickled bytes do not grow after the K-th key)."""
    bound = _unit(3).__class__(unit_fn=len, max_keys_per_unit=3, max_steps_per_unit=1)
    record, sizes = (), []
    rng = random.Random(0)
    for i in range(2000):
        usage = UnitUsage.decode(bound, record, keep_keys=True)
        key = f'key{rng.randrange(50)}'
        if not usage.holds(key):
            usage.offer(key, i // 10)
        record = usage.record()
        sizes.append(len(pickle.dumps(record)))
    assert isinstance(record, tuple) and len(record) == 1 + 3       # total + 3 keys
    assert all(len(entry) == 1 for entry in record[1:])            # each key full: (key,)
    assert max(sizes) == sizes[-1] <= 80, max(sizes)
    # without keep_keys the record collapses to the exhausted marker (then a repeat of a held
    # key could not be told from a new key)
    usage = UnitUsage.decode(bound, record)
    assert usage.record() == 1


def test_seeded_parity_with_replay():
    keys = ['a', 'b', 'c']
    rng = random.Random(3)
    records = []
    for u in range(60):
        for key in rng.sample(keys, 2):                    # ≤ K keys per unit
            step = rng.randrange(5)
            records += [(key, f'u{u}', step * STEP + rng.randrange(STEP))] * rng.randint(1, 3)
    t = ContinualDistinctCountPerKey(public_keys=keys, start=0, step=STEP, end=300,
                                     budget=PrivacyBudget(epsilon=1.0), privacy_unit=_unit(2),
                                     testing_seed=7, label='Distinct')
    firsts = {(k, u): s // STEP for k, u, s in records}    # one step per (unit, key) here
    expected = release_table(replay(t.driver.loop_driver(), keyed_events(
        t.driver, [(k, s, None) for (k, _), s in sorted(firsts.items())], steps=5),
        label='Distinct', seed=7, end_input=False).releases)
    shuffled = list(records)
    rng.shuffle(shuffled)
    stream = TestStream().advance_watermark_to(0)
    for chunk in (shuffled[::2], shuffled[1::2]):
        stream = stream.add_elements([tv(r, r[2]) for r in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    run_stream(stream, t, extract=lambda r: (r.key, r.step, r.value),
               expected=[(k, s, v[0]) for (k, s), v in expected.items()])


def test_private_keys_count_a_heavy_unit_once():
    # 'heavy': one unit with 300 records → 1 distinct unit, never selected; 'crowd': 150
    # units, selected (at the latest by the known end's final test), its value 150.
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(('heavy', 'u0'), 1 + i % 170) for i in range(300)]
                            + [tv(('crowd', f'u{i + 1}'), 2 + i) for i in range(150)])
              .advance_watermark_to(400).advance_watermark_to_infinity())
    t = ContinualDistinctCountPerKey(
        keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2), start=0,
        step=STEP, end=180, budget=NOISE_FREE, privacy_unit=_unit(1), testing_seed=1)
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream | t
        assert_that(out.releases | beam.Filter(lambda r: r.step == 2)
                    | beam.Map(lambda r: (r.key, round(r.value, 6))),
                    equal_to([('crowd', 150.0)]))
        assert_that(out.dead_letter, equal_to([]), label='no dead letters')


@pytest.mark.prism
@requires_prism
def test_on_prism():
    records = [('a', 'u1', 1), ('a', 'u1', 2), ('a', 'u2', 61), ('b', 'u2', 62), ('a', 'u1', 65)]
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([tv(r, r[2]) for r in records])
              .advance_watermark_to(200).advance_watermark_to_infinity())
    t = ContinualDistinctCountPerKey(public_keys=['a', 'b'], start=0, step=STEP, end=120,
                                     budget=NOISE_FREE, privacy_unit=_unit(2))
    with beam.Pipeline(argv=prism_options(streaming=True)) as p:
        out = p | stream | t
        assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, round(r.value, 6))),
                    equal_to([('a', 0, 1.0), ('b', 0, 0.0), ('a', 1, 2.0), ('b', 1, 1.0)]))
