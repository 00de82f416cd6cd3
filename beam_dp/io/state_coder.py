"""The encoding of everything beam_dp keeps in Beam state: explicit, versioned, no pickle.

A long-lived job's state outlives the code that wrote it (a Flink savepoint restored by a newer
release, a Dataflow ``--update``). Pickled state names library classes by their module path, so
a moved or changed class makes the state unreadable. This module encodes state as a tagged,
deterministic binary format of plain values and of *registered* record types:

* a leading state-format version byte (``FORMAT_VERSION``); a value written in a newer format,
  or in one this release no longer reads, fails to decode with ``StateFormatError`` (loudly:
  restoring a job must never start a step from empty or misread state);
* plain values: None, bool, int (any size), float, str, bytes, tuple, list, dict (insertion
  order kept), set / frozenset (elements in the order of their encodings: deterministic),
  numpy arrays (dtype, shape, C-order bytes; an object array: its shape and each element,
  itself plain or registered) and numpy scalars;
* registered types (``register``): a NamedTuple, a dataclass or a class with ``__slots__`` /
  ``__dict__``, under a stable name (not its module path) and a schema version, its fields
  positionally in the registered order. A value of an older schema version is decoded by the
  type's upgrade functions (``upgrades={old version: fn(fields tuple) -> fields tuple of the
  next version}``) before the object is built; a newer one is refused.

Encoding a value of any other type raises ``UnregisteredStateType``, so a new state class
cannot silently fall back to pickle (the tests run every family with this coder).

Pure: no Beam here. ``beam_dp.transforms.state_types`` registers the state types of the drivers
and mechanisms and wraps this encoding in a Beam coder.
"""

import dataclasses
import struct
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    'FORMAT_VERSION',
    'StateFormatError',
    'UnregisteredStateType',
    'decode',
    'encode',
    'register',
    'register_wrapper',
    'registered',
]

#: The state format written by this release (the first byte of every encoded value). Bump it
#: when the encoding of plain values changes (not when a registered type changes: that is the
#: type's schema version); keep reading the formats listed in ``_READABLE``.
FORMAT_VERSION = 1
_READABLE = (1,)


class StateFormatError(ValueError):
    """Encoded state that this release cannot read (newer format or schema, unknown type)."""


class UnregisteredStateType(TypeError):
    """A value of a type that is neither plain nor registered was put in state."""


# Tags (one byte each).
_NONE, _TRUE, _FALSE = b'N', b'T', b'F'
_INT, _BIGINT, _FLOAT, _STR, _BYTES = b'i', b'I', b'f', b's', b'b'
_TUPLE, _LIST, _DICT, _SET, _FROZENSET = b't', b'l', b'd', b'S', b'Z'
_ARRAY, _NPSCALAR, _OBJECT, _OBJARRAY = b'a', b'g', b'o', b'A'

_Q = struct.Struct('>q')
_D = struct.Struct('>d')
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


class _Type:
    __slots__ = ('cls', 'name', 'version', 'fields', 'upgrades', 'build', 'values', 'name_bytes')

    def __init__(self, cls, name, version, fields, upgrades, build, values):
        self.cls, self.name, self.version, self.fields = cls, name, version, fields
        self.upgrades, self.build, self.values = upgrades, build, values
        raw = name.encode('utf-8')
        self.name_bytes = _varint(len(raw)) + raw


_BY_CLASS: Dict[type, _Type] = {}
_BY_NAME: Dict[str, _Type] = {}
_WRAPPERS: Dict[type, Callable[[Any], Any]] = {}
_BY_RAW_NAME: Dict[bytes, '_Type'] = {}        # decoding: the UTF-8 name → its entry


def _fields_of(cls) -> Tuple[str, ...]:
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, '_fields'):
        return tuple(cls._fields)
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    slots = []
    for klass in reversed(cls.__mro__):
        for slot in klass.__dict__.get('__slots__', ()):
            if slot not in ('__dict__', '__weakref__') and slot not in slots:
                slots.append(slot)
    return tuple(slots)


