"""Public keys from a PCollection (issue 23 item 3): ``SelectKeys(...).keys`` (or any key
PCollection) passed as ``public_keys`` is read as a side input: every key of the set is released
at every step, records of other keys are dead-lettered, no selection cost is charged, and the
job matches ``beam_dp.testing.replay`` of its driver under a seed."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualDistinctCountPerKey
from beam_dp import PrivacyBudget
from beam_dp import SelectKeys
from beam_dp import UserLevel
from beam_dp.drivers.keyed import PrivatePartial
from beam_dp.drivers.private_keys import KeySetInput
from beam_dp.drivers.private_keys import ShardKeys
from beam_dp.testing import Element
from beam_dp.testing import Watermark
from beam_dp.testing import replay
from tests.helpers import NOISE_FREE
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

STEP = 60


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def _stream(records, until=300):
    return (TestStream().advance_watermark_to(0)
            .add_elements([tv(r, t) for r, t in records])
            .advance_watermark_to(until).advance_watermark_to_infinity())


def test_a_key_pcollection_is_public_keys_every_key_every_step_and_others_dead_lettered():
    records = [(('a', 1), 1), (('a', 1), 70), (('c', 1), 5), (('b', 2), 61)]
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        keys = p | 'Keys' >> beam.Create(['a', 'b', 'z'])
        out = p | _stream(records) | ContinualCountPerKey(
            public_keys=keys, start=0, step=STEP, end=180, budget=NOISE_FREE, num_shards=2)
        assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, round(r.value, 6))),
                    equal_to([('a', 0, 1.0), ('b', 0, 0.0), ('z', 0, 0.0),
                              ('a', 1, 2.0), ('b', 1, 1.0), ('z', 1, 0.0),
                              ('a', 2, 2.0), ('b', 2, 1.0), ('z', 2, 0.0)]))
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.reason)),
                    equal_to([('KeepPublicKeys', "key 'c' is not in the public key set")]),
                    label='dead')


def test_select_keys_output_feeds_a_continual_distinct_count():
    # 'popular' has 80 distinct users, 'rare' 1: SelectKeys (bounded history) keeps 'popular';
    # the continual distinct count on the stream then releases it (and only it) every step.
    history = [('popular', f'u{i}') for i in range(80)] + [('rare', 'v0')]
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_steps_per_unit=1)
    stream = [(('popular', f'u{i}'), 1 + i) for i in range(30)] + [(('rare', 'v1'), 3)]
    with beam.Pipeline(runner=BATCH_RUNNER) as p:      # SelectKeys runs on bounded input
        selected = p | 'History' >> beam.Create(history) | SelectKeys(
            budget=PrivacyBudget(epsilon=2.0, delta=1e-6), privacy_unit=unit, testing_seed=3)
        rows = (p | 'Stream' >> beam.Create(stream)
                | beam.Map(lambda rt: TimestampedValue(rt[0], rt[1])))
        out = rows | ContinualDistinctCountPerKey(
            public_keys=selected.keys, start=0, step=STEP, end=120, budget=NOISE_FREE,
            privacy_unit=unit)
        assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, round(r.value, 6))),
                    equal_to([('popular', 0, 30.0), ('popular', 1, 30.0)]))
        assert_that(out.dead_letter | beam.Map(lambda d: d.reason),
                    equal_to(["key 'rare' is not in the public key set"]), label='dead')


def test_no_selection_cost_and_release_metadata_are_the_release_budget():
    with beam.Pipeline(runner=DIRECT_RUNNER) as p:
        t = ContinualCountPerKey(public_keys=p | beam.Create(['a']), start=0, step=STEP,
                                 end=120, budget=PrivacyBudget(epsilon=0.5))
    assert isinstance(t.driver.private_keys, KeySetInput) and not t.driver.selects_keys
    assert [label for label, _ in t.privacy_costs()] == [t.label]
    meta = t.driver.release_metadata()
    assert (meta['epsilon'], meta['delta']) == (0.5, 0.0)


def test_seeded_parity_with_replay():
    keys = ['k1', 'k2', 'k3', 'k4']
    records = [((keys[i % 4], i), (7 * i) % 290) for i in range(120)] + [(('zz', 0), 10)]
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        t = ContinualCountPerKey(public_keys=p | 'Keys' >> beam.Create(keys), start=0,
                                 step=STEP, end=300, budget=PrivacyBudget(epsilon=1.0),
                                 num_shards=2, testing_seed=5, label='Side')
        driver = t.driver
        key_set = driver.private_keys
        events = [Element(s, None) for s in range(2)]
        events += [Element(s, ShardKeys(ks)) for s, ks in sorted(key_set.shards(keys).items())]
        per = {}
        for (key, _), ts in records:
            if key in keys:
                slot = per.setdefault((key_set.shard_of(key), ts // STEP), {})
                n = slot.get(key, ((0,), 0))[0][0] + 1
                slot[key] = ((n,), n)
        events += [Element(s, PrivatePartial(step, payload))
                   for (s, step), payload in sorted(per.items())]
        events.append(Watermark(driver.clock.release_time_micros(4)))
        expected = [(r.key, r.step, r.value) for r in replay(
            driver.loop_driver(), events, label='Side', seed=5, end_input=False).releases]
        assert len(expected) == 4 * 5 and len({v for *_, v in expected}) > 5
        out = p | _stream(records, until=400) | t
        assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, r.value)),
                    equal_to(expected))
    assert np.isfinite([v for *_, v in expected]).all()
