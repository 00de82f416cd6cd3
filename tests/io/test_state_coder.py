"""The state coder (``beam_dp.io.state_coder``): plain values and every registered state type
round-trip exactly and deterministically, an unregistered type is refused, the format version
byte and the schema versions are checked, and the registry's schemas are pinned."""

import json
import pathlib
import pickle

import numpy as np
import pytest

from beam_dp.io import state_coder
from beam_dp.io.state_coder import StateFormatError
from beam_dp.io.state_coder import UnregisteredStateType
from beam_dp.transforms import contribution_bounding  # noqa: F401  (registers the unit table)
from beam_dp.transforms import release_loop  # noqa: F401  (registers the cache wrapper)
from beam_dp.transforms import state_types

SCHEMA = pathlib.Path(__file__).with_name('state_schema.json')

PLAIN = [
    None, True, False, 0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 200 + 7, 1.5, -0.0,
    float('inf'), 'é\u2603', '', b'\x00\xff', (), (1, 'a'), [1, [2, (3,)]],
    {'b': 1, 'a': (2.5, None)}, {3, 1, 2}, frozenset({'x', 'y'}),
    np.arange(6, dtype=np.int64).reshape(2, 3), np.zeros((0, 4)), np.array([1.5], np.float32),
    np.int64(-5), np.float64(0.25), np.bool_(True), {(1, 'k'): [np.uint8(3)]},
    np.array([[2 ** 70, -3], [0, 5]], dtype=object),
]


def _same(a, b):
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and all(map(_same, a.ravel().tolist(), b.ravel().tolist())))
    if isinstance(a, (np.generic,)):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return (type(a) is type(b) and list(a) == list(b)
                and all(_same(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and a == 0:
        return type(b) is float and str(a) == str(b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize('value', PLAIN, ids=repr)
def test_plain_values_round_trip(value):
    data = state_coder.encode(value)
    assert data[0] == state_coder.FORMAT_VERSION
    back = state_coder.decode(data)
    assert _same(value, back), (value, back)
    assert state_coder.encode(back) == data                     # deterministic


def test_sets_encode_independently_of_insertion_order():
    a, b = {'x', 'yy', 'zzz', 1}, set()
    for v in (1, 'zzz', 'yy', 'x'):
        b.add(v)
    assert state_coder.encode(a) == state_coder.encode(b)


def _sample(i):
    return {b'unit': (i, f'f{i}', i / 4, None, (i, np.arange(i + 1, dtype=np.int64)), [i])}


@pytest.mark.parametrize('name', sorted(state_coder.registered()))
def test_every_registered_type_round_trips(name):
    cls, _, fields = state_coder.registered()[name]
    entry = state_coder._BY_NAME[name]  # pylint: disable=protected-access
    values = tuple(_sample(i) for i in range(len(fields)))
    obj = entry.build(values)
    assert type(obj) is cls
    back = state_coder.decode(state_coder.encode(obj))
    assert type(back) is cls
    assert _same(entry.values(back), entry.values(obj))
    assert state_coder.encode(back) == state_coder.encode(obj)


def test_registry_schemas_are_pinned():
    """A registered type whose fields change must bump its schema version (and give upgrades
    from the old one); then update tests/io/state_schema.json. A new type is added there."""
    pinned = json.loads(SCHEMA.read_text())
    now = {n: {'version': v, 'fields': list(f)} for n, (_, v, f) in
           state_coder.registered().items()}
    for name, entry in pinned.items():
        assert name in now, f'state type {name!r} was unregistered: old state holds it'
        if now[name]['fields'] != entry['fields']:
            assert now[name]['version'] > entry['version'], (
                f'{name}: fields changed without a schema version bump')
    assert now == pinned, 'update tests/io/state_schema.json (new or upgraded state types)'


def test_every_state_type_of_the_table_is_registered():
    registered = {cls for cls, _, _ in state_coder.registered().values()}
    assert set(state_types.STATE_TYPES.values()) <= registered


class _Unregistered:
    def __init__(self):
        self.x = 1


@pytest.mark.parametrize('value', [_Unregistered(), [1, {'a': _Unregistered()}],
                                   np.array([object()], dtype=object), object(),
                                   np.zeros(2, dtype=[('a', 'i4')])])
def test_unregistered_types_are_refused(value):
    with pytest.raises(UnregisteredStateType):
        state_coder.encode(value)


def test_a_subclass_of_a_plain_type_is_refused():
    class Mine(dict):
        pass
    with pytest.raises(UnregisteredStateType):
        state_coder.encode(Mine(a=1))


def test_format_version_is_checked():
    data = state_coder.encode((1, 2))
    with pytest.raises(StateFormatError, match='format version 2'):
        state_coder.decode(bytes([2]) + data[1:])
    with pytest.raises(StateFormatError, match='format version'):
        state_coder.decode(pickle.dumps((1, 2)))             # state of a pre-versioned release
    with pytest.raises(StateFormatError):
        state_coder.decode(data + b'N')                        # trailing bytes
    with pytest.raises(StateFormatError):
        state_coder.decode(b'')


class _Point:
    __slots__ = ('x', 'y', 'z')


def test_schema_versions_upgrade_and_refuse_newer():
    name = 'test.Point'
    state_coder.register(_Point, name=name, version=1, fields=('x', 'y'))
    try:
        p = object.__new__(_Point)
        p.x, p.y = 1, 2
        old = state_coder.encode(p)
        # v2 adds z (default 0); v1 state decodes through the upgrade.
        state_coder.register(_Point, name=name, version=2, fields=('x', 'y', 'z'),
                             upgrades={1: lambda f: f + (0,)})
        q = state_coder.decode(old)
        assert (q.x, q.y, q.z) == (1, 2, 0)
        q.z = 5
        newer = state_coder.encode(q)
        state_coder.register(_Point, name=name, version=1, fields=('x', 'y'))
        with pytest.raises(StateFormatError, match='newer release'):
            state_coder.decode(newer)
    finally:
        state_coder._BY_NAME.pop(name, None)  # pylint: disable=protected-access
        state_coder._BY_CLASS.pop(_Point, None)  # pylint: disable=protected-access
    with pytest.raises(StateFormatError, match='does not know'):
        state_coder.decode(old)


def test_registering_a_version_without_upgrades_is_refused():
    with pytest.raises(ValueError, match='needs upgrades'):
        state_coder.register(_Point, name='test.Other', version=3, upgrades={1: tuple})


def test_a_bounding_key_stored_at_version_1_decodes_with_no_latest_step():
    """``bounding.Key`` v2 added ``last``: a v1 key (dead, live) decodes with last = −1."""
    from beam_dp.drivers.bounding import _Key  # pylint: disable=import-outside-toplevel
    name = 'bounding.Key'
    entry = state_coder._BY_NAME[name]  # pylint: disable=protected-access
    try:
        state_coder.register(_Key, name=name, version=1, fields=('dead', 'live'))
        old = state_coder.encode(_Key(3, {7: 2}))
    finally:
        state_coder._BY_NAME[name] = entry  # pylint: disable=protected-access
        state_coder._BY_CLASS[_Key] = entry  # pylint: disable=protected-access
    key = state_coder.decode(old)
    assert (key.dead, key.live, key.last) == (3, {7: 2}, -1)
    assert state_coder.registered()[name][1:] == (2, ('dead', 'live', 'last'))
