"""Pipeline tier of ``final_share``: on TestStream in streaming mode (DirectRunner named
explicitly), ``ContinualCountPerKey`` / ``ContinualVariancePerKey`` with a one-shot final release
emit exactly the releases of ``beam_dp.testing.replay`` under a seed (the one-shot's draw at its
own address included), whatever the arrival order, with the combined ``noise_stddev`` on the
last step."""

import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualVariancePerKey
from beam_dp import PrivacyBudget
from beam_dp.testing import keyed_events
from beam_dp.testing import release_table
from beam_dp.testing import replay
from tests.helpers import run_stream

pytestmark = pytest.mark.pipeline

STEP = 60
KEYS = [f'k{i}' for i in range(4)]


@pytest.mark.parametrize('cls, budget, kw', [
    (ContinualCountPerKey, PrivacyBudget(epsilon=1.0), {}),
    (ContinualVariancePerKey, PrivacyBudget(rho=0.5), dict(lower=0.0, upper=12.0)),
], ids=['count_eps', 'variance_rho'])
def test_parity_with_replay_under_a_seed(cls, budget, kw):
    events = [(KEYS[(i * 3) % 4], 7 * i % 290, float((i * 13) % 17 - 3)) for i in range(60)]
    stream = TestStream().advance_watermark_to(0)
    for chunk in (events[40:], events[:40]):
        stream = stream.add_elements([TimestampedValue((k, x), t) for k, t, x in chunk])
    stream = stream.advance_watermark_to(400).advance_watermark_to_infinity()
    transform = cls(public_keys=KEYS, start=0, step=STEP, end=300, num_shards=2, budget=budget,
                    final_share=0.5, testing_seed=11, label='Final', **kw)
    driver = transform.driver
    replayed = replay(driver.loop_driver(), keyed_events(
        driver, [(k, t // STEP, x) for k, t, x in events], steps=5), label='Final', seed=11,
        end_input=False).releases
    expected = release_table(replayed)
    assert len(expected) == 20
    last = {r.noise_stddev for r in replayed if r.step == 4}
    assert last == {driver.noise_stddev(4)} and driver.noise_stddev(4) < driver.noise_stddev(3)
    run_stream(stream, transform,
               extract=lambda r: (r.key, r.step, tuple(r.values) or (r.value,), r.noise_stddev),
               expected=[(k, s, tuple(v), driver.noise_stddev(s))
                         for (k, s), v in expected.items()])
