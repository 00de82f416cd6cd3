"""Many small exact draws in one pass (the per-step tests of private key selection).

* ``WordBuffer``: a ``RandomSource`` over a *stateless* source (``SecureRandom``: every word is
  fresh OS randomness and ``derive`` returns the source itself) that reads the words in blocks
  (one ``uint64(BLOCK)`` call, i.e. one ``os.urandom``, per ``BLOCK`` words) and hands them out
  one by one, in order. Its word stream is exactly the concatenation of the blocks, so every
  sampler run on it sees i.i.d. uniform words as on the source itself, and a source whose
  ``uint64`` calls read one sequential stream gives the same words through the buffer as
  without it (the tests drive such a source). ``derive`` returns the buffer, as the source's
  ``derive`` returns the source: addresses mean nothing to a stateless source. A buffer is made
  per call site and dropped after it (unused words are discarded, never reused).
  ``shared_words(rng)`` returns a buffer for a ``SecureRandom`` and None for addressed sources
  (seeded, keyed), whose per-address streams must be used as they are.
* ``BlockBuffer`` (``shared_blocks``): the same for samplers that read ``uint64(n)`` arrays
  (the counters' discrete Laplace rounds): each call is a slice of a block instead of one
  ``os.urandom`` call.
* ``dlap_tail_tick(src, n, d, k)``: ``geometric.bernoulli_dlap_tail(src, n/d, k)`` with the
  samplers' scalar helpers inlined: the SAME ``src.word()`` / ``src.randbits()`` calls in the
  same order and the same result (tested call by call), without a Python call per word.
"""

import itertools

import numpy as np

from beam_dp.noise.rng import RandomSource
from beam_dp.noise.rng import SecureRandom

__all__ = [
    'BLOCK',
    'BlockBuffer',
    'WordBuffer',
    'dlap_tail_tick',
    'shared_blocks',
    'shared_words',
]

#: Words read per ``uint64`` call of the underlying source.
BLOCK = 4096


class _Buffer(RandomSource):
    """What both buffers share: local to one call, ``derive`` is the identity (as the stateless
    source's), never pickled."""

    def __init__(self, source: RandomSource):
        self._source = source
        self.is_secure = source.is_secure

    def derive(self, *labels) -> '_Buffer':
        del labels
        return self

    def __reduce__(self):
        raise TypeError(f'{type(self).__name__} holds drawn words: it is local to one call, '
                        f'never pickled.')

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self._source!r})'


class WordBuffer(_Buffer):
    """The words of ``source`` read ``block`` at a time (see the module docstring)."""

    def __init__(self, source: RandomSource, block: int = BLOCK):
        super().__init__(source)
        blocks = iter(lambda: source.uint64(block).tolist(), None)
        self._words = itertools.chain.from_iterable(blocks)
        # One C call per word: ``next`` on the chained blocks.
        self.word = self._words.__next__

    def uint64(self, size: int) -> np.ndarray:
        size = int(size)
        return np.fromiter(itertools.islice(self._words, size), dtype=np.uint64, count=size)


class BlockBuffer(_Buffer):
    """The words of ``source`` read ``block`` at a time (at least the size asked), handed out
    as ``uint64`` slices in order: the same word stream as ``WordBuffer``'s, for array reads."""

    def __init__(self, source: RandomSource, block: int = BLOCK):
        super().__init__(source)
        self._block_size = block
        self._block = np.empty(0, dtype=np.uint64)
        self._pos = 0

    def uint64(self, size: int) -> np.ndarray:
        size = int(size)
        pos, end = self._pos, self._pos + size
        if end > self._block.size:
            more = self._source.uint64(max(self._block_size, end - self._block.size))
            self._block = np.concatenate([self._block[pos:], more])
            pos, end = 0, size
        self._pos = end
        return self._block[pos:end].copy()


def shared_words(rng: RandomSource, block: int = BLOCK):
    """A ``WordBuffer`` over ``rng`` if it is stateless (``SecureRandom``: ``derive`` is the
    identity, so one stream serves every address), else None (seeded and keyed sources: every
    address has its own stream, which must be read as it is)."""
    return WordBuffer(rng, block) if isinstance(rng, SecureRandom) else None


def shared_blocks(rng: RandomSource, block: int = BLOCK):
    """``shared_words`` for array reads: a ``BlockBuffer`` over a ``SecureRandom``, else None."""
    return BlockBuffer(rng, block) if isinstance(rng, SecureRandom) else None


def _below_wide(src: RandomSource, m: int, bits: int) -> int:
    """``samplers._uniform_below_int(src, m)`` for ``bits`` = bit length of m - 1 > 64: the
    same ``randbits`` calls."""
    r = src.randbits(bits)
    while r >= m:
        r = src.randbits(bits)
    return r


def _exp_le1(src: RandomSource, num: int, den: int) -> bool:
    """``samplers._bernoulli_exp_le1_scalar(src, num, den)``: Bernoulli(exp(-num/den)), its
    ``_uniform_below_int(src, den * k)`` inlined."""
    k = 1
    while True:
        m = den * k
        b = (m - 1).bit_length()
        if b == 0:
            r = 0
        elif b <= 64:
            shift = 64 - b
            word = src.word
            r = word() >> shift
            while r >= m:
                r = word() >> shift
        else:
            r = _below_wide(src, m, b)
        if r >= num:
            return k % 2 == 1
        k += 1


def _exp(src: RandomSource, num: int, den: int) -> bool:
    """``samplers._bernoulli_exp_scalar(src, num, den)``: Bernoulli(exp(-num/den))."""
    whole, frac = divmod(num, den)       # exp(-1)^whole · exp(-frac/den), stopping at a failure
    return all(_exp_le1(src, 1, 1) for _ in range(whole)) and _exp_le1(src, frac, den)


def dlap_tail_tick(src: RandomSource, n: int, d: int, k: int) -> bool:
    """Exact Bernoulli(P[Y ≥ k]), Y ~ DLap(n/d): ``bernoulli_dlap_tail(src, scale, k)`` for a
    scale whose rational rounding is n/d (``samplers._scale_nd``), word for word."""
    k = int(k)
    hit = _exp(src, k * d if k >= 1 else (1 - k) * d, n)
    if hit:                                        # Bernoulli(1/(1+a)): even Geometric(a)
        even = True
        while _exp(src, d, n):
            even = not even
        hit = even
    return hit if k >= 1 else not hit
