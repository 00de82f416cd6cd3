"""Noise keys: references to a secret that lives outside the pipeline graph.

A keyed noise source (``keyed.KeyedRandom``) is pickled into the pipeline graph, so it must not
hold the key. It holds a *reference* that each worker resolves on first use (cached per
process):

* ``env:VAR`` -- the bytes (UTF-8) of the environment variable ``VAR`` on the worker;
* ``file:/path`` -- the bytes of the file (one trailing newline is dropped);
* ``gcpsm:projects/P/secrets/S/versions/N`` -- the payload of a Google Secret Manager secret
  version (needs ``google-cloud-secret-manager``, imported only then), readable by the worker
  service account only.

The secret is used as it is stored; it must be at least ``MIN_KEY_BYTES`` bytes (generate one
with ``openssl rand -hex 32``: 64 characters, 256 random bits). Nothing here ever formats the
key, and an unrecognised reference string is never echoed (it might be a key pasted by
mistake).
"""

import dataclasses
import hashlib
import os
import re
import threading
from typing import Dict, Optional, Union

from beam_dp.errors import InvalidParamsError

__all__ = [
    'MIN_KEY_BYTES',
    'NoiseKeyRef',
    'clear_key_cache',
]

#: Keys shorter than this are refused (a 256-bit PRF key).
MIN_KEY_BYTES = 32
_ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_GCPSM_NAME = re.compile(r'^projects/[^/\s]+/secrets/[^/\s]+/versions/[1-9][0-9]*$')
_FORMS = "'env:VAR', 'file:/path' or 'gcpsm:projects/P/secrets/S/versions/N'"

_cache: Dict[str, bytes] = {}
_lock = threading.Lock()


def clear_key_cache() -> None:
    """Forgets every resolved key of this process (key rotation, tests)."""
    with _lock:
        _cache.clear()


def _bad(owner: str, why: str) -> InvalidParamsError:
    return InvalidParamsError(f'{owner}: noise_key {why}; it must be a reference to the secret '
                              f'({_FORMS}), never the key itself.')


@dataclasses.dataclass(frozen=True)
class NoiseKeyRef:
    """A validated reference to a noise key; ``master_key()`` resolves it (once per process).

    ``stream_id`` names the stream the key's noise is for (a job identity such as
    ``'rides-eu/2026'``, public): it is the root of every noise address (``keyed.py``), so one
    key used by two jobs over different streams never draws the same noise. The transforms
    require it with a noise key.

    Raises:
      InvalidParamsError: for a malformed reference or stream id (at construction), or, on first
        use, for a missing, unreadable or too short key.
    """
    reference: str
    stream_id: Optional[str] = None

    def __post_init__(self):
        sid = self.stream_id
        if sid is not None and (not isinstance(sid, str) or not sid.strip() or len(sid) > 512
                                or not sid.isprintable()):
            raise InvalidParamsError(
                f'NoiseKeyRef: stream_id must be a non-empty printable string of at most 512 '
                f'characters naming the stream (e.g. the job identity), got {sid!r}.')
        ref = self.reference
        if not isinstance(ref, str):
            raise _bad('NoiseKeyRef', f'must be a string, got a {type(ref).__name__}')
        scheme, sep, rest = ref.partition(':')
        if not sep or scheme not in ('env', 'file', 'gcpsm'):
            raise _bad('NoiseKeyRef', 'is not a reference (value not shown)')
        if scheme == 'env' and not _ENV_NAME.match(rest):
            raise _bad('NoiseKeyRef', f'names no valid environment variable: {ref!r}')
        if scheme == 'file' and not os.path.isabs(rest):
            raise _bad('NoiseKeyRef', f'must name an absolute path: {ref!r}')
        if scheme == 'gcpsm' and not _GCPSM_NAME.match(rest):
            raise _bad('NoiseKeyRef', f'is not projects/P/secrets/S/versions/N with a pinned '
                                      f'version number N (an alias such as "latest" can resolve to '
                                      f'another key on a restarted worker, which would draw other '
                                      f'noise at the same addresses): {ref!r}')

    @classmethod
    def of(cls, value: Union['NoiseKeyRef', str], owner: str = 'NoiseKeyRef',
           stream_id: Optional[str] = None) -> 'NoiseKeyRef':
        """``value`` as a reference; ``stream_id`` sets the stream of a reference that has none
        (a different one than the reference's own is refused)."""
        try:
            if isinstance(value, cls):
                if stream_id is None or stream_id == value.stream_id:
                    return value
                if value.stream_id is not None:
                    raise InvalidParamsError(
                        f'NoiseKeyRef: the noise key already names stream '
                        f'{value.stream_id!r}; cannot use it for stream {stream_id!r}.')
                return cls(value.reference, stream_id)
            return cls(value, stream_id)
        except InvalidParamsError as e:
            raise InvalidParamsError(str(e).replace('NoiseKeyRef:', f'{owner}:', 1)) from None

    @property
    def scheme(self) -> str:
        return self.reference.partition(':')[0]

    def __repr__(self) -> str:
        if self.stream_id is None:
            return f'NoiseKeyRef({self.reference!r})'
        return f'NoiseKeyRef({self.reference!r}, stream_id={self.stream_id!r})'

    def master_key(self) -> bytes:
        """64 bytes derived from the secret (BLAKE2b), the key of every address derivation."""
        with _lock:
            cached = _cache.get(self.reference)
        if cached is not None:
            return cached
        secret = self._read()
        if len(secret) < MIN_KEY_BYTES:
            raise InvalidParamsError(
                f'NoiseKeyRef: the noise key at {self.reference!r} has {len(secret)} bytes; at '
                f'least {MIN_KEY_BYTES} are required (generate one with `openssl rand -hex 32`).')
        master = hashlib.blake2b(secret, digest_size=64, person=b'beam_dp.noisekey').digest()
        with _lock:
            _cache[self.reference] = master
        return master

    def _read(self) -> bytes:
        scheme, _, rest = self.reference.partition(':')
        if scheme == 'env':
            value = os.environ.get(rest)
            if value is None:
                raise InvalidParamsError(f'NoiseKeyRef: environment variable {rest} (noise_key '
                                         f'{self.reference!r}) is not set on this worker.')
            return value.encode('utf-8')
        if scheme == 'file':
            try:
                with open(rest, 'rb') as f:
                    data = f.read()
            except OSError as e:
                raise InvalidParamsError(f'NoiseKeyRef: cannot read the noise key file {rest!r}: '
                                         f'{e.strerror}.') from None
            if data.endswith(b'\r\n'):
                return data[:-2]
            return data[:-1] if data.endswith(b'\n') else data
        return _read_secret_manager(rest)


def _read_secret_manager(name: str) -> bytes:
    try:
        from google.cloud import secretmanager  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise InvalidParamsError(
            'NoiseKeyRef: a gcpsm: noise key needs google-cloud-secret-manager on the workers '
            "(pip install 'beam_dp[gcp]' or add it to the worker image).") from None
    client = secretmanager.SecretManagerServiceClient()
    return bytes(client.access_secret_version(name=name).payload.data)
