"""The ERM stream driver running ``DPFTRL`` (``ContinualERM(algorithm='dp_ftrl')``'s pure
core): one release per block from block 0 (empty blocks included), element order irrelevant,
late records refused, blocks over n_max uniformly subsampled, the driver's noise addresses,
the Avro record, and the digits utility (ε = 100: final release ≥ 0.85, slow)."""

import io
import random

import fastavro
import numpy as np
import pytest

from beam_dp import noise
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.erm import ERMStreamDriver
from tests.drivers.erm_one_pass import reference
from beam_dp.io import erm as records
from beam_dp.mechanisms.erm import DPFTRL
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import clip_features

LOSS = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
RAW, N_MAX, BLOCK, BLOCKS = 4, 6, 1000, 10


def make_driver(epsilon=2.0):
    return ERMStreamDriver(DPFTRL(LOSS, N_MAX, RAW + 1, epsilon, horizon=BLOCKS, mu=0.1),
                           RAW, StepClock(0, BLOCK, 0, last_step=BLOCKS - 1))


def stream(seed=0, skip=(4,)):
    rng = np.random.default_rng(seed)
    out = []
    for b in range(BLOCKS):
        if b in skip:
            continue
        for _ in range(4 + int(rng.integers(0, 6))):          # up to 9 > n_max: subsampled
            out.append(('record', b * BLOCK + int(rng.integers(0, BLOCK)),
                        rng.normal(size=RAW).tolist(), int(rng.integers(0, 3))))
    return out


def weights(result):
    return [(e.job.job_id, tuple(e.model.weights)) for e in result.events]


def test_one_release_per_block_from_block_zero_and_order_does_not_matter():
    inputs = stream()
    base = reference(make_driver(), 's', inputs, noise.seeded(4))
    assert [e.job.job_id for e in base.events] == [f'ftrl:t{b}' for b in range(BLOCKS)]
    assert all(e.job.algo == 'dp_ftrl' and e.ledger_worst == 2.0 for e in base.events)
    shuffled = list(inputs)
    random.Random(1).shuffle(shuffled)
    assert weights(base) == weights(reference(make_driver(), 's', shuffled, noise.seeded(4)))
    assert weights(base) != weights(reference(make_driver(), 's', inputs, noise.seeded(5)))


def test_late_records_are_refused_and_do_not_change_a_release():
    inputs = stream()
    late = ('record', 2 * BLOCK + 5, [9.0, 9.0, 9.0, 9.0], 1)
    cut = next(i for i, item in enumerate(inputs) if item[1] >= 6 * BLOCK)
    with_late = inputs[:cut] + [('watermark', 6 * BLOCK), late] + inputs[cut:]
    plain = inputs[:cut] + [('watermark', 6 * BLOCK)] + inputs[cut:]
    got = reference(make_driver(), 's', with_late, noise.seeded(1))
    assert [r for _, r in got.rejected] == [late[1:]]
    assert got.rejected[0][0].startswith('late')
    assert weights(got) == weights(reference(make_driver(), 's', plain, noise.seeded(1)))


def test_the_driver_feeds_the_mechanism_sorted_subsampled_clipped_blocks():
    """The driver's blocks (sorted, subsampled with ('subsample', b), bias added, clipped) on
    the mechanism's ('dp_ftrl', b) addresses under ('erm', stream): the same models."""
    driver = make_driver()
    inputs = stream(seed=3)
    got = reference(driver, 's', inputs, noise.seeded(2))
    stream_rng = noise.seeded(2).derive('erm', 's')
    mech = driver.mechanism
    state = mech.init_state()
    for b in range(BLOCKS):
        rows = [((tuple(float(a) for a in x)), y) for _, t, x, y in inputs if t // BLOCK == b]
        x, y = driver._block_data(rows, stream_rng.derive('subsample', b))
        assert len(y) == min(len(rows), N_MAX)
        event, state = mech.release_block(state, x, y, stream_rng.derive('dp_ftrl', b))
        assert np.array_equal(event.model.weights, got.events[b].model.weights)


def test_model_release_record_round_trips_through_avro():
    got = reference(make_driver(), 's', stream(), noise.seeded(0))
    release = records.model_release_from_event('s', got.events[3], 2.0, 3, RAW + 1, 3 * BLOCK)
    assert (release.algo, release.kind, release.level, release.center_release_id) == (
        'dp_ftrl', 'prefix', 0, '')
    assert (release.block_lo, release.block_hi, release.n_nominal) == (3, 4, 4 * N_MAX)
    assert release.eps_cost_per_record == 2.0 and release.privacy == records.EVENT_LEVEL
    buf = io.BytesIO()
    fastavro.writer(buf, records.MODEL_RELEASE_SCHEMA, [records.model_release_to_avro(release)])
    buf.seek(0)
    assert records.model_release_from_avro(next(fastavro.reader(buf))) == release


def _digits_final(eps: float, seed: int) -> float:
    sklearn = pytest.importorskip('sklearn.datasets')
    x_all, y_all = sklearn.load_digits(return_X_y=True)
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=10)
    order = np.random.default_rng(seed).permutation(len(y_all))
    x, y = x_all[order] / 8.0 - 1.0, y_all[order]
    driver = ERMStreamDriver(DPFTRL(loss, 64, 65, eps, horizon=21, mu=0.002,
                                    learning_rate=0.5), 64)
    inputs = [('record', i // 64, x[i].tolist(), int(y[i])) for i in range(1344)]
    events = reference(driver, 'digits', inputs, noise.seeded(seed).derive('ftrl')).events
    assert len(events) == 21
    test_x = clip_features(np.hstack([x[1344:], np.ones((len(y) - 1344, 1))]), 1.0)
    return loss.accuracy(events[-1].model.weights, test_x, y[1344:])


@pytest.mark.slow
@pytest.mark.statistical
def test_digits_final_release_reaches_085_at_eps_100_through_the_driver():
    """benchmarks/erm README: ``ftrl_laplace_auto`` 0.894 final (median of 5 seeds) at ε = 100.
    Threshold: issue 12's 0.85. Control: the same runs at ε = 1 stay far below it."""
    finals = [_digits_final(100.0, seed) for seed in range(5)]
    assert np.median(finals) >= 0.85, finals
    assert np.median([_digits_final(1.0, seed) for seed in range(5)]) < 0.5
