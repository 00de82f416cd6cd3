"""Public keys and record keys of the keyed continual transforms: ``text_key`` (what every keyed
transform requires of a record's key), ``KeyLayout`` (public keys in shards), ``CountCodes``
(the fast path of an event-level public-key count: one record → one integer code, a bundle's
codes → pre-aggregated partial counts per shard and step, vectorised) and ``PrivateCountCodes``
(the same for private keys, over the keys the validator has accepted so far). Pure Python +
numpy.
"""

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from beam_dp import _validation as v
from beam_dp.drivers.clock import NO_EVENT_TIME_MICROS
from beam_dp.drivers.clock import StepClock
from beam_dp.errors import InvalidParamsError
from beam_dp.errors import InvalidRecordError

__all__ = [
    'CountCodes',
    'KeyLayout',
    'PrivateCountCodes',
    'text_key',
]

#: Codes are step × keys + key index < 2^62: int64 with room (``CountCodes``).
_CODE_LIMIT = 1 << 62
#: ``PrivateCountCodes``: a code is step << _ID_BITS | key id; at most _MAX_KEYS ids at once.
_ID_BITS = 20
_MAX_KEYS = 1 << 17


def text_key(key) -> str:
    """A record's key as every keyed transform requires it: a ``str`` that is valid UTF-8 text
    (a ``numpy.str_`` becomes the equal ``str``, so no later deterministic key encoding meets
    a numpy scalar).

    Raises:
      InvalidRecordError: for a non-string key (unhashable ones included) or a string with lone
        surrogates (no UTF-8 encoding: it could not be sharded, encoded or written).
    """
    if not isinstance(key, str):
        raise InvalidRecordError(f'key must be a string, got {type(key).__name__} '
                                 f'{_short_repr(key)}')
    try:
        return str(key).encode('utf-8').decode('utf-8')
    except UnicodeError as e:
        raise InvalidRecordError(f'key is not valid UTF-8 text: {e}') from e