def register(cls=None, *, name: str, version: int = 1,
             fields: Optional[Sequence[str]] = None,
             upgrades: Optional[Mapping[int, Callable[[tuple], tuple]]] = None,
             values: Optional[Callable[[Any], tuple]] = None,
             build: Optional[Callable[[tuple], Any]] = None):
    """Registers ``cls`` as a state type under ``name`` (stable: never its module path) at
    schema ``version``. ``fields``: the attributes stored, in order (default: a NamedTuple's
    fields, a dataclass's fields, or the class's ``__slots__``; a class with only a
    ``__dict__`` must name them). ``upgrades[v]`` maps the fields tuple of schema version v to
    that of v + 1. ``values(obj) -> tuple`` and ``build(tuple) -> obj`` replace the default
    field access (e.g. a dict subclass: ``fields=('items',)``). Usable as a decorator: ``@register(name=..., version=...)``."""
    def add(klass):
        names = tuple(fields) if fields is not None else _fields_of(klass)
        if not names and fields is None:
            raise TypeError(f'{klass.__qualname__}: name the fields to store (fields=...)')
        if name in _BY_NAME and _BY_NAME[name].cls is not klass:
            raise ValueError(f'state type name {name!r} is already registered '
                             f'({_BY_NAME[name].cls.__qualname__})')
        missing = [v for v in range(1, version) if v not in (upgrades or {})]
        if version < 1 or (upgrades is not None and missing):
            raise ValueError(f'{name}: schema version {version} needs upgrades from {missing}')
        if values is not None:
            make, get = build, values
        elif isinstance(klass, type) and issubclass(klass, tuple) and hasattr(klass, '_fields'):
            make, get = klass._make, tuple
        else:
            make, get = _builder(klass, names), _getter(names)
        entry = _Type(klass, name, version, names, dict(upgrades or {}), make, get)
        _BY_CLASS[klass] = entry
        _BY_NAME[name] = entry
        return klass
    return add if cls is None else add(cls)


def register_wrapper(cls, unwrap: Callable[[Any], Any]) -> None:
    """Values of ``cls`` are stored as ``unwrap(value)`` (e.g. a cache-size wrapper): they
    decode as the unwrapped value."""
    _WRAPPERS[cls] = unwrap


def registered() -> Dict[str, Tuple[type, int, Tuple[str, ...]]]:
    """name → (class, schema version, fields) of every registered state type."""
    return {n: (t.cls, t.version, t.fields) for n, t in sorted(_BY_NAME.items())}


def _getter(names):
    def values(obj):
        return tuple(getattr(obj, n) for n in names)
    return values


def _builder(cls, names):
    setter = object.__setattr__
    new = object.__new__

    def build(values):
        obj = new(cls)
        for n, v in zip(names, values):
            setter(obj, n, v)
        return obj
    return build


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7f) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [_varint(n) for n in range(256)]


def _length(n: int) -> bytes:
    return _SMALL[n] if n < 256 else _varint(n)


def _enc(value, out) -> None:
    fn = _ENCODERS.get(type(value))
    if fn is not None:
        fn(value, out)
        return
    entry = _BY_CLASS.get(type(value))
    if entry is not None:
        values = entry.values(value)
        out.append(_OBJECT)
        out.append(entry.name_bytes)
        out.append(_length(entry.version))
        out.append(_length(len(values)))
        for v in values:
            _enc(v, out)
        return
    unwrap = _WRAPPERS.get(type(value))
    if unwrap is not None:
        _enc(unwrap(value), out)
        return
    if isinstance(value, np.generic):
        _enc_npscalar(value, out)
        return
    raise UnregisteredStateType(
        f'{type(value).__module__}.{type(value).__qualname__} is not a registered state type '
        '(beam_dp.io.state_coder.register; see docs/state.md)')


def _enc_none(value, out):
    out.append(_NONE)


def _enc_bool(value, out):
    out.append(_TRUE if value else _FALSE)


