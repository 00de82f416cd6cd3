"""The ERM stream driver (§12 criteria 12–14 at driver level): blocks in index order, order
independence, late and malformed records refused, subsample/pad to n_max, data-independent
release schedule, the reference run equal to a DoFn-style loop, and the Avro records."""

import io
import random

import fastavro
import numpy as np
import pytest

from beam_dp import noise
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.erm import ERMStreamDriver
from tests.drivers.erm_one_pass import reference
from beam_dp.errors import InvalidParamsError
from beam_dp.io import erm as records
from beam_dp.mechanisms.erm import NOT_DP_LABEL
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import ContinualReleaseSchedule
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import IndependentBlocks
from beam_dp.mechanisms.erm import SlidingWindowChain
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy

LOSS = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
RAW, N_MAX, BLOCK = 4, 6, 1000


def make_driver(schedule=None, lateness=0, psgd=None):
    mech = ERMRelease(schedule or ContinualReleaseSchedule(2, 1.0),
                      psgd or PSGD(LOSS, mu=0.5, passes=2, batch_size=2), N_MAX, RAW + 1)
    return ERMStreamDriver(mech, RAW, StepClock(0, BLOCK, lateness))


def stream(blocks=10, per_block=5, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for b in range(blocks):
        for _ in range(per_block + int(rng.integers(0, 4))):
            out.append(('record', b * BLOCK + int(rng.integers(0, BLOCK)),
                        rng.normal(size=RAW).tolist(), int(rng.integers(0, 3))))
    return out


def weights(result):
    return [(e.job.job_id, tuple(e.model.weights)) for e in result.events]


def test_element_order_within_and_across_blocks_does_not_matter():
    inputs = stream()
    base = reference(make_driver(), 's', inputs, noise.seeded(4))
    shuffled = list(inputs)
    random.Random(1).shuffle(shuffled)
    again = reference(make_driver(), 's', shuffled, noise.seeded(4))
    assert weights(base) == weights(again) and len(base.events) > 5


def test_late_records_are_refused_and_never_change_a_release():
    inputs = stream(blocks=6)
    clean = reference(make_driver(), 's', inputs + [('watermark', 6 * BLOCK)], noise.seeded(2))
    # the two late records arrive after blocks 0..2 were released
    ordered = sorted(inputs[:], key=lambda r: r[1])
    late = ([r for r in ordered if r[1] < 3 * BLOCK] + [('watermark', 3 * BLOCK)]
            + [('record', BLOCK + 5, [9.0] * RAW, 1), ('record', 2 * BLOCK + 5, [1.0] * RAW, 0)]
            + [r for r in ordered if r[1] >= 3 * BLOCK] + [('watermark', 6 * BLOCK)])
    got = reference(make_driver(), 's', late, noise.seeded(2))
    assert [reason.split(':')[0] for reason, _ in got.rejected] == ['late', 'late']
    assert weights(got) == weights(clean)


def test_allowed_lateness_keeps_a_block_open():
    driver = make_driver(lateness=BLOCK // 2)
    assert driver.release_time(0) == BLOCK + BLOCK // 2
    assert driver.last_final_block(BLOCK + BLOCK // 2 - 1) == -1
    assert driver.last_final_block(BLOCK + BLOCK // 2) == 0


def test_malformed_records_go_to_dead_letters():
    driver = make_driver()
    bad = [(5, [1.0, 2.0], 0), (5, [1.0, 2.0, 3.0, float('nan')], 0), (5, [0.0] * RAW, 7),
           (5, [0.0] * RAW, True), ('x', [0.0] * RAW, 1), (-3, [0.0] * RAW, 1), 'garbage']
    state, rejected = driver.add(driver.init_state(), bad)
    assert len(rejected) == len(bad) and state.pending_records() == 0
    assert all(reason.startswith(('malformed', 'event time is before')) for reason, _ in rejected)


def test_a_last_step_ends_the_stream():
    mech = ERMRelease(IndependentBlocks(1.0), PSGD(LOSS, mu=1.0, passes=1), N_MAX, RAW + 1)
    driver = ERMStreamDriver(mech, RAW, StepClock(0, BLOCK, 0, last_step=2))
    state, rejected = driver.add(driver.init_state(), [(3 * BLOCK, [0.0] * RAW, 1)])
    assert rejected[0][0].startswith('event time is after the last released step')
    events, state = driver.close_through(state, 10, noise.seeded(0), 's')
    assert len(events) == 3 and state.next_block == 3


def test_blocks_are_subsampled_or_padded_to_n_max_and_released_on_schedule():
    calls = []

    class Spy(PSGD):
        def release(self, x, y, n_nominal, eps_noise, rng, release_id, center=None):
            calls.append((release_id, len(y), n_nominal, float(np.linalg.norm(x, axis=1).max(
                initial=0))))
            return super().release(x, y, n_nominal, eps_noise, rng, release_id, center)

    spy = Spy(LOSS, mu=0.5, passes=1)
    driver = make_driver(IndependentBlocks(1.0), psgd=spy)
    heavy = [('record', 10, [5.0] * RAW, 1)] * 40 + [('record', 2 * BLOCK + 1, [0.1] * RAW, 2)]
    result = reference(driver, 's', heavy, noise.seeded(0), until_block=9)
    assert [c[1] for c in calls[:3]] == [N_MAX, 0, 1]        # subsampled, empty, one record
    assert all(c[2] == N_MAX for c in calls)                  # nominal n: data-independent
    assert all(c[3] <= 1.0 + 1e-12 for c in calls)            # clipped with the bias column
    assert len(result.events) == 10 and result.state.next_block == 10
    empty = reference(make_driver(IndependentBlocks(1.0)), 's', [], noise.seeded(0),
                      until_block=9)
    assert [e.job.job_id for e in empty.events] == [e.job.job_id for e in result.events]


def test_reference_equals_a_dofn_style_loop():
    driver = make_driver(SlidingWindowChain(2, 1.0))
    inputs = stream(blocks=8)
    ref = reference(driver, 'k', inputs, noise.seeded(5))
    state, events = driver.init_state(), []
    for item in sorted(inputs, key=lambda r: r[1]):           # one element at a time
        block = driver.clock.step_of(item[1])
        if block > state.next_block:                          # the timer of the previous block
            out, state = driver.close_through(state, block - 1, noise.seeded(5), 'k')
            events.extend(out)
        state, bad = driver.add(state, [item[1:]])
        assert not bad
    out, state = driver.close_through(state, 7, noise.seeded(5), 'k')
    events.extend(out)
    assert [(e.job.job_id, tuple(e.model.weights)) for e in events] == weights(ref)
    assert state.mech.retained_records() <= 3 * N_MAX         # w = 3 blocks of w0


def test_driver_rejects_a_dimension_mismatch():
    mech = ERMRelease(ContinualReleaseSchedule(2, 1.0), PSGD(LOSS, mu=1.0), N_MAX, RAW + 1)
    with pytest.raises(InvalidParamsError, match='feature_dim'):
        ERMStreamDriver(mech, RAW + 1)


def _roundtrip(schema, rows):
    buf = io.BytesIO()
    fastavro.writer(buf, schema, rows)
    buf.seek(0)
    return list(fastavro.reader(buf))


def test_model_release_and_ledger_rows_roundtrip_through_avro():
    driver = make_driver()
    result = reference(driver, 's', stream(blocks=4), noise.seeded(3))
    event = result.events[-1]
    release = records.model_release_from_event('s', event, 1.0, 3, RAW + 1,
                                                driver.block_start(event.job.lo))
    assert release.privacy == records.EVENT_LEVEL
    assert release.center_release_id == (event.job.center or '')
    back = _roundtrip(records.MODEL_RELEASE_SCHEMA, [records.model_release_to_avro(release)])
    assert records.model_release_from_avro(back[0]) == release
    row = records.ledger_row_from_event('s', event, 1.0)
    back = _roundtrip(records.ERM_LEDGER_SCHEMA, [records.ledger_row_to_avro(row)])
    assert records.ledger_row_from_avro(back[0]) == row and row.worst_bound <= 1.0


def test_reproduce_paper_outputs_are_labelled_not_dp():
    driver = make_driver(psgd=PSGD.paper(LOSS))
    result = reference(driver, 's', stream(blocks=4), noise.seeded(3))
    assert result.events and all(e.model.not_dp for e in result.events)
    release = records.model_release_from_event('s', result.events[0], 1.0, 3, RAW + 1, 0)
    assert release.privacy == NOT_DP_LABEL
    assert records.ledger_row_from_event('s', result.events[0], 1.0).privacy == NOT_DP_LABEL


def test_stream_state_pickles_for_beam_state():
    import pickle
    driver = make_driver(SlidingWindowChain(2, 1.0))
    result = reference(driver, 's', stream(blocks=5), noise.seeded(1))
    state = pickle.loads(pickle.dumps(result.state))
    more = [('record', 5 * BLOCK + 3, [0.5] * RAW, 1)]
    a = driver.close_through(driver.add(result.state, [more[0][1:]])[0], 5, noise.seeded(1), 's')
    b = driver.close_through(driver.add(state, [more[0][1:]])[0], 5, noise.seeded(1), 's')
    assert [tuple(e.model.weights) for e in a[0]] == [tuple(e.model.weights) for e in b[0]]
