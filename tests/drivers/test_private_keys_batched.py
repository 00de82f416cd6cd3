"""The batched per-step tests of a private-keys shard (``PrivateKeysShard(batched=True)``, the
default) against the scalar path (``batched=False``: every candidate through ``_advance``),
step by step: the same releases and the same candidate states, on addressed sources (seeded,
keyed: the same ``rng.derive`` addresses and words) and on a stateless source like the OS one
(one stream for every address, read through the ``WordBuffer``: the same words in the same
order). Random streams mix heavy keys (selected early), keys with data at most steps, bursty
keys (tested one by one after a burst, then drawn ahead) and keys that appear late."""

import dataclasses

import numpy as np
import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers import private_keys
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.noise import KeyedRandom
from beam_dp.noise import batched
from beam_dp.noise import secret_key
from beam_dp.noise import seeded
from beam_dp.privacy_unit import EventLevel
from tests.mechanisms.test_key_selection_batched import Sequential

STEPS = 40


def shard(metric, epsilon):
    kwargs = dict(bins=('x', 'y')) if metric == 'histogram' else {}
    d = KeyedReleaseDriver(metric=metric, budget=PrivacyBudget(epsilon=1.0),
                           privacy_unit=EventLevel(), clock=StepClock(0, 60),
                           private_keys=PrivateKeys(PrivacyBudget(epsilon=epsilon, delta=1e-6),
                                                    num_shards=1), **kwargs)
    return d.private_shard


def stream(seed, bins):
    """[step → {key: (per-bin totals, new units)}]."""
    rng = np.random.default_rng(seed)
    rates = {f'heavy{i}': 30.0 for i in range(3)}
    rates.update({f'mid{i}': 2.0 for i in range(25)})
    rates.update({f'light{i}': 0.15 for i in range(40)})
    out = []
    for step in range(STEPS):
        per_key = {}
        for key, rate in rates.items():
            if key.startswith('light') and step >= int(key[5:]):     # appear one by one
                rate = 3.0 if rng.random() < 0.1 else rate          # bursts
            elif key.startswith('light'):
                continue
            n = int(rng.poisson(rate))
            if n:
                split = rng.multinomial(n, [1 / bins] * bins).tolist()
                per_key[key] = (tuple(split), n)
        out.append(per_key)
    return out


def run(machine, contributions, make_rng):
    state, rows = machine.init_state(), []
    for per_key in contributions:
        out, state = machine.release_step(state, per_key, make_rng())
        rows.append(out)
        yield rows[-1], state


@pytest.fixture
def noise_key(monkeypatch):
    monkeypatch.setenv('BDP_TEST_BATCHED_KEY', 'c0ffee' * 11)
    secret_key.clear_key_cache()
    yield 'env:BDP_TEST_BATCHED_KEY'
    secret_key.clear_key_cache()


@pytest.mark.parametrize('source', ['seeded', 'keyed', 'stateless'])
@pytest.mark.parametrize('metric, epsilon, seed', [('count', 1.0, 1), ('count', 0.3, 2),
                                                   ('histogram', 1.0, 3)])
def test_batched_tests_equal_the_scalar_path_step_by_step(source, metric, epsilon, seed,
                                                          noise_key, monkeypatch):
    fast = shard(metric, epsilon)
    assert fast.batched
    scalar = dataclasses.replace(fast, batched=False)
    if source == 'seeded':
        makes = [lambda: seeded(seed).derive('T')] * 2
    elif source == 'keyed':
        makes = [lambda: KeyedRandom(noise_key).derive('T')] * 2
    else:   # one stream per run, read one word per block so both runs stay aligned
        monkeypatch.setattr(private_keys, 'shared_words',
                            lambda rng: batched.WordBuffer(rng, 1))
        monkeypatch.setattr(private_keys, 'shared_blocks',
                            lambda rng: batched.BlockBuffer(rng, 1))
        streams = [Sequential(seed), Sequential(seed)]
        makes = [lambda: streams[0], lambda: streams[1]]
    ticks = []
    monkeypatch.setattr(private_keys, 'dlap_tail_tick',
                        lambda *a: ticks.append(a) or batched.dlap_tail_tick(*a))
    contributions = stream(seed, fast.bins)
    selected = 0
    for (rows, state), (old_rows, old_state) in zip(run(fast, contributions, makes[0]),
                                                    run(scalar, contributions, makes[1])):
        assert rows == old_rows
        assert state.candidates == old_state.candidates and state.wake == old_state.wake
        assert state.selected.keys() == old_state.selected.keys()
        selected = len(state.selected)
    assert 3 <= selected < 68 and len(ticks) > 500       # both paths ran many inline tests

