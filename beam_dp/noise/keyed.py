"""Deterministic secret-keyed noise: every draw is a PRF of a secret key and the draw's address.

``KeyedRandom(noise_key)`` is a ``RandomSource`` whose words depend only on the secret key and
on where they are drawn: the address ``labels`` given to ``derive`` (transform label, key or
shard, step, node, purpose) and the index of the ``uint64`` call within that derived stream.
So a replayed bundle, a re-fired timer or a worker restored from a checkpoint draws
bit-identical noise in any process and any bundle order, and two copies of one release can no
longer be averaged. Without the key the words are indistinguishable from uniform (PRF
security), so the noise is as good as fresh OS randomness to anyone who does not hold the key.

Construction (two standard PRFs, no new cryptography):

1. ``master = BLAKE2b-512(secret, person='beam_dp.noisekey')`` (once per process, see
   ``secret_key.py``);
2. ``address_key = BLAKE2b-256(encode(labels), key=master, person='beam_dp.noise.v1')``: keyed
   BLAKE2b is a PRF (RFC 7693 §2.9, its MAC mode); ``encode`` is injective (type tag + length
   prefix per label), so different addresses never share an input;
3. call ``j`` of ``uint64(n)`` returns the first 8n bytes of
   ``SHAKE-256(address_key || j as 8 bytes LE)`` read as little-endian words -- exactly the PRF
   ML-KEM uses (FIPS 203 §4.1, PRF(s, b) = SHAKE256(s || b)).

The object holds only the key *reference* (``env:``, ``file:``, ``gcpsm:``), its labels and its
call counter; pickling, ``repr`` and display data never contain the key or a derived key, and
``repr`` shows the depth of the address, not its labels (keys of private partitions are data).
"""

import hashlib
import struct
from typing import Union

import numpy as np

from beam_dp.noise.address import encode_address
from beam_dp.noise.rng import RandomSource
from beam_dp.noise.secret_key import NoiseKeyRef

__all__ = [
    'KeyedRandom',
    'encode_labels',
]

_PERSON = b'beam_dp.noise.v1'


def encode_labels(labels: tuple) -> bytes:
    """The injective encoding of an address (``address.encode_address``)."""
    return encode_address(labels)


class KeyedRandom(RandomSource):
    """Uniform 64-bit words that are a PRF of (secret noise key, address, call index).

    Args:
      noise_key: a reference string (``env:VAR``, ``file:/path``,
        ``gcpsm:projects/P/secrets/S/versions/N``) or a ``NoiseKeyRef``; resolved lazily, on the
        first draw, once per process.

    Raises:
      InvalidParamsError: for a malformed reference (here) or a missing or short key (first draw).
    """

    is_secure = True

    def __init__(self, noise_key: Union[str, NoiseKeyRef], labels: tuple = (), calls: int = 0):
        self._ref = NoiseKeyRef.of(noise_key, 'KeyedRandom')
        self._labels = tuple(labels)
        self._calls = int(calls)
        self._address_key = None

    @property
    def noise_key(self) -> NoiseKeyRef:
        return self._ref

    def _key(self) -> bytes:
        if self._address_key is None:
            stream = self._ref.stream_id
            root = () if stream is None else ('beam_dp.stream', stream)
            self._address_key = hashlib.blake2b(
                encode_address(root + self._labels), key=self._ref.master_key(), digest_size=32,
                person=_PERSON).digest()
        return self._address_key

    def uint64(self, size: int) -> np.ndarray:
        size = int(size)
        data = hashlib.shake_256(self._key() + struct.pack('<Q', self._calls)).digest(8 * size)
        self._calls += 1
        return np.frombuffer(data, dtype='<u8').astype(np.uint64)

    def derive(self, *labels) -> 'KeyedRandom':
        child = KeyedRandom(self._ref, self._labels + labels)
        return child

    def __getstate__(self):
        return {'noise_key': self._ref.reference, 'stream_id': self._ref.stream_id,
                'labels': self._labels, 'calls': self._calls}

    def __setstate__(self, state):
        self.__init__(NoiseKeyRef(state['noise_key'], state.get('stream_id')), state['labels'],
                      state['calls'])

    def __repr__(self) -> str:
        return f'KeyedRandom(noise_key={self._ref.reference!r}, depth={len(self._labels)})'

    def __eq__(self, other) -> bool:
        return (isinstance(other, KeyedRandom) and other._ref == self._ref
                and other._labels == self._labels and other._calls == self._calls)

    def __hash__(self) -> int:
        return hash((KeyedRandom, self._ref, self._labels, self._calls))
