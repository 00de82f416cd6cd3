"""Fuzzing every mechanism's parameters (issue 10): built with hostile values for any subset of
its constructor arguments, a mechanism either constructs or raises ``InvalidParamsError`` —
never another exception type (a TypeError, OverflowError, ZeroDivisionError or MemoryError at
construction would escape a transform's validation). 10^4 generated cases per mechanism: each
case draws three hostile values and which parameters of every mechanism get them.

The mechanisms are those of the contract tests (``tests/mechanisms``), whose ``make(**overrides)``
builds each from valid defaults (read back from the instance and overridden here); ``test_every_mechanism_runs_the_contract`` there keeps that
list complete.
"""

import importlib
import inspect
import math
import pkgutil
import resource

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tests.mechanisms
from beam_dp.errors import InvalidParamsError
from tests.fuzz import strategies as fz
from tests.mechanisms.contract import MechanismContract

pytestmark = pytest.mark.fuzz

_HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, 1, -1, 2, 3, 0.5, -0.5, 1e-300, 1e300, -1e300,
                     math.nan, math.inf, -math.inf, -0.0, 2 ** 31, 2 ** 62, 2 ** 64, -(2 ** 63),
                     '', '1', 'textbook', 'variance_reduced', (), [], {}, [1.0], (0.5, 0.5)]),
    st.floats(), st.integers(-10, 10), st.builds(np.float64, st.floats()),
    st.builds(np.int64, st.integers(-10, 10)), st.text(max_size=3))


def _contracts():
    for info in pkgutil.walk_packages(tests.mechanisms.__path__, 'tests.mechanisms.'):
        importlib.import_module(info.name)
    out, stack = {}, list(MechanismContract.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__name__.startswith('Test'):
            out[cls.__name__] = cls
    return out


def _factory(contract):
    """(class, valid keyword arguments read back from the contract's default instance)."""
    inst = contract().make()
    cls = type(inst)
    params = [n for n, p in inspect.signature(cls).parameters.items()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and hasattr(inst, n)]
    base = {n: getattr(inst, n) for n in params}
    cls(**base)                                   # the defaults are valid
    return cls, base


@pytest.fixture(scope='module', autouse=True)
def _memory_cap():
    """A constructor that allocates for a huge parameter must fail with MemoryError (reported
    below), not take the machine down: cap this process at its current size + 2 GiB."""
    with open('/proc/self/statm') as f:
        size = int(f.read().split()[0]) * resource.getpagesize()
    old = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + (2 << 30), old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


@pytest.fixture(scope='module')
def mechanisms():
    contracts = _contracts()
    assert len(contracts) >= 20, sorted(contracts)
    return [(name,) + _factory(contract) for name, contract in sorted(contracts.items())]


def test_every_mechanism_constructs_or_raises_invalid_params(mechanisms):
    outcomes = {name: [0, 0] for name, _, _ in mechanisms}

    @fz.FUZZ
    @given(values=st.lists(_HOSTILE, min_size=3, max_size=3), choice=st.integers(0, 2 ** 32 - 1))
    def check(values, choice):
        for i, (name, cls, base) in enumerate(mechanisms):
            params = list(base)
            # Up to three of its parameters (the drawn choice picks which), hostile values.
            overrides = {params[((choice >> (8 * j)) + 7 * i) % len(params)]: values[j]
                         for j in range(1 + choice % 3)}
            try:
                cls(**{**base, **overrides})
                outcomes[name][0] += 1
            except InvalidParamsError:
                outcomes[name][1] += 1
            except Exception as e:  # pylint: disable=broad-except
                escaped.setdefault((name, type(e).__name__), f'{overrides!r} raised {e!r}')

    escaped = {}
    check()
    assert not escaped, '\n'.join(f'{n}: {msg}' for (n, _), msg in sorted(escaped.items()))
    for name, (built, refused) in outcomes.items():
        assert built + refused >= 10_000 and refused > 0, (name, built, refused)
