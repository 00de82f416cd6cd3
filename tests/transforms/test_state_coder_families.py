"""Every family of tests/families.py on the DirectRunner, its state through the versioned state
coder (``beam_dp.transforms.state_types.StateCoder``; the DirectRunner encodes and decodes every
state read and write): no family keeps an unregistered type (the coder raises, the pipeline
fails), every state value re-encodes to the same bytes after a decode (deterministic and
lossless), and the releases are those of the pure reference where the runner matrix checks it."""

import collections
import threading

import pytest

from beam_dp.io import state_coder
from beam_dp.transforms import state_types
from tests import families
from tests import runner_matrix as matrix
from tests import runners

_LOCK = threading.Lock()


@pytest.fixture
def recorded(monkeypatch):
    """Counts of the registered state types seen by the coder, checking every value."""
    seen = collections.Counter()
    encode = state_coder.encode

    def checked(value):
        data = encode(value)
        again = encode(state_coder.decode(data))
        assert again == data, f'state value does not round-trip: {value!r}'
        with _LOCK:
            seen[type(value).__name__] += 1
        return data

    monkeypatch.setattr(state_types.state_coder, 'encode', checked)
    return seen


@pytest.mark.parametrize('name', list(families.FAMILIES))
def test_family_state_goes_through_the_state_coder(name, recorded):
    got = matrix.run(runners.direct_options(streaming=name not in matrix.BOUNDED_ONLY),
                     [name])[name]
    assert any(got.values()), f'{name}: no output'
    if name not in matrix.BOUNDED_ONLY:     # batch: bounded by grouping, no state cells
        assert sum(recorded.values()) > 0, f'{name}: no state went through the state coder'
