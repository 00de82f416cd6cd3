"""Secret-keyed noise: a PRF of (key, address, call index), the key never in the graph."""

import os
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.binary_tree import BinaryTreeCounter
from beam_dp.noise import secret_key
from beam_dp.noise.keyed import KeyedRandom
from beam_dp.noise.keyed import encode_labels

KEY = 'c0ffee' * 11                       # 66 bytes of text: a valid key


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv('BDP_TEST_NOISE_KEY', KEY)
    monkeypatch.setenv('BDP_TEST_OTHER_KEY', KEY[::-1])
    secret_key.clear_key_cache()
    yield
    secret_key.clear_key_cache()


def _rng(var='BDP_TEST_NOISE_KEY'):
    return KeyedRandom(f'env:{var}')


def test_same_address_same_words_in_any_derive_order():
    base = _rng()
    a1 = base.derive('label', 'key-a', 7)
    b1 = base.derive('label', 'key-b', 7)
    b_first = _rng().derive('label', 'key-b', 7).uint64(5)
    assert b1.uint64(5).tolist() == b_first.tolist()
    assert a1.uint64(5).tolist() == _rng().derive('label').derive('key-a', 7).uint64(5).tolist()
    # numpy and Python integers are one address; different addresses, keys, calls differ.
    assert (_rng().derive('label', 'key-a', np.int64(7)).uint64(3).tolist()
            == _rng().derive('label', 'key-a', 7).uint64(3).tolist())
    words = {tuple(r.uint64(3).tolist()) for r in (
        _rng().derive('label', 'key-a', 8), _rng().derive('label', 'key-a', '7'),
        _rng('BDP_TEST_OTHER_KEY').derive('label', 'key-a', 7), _rng().derive('label', 'key-a'))}
    assert len(words) == 4
    r = _rng().derive('x')
    assert r.uint64(4).tolist() != r.uint64(4).tolist()


def test_label_encoding_is_injective_on_tricky_pairs():
    pairs = [(('ab', 'c'), ('a', 'bc')), ((1,), ('1',)), ((True,), (1,)), ((None,), ('None',)),
             (((1, 2),), (1, 2)), ((b'x',), ('x',)), ((1.0,), (1,))]
    for a, b in pairs:
        assert encode_labels(a) != encode_labels(b), (a, b)


def test_identical_in_another_process():
    code = ('from beam_dp.noise.keyed import KeyedRandom; '
            "print(KeyedRandom('env:BDP_TEST_NOISE_KEY').derive('t', 'k', 3).uint64(4).tolist())")
    env = dict(os.environ, BDP_TEST_NOISE_KEY=KEY)
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__)))))
    assert out.stdout.strip() == str(_rng().derive('t', 'k', 3).uint64(4).tolist())


def test_pickle_holds_the_reference_only_and_resumes_mid_stream():
    r = _rng().derive('label', 'key', 3)
    r.uint64(2)
    blob = pickle.dumps(r)
    master = secret_key.NoiseKeyRef('env:BDP_TEST_NOISE_KEY').master_key()
    for secret in (KEY.encode(), master, r._key()):   # pylint: disable=protected-access
        assert secret not in blob
    assert b'env:BDP_TEST_NOISE_KEY' in blob
    clone = pickle.loads(blob)
    assert clone.uint64(3).tolist() == r.uint64(3).tolist()
    text = repr(r) + str(r)
    assert KEY not in text and 'key' not in text.replace('noise_key', '')
    assert 'BDP_TEST_NOISE_KEY' in text


def test_replayed_release_step_is_bit_identical():
    """A re-fired timer restarts from the stored state and redraws the step's address."""
    counter = BinaryTreeCounter(horizon=16, epsilon=0.5, estimator='textbook', dimension=3)
    state = counter.init_state()
    for t in range(7):
        _, state = counter.step(state, [t, 1, 2], _rng().derive('Count', 'shard-0', t))
    first, _ = counter.step(state, [5, 5, 5], _rng().derive('Count', 'shard-0', 7))
    replay, _ = counter.step(state, [5, 5, 5], _rng().derive('Count', 'shard-0', 7))
    assert first.tolist() == replay.tolist()
    secure = [counter.step(state, [5, 5, 5], noise.secure_rng())[0].tolist() for _ in range(4)]
    assert len({tuple(x) for x in secure}) > 1       # today's default: fresh draws


def test_short_missing_and_malformed_keys_are_refused(monkeypatch, tmp_path):
    monkeypatch.setenv('BDP_SHORT', 'x' * 31)
    with pytest.raises(InvalidParamsError, match='31 bytes; at least 32'):
        _rng('BDP_SHORT').uint64(1)
    monkeypatch.delenv('BDP_UNSET', raising=False)
    with pytest.raises(InvalidParamsError, match='BDP_UNSET .* is not set'):
        _rng('BDP_UNSET').derive('a').uint64(1)
    for bad in ['thisIsTheKeyItself-0123456789abcdef0123456789', 'env:1BAD', 'file:rel/path',
                'gcpsm:projects/p/secrets/s', 'ENV:X']:
        with pytest.raises(InvalidParamsError, match='never the key itself') as info:
            KeyedRandom(bad)
        if not bad.startswith(('env:', 'file:', 'gcpsm:')):
            assert bad not in str(info.value)
    with pytest.raises(InvalidParamsError, match='cannot read the noise key file'):
        KeyedRandom(f'file:{tmp_path}/missing').uint64(1)


def test_file_key_drops_one_trailing_newline(tmp_path):
    path = tmp_path / 'key'
    path.write_bytes(KEY.encode() + b'\n')
    assert (KeyedRandom(f'file:{path}').derive('a').uint64(2).tolist()
            == _rng().derive('a').uint64(2).tolist())


def test_secret_manager_is_lazy_and_explained(monkeypatch):
    name = 'projects/p/secrets/noise/versions/3'
    monkeypatch.setitem(sys.modules, 'google.cloud.secretmanager', None)
    rng = KeyedRandom(f'gcpsm:{name}')              # no import, no access at construction
    with pytest.raises(InvalidParamsError, match='google-cloud-secret-manager'):
        rng.uint64(1)

    calls = []

    class Client:
        def access_secret_version(self, name):
            calls.append(name)
            return types.SimpleNamespace(payload=types.SimpleNamespace(data=KEY.encode()))

    fake = types.ModuleType('google.cloud.secretmanager')
    fake.SecretManagerServiceClient = Client
    monkeypatch.setitem(sys.modules, 'google.cloud.secretmanager', fake)
    import google.cloud                                # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(google.cloud, 'secretmanager', fake, raising=False)
    words = KeyedRandom(f'gcpsm:{name}').derive('a').uint64(2).tolist()
    KeyedRandom(f'gcpsm:{name}').derive('b').uint64(2)
    assert words == _rng().derive('a').uint64(2).tolist()
    assert calls == [name]                           # resolved once per process


def test_keyed_source_feeds_every_sampler():
    r = _rng().derive('samplers')
    assert r.is_secure
    x = noise.discrete_laplace(r, 3.0, 4000)
    assert abs(x.mean()) < 0.5 and 12 < x.var() < 24      # variance ≈ 17.5
    assert isinstance(noise.discrete_gaussian(r, 4.0), int)
    assert 0 <= r.randbits(70) < 2 ** 70
