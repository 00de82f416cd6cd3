"""The batched per-step selection test (``beam_dp.noise.batched``): ``dlap_tail_tick`` makes the
same source calls in the same order as ``bernoulli_dlap_tail`` and returns the same result;
``WordBuffer`` hands out exactly the words of its source in order; a ``SecureRandom`` gets a
buffer, addressed sources never do; and the law of the buffered tick on the OS source is
Bernoulli(P[DLap ≥ k]) (statistical, with power against a 30 % mis-scaled sampler)."""

import math

import numpy as np
import pytest

from beam_dp.noise import KeyedRandom
from beam_dp.noise import RandomSource
from beam_dp.noise import SecureRandom
from beam_dp.noise import seeded
from beam_dp.noise import batched
from beam_dp.noise.batched import BlockBuffer
from beam_dp.noise.batched import WordBuffer
from beam_dp.noise.batched import dlap_tail_tick
from beam_dp.noise.batched import shared_blocks
from beam_dp.noise.batched import shared_words
from beam_dp.noise.geometric import bernoulli_dlap_tail
from beam_dp.noise.geometric import dlap_tail
from beam_dp.noise.samplers import _bernoulli_exp_scalar
from beam_dp.noise.samplers import _scale_nd


class Recording(RandomSource):
    """One PCG64 stream; logs every call (``word``, ``randbits(k)``, ``uint64(n)``)."""

    def __init__(self, seed):
        self._bits = np.random.PCG64(seed)
        self.calls = []

    def uint64(self, size):
        self.calls.append(('uint64', int(size)))
        return self._bits.random_raw(int(size)).astype(np.uint64)

    def word(self):
        self.calls.append(('word',))
        return int(self._bits.random_raw(1)[0])

    def randbits(self, k):
        self.calls.append(('randbits', k))
        return super().randbits(k)

    def derive(self, *labels):
        return self


SCALES = [2.0, 0.7, 13 / 3, 1e-3, 1234.5678]


@pytest.mark.parametrize('scale', SCALES)
def test_tick_makes_the_same_calls_and_returns_the_same_result_as_bernoulli_dlap_tail(scale):
    n, d = _scale_nd(scale)
    hits = 0
    for seed in range(60):
        for k in (-40, -3, 0, 1, 2, 3, 7, 31, 64, 150):
            a, b = Recording(seed * 1000 + k + 50), Recording(seed * 1000 + k + 50)
            expected = bernoulli_dlap_tail(a, scale, k)
            assert dlap_tail_tick(b, n, d, k) == expected, (scale, seed, k)
            assert a.calls == b.calls and a.calls, (scale, seed, k)
            hits += expected
    assert 0 < hits < 600                                # both outcomes occur


@pytest.mark.parametrize('num, den', [(0, 1), (1, 1), (5, 2), (7, 3), (2**69, 2**70 + 3),
                                      (3 * 2**70, 2**70 + 3), (10**30, 10**29 + 7)])
def test_exp_makes_the_same_calls_as_the_scalar_sampler_also_beyond_64_bits(num, den):
    calls = set()
    for seed in range(200):
        a, b = Recording(seed), Recording(seed)
        assert batched._exp(b, num, den) == _bernoulli_exp_scalar(a, num, den)
        assert a.calls == b.calls
        calls.update(c[0] for c in a.calls)
    if den > 2**64 and num < 4 * den:                  # the fraction's test is reached
        assert 'randbits' in calls                       # the > 64-bit branch was taken


class Sequential(SecureRandom):
    """A stateless source (derive is the identity) whose words are one seeded stream: what
    the OS source looks like, but reproducible."""

    def __init__(self, seed):
        self._bits = np.random.PCG64(seed)

    def uint64(self, size):
        return self._bits.random_raw(int(size)).astype(np.uint64)

    def word(self):
        return int(self.uint64(1)[0])


@pytest.mark.parametrize('kind', [WordBuffer, BlockBuffer])
@pytest.mark.parametrize('block', [1, 7, 4096])
def test_buffer_hands_out_the_source_words_in_order(kind, block):
    buffered, plain = kind(Sequential(5), block), Sequential(5)
    rng = np.random.default_rng(block)
    for _ in range(300):
        if rng.random() < 0.5:
            assert buffered.word() == plain.word()
        else:
            size = int(rng.integers(0, 20 if rng.random() < 0.9 else 9000))
            got = buffered.uint64(size)
            assert got.dtype == np.uint64 and got.tolist() == plain.uint64(size).tolist()
    assert buffered.derive('select', 'k') is buffered and buffered.is_secure
    assert buffered.randbits(130) == plain.randbits(130)
    with pytest.raises(TypeError, match='never pickled'):
        __import__('pickle').dumps(buffered)
    assert repr(buffered).startswith(kind.__name__)


def test_ticks_on_a_buffer_equal_ticks_on_the_stream():
    n, d = _scale_nd(2.0)
    buffered, plain = WordBuffer(Sequential(9), 16), Sequential(9)
    gaps = np.random.default_rng(1).integers(-5, 60, 3000).tolist()
    assert [dlap_tail_tick(buffered, n, d, k) for k in gaps] == \
        [bernoulli_dlap_tail(plain, 2.0, k) for k in gaps]


def test_only_the_stateless_os_source_gets_a_buffer(monkeypatch):
    assert isinstance(shared_words(SecureRandom()), WordBuffer)
    assert isinstance(shared_blocks(SecureRandom()), BlockBuffer)
    monkeypatch.setenv('BDP_TEST_BATCHED_KEY', 'c0ffee' * 11)
    for addressed in (seeded(1), KeyedRandom('env:BDP_TEST_BATCHED_KEY')):
        assert shared_words(addressed) is None and shared_blocks(addressed) is None


def _frequency_pvalues(scale_used, draws=20_000):
    """Two-sided p-values of the buffered OS tick's hit frequency against P[DLap(2) ≥ k]."""
    n, d = _scale_nd(scale_used)
    out = []
    for k in (-1, 1, 3):
        src = shared_words(SecureRandom())
        hits = sum(dlap_tail_tick(src, n, d, k) for _ in range(draws))
        q = dlap_tail(2.0, k)
        z = (hits - draws * q) / math.sqrt(draws * q * (1 - q))
        out.append(math.erfc(abs(z) / math.sqrt(2)))
    return out


@pytest.mark.statistical
def test_buffered_tick_has_the_law_and_power_against_a_wrong_scale():
    assert min(_frequency_pvalues(2.0)) > 1e-4
    assert min(_frequency_pvalues(2.0 * 1.3)) < 1e-6     # 30 % off: rejected

