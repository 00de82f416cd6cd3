"""The inlined int / bytes-key paths of the state coder write exactly the tagged bytes of the
format (``_enc_int`` / ``_enc_bytes``): built here by hand from the format's description."""

import struct

from beam_dp.io import state_coder


def _int(v):
    if -(1 << 63) <= v < (1 << 63):
        return b'i' + struct.pack('>q', v)
    raw = v.to_bytes((v.bit_length() + 8) // 8, 'big', signed=True)
    return b'I' + bytes([len(raw)]) + raw


def test_sequence_ints_and_bytes_keys_are_the_formats_bytes():
    ints = [0, 1, -1, (1 << 63) - 1, -(1 << 63), 1 << 63, -(1 << 63) - 1, 1 << 70]
    body = b''.join(_int(v) for v in ints)
    assert state_coder.encode(tuple(ints)) == b'\x01t' + bytes([len(ints)]) + body
    assert state_coder.encode(list(ints)) == b'\x01l' + bytes([len(ints)]) + body
    # bools are not ints here: their own tags
    assert state_coder.encode((True, False, 3)) == b'\x01t\x03TF' + _int(3)
    value = {b'u1': (2, ('k', 0, 5, 1)), 'text': 1, b'': ()}
    expected = (b'\x01d\x03' + b'b\x02u1' + b't\x02' + _int(2) + b't\x04s\x01k' + _int(0)
                + _int(5) + _int(1) + b's\x04text' + _int(1) + b'b\x00' + b't\x00')
    assert state_coder.encode(value) == expected
    assert state_coder.decode(expected) == value
    assert state_coder.decode(state_coder.encode(tuple(ints))) == tuple(ints)