def _short_repr(value, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # pylint: disable=broad-except
        return f'<unprintable {type(value).__name__}>'
    return text if len(text) <= limit else text[:limit] + '...'


@dataclasses.dataclass(frozen=True)
class KeyLayout:
    """Public keys laid out in shards: key i of the sorted key list goes to shard i % num_shards,
    position i // num_shards."""
    keys: Tuple[str, ...]
    num_shards: int

    def __post_init__(self):
        owner = 'KeyLayout'
        if not self.keys:
            raise InvalidParamsError(f'{owner}: public_keys must not be empty.')
        bad = [k for k in self.keys if not isinstance(k, str)]
        if bad:
            raise InvalidParamsError(f'{owner}: public keys must be strings, got {bad[0]!r}.')
        if len(set(self.keys)) != len(self.keys):
            raise InvalidParamsError(f'{owner}: public keys must be distinct.')
        v.check_positive_int(owner, 'num_shards', self.num_shards)
        if self.num_shards > len(self.keys):
            raise InvalidParamsError(f'{owner}: num_shards must not exceed the number of keys '
                                     f'({len(self.keys)}), got {self.num_shards}.')
        object.__setattr__(self, '_index', {k: i for i, k in enumerate(self.keys)})
        object.__setattr__(self, '_shards', tuple(self.keys[s::self.num_shards]
                                                  for s in range(self.num_shards)))

    @classmethod
    def of(cls, keys: Sequence[str], num_shards: Optional[int] = None,
           keys_per_shard: int = 512) -> 'KeyLayout':
        keys = tuple(sorted(keys)) if all(isinstance(k, str) for k in keys) else tuple(keys)
        if num_shards is None:
            num_shards = max(1, min(len(keys), math.ceil(len(keys) / keys_per_shard)))
        return cls(keys, num_shards)

    def locate(self, key) -> Optional[Tuple[int, int]]:
        """(shard, position in the shard) of a public key, or None for any other key."""
        i = self._index.get(key)
        if i is None:
            return None
        return i % self.num_shards, i // self.num_shards

    def shard_keys(self, shard: int) -> Tuple[str, ...]:
        return self._shards[shard]


@dataclasses.dataclass(frozen=True)
class CountCodes:
    """The fast path of 'ExtractAndValidate' for an event-level count over public keys.

    A record whose key is exactly (``type is str``) one of the public keys and whose event time
    lies in [start, end of the last coded step) is one integer, ``step × num_keys + key index``
    (``code``); any other record takes the full validator (``KeyedReleaseDriver.extract``),
    which dead-letters it with its reason or accepts it. A public key that ``text_key`` would
    refuse (lone surrogates) is left out of ``index``, so its records take the full validator
    too: the fast path accepts exactly a subset of what the validator accepts, with the same
    (key index, step). ``partials`` turns a bundle's codes into the exact per (shard, step)
    counts the stateful DoFn takes, vectorised (no per-record Python work beyond one
    ``dict.get`` and one ``list.append``).

    Attributes:
      index: public key → flat key index (position × num_shards + shard).
      start_micros, end_micros: the coded event-time range [start, end).
    """
    layout: KeyLayout
    clock: StepClock

    def __post_init__(self):
        index = {}
        for i, key in enumerate(self.layout.keys):
            try:
                text_key(key)
            except InvalidRecordError:
                continue
            index[key] = i
        num_keys = len(self.layout.keys)
        steps = _CODE_LIMIT // num_keys
        if self.clock.last_step is not None:
            steps = min(steps, self.clock.last_step + 1)
        assert self.clock.start_micros > NO_EVENT_TIME_MICROS
        object.__setattr__(self, 'index', index)
        object.__setattr__(self, 'num_keys', num_keys)
        object.__setattr__(self, 'start_micros', self.clock.start_micros)
        object.__setattr__(self, 'step_micros', self.clock.step_micros)
        object.__setattr__(self, 'end_micros',
                           self.clock.start_micros + steps * self.clock.step_micros)

    def code(self, key, micros: int) -> Optional[int]:
        """The code of a record (what the DoFn inlines), or None: take the full validator."""
        i = self.index.get(key) if type(key) is str else None  # pylint: disable=unidiomatic-typecheck
        if i is None or not self.start_micros <= micros < self.end_micros:
            return None
        return (micros - self.start_micros) // self.step_micros * self.num_keys + i

    def partials(self, codes: Sequence[int]) -> List[Tuple[int, int, np.ndarray, np.ndarray]]:
        """A bundle's codes → ``[(shard, step, flat positions, counts)]``, one per (shard,
        step) present, counts int64 (at most the number of codes)."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size == 0:
            return []
        unique, counts = np.unique(codes, return_counts=True)
        steps, keys = np.divmod(unique, self.num_keys)
        num_shards = self.layout.num_shards
        group = steps * num_shards + keys % num_shards
        order = np.argsort(group, kind='stable')
        group, positions, counts = group[order], keys[order] // num_shards, counts[order]
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        ends = np.r_[starts[1:], group.size].tolist()
        heads = group[starts]
        return [(shard, step, positions[a:b].copy(), counts[a:b].copy())
                for a, b, step, shard in zip(starts.tolist(), ends, (heads // num_shards).tolist(),
                                             (heads % num_shards).tolist())]


class PrivateCountCodes:
    """The fast path of 'ExtractAndValidate' for an event-level count over PRIVATE keys.

    The keys are not known in advance, so the fast path knows the keys the full validator
    (``KeyedReleaseDriver.extract``) has accepted so far: ``learn(key, shard)`` after it
    accepted a record whose key is exactly a ``str`` (then ``text_key`` returns the key itself
    and the shard is a function of it). A later record whose key is a learnt ``str`` and whose
    event time lies in [start, end of the last coded step) is one integer
    ``step << 20 | key id`` (``code``: one ``dict.get``, one comparison, no SHA-256); every
    other record takes the validator. So the fast path accepts exactly a subset of what the
    validator accepts, with the same (key, shard, step). ``partials`` turns codes into exact
    counts per (shard, step, key), vectorised. At most 2**17 keys are known at once; ``room``
    (called between bundles, when no code is pending) forgets them all once that is reached,
    so memory stays bounded on an unbounded key universe.

    Attributes:
      index: learnt key → id (read by the DoFn's inlined fast path).
      start_micros, end_micros, step_micros: the coded event-time range [start, end).
    """

    def __init__(self, clock: StepClock):
        steps = _CODE_LIMIT >> _ID_BITS
        if clock.last_step is not None:
            steps = min(steps, clock.last_step + 1)
        assert clock.start_micros > NO_EVENT_TIME_MICROS
        self.index = {}
        self._keys: List[str] = []
        self._shards: List[int] = []
        self.start_micros = clock.start_micros
        self.step_micros = clock.step_micros
        self.end_micros = clock.start_micros + steps * clock.step_micros

    @property
    def shards(self) -> List[int]:
        """The shard of every learnt key, by id (read only)."""
        return self._shards

    def learn(self, key: str, shard: int) -> None:
        """A key the validator accepted (exactly a ``str``), with its shard."""
        if type(key) is str and key not in self.index and len(self._keys) < _MAX_KEYS:  # pylint: disable=unidiomatic-typecheck
            self.index[key] = len(self._keys)
            self._keys.append(key)
            self._shards.append(shard)

    def room(self) -> None:
        """Forgets every learnt key once the cap is reached (call with no pending code)."""
        if len(self._keys) >= _MAX_KEYS:
            self.index.clear()
            self._keys.clear()
            self._shards.clear()

    def code(self, key, micros: int) -> Optional[int]:
        """The code of a record (what the DoFn inlines), or None: take the full validator."""
        i = self.index.get(key) if type(key) is str else None  # pylint: disable=unidiomatic-typecheck
        if i is None or not self.start_micros <= micros < self.end_micros:
            return None
        return (micros - self.start_micros) // self.step_micros << _ID_BITS | i

    @staticmethod
    def compact(codes: np.ndarray, counts: Optional[np.ndarray] = None
                ) -> Tuple[np.ndarray, np.ndarray]:
        """(distinct codes, their exact total counts) of codes with optional multiplicities."""
        if counts is None:
            return np.unique(codes, return_counts=True)
        unique, inverse = np.unique(codes, return_inverse=True)
        return unique, _sum_by(inverse.reshape(-1), counts, unique.size)

    def partials(self, codes: np.ndarray, counts: Optional[np.ndarray] = None
                 ) -> List[Tuple[int, int, List[str], List[int]]]:
        """Codes (with optional multiplicities) → ``[(shard, step, keys, counts)]``, one per
        (shard, step) present, keys distinct and sorted by id; counts are exact ints."""
        codes = np.asarray(codes, dtype=np.int64)
        if codes.size == 0:
            return []
        unique, totals = self.compact(codes, counts)
        ids = unique & ((1 << _ID_BITS) - 1)
        steps = unique >> _ID_BITS
        shards = np.asarray(self._shards, dtype=np.int64)[ids]
        order = np.lexsort((ids, shards, steps))
        ids, shards, steps = ids[order], shards[order], steps[order]
        new = np.r_[True, (steps[1:] != steps[:-1]) | (shards[1:] != shards[:-1])]
        starts = np.flatnonzero(new).tolist()
        ends = starts[1:] + [ids.size]
        keys = [self._keys[i] for i in ids.tolist()]
        totals = totals[order].tolist()
        steps, shards = steps.tolist(), shards.tolist()
        return [(shards[a], steps[a], keys[a:b], totals[a:b]) for a, b in zip(starts, ends)]


def _sum_by(inverse: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``counts`` per group (np.add.at: no float weights)."""
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, inverse, np.asarray(counts, dtype=np.int64))
    return out
