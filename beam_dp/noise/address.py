"""Noise addresses: a canonical, typed, injective encoding of where a draw is made.

With a secret noise key every draw is a PRF of the key and its *address* (``keyed.py``), so two
draws share noise exactly when their addresses encode to the same bytes. An address is a tuple
of labels: the stream's identity (``NoiseKeyRef.stream_id``), the transform's full path in the
pipeline (unique in a Beam pipeline), then what the transform adds (key or shard, step, node,
purpose). This module makes the encoding injective by construction:

* ``canonical_key(value)`` maps a record's key (a Beam state key, an instance key) to its
  canonical form, *which the transform then uses as the key*: numpy scalars become the equal
  Python scalar, ``str``/``bytes``/``int`` subclasses (``numpy.str_``, enums) the plain value,
  lists and NamedTuples plain tuples. So two keys a transform keeps apart always have distinct
  canonical forms, and two inputs with the same canonical form are one key (one state, one
  release, one noise). Anything else (objects whose only identity is their ``repr``, NaN,
  dicts, sets) is refused with ``InvalidRecordError``: the record goes to the dead letter.
* ``encode_address(labels)`` encodes a tuple of canonical labels as type tag + length +
  payload, recursively for tuples: an injective (prefix-free) code, so distinct label tuples
  never encode alike. It refuses (``TypeError``) any label that is not canonical-encodable;
  transforms canonicalise keys where records enter, so nothing raises inside a DoFn.

Integers encode alike whatever their Python or numpy type (a step index may be either), which
is why keys are canonicalised first: ``numpy.int64(1)`` and ``1`` are one key.
"""

import math
import numbers
import struct

import numpy as np

from beam_dp.errors import InvalidRecordError

__all__ = [
    'KEY_TYPES',
    'canonical_key',
    'encode_address',
]

#: What a key may be (after ``canonical_key``), for error messages and docs.
KEY_TYPES = 'str, bytes, int, bool, float (not NaN), None, or tuples/lists of these'
_MAX_DEPTH = 32


def _field(out: bytearray, tag: bytes, data: bytes) -> None:
    out += tag
    out += struct.pack('<Q', len(data))
    out += data


def _canonical(value, depth: int):
    if depth > _MAX_DEPTH:
        raise InvalidRecordError(f'key is nested deeper than {_MAX_DEPTH} levels')
    kind = type(value)
    if kind is str or kind is int or kind is bytes or value is None or kind is bool:
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):                  # numpy.str_, str enums and other subclasses
        return str.__str__(value)
    if isinstance(value, (bytes, bytearray, np.bytes_)):
        return bytes(value)
    if isinstance(value, numbers.Integral):     # numpy integers, IntEnum, ...
        return int(value)
    if isinstance(value, numbers.Real):         # float, numpy floating
        as_float = float(value)
        if math.isnan(as_float):
            raise InvalidRecordError('key is NaN (NaN keys cannot be told apart)')
        return as_float
    if isinstance(value, (tuple, list)):        # NamedTuples and lists become plain tuples
        return tuple(_canonical(item, depth + 1) for item in value)
    raise InvalidRecordError(
        f'key of type {kind.__name__} has no canonical encoding (keys must be {KEY_TYPES}; map '
        f'other objects to one of these in key_fn)')


def canonical_key(value):
    """The canonical form of a key (see the module docstring).

    Raises:
      InvalidRecordError: for a value with no canonical encoding (the record is dead-lettered).
    """
    kind = type(value)
    if kind is str or kind is int:
        return value
    return _canonical(value, 0)


def _encode(x, out: bytearray) -> None:
    kind = type(x)
    if kind is str:
        _field(out, b'S', x.encode('utf-8', 'surrogatepass'))
    elif x is None:
        _field(out, b'N', b'')
    elif kind is bool or kind is np.bool_:
        _field(out, b'T' if x else b'F', b'')
    elif isinstance(x, (int, np.integer)):
        i = int(x)
        _field(out, b'I', i.to_bytes(i.bit_length() // 8 + 1, 'little', signed=True))
    elif kind is tuple:
        inner = bytearray()
        for item in x:
            _encode(item, inner)
        _field(out, b'L', bytes(inner))
    elif kind is bytes:
        _field(out, b'B', x)
    elif isinstance(x, (float, np.floating)) and not math.isnan(float(x)):
        _field(out, b'D', float(x).hex().encode('ascii'))
    else:
        raise TypeError(f'noise address label of type {kind.__name__} is not canonical '
                        f'(canonical_key it first): {KEY_TYPES}')


def encode_address(labels: tuple) -> bytes:
    """The injective byte encoding of an address (a tuple of canonical labels).

    Raises:
      TypeError: for a label that is not in canonical form (a list, a numpy string, an object).
    """
    out = bytearray()
    for label in labels:
        _encode(label, out)
    return bytes(out)
