"""The release DoFns driven by hand (``tests.fuzz.harness``): arrival order and replays.

* Issue 10 item 4: a key's data may reach 'ReleaseSegments' before its seed (Flatten gives no
  order), and its timer may fire before the seed arrives: no crash, the same releases as in the
  seed-first order (sparse and dynamic, fixed seed).
* Replays: a worker restored from a checkpoint re-fires a release timer. With a noise key the
  replayed step releases bit-identical values; with fresh OS randomness it does not (the
  check has power: that is the defect the key removes).
"""

import pytest

from beam_dp.noise import NoiseKeyRef
from beam_dp import Release
from beam_dp import noise
from tests.fuzz.harness import Harness
from tests.fuzz.harness import entry_fn

S = 1_000_000
KEY_ENV = 'BEAM_DP_TEST_NOISE_KEY'

PAYLOADS = {
    'SparseContinualCountPerKey': [(2, (1,)), (2, (1,)), (5, (1,)), (7, (1,))],
    'DynamicCountPerKey': [(2, (('r1', 1),)), (2, (('r2', 1),)), (5, (('r1', -1),)),
                           (7, (('r9', -1),))],
}


def _releases(harness):
    return [(o.key, o.step, o.value, o.noise_stddev) for o in harness.outputs
            if isinstance(o, Release)]


def _drive_harness(name, order):
    _, fn = entry_fn(name, 'ReleaseSegments', testing_seed=5)
    h = Harness(fn, 'a')
    data = [('a', item) for item in PAYLOADS[name]]
    seed = ('a', None)
    if order == 'seed_first':
        for e in [seed] + data:
            h.element(e)
    elif order == 'data_first':
        for e in data[:2] + [seed] + data[2:]:
            h.element(e)
    else:                              # the timer of the data fires before the seed arrives
        for e in data[:2]:
            h.element(e)
        h.advance_to(3 * S + 500_000)
        for e in [seed] + data[2:]:
            h.element(e)
    h.advance_to(20 * S)
    return _releases(h), [o for o in h.outputs if not isinstance(o, Release)]


@pytest.mark.parametrize('name', sorted(PAYLOADS))
def test_data_before_the_seed_and_a_timer_before_the_seed_release_the_same(name):
    reference, ref_other = _drive_harness(name, 'seed_first')
    assert reference, 'no release at all'
    for order in ('data_first', 'timer_first'):
        releases, other = _drive_harness(name, order)
        assert releases == reference, order
        assert len(other) == len(ref_other), order


def _replay(name, stage, shard, elements, release_at, **kw):
    """Processes ``elements``, snapshots the state, fires the timers up to ``release_at`` twice
    from the same snapshot (a restored worker) and returns both releases."""
    _, fn = entry_fn(name, stage, **kw)
    h = Harness(fn, shard)
    for e in elements:
        h.element(e)
    snap = h.snapshot()
    outs = []
    for _ in range(2):
        h.restore(snap)
        h.outputs = []
        h.advance_to(release_at)
        outs.append(_releases(h))
    return outs


def _keyed(name):
    if name == 'ContinualCountPerKey':
        import numpy as np
        elements = [(0, None), (0, (1, np.array([0]), np.array([3])))]
        return 'ReleaseNoisyValues', 0, elements
    return 'ReleaseSegments', 'a', [('a', None)] + [('a', p) for p in PAYLOADS[name]]


@pytest.mark.parametrize('name', ['ContinualCountPerKey', 'SparseContinualCountPerKey',
                                  'DynamicCountPerKey'])
def test_a_replayed_release_timer_is_bit_identical_under_a_noise_key(name, monkeypatch):
    monkeypatch.setenv(KEY_ENV, '5c' * 32)
    noise.secret_key.clear_key_cache()
    stage, shard, elements = _keyed(name)
    first, replay = _replay(name, stage, shard, elements, 9 * S, noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests'))
    assert first and first == replay
    # Power: with fresh OS randomness a replayed step redraws its noise.
    differ = False
    for _ in range(5):
        a, b = _replay(name, stage, shard, elements, 9 * S)
        differ = differ or a != b
    assert differ, 'fresh randomness replayed identically: the check has no power'
    noise.secret_key.clear_key_cache()