def _enc_int(value, out):
    if _INT_MIN <= value <= _INT_MAX:
        out.append(_INT)
        out.append(_Q.pack(value))
    else:
        raw = value.to_bytes((value.bit_length() + 8) // 8, 'big', signed=True)
        out.append(_BIGINT)
        out.append(_length(len(raw)))
        out.append(raw)


def _enc_float(value, out):
    out.append(_FLOAT)
    out.append(_D.pack(value))


def _enc_str(value, out):
    raw = value.encode('utf-8', 'surrogatepass')
    out.append(_STR)
    out.append(_length(len(raw)))
    out.append(raw)


def _enc_bytes(value, out):
    out.append(_BYTES)
    out.append(_length(len(value)))
    out.append(bytes(value))


def _enc_seq(tag):
    def enc(value, out):
        out.append(tag)
        out.append(_length(len(value)))
        append, pack = out.append, _Q.pack
        for v in value:
            # ``_enc_int`` inlined for the common 64-bit int (the same bytes): unit tables
            # hold millions of them
            # pylint: disable-next=unidiomatic-typecheck
            if type(v) is int and _INT_MIN <= v <= _INT_MAX:
                append(_INT)
                append(pack(v))
            else:
                _enc(v, out)
    return enc


def _enc_dict(value, out):
    out.append(_DICT)
    out.append(_length(len(value)))
    append = out.append
    for k, v in value.items():
        # ``_enc_bytes`` inlined (the same bytes)
        if type(k) is bytes:  # pylint: disable=unidiomatic-typecheck
            append(_BYTES)
            append(_length(len(k)))
            append(k)
        else:
            _enc(k, out)
        _enc(v, out)


def _enc_set(tag):
    def enc(value, out):
        items = sorted(encode_body(v) for v in value)
        out.append(tag)
        out.append(_length(len(items)))
        out.extend(items)
    return enc


def _dtype(dtype) -> bytes:
    if dtype.hasobject or dtype.fields is not None:
        raise UnregisteredStateType(f'numpy dtype {dtype} cannot be kept in state')
    raw = dtype.str.encode('ascii')
    return _length(len(raw)) + raw


def _enc_array(value, out):
    if value.dtype.hasobject and value.dtype.fields is None:
        # exact arithmetic (Python ints, ...): shape, then each element in C order
        out.append(_OBJARRAY)
        out.append(_length(value.ndim))
        for n in value.shape:
            out.append(_length(n))
        for v in value.ravel(order='C').tolist():
            _enc(v, out)
        return
    out.append(_ARRAY)
    out.append(_dtype(value.dtype))
    out.append(_length(value.ndim))
    for n in value.shape:
        out.append(_length(n))
    raw = np.ascontiguousarray(value).tobytes()
    out.append(_length(len(raw)))
    out.append(raw)


def _enc_npscalar(value, out):
    out.append(_NPSCALAR)
    out.append(_dtype(value.dtype))
    out.append(value.tobytes())


_ENCODERS = {
    type(None): _enc_none, bool: _enc_bool, int: _enc_int, float: _enc_float, str: _enc_str,
    bytes: _enc_bytes, tuple: _enc_seq(_TUPLE), list: _enc_seq(_LIST), dict: _enc_dict,
    set: _enc_set(_SET), frozenset: _enc_set(_FROZENSET), np.ndarray: _enc_array,
}
for _scalar in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                np.uint64, np.float16, np.float32, np.float64, np.bool_, np.complex64,
                np.complex128):
    _ENCODERS[_scalar] = _enc_npscalar


def encode_body(value) -> bytes:
    out = []
    _enc(value, out)
    return b''.join(out)


def encode(value) -> bytes:
    """``value`` in the state format (leading format version byte)."""
    out = [_FORMAT_BYTE]
    _enc(value, out)
    return b''.join(out)


_FORMAT_BYTE = bytes([FORMAT_VERSION])


# --- decoding -------------------------------------------------------------------------------

def _read_varint(buf, pos):
    n = buf[pos]
    pos += 1
    if n < 0x80:
        return n, pos
    n &= 0x7f
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7f) << shift
        if b < 0x80:
            return n, pos
        shift += 7


_unpack_q = _Q.unpack_from
_unpack_d = _D.unpack_from


