"""``RandomSource.word`` / ``randbits``: the one-word scalar path returns the words ``uint64``
returns, from the same calls (seeded streams and every sampler's output are unchanged)."""

import os

import numpy as np
import pytest

from beam_dp.noise.keyed import KeyedRandom
from beam_dp.noise.rng import SecureRandom, SeededRandom


def _old_randbits(rng, k):
    words = (k + 63) // 64
    value = 0
    for word in rng.uint64(words).tolist():
        value = (value << 64) | int(word)
    return value >> (64 * words - k)


@pytest.mark.parametrize('make', [lambda: SeededRandom(7, ('a',)),
                                  lambda: KeyedRandom('env:BEAM_DP_TEST_WORD_KEY').derive('x', 3)])
def test_randbits_equals_the_multiword_formula_on_the_same_stream(make, monkeypatch):
    monkeypatch.setenv('BEAM_DP_TEST_WORD_KEY', '6b' * 32)
    new, old = make(), make()
    for k in list(range(1, 130)) * 3:
        assert new.randbits(k) == _old_randbits(old, k)
    assert new.uint64(4).tolist() == old.uint64(4).tolist()     # same words consumed


def test_secure_word_is_the_word_uint64_reads(monkeypatch):
    blocks = [bytes(range(i, i + 8)) for i in range(0, 80, 8)]
    served = iter(blocks + blocks)
    monkeypatch.setattr(os, 'urandom', lambda n: b''.join(next(served) for _ in range(n // 8)))
    rng = SecureRandom()
    words = [rng.word() for _ in range(len(blocks))]
    expected = [int(rng.uint64(1)[0]) for _ in range(len(blocks))]
    assert words == expected
    assert all(isinstance(w, int) and 0 <= w < 2 ** 64 for w in words)


def test_secure_word_is_uniform_enough_to_use_every_bit():
    rng = SecureRandom()
    words = np.array([rng.word() for _ in range(4096)], dtype=np.uint64)
    bits = np.unpackbits(words.view(np.uint8)).reshape(-1, 64).mean(axis=0)
    assert np.all(np.abs(bits - 0.5) < 0.06)       # each bit ~ Bernoulli(1/2), 4096 draws
