"""§12 criteria 9, 10, 13 on the runner: centres are released objects, sampled jobs are
normalised by the nominal n, bounded state, nothing before the first full window."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import ContinualReleaseSchedule
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import IndependentBlocks
from beam_dp.mechanisms.erm import ReleasedModel
from beam_dp.mechanisms.erm import SlidingWindowChain
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import chained_basic

LOSS = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
PSGD_ = PSGD(LOSS, mu=0.5, passes=1, batch_size=4)
N_MAX, DIM = 8, 3


class RecordingTrainer:
    """Records every call; returns fresh ReleasedModel objects (weights = a call counter)."""

    def __init__(self):
        self.calls, self.returned = [], []

    def release(self, x, y, n_nominal, eps_noise, rng, release_id, center=None):
        self.calls.append(dict(n=len(y), n_nominal=n_nominal, center=center, id=release_id))
        model = ReleasedModel(release_id, np.full(LOSS.n_params(DIM), len(self.calls)), 1.0,
                              eps_noise, n_nominal, None if center is None else
                              center.release_id)
        self.returned.append(model)
        return model


def _blocks(count, seed=0, size=N_MAX):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        x = rng.normal(size=(size, DIM))
        x /= np.maximum(1, np.linalg.norm(x, axis=1, keepdims=True))
        yield x, rng.integers(0, 3, size)


def _release_blocks(schedule, blocks, trainer=None, size=N_MAX):
    mech = ERMRelease(schedule, PSGD_, N_MAX, DIM, trainer=trainer)
    state, events, states = mech.init_state(), [], []
    for block in _blocks(blocks, size=size):
        out, state = mech.step(state, block, noise.seeded(1))
        events.append(out)
        states.append(state)
    return events, states


def test_every_centre_is_an_object_returned_by_an_earlier_release():
    for schedule in (ContinualReleaseSchedule(4, 1.0), chained_basic(4, 1.0),
                     SlidingWindowChain(3, 1.0), ContinualReleaseSchedule(2, 1.0, max_level=1,
                                                                          sampling=True)):
        trainer = RecordingTrainer()
        _release_blocks(schedule, 70, trainer)
        centres = 0
        for n, call in enumerate(trainer.calls):
            if call['center'] is not None:
                centres += 1
                assert any(call['center'] is earlier for earlier in trainer.returned[:n])
                assert isinstance(call['center'], ReleasedModel)
        assert centres > 10


def test_sampled_jobs_keep_the_nominal_normalisation():
    trainer = RecordingTrainer()
    _release_blocks(ContinualReleaseSchedule(2, 0.5, sampling=True), 40, trainer)
    sampled = [c for c in trainer.calls if c['id'].startswith('a4:large') and
               c['n_nominal'] > 2 * N_MAX]
    assert sampled
    for call in sampled:
        assert call['n'] < call['n_nominal']              # subsampled records ...
        assert call['n_nominal'] % N_MAX == 0             # ... normalised by blocks × n_max


def test_sliding_window_state_is_bounded_and_silent_until_full():
    schedule = SlidingWindowChain(3, 1.0)
    events, states = _release_blocks(schedule, 60, RecordingTrainer())
    window = schedule.window_blocks
    assert all(not e for e in events[:window - 1]) and events[window - 1]
    for state in states:
        assert state.retained_records() <= window * N_MAX
        assert len(state.models) <= 3
        assert state.ledger.size() <= 2 * window
    published = [ev for e in events for ev in e if ev.job.publish]
    assert len(published) == 60 - window + 1


def test_real_training_is_seed_reproducible_and_ledger_bounded():
    a, _ = _release_blocks(ContinualReleaseSchedule(4, 1.0), 20)
    b, _ = _release_blocks(ContinualReleaseSchedule(4, 1.0), 20)
    flat_a = [ev for e in a for ev in e]
    flat_b = [ev for e in b for ev in e]
    assert [ev.job for ev in flat_a] == [ev.job for ev in flat_b]
    assert all(np.array_equal(x.model.weights, y.model.weights) for x, y in zip(flat_a, flat_b))
    assert max(ev.ledger_worst for ev in flat_a) <= 1.0
    assert all(ev.model.noise_scale > 0 for ev in flat_a)


def test_independent_blocks_release_every_block_even_empty_ones():
    events, states = _release_blocks(IndependentBlocks(2.0), 6, size=0)
    assert [len(e) for e in events] == [1] * 6
    assert states[-1].retained_records() == 0


def test_update_psgd_trains_centred_jobs_with_its_own_mu_and_honest_scale():
    """Jobs with a centre (PBERM) use update_psgd: noise scale 2L/(μ_u·n)/eps_noise; bases
    keep psgd's μ; the ledger charges the schedule's cost either way."""
    update = PSGD(LOSS, mu=4.0, passes=1, batch_size=4)
    mech = ERMRelease(ContinualReleaseSchedule(2, 1.0), PSGD_, N_MAX, DIM, update_psgd=update)
    state, flat = mech.init_state(), []
    for block in _blocks(9):
        out, state = mech.step(state, block, noise.seeded(3))
        flat.extend(out)
    assert {ev.job.kind for ev in flat} == {'base', 'large', 'small'}
    for ev in flat:
        optimiser = PSGD_ if ev.job.center is None else update
        n = ev.job.blocks * N_MAX
        assert np.isclose(ev.model.noise_scale, optimiser.sensitivity(n) / ev.job.eps_noise)
    assert max(ev.ledger_worst for ev in flat) <= 1.0
    plain, _ = _release_blocks(ContinualReleaseSchedule(2, 1.0), 9)
    bases = [ev for e in plain for ev in e if ev.job.kind == 'base']
    mine = [ev for ev in flat if ev.job.kind == 'base']
    assert [b.model.noise_scale for b in bases] == [b.model.noise_scale for b in mine]


def test_update_psgd_must_share_the_loss():
    other = PSGD(SoftmaxCrossEntropy(clip_norm=2.0, num_classes=3), mu=1.0)
    with pytest.raises(InvalidParamsError, match='update_psgd'):
        ERMRelease(ContinualReleaseSchedule(2, 1.0), PSGD_, N_MAX, DIM, update_psgd=other)
