"""Pipeline tier: DynamicCountPerKey (C6 'two_stream' and C9 'fenwick') on TestStream in
streaming mode: deletion-heavy and invalid streams, dead letters that are still counted, parity
with the pure driver, validation."""

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp.transforms.dynamic import DynamicCountPerKey
from beam_dp.testing import key_events
from beam_dp.testing import replay
from tests import helpers
from tests.helpers import NOISE_FREE
from tests.helpers import reason
from tests.helpers import run_stream
from tests.runners import BATCH_RUNNER

pytestmark = pytest.mark.pipeline


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def _step_value(release):
    return release.step, round(release.value, 6)


# Step s covers [s, s+1). Deletion-heavy: 4 inserts at step 2, 3 deletes at step 6 (one of an
# id never inserted), a duplicate insert, a missing id, a re-insert after delete.
UPDATES = [('a', 'r1', 1, 2.5), ('a', 'r2', 1, 2.5), ('a', 'r3', 1, 2.6), ('a', 'r4', 1, 2.7),
           ('a', 'r1', -1, 6.5), ('a', 'r2', -1, 6.5), ('a', 'zz', -1, 6.6),
           ('a', 'r3', 1, 6.7), ('a', None, 1, 6.8), ('a', 'r1', 1, 10.5)]


def _stamped(updates):
    return [((k, rid, op), t) for k, rid, op, t in updates]


def _check_dead(reasons):
    reasons = sorted(reasons)
    assert len(reasons) == 4, reasons
    assert sum(r.startswith('deletion of a record that is not live') for r in reasons) == 1
    assert sum(r.startswith('duplicate insertion of a live record id') for r in reasons) == 1
    assert sum(r.startswith('update without a record id') for r in reasons) == 1
    assert sum(r.startswith('late: step 2 was already released') for r in reasons) == 1


@pytest.mark.parametrize('construction', ['two_stream', 'fenwick'])
def test_deletion_heavy_stream_noise_free(construction):
    t = DynamicCountPerKey(public_keys=['a'], start=0, step=1, end=50, budget=NOISE_FREE,
                           construction=construction)
    # Noise-free: every data step closes a segment; forced closes at steps 1, 3, 15 when empty.
    # step 2: 4 live; step 6: 2 live (r1, r2 deleted; zz invalid; r3 duplicate; None id);
    # step 10: r1 re-inserted → 3. C6 also closes its deletion stream's forced segments.
    expected = {'two_stream': [(1, 0.0), (2, 4.0), (3, 4.0), (6, 2.0), (10, 3.0),
                               (48, 3.0)],
                'fenwick': [(1, 0.0), (2, 4.0), (6, 2.0), (10, 3.0)]}[construction]
    late = [('a', 'r9', 1, 2.9)]
    run_stream(helpers.stream(_stamped(reversed(UPDATES)), 30, _stamped(late), 60), t,
               expected=expected, extract=_step_value, dead=_check_dead, dead_extract=reason)


@pytest.mark.parametrize('construction', ['two_stream', 'fenwick'])
def test_invalid_updates_are_counted_by_the_partitioner(construction):
    """§17.5: a stream of ONLY invalid updates moves the SVT like valid ones would."""
    t = DynamicCountPerKey(public_keys=['a'], start=0, step=1, budget=NOISE_FREE,
                           construction=construction)
    invalid = [(4, (('x', -1),)), (7, ((None, 1),))]
    out = replay(t.loop_driver(), key_events(t.clock, 'a', invalid, 11), label='L', seed=0,
                 end_input=False)
    assert 4 in [r.step for r in out.releases] and 7 in [r.step for r in out.releases]
    assert all(r.value == 0.0 for r in out.releases)
    assert len(out.dead_letters) == 2


@pytest.mark.parametrize('construction', ['two_stream', 'fenwick'])
def test_parity_with_the_pure_driver_under_a_seed(construction):
    t = DynamicCountPerKey(public_keys=['a'], start=0, step=1, end=300,
                           budget=PrivacyBudget(epsilon=2.0), c_theta=1.0,
                           construction=construction, testing_seed=3, label='Dyn')
    # Sliding window: one insert per 3 steps, each deleted 30 steps later.
    updates = []
    for i in range(60):
        updates.append(('a', f'r{i}', 1, 3 * i + 0.5))
        updates.append(('a', f'r{i}', -1, 3 * i + 30.5))
    updates = [u for u in updates if u[3] < 290]
    batches = [(int(tt), ((rid, op),)) for _, rid, op, tt in updates]
    ref = replay(t.loop_driver(), key_events(t.clock, 'a', batches, 299), label='Dyn', seed=3,
                 end_input=False).releases
    expected = [(r.step, round(r.value, 6)) for r in ref]
    assert len(expected) >= 3
    stream = TestStream().advance_watermark_to(0)
    half = len(updates) // 2
    for chunk in (updates[half:], updates[:half]):          # out of order across steps
        stream = stream.add_elements([tv((k, rid, op), tt) for k, rid, op, tt in chunk])
    stream = stream.advance_watermark_to(310).advance_watermark_to_infinity()
    run_stream(stream, t, expected=expected, extract=_step_value)


@pytest.mark.parametrize('kwargs, match', [
    ({'construction': 'tree'}, "construction must be one of 'two_stream', 'fenwick'"),
    ({'update_fn': 3}, 'update_fn must be callable'),
    ({'budget': PrivacyBudget(rho=1.0)}, 'pure epsilon budget'),
    ({'c_theta': -1}, 'c_theta must be positive'),
])
def test_validation(kwargs, match):
    params = dict(public_keys=['a'], start=0, step=1, budget=PrivacyBudget(epsilon=1.0))
    params.update(kwargs)
    with pytest.raises(InvalidParamsError, match=match):
        DynamicCountPerKey(**params)


def test_bad_op_is_dead_lettered_at_extraction():
    stream = (TestStream().advance_watermark_to(0).add_elements([tv(('a', 'r', 7), 1)])
              .advance_watermark_to(5).advance_watermark_to_infinity())
    t = DynamicCountPerKey(public_keys=['a'], start=0, step=1, end=4, budget=NOISE_FREE)
    run_stream(stream, t, dead=lambda reasons: _assert_one(reasons, "op must be +1/'insert'"),
               dead_extract=reason)


def _assert_one(reasons, prefix):
    assert len(reasons) == 1 and reasons[0].startswith(prefix), reasons


def test_batch_input_and_an_unhashable_record_id_is_dead_lettered_at_extraction():
    records = [('a', 'r1', 1, 2.5), ('a', 'r2', 1, 2.5), ('a', ['r3'], 1, 2.5),
               ('a', 'r1', -1, 6.5)]
    t = DynamicCountPerKey(public_keys=['a'], start=0, step=1, end=10, budget=NOISE_FREE,
                           construction='fenwick')
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = (p | beam.Create(records) | beam.Map(lambda r: TimestampedValue(r[:3], r[3]))
               | t)
        assert_that(out.releases | 'Extract' >> beam.Map(lambda r: (r.step, r.value)),
                    equal_to([(1, 0.0), (2, 2.0), (6, 1.0)]), label='CheckReleases')
        assert_that(out.dead_letter | 'Reasons' >> beam.Map(lambda d: (d.stage, d.reason[:28])),
                    equal_to([('ExtractAndValidate', 'record_id must be hashable, ')]),
                    label='CheckDead')
