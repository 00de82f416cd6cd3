"""Noise addresses are injective by construction (``beam_dp.noise.address``).

* ``canonical_key`` maps every value a record's key can take to the key the transform keeps;
  two inputs with one canonical form are one key, anything without a canonical form is refused.
* ``encode_address`` is injective over canonical label tuples: a generated set of distinct
  canonical keys (and addresses built from them) never shares an encoding, nor a
  ``KeyedRandom`` stream.
* The stream id roots every ``KeyedRandom`` address.
"""

import collections
import enum
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp.errors import InvalidRecordError
from beam_dp.noise import KeyedRandom
from beam_dp.noise import NoiseKeyRef
from beam_dp.noise import canonical_key
from beam_dp.noise import encode_address
from beam_dp.noise.secret_key import clear_key_cache

KEY_ENV = 'BEAM_DP_ADDRESS_TEST_KEY'
Point = collections.namedtuple('Point', 'x y')


class Colour(enum.IntEnum):
    RED = 1


class Name(str, enum.Enum):
    A = 'a'


def _typed(value):
    """A structural identity that tells 1, 1.0 and True apart (Python's == does not)."""
    if isinstance(value, tuple):
        return ('tuple', tuple(_typed(v) for v in value))
    if isinstance(value, float):
        return ('float', value.hex())
    return (type(value).__name__, value)


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.integers(min_value=-2**63, max_value=2**63 - 1).map(np.int64),
    st.integers(min_value=0, max_value=2**32 - 1).map(np.uint32),
    st.text(max_size=6), st.text(max_size=6).map(np.str_),
    st.binary(max_size=6), st.binary(max_size=6).map(np.bytes_),
    st.floats(allow_nan=False), st.floats(allow_nan=False, width=32).map(np.float32),
    st.sampled_from([Colour.RED, Name.A]))
_KEYS = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.tuples(inner, inner).map(lambda t: Point(*t))), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEYS, min_size=2, max_size=12))
def test_distinct_canonical_keys_never_share_an_address(keys):
    canon = [canonical_key(k) for k in keys]
    by_encoding = {}
    for key in canon:
        for address in ((key,), ('T/Label', key, 3), ('T/Label', 'select', key)):
            encoded = encode_address(address)
            typed = tuple(_typed(x) for x in address)
            assert by_encoding.setdefault(encoded, typed) == typed
    # Canonical forms are fixed points and contain only canonical types.
    for key in canon:
        assert _typed(canonical_key(key)) == _typed(key)


@pytest.mark.parametrize('a,b', [
    (('k', 1), ['k', 1]), (1, np.int64(1)), ('a', np.str_('a')), (b'x', np.bytes_(b'x')),
    (Point(1, 2), (1, 2)), (Colour.RED, 1), (Name.A, 'a'), (2.5, np.float64(2.5)),
    (True, np.bool_(True)),
])
def test_inputs_with_one_canonical_form_are_one_key(a, b):
    assert _typed(canonical_key(a)) == _typed(canonical_key(b))
    assert encode_address((canonical_key(a),)) == encode_address((canonical_key(b),))


@pytest.mark.parametrize('a,b', [(1, True), (1, 1.0), (0.0, -0.0), ('1', 1), (b'a', 'a'),
                                 (('a',), 'a'), ((), None), (('a', 'b'), (('a', 'b'),))])
def test_keys_python_may_confuse_get_distinct_addresses(a, b):
    assert encode_address((canonical_key(a),)) != encode_address((canonical_key(b),))


class _SameRepr:
    def __repr__(self):
        return 'same'


@pytest.mark.parametrize('bad', [_SameRepr(), object(), math.nan, np.float64('nan'), {'a': 1},
                                 {1, 2}, ('a', _SameRepr()), ('a', {'x'})])
def test_keys_without_a_canonical_form_are_refused(bad):
    with pytest.raises(InvalidRecordError, match='key'):
        canonical_key(bad)


def _deep(n):
    value = ()
    for _ in range(n):
        value = (value,)
    return value


def test_too_deep_keys_are_refused():
    canonical_key(_deep(30))
    with pytest.raises(InvalidRecordError, match='nested deeper'):
        canonical_key(_deep(40))


@pytest.mark.parametrize('label', [['k', 1], np.str_('a'), _SameRepr(), math.nan, Point(1, 2),
                                   bytearray(b'x')])
def test_the_encoder_refuses_non_canonical_labels(label):
    # Before: lists encoded as tuples, numpy strings as str and other objects by their repr.
    with pytest.raises(TypeError, match='not canonical'):
        encode_address(('T', label))


def test_keyed_streams_differ_by_address_and_stream(monkeypatch):
    monkeypatch.setenv(KEY_ENV, '5c' * 32)
    clear_key_cache()
    try:
        ref = NoiseKeyRef(f'env:{KEY_ENV}', 'stream-a')
        words = {}
        for labels in [('CityA/Counts', 'k', 0), ('CityB/Counts', 'k', 0), ('Counts', 'k', 0),
                       ('CityA/Counts', ('k', 1), 0), ('CityA/Counts', 'k', 1)]:
            words[labels] = KeyedRandom(ref).derive(*labels).uint64(4).tolist()
        assert len({tuple(w) for w in words.values()}) == len(words)
        other = KeyedRandom(NoiseKeyRef(f'env:{KEY_ENV}', 'stream-b')).derive('Counts', 'k', 0)
        assert other.uint64(4).tolist() != words[('Counts', 'k', 0)]
        again = KeyedRandom(NoiseKeyRef(f'env:{KEY_ENV}', 'stream-a')).derive('Counts', 'k', 0)
        assert again.uint64(4).tolist() == words[('Counts', 'k', 0)]
    finally:
        clear_key_cache()
