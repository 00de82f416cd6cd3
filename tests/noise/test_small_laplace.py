"""The small-size path of ``discrete_laplace`` (Python ints, ``SMALL_SIZE`` values or fewer) is
the numpy path word for word: the same ``rng.uint64`` calls (order and sizes) and the same values
for every source, seed, size and scale, so seeded and keyed releases did not change."""

import fractions

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.noise import samplers
from beam_dp.noise import secret_key
from beam_dp.noise.keyed import KeyedRandom
from beam_dp.noise.rng import RandomSource

SCALES = [1, 2, 3, 1000, 0.3, 0.5, 2.5, 7.3, fractions.Fraction(7, 3),
          fractions.Fraction(2 ** 60 - 1, 2 ** 20), 2.0 ** 40]


class Recording(RandomSource):
    """Passes words through and records every call's size and words."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def uint64(self, size):
        words = self.inner.uint64(size)
        self.calls.append((int(size), words.tolist()))
        return words

    def derive(self, *labels):
        raise AssertionError('the sampler never derives')


class Replay(RandomSource):
    """Hands out recorded words, failing on a call of another size or an extra call."""

    def __init__(self, calls):
        self.calls = list(calls)

    def uint64(self, size):
        assert self.calls, 'more calls than the numpy path made'
        want, words = self.calls.pop(0)
        assert int(size) == want
        return np.asarray(words, dtype=np.uint64)

    def derive(self, *labels):
        raise AssertionError('the sampler never derives')


def _both(make_rng, n, d, count):
    fast, ref = Recording(make_rng()), Recording(make_rng())
    got = samplers._discrete_laplace_small(fast, n, d, count)
    want = samplers._discrete_laplace_vector(ref, n, d, count)
    assert want.dtype == np.int64 and want.shape == (count,)
    assert got == want.tolist()
    assert [c[0] for c in fast.calls] == [c[0] for c in ref.calls]
    assert fast.calls == ref.calls
    return fast, ref


@pytest.mark.parametrize('scale', SCALES, ids=str)
def test_seeded_identical_for_sizes_0_to_64(scale):
    n, d = samplers._scale_nd(scale)
    for seed in range(12):
        for count in range(65):
            fast, ref = _both(lambda: noise.seeded(seed).derive(count), n, d, count)
            # Same consumption: the next words of both streams agree.
            assert fast.inner.uint64(3).tolist() == ref.inner.uint64(3).tolist()


@pytest.mark.parametrize('scale', SCALES, ids=str)
def test_keyed_identical_for_sizes_0_to_64(scale, monkeypatch):
    monkeypatch.setenv('BDP_TEST_NOISE_KEY', 'c0ffee' * 11)
    secret_key.clear_key_cache()
    try:
        n, d = samplers._scale_nd(scale)
        for seed in range(4):
            for count in range(65):
                fast, ref = _both(lambda: KeyedRandom('env:BDP_TEST_NOISE_KEY').derive(
                    seed, count), n, d, count)
                assert fast.inner == ref.inner                  # same call counter
                assert fast.inner.uint64(2).tolist() == ref.inner.uint64(2).tolist()
    finally:
        secret_key.clear_key_cache()


@pytest.mark.parametrize('scale', [2, 7.3, fractions.Fraction(2 ** 60 - 1, 2 ** 20)], ids=str)
def test_os_source_same_calls_and_values_on_replay(scale):
    """The OS source cannot be re-run: record the numpy path's words, replay them to the fast
    path, which must ask for exactly those calls and return the same values."""
    n, d = samplers._scale_nd(scale)
    for count in range(65):
        ref = Recording(noise.secure_rng())
        want = samplers._discrete_laplace_vector(ref, n, d, count).tolist()
        replay = Replay(ref.calls)
        assert samplers._discrete_laplace_small(replay, n, d, count) == want
        assert not replay.calls


def test_wide_numerators_take_the_python_int_rounds_identically():
    """n·k past int64 from the second round on (numerator past 2**62: only reachable directly),
    so both paths finish Bernoulli rounds with Python ints and compute y exactly."""
    n, d = 2 ** 62 + 3, 2 ** 22
    for seed in range(20):
        for count in (1, 5, 33, 64, 128):
            _both(lambda: noise.seeded(seed).derive('wide'), n, d, count)


@pytest.mark.parametrize('size', [0, 1, 7, (0,), (2, 3), (1, 1), (8, 8), (5, 0)], ids=str)
def test_public_entry_point_shape_dtype_and_values(size):
    for scale in (2, 0.3):
        got = noise.discrete_laplace(noise.seeded(4).derive('x'), scale, size)
        n, d = samplers._scale_nd(scale)
        want = samplers._discrete_laplace_vector(noise.seeded(4).derive('x'), n, d,
                                                 int(np.prod(size)))
        assert got.dtype == np.int64 and got.shape == want.reshape(size).shape
        assert got.tolist() == want.reshape(size).tolist()


def test_crossover_boundary_uses_both_paths_consistently():
    n, d = samplers._scale_nd(2.5)
    assert samplers.SMALL_SIZE >= 64
    for count in (100, samplers.SMALL_SIZE, samplers.SMALL_SIZE + 1):
        got = noise.discrete_laplace(noise.seeded(9), 2.5, count)
        assert got.tolist() == samplers._discrete_laplace_vector(noise.seeded(9), n, d,
                                                                 count).tolist()


def test_scale_cache_keeps_type_errors_and_rounding():
    with pytest.raises(TypeError, match='real number'):
        noise.discrete_laplace(noise.seeded(1), True, 3)
    noise.discrete_laplace(noise.seeded(1), 1, 3)                 # 1 cached, True still refused
    with pytest.raises(TypeError, match='real number'):
        noise.discrete_laplace(noise.seeded(1), True, 3)
    with pytest.raises(TypeError, match='real number'):
        noise.discrete_laplace(noise.seeded(1), [2.0], 3)         # unhashable: same message
    with pytest.raises(ValueError, match='positive'):
        noise.discrete_laplace(noise.seeded(1), -1.0, 3)
    assert samplers._scale_nd(0.1) == (lambda f: (f.numerator, f.denominator))(
        noise.as_rational_up(0.1))


def _uniform_below_int_by_randbits(rng, m):
    k = (m - 1).bit_length()
    while True:
        r = rng.randbits(k)
        if r < m:
            return r


@pytest.mark.parametrize('m', [1, 2, 3, 5, 2 ** 20 + 1, 2 ** 52 * 3, 2 ** 63 - 1, 2 ** 64 - 5,
                               2 ** 64, 2 ** 64 + 1, 2 ** 100 + 7], ids=str)
def test_scalar_uniform_below_is_randbits_word_for_word(m):
    """``_uniform_below_int`` reads one word per try itself (k ≤ 64) instead of via randbits:
    the same calls, words and values."""
    for seed in range(40):
        fast, ref = Recording(noise.seeded(seed)), Recording(noise.seeded(seed))
        got = [samplers._uniform_below_int(fast, m) for _ in range(5)]
        assert got == [_uniform_below_int_by_randbits(ref, m) for _ in range(5)]
        assert fast.calls == ref.calls
