"""Fuzzing ChooseContributionBounds' input path: its 'ExtractAndValidate' DoFn called directly
on hostile records, element timestamps and ``time_fn`` values (10^4 cases each). Required: no
exception escapes, exactly one outcome per record (one (unit, (key, step)) element or one dead
letter with a reason), a kept element has an encodable unit, a step inside the clock, and a
well-formed record is never dead-lettered. Also the per-unit statistics on arbitrary cells."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beam_dp import ChooseContributionBounds
from beam_dp import PrivacyBudget
from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.drivers.bounds import unit_statistics
from beam_dp.transforms.choose_bounds import _ExtractFn
from tests.fuzz import strategies as fz

pytestmark = pytest.mark.fuzz

HORIZON = 10


def _fn(time_fn=None):
    t = ChooseContributionBounds(budget=PrivacyBudget(rho=0.1),
                                 release_budget=PrivacyBudget(rho=0.5), horizon=HORIZON,
                                 start=0, step=1, unit_fn=lambda r: r[2], time_fn=time_fn,
                                 label='Fuzz')
    return _ExtractFn('Fuzz', *t._fns, t._clock)


ELEMENT_TIME = _fn()
RECORD_TIME = _fn(time_fn=lambda r: r[1])


def _check(valid, dead, other, well_formed):
    assert not other and len(valid) + len(dead) == 1, (valid, dead, other)
    if valid:
        unit, (key, step) = valid[0]
        assert isinstance(unit, bytes) and 0 <= step < HORIZON
        hash(key)
    if well_formed:
        assert valid, dead


@fz.FUZZ
@given(record=fz.records(), micros=fz.event_micros())
def test_element_time_path(record, micros):
    valid, dead, other = fz.extract(ELEMENT_TIME, record, micros)
    well_formed = (isinstance(record, tuple) and len(record) == 3 and record[0] in
                   ('a', 'b', 'c') and record[2] in ('u1', 'u2', 'u3')
                   and 0 <= micros < HORIZON * 1_000_000)
    _check(valid, dead, other, well_formed and isinstance(record[0], str))


@fz.FUZZ
@given(record=st.tuples(fz.bad_or_good_keys(), fz.values(), st.sampled_from(['u1', None, 3])))
def test_record_time_path(record):
    valid, dead, other = fz.extract(RECORD_TIME, record, 0)
    t = record[1]
    well_formed = (isinstance(t, int) and not isinstance(t, bool) and 0 <= t < HORIZON
                   and record[2] == 'u1' and record[0] in ('a', 'b', 'c'))
    _check(valid, dead, other, well_formed)


@fz.FUZZ
@given(cells=st.dictionaries(st.tuples(st.text(max_size=2), st.integers(0, 50)),
                             st.integers(1, 10 ** 6), min_size=1, max_size=30))
def test_unit_statistics_are_in_range_and_bucketed(cells):
    k, m, s, c = unit_statistics(cells)
    assert 1 <= k <= len(cells) and 1 <= m <= c and 1 <= s <= len(cells) and k * s >= s
    assert c == sum(cells.values()) and c >= m
    chooser = CHOOSER
    buckets = chooser.bucket_indices((k, m, s, c))
    assert all(0 <= b < len(chooser.edges) for b in buckets)


CHOOSER = BoundsChooser(PrivacyBudget(rho=0.1), PrivacyBudget(rho=0.5), HORIZON)
