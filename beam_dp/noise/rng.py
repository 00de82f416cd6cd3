"""Random sources: the CSPRNG used in production and the seeded source used in tests.

A random source only hands out uniformly random 64-bit words; every distribution in beam_dp is
built from those words by exact integer arithmetic (see ``samplers.py``). Production code uses
``secure_rng()`` (the operating system's CSPRNG, ``os.urandom``); tests and reproducible audits
use ``seeded(seed)``. Library code never touches ``random`` or ``np.random`` directly.

``derive(*labels)`` returns an independent sub-stream. For a seeded source the sub-stream is a
pure function of (seed, labels), so the same key and step draw the same noise on every runner and
in every bundle order (this is what makes DirectRunner, Flink and Prism release-for-release
identical under a seed). For the secure source every derived stream is fresh OS randomness:
retries draw new noise, which is safe for values that later releases depend on (drawn once and
held in Beam state). The production source with replay-identical noise is ``keyed.KeyedRandom``
(a PRF of a secret key and the address). Transforms pick their source with
``sources.noise_source``, which refuses a seed unless a test opted in (``noise.testing``).
"""

import abc
import hashlib
import os
import sys
from typing import Optional

import numpy as np

from beam_dp.noise.address import encode_address

__all__ = [
    'RandomSource',
    'SecureRandom',
    'SeededRandom',
    'secure_rng',
    'seeded',
]

_MASK64 = (1 << 64) - 1


class RandomSource(abc.ABC):
    """Uniform 64-bit words; the only primitive the samplers need."""

    #: True for the unpredictable sources (OS CSPRNG, secret-keyed PRF). Pipelines refuse seeded
    #: sources unless a test explicitly opts in (``noise.testing``, ``noise.sources``).
    is_secure: bool = False

    @abc.abstractmethod
    def uint64(self, size: int) -> np.ndarray:
        """Returns ``size`` independent uniform ``np.uint64`` words."""

    @abc.abstractmethod
    def derive(self, *labels) -> 'RandomSource':
        """Returns an independent sub-stream identified by ``labels``."""

    def word(self) -> int:
        """One uniform 64-bit word as a Python int: ``uint64(1)[0]``, the same word from the same
        call (scalar samplers call this once per try; sources may override it to skip numpy)."""
        return int(self.uint64(1)[0])

    def randbits(self, k: int) -> int:
        """A uniform Python int in [0, 2**k)."""
        if k <= 0:
            return 0
        if k <= 64:
            return self.word() >> (64 - k)
        words = (k + 63) // 64
        value = 0
        for word in self.uint64(words).tolist():
            value = (value << 64) | int(word)
        return value >> (64 * words - k)


class SecureRandom(RandomSource):
    """The operating system's CSPRNG (``os.urandom``). Stateless, so it pickles trivially."""

    is_secure = True

    def uint64(self, size: int) -> np.ndarray:
        return np.frombuffer(os.urandom(8 * int(size)), dtype=np.uint64).copy()

    def word(self) -> int:
        # The 8 bytes uint64(1) would read, as the same native-order word, without numpy.
        return int.from_bytes(os.urandom(8), sys.byteorder)

    def derive(self, *labels) -> 'SecureRandom':
        del labels  # Fresh OS randomness; nothing to derive.
        return self

    def __repr__(self) -> str:
        return 'SecureRandom()'

    def __eq__(self, other) -> bool:
        return isinstance(other, SecureRandom)

    def __hash__(self) -> int:
        return hash(SecureRandom)


def _digest(*parts) -> bytes:
    h = hashlib.sha256()
    for part in parts:
        data = repr(part).encode('utf-8')
        h.update(len(data).to_bytes(8, 'little'))
        h.update(data)
    return h.digest()


class SeededRandom(RandomSource):
    """A reproducible source for tests: PCG64 keyed by SHA-256 of (seed, labels).

    Never use it in production: its output is predictable by anyone who knows the seed.
    """

    def __init__(self, seed: int, labels: tuple = ()):
        self._seed = seed
        self._labels = tuple(labels)
        # Refuses (TypeError) every label a keyed source refuses, so that a test under a seed
        # fails where production would: the address must be canonical (``address.py``).
        encode_address(self._labels)
        key = int.from_bytes(_digest(seed, *self._labels), 'little')
        self._bitgen = np.random.PCG64(np.random.SeedSequence(key))

    def uint64(self, size: int) -> np.ndarray:
        return self._bitgen.random_raw(int(size)).astype(np.uint64, copy=False)

    def derive(self, *labels) -> 'SeededRandom':
        return SeededRandom(self._seed, self._labels + tuple(labels))

    def __getstate__(self):
        return {'seed': self._seed, 'labels': self._labels,
                'bitgen': self._bitgen.state}

    def __setstate__(self, state):
        self.__init__(state['seed'], state['labels'])
        self._bitgen.state = state['bitgen']

    def __repr__(self) -> str:
        return f'SeededRandom(seed={self._seed!r}, labels={self._labels!r})'


def secure_rng() -> SecureRandom:
    """The production random source (OS CSPRNG)."""
    return SecureRandom()


def seeded(seed: Optional[int]) -> RandomSource:
    """A reproducible random source for tests; ``seeded(None)`` is ``secure_rng()``."""
    if seed is None:
        return secure_rng()
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f'seeded: seed must be an int, got {seed!r}.')
    return SeededRandom(seed)