def _dec(buf, pos):
    tag = buf[pos]
    pos += 1
    if tag == 0x69:                                     # i
        return _unpack_q(buf, pos)[0], pos + 8
    if tag == 0x74 or tag == 0x6c:                      # t, l
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = _read_varint(buf, pos)
        items = []
        append = items.append
        for _ in range(n):
            v, pos = _dec(buf, pos)
            append(v)
        return (tuple(items) if tag == 0x74 else items), pos
    if tag == 0x6f:                                     # o
        return _dec_object(buf, pos)
    if tag == 0x66:                                     # f
        return _unpack_d(buf, pos)[0], pos + 8
    if tag == 0x4e:                                     # N
        return None, pos
    if tag == 0x73:                                     # s
        n, pos = _read_varint(buf, pos)
        return str(buf[pos:pos + n], 'utf-8', 'surrogatepass'), pos + n
    if tag == 0x54:
        return True, pos
    if tag == 0x46:
        return False, pos
    if tag == 0x64:                                     # d
        n, pos = _read_varint(buf, pos)
        out = {}
        for _ in range(n):
            k, pos = _dec(buf, pos)
            out[k], pos = _dec(buf, pos)
        return out, pos
    if tag == 0x62:                                     # b
        n, pos = _read_varint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if tag == 0x49:                                     # I
        n, pos = _read_varint(buf, pos)
        return int.from_bytes(buf[pos:pos + n], 'big', signed=True), pos + n
    if tag == 0x53 or tag == 0x5a:                      # S, Z
        n, pos = _read_varint(buf, pos)
        items, pos = _dec_items(buf, pos, n)
        return (set(items) if tag == 0x53 else frozenset(items)), pos
    if tag == 0x61:                                     # a
        dtype, pos = _read_dtype(buf, pos)
        shape, pos = _read_shape(buf, pos)
        n, pos = _read_varint(buf, pos)
        arr = np.frombuffer(buf, dtype=dtype, count=n // dtype.itemsize if dtype.itemsize else 0,
                            offset=pos).reshape(shape).copy()     # one copy, writable
        return arr, pos + n
    if tag == 0x41:                                     # A
        shape, pos = _read_shape(buf, pos)
        arr = np.empty(shape, dtype=object)
        flat = arr.reshape(-1)
        for i in range(flat.size):
            flat[i], pos = _dec(buf, pos)
        return arr, pos
    if tag == 0x67:                                     # g
        dtype, pos = _read_dtype(buf, pos)
        size = dtype.itemsize
        return np.frombuffer(buf, dtype=dtype, count=1, offset=pos)[0].copy(), pos + size
    raise StateFormatError(f'unknown state tag {tag!r} at byte {pos - 1}')


_DTYPES: Dict[bytes, np.dtype] = {}


def _read_dtype(buf, pos):
    n, pos = _read_varint(buf, pos)
    raw = bytes(buf[pos:pos + n])
    dtype = _DTYPES.get(raw)
    if dtype is None:
        dtype = _DTYPES[raw] = np.dtype(raw.decode('ascii'))
    return dtype, pos + n


def _read_many(buf, pos, count: int, read):
    """``count`` values read one after the other by ``read(buf, pos) -> (value, pos)``: (the
    list of them, the position after)."""
    items = []
    for _ in range(count):
        v, pos = read(buf, pos)
        items.append(v)
    return items, pos


def _dec_items(buf, pos, count: int):
    """``count`` encoded values from ``pos``: (the list of them, the position after)."""
    return _read_many(buf, pos, count, _dec)


def _read_shape(buf, pos):
    """An array shape (its length, then each dimension, as varints): (shape, position)."""
    ndim, pos = _read_varint(buf, pos)
    return _read_many(buf, pos, ndim, _read_varint)


def _dec_object(buf, pos):
    n, pos = _read_varint(buf, pos)
    raw = bytes(buf[pos:pos + n])
    pos += n
    version, pos = _read_varint(buf, pos)
    count, pos = _read_varint(buf, pos)
    values, pos = _dec_items(buf, pos, count)
    entry = _BY_RAW_NAME.get(raw)
    if entry is None or entry is not _BY_NAME.get(entry.name):
        name = raw.decode('utf-8')
        entry = _BY_NAME.get(name)
        if entry is not None:
            _BY_RAW_NAME[raw] = entry
    if entry is None:
        raise StateFormatError(f'state holds a {raw.decode("utf-8", "replace")!r}, which this '
                               'release does not know')
    values = tuple(values)
    if version != entry.version:
        if version > entry.version:
            raise StateFormatError(
                f'state holds {entry.name!r} of schema version {version}, written by a newer release '
                f'(this one reads up to {entry.version})')
        for v in range(version, entry.version):
            values = tuple(entry.upgrades[v](values))
    if len(values) != len(entry.fields):
        raise StateFormatError(f'{entry.name!r} v{entry.version}: {len(values)} fields stored, '
                               f'{len(entry.fields)} expected')
    return entry.build(values), pos


def decode(data: bytes):
    """The value ``encode`` wrote; ``StateFormatError`` when it cannot be read."""
    if not data:
        raise StateFormatError('empty state value')
    fmt = data[0]
    if fmt not in _READABLE:
        raise StateFormatError(
            f'state format version {fmt}: this release reads {_READABLE} (state written by a '
            'newer beam_dp, or by one older than versioned state: docs/state.md)')
    value, pos = _dec(memoryview(data), 1)
    if pos != len(data):
        raise StateFormatError(f'{len(data) - pos} trailing bytes after a state value')
    return value
