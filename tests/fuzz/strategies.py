"""Helper module (no tests): hypothesis strategies of hostile input for the fuzz tests, and a
direct driver of a transform's extraction DoFn (its ``process()`` called as a plain generator
with a timestamp: no pipeline, so 10^4 cases take seconds).

Bad keys: unhashable (lists, dicts, sets), non-string (ints, floats, bytes, None, tuples),
numpy scalars (``numpy.str_``, ``numpy.int64``), strings with lone surrogates. Bad values: None,
NaN, ±inf, huge and negative numbers, strings, numpy scalars. Event times: before ``start``,
after ``end``, Beam's minimum and maximum timestamps. Records: the right shape, too short, not
a tuple at all.
"""

import math

import numpy as np
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.timestamp import Timestamp
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp.io.records import DeadLetter
from beam_dp.transforms.shell import DEAD_LETTER
from tests import families

__all__ = ['FUZZ', 'bad_or_good_keys', 'event_micros', 'extract', 'ids', 'records', 'values']

#: 10^4 generated cases per pure property (no shrinking database: reproducible from the seed).
FUZZ = settings(max_examples=10_000, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))

START, END = 0, 10 * 1_000_000        # the families' clock: start=0, step=1 s, end=10 s

_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_text = st.text(max_size=6)
surrogate_strings = st.builds(lambda a, s, b: a + s + b, _text, _surrogate, _text)
unhashable = st.one_of(st.lists(st.integers(), max_size=2), st.dictionaries(_text, st.integers(),
                                                                               max_size=2),
                       st.sets(st.integers(), max_size=2), st.builds(bytearray, st.binary()))
numpy_scalars = st.one_of(st.builds(np.str_, st.sampled_from(families.KEYS)),
                          st.builds(np.str_, _text), st.builds(np.int64, st.integers(-9, 9)),
                          st.builds(np.float64, st.floats()))
non_strings = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=4),
                        st.booleans(), st.tuples(st.integers()), st.just(object()))


def bad_or_good_keys():
    """Mostly hostile keys, with enough public keys that good records occur."""
    return st.one_of(st.sampled_from(families.KEYS), st.sampled_from(families.KEYS),
                     _text, surrogate_strings, unhashable, numpy_scalars, non_strings)


def values():
    """Numbers of every kind and non-numbers."""
    return st.one_of(
        st.sampled_from([0, 1, -1, 2.5, -2.0, 3.0, None, math.nan, math.inf, -math.inf, 1e308,
                         -1e308, 2 ** 70, -(2 ** 70), '1.5', 'x', True]),
        st.floats(), st.integers(), st.builds(np.float64, st.floats()),
        st.builds(np.int64, st.integers(-2 ** 63, 2 ** 63 - 1)),
        st.sampled_from(families.BINS), _text, unhashable)


def ids():
    """Record ids: few distinct ones (duplicates and deletions of unknown ids), None, unhashable."""
    return st.one_of(st.sampled_from(['r1', 'r2', 'r3', 1, 2, None]), st.integers(0, 5),
                     unhashable, surrogate_strings, st.floats())


def event_micros():
    """Inside the clock, before ``start``, after ``end``, at its edges and at Beam's limits."""
    return st.one_of(
        st.integers(START, END - 1), st.integers(START, END - 1),
        st.integers(-10 ** 12, START - 1), st.integers(END, 10 ** 13),
        st.sampled_from([START, START - 1, END - 1, END, MIN_TIMESTAMP.micros,
                         MAX_TIMESTAMP.micros, GlobalWindow().max_timestamp().micros]))


def records(third=None):
    """Records of the families' shape (key, value, unit|op) and malformed ones."""
    third = st.one_of(st.sampled_from(['u1', 'u2', 'u3']), unhashable, st.none(),
                      st.integers(0, 3)) if third is None else third
    plausible = st.tuples(st.sampled_from(families.KEYS),
                          st.sampled_from(families.BINS + ('r1', 'r2', 1, 0.5, -1.5)),
                          st.sampled_from(['u1', 'u2', 1, -1, 'insert', 'delete']))
    return st.one_of(plausible, st.tuples(bad_or_good_keys(), values(), third),
                     st.tuples(bad_or_good_keys()), st.none(), st.integers(), _text,
                     unhashable)


def extract(fn, record, micros):
    """Calls the DoFn's ``process`` directly; returns (valid outputs, dead letters, others)."""
    outputs = list(fn.process(record, timestamp=Timestamp(micros=micros)))
    valid, dead, other = [], [], []
    for out in outputs:
        if isinstance(out, TaggedOutput):
            if out.tag == DEAD_LETTER:
                assert isinstance(out.value, DeadLetter), out.value
                assert out.value.reason, 'a dead letter without a reason'
                dead.append(out.value)
            else:
                other.append(out)
        else:
            valid.append(out)
    return valid, dead, other


def extract_tagged(fn, element, micros):
    """``extract`` for a DoFn that also takes the window (the growing-database tagger)."""
    outputs = fn.process(element, timestamp=Timestamp(micros=micros), window=GlobalWindow())
    return _split(list(outputs))


def _split(outputs):
    valid, dead, other = [], [], []
    for out in outputs:
        if isinstance(out, TaggedOutput):
            (dead if out.tag == DEAD_LETTER else other).append(
                out.value if out.tag == DEAD_LETTER else out)
        else:
            valid.append(out)
    for d in dead:
        assert isinstance(d, DeadLetter) and d.reason, d
    return valid, dead, other
