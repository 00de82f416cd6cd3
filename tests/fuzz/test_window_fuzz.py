"""Fuzzing the per-step and window outputs: hostile ``output=`` values and WindowCounter
parameters either construct or raise ``InvalidParamsError`` (never another exception); for
random windows, trees and integer streams the noise-free releases are the exact window sums and
``release_variance`` is the node count times the node variance; the input path of the window
families is fuzzed with the others (tests/families.py: 'ContinualCountPerKey/window',
'ContinualCountPerKey/per_step/private', in tests/fuzz/test_extraction.py)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import noise
from beam_dp.drivers.keyed import parse_output
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.window import MAX_WINDOW
from beam_dp.mechanisms.window import WindowCounter
from beam_dp.mechanisms.window import window_decomposition

pytestmark = pytest.mark.fuzz

_SETTINGS = settings(max_examples=400, deadline=None, database=None, derandomize=True)
_HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, 1, -1, 2, 7, 2.5, math.nan, math.inf, 2 ** 62,
                     -(2 ** 63), MAX_WINDOW, MAX_WINDOW + 1, '', 'window', 'per_step',
                     'cumulative', (), [], {}]),
    st.integers(-5, 5000), st.floats(), st.text(max_size=4),
    st.builds(np.int64, st.integers(-3, 100)))


@_SETTINGS
@given(kind=_HOSTILE, w=_HOSTILE, as_list=st.booleans())
def test_output_parses_or_is_refused(kind, w, as_list):
    for candidate in (kind, [kind, w] if as_list else (kind, w), ('window', w)):
        try:
            out = parse_output('T', candidate)
        except InvalidParamsError:
            continue
        assert out in ('cumulative', 'per_step') or (
            out[0] == 'window' and isinstance(out[1], int) and 2 <= out[1] <= MAX_WINDOW)


@_SETTINGS
@given(window=_HOSTILE, arity=_HOSTILE, levels=_HOSTILE, eps=_HOSTILE)
def test_window_counter_constructs_or_raises_invalid_params(window, arity, levels, eps):
    for kw in (dict(window=window, epsilon=1.0), dict(window=7, arity=arity, levels=levels,
                                                      rho=0.5),
               dict(window=window, arity=arity, levels=levels, epsilon=eps)):
        try:
            WindowCounter(**kw)
        except InvalidParamsError:
            pass


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(window=st.integers(1, 40), arity=st.integers(2, 6), levels=st.integers(1, 4),
       stream=st.lists(st.integers(-50, 50), min_size=1, max_size=90))
def test_noise_free_releases_are_exact_window_sums(window, arity, levels, stream):
    try:
        m = WindowCounter(window=window, epsilon=1e9, arity=arity, levels=levels)
    except InvalidParamsError:
        return                                   # more levels than the window needs
    state, rng = m.init_state(), noise.seeded(0)
    for b, x in enumerate(stream):
        release, state = m.step(state, [x], rng)
        assert int(release[0]) == sum(stream[max(0, b + 1 - window):b + 1])
        nodes = window_decomposition(window, arity, m.h, b)
        assert m.release_variance(b + 1) == pytest.approx(len(nodes) *
                                                          m.node_noise.variance())
