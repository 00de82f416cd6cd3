"""Fuzzing every transform's input path (issue 10): the DoFn where records enter
('ExtractAndValidate', or 'TagData'/'TagQueries' for the growing databases), found in the built
graph and called directly as a plain generator, 10^4 hypothesis cases per family.

Required of every record: no exception escapes; exactly ONE outcome, either one valid element or
one dead letter with a reason (so input = kept + dead-lettered, exactly); a kept element is safe
for every later stage (a ``str`` key that is valid UTF-8 and encodes deterministically, an
encodable unit, a hashable record id, a step of the clock, a bounded value); and a well-formed
record is never dead-lettered.
"""

import inspect
import math
import numbers

import pytest
from apache_beam.coders import StrUtf8Coder
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from beam_dp.drivers.growing import RECORD
from beam_dp.queries import LinearQuery
from beam_dp.transforms.continual_extract import _ExtractAndAggregateFn
from beam_dp.transforms.continual_extract import _ExtractAndAggregatePrivateFn
from beam_dp.transforms.continual_extract import _ExtractAndGroupFn
from beam_dp.transforms.contribution_bounding import unit_shard
from beam_dp.transforms.shell import key_bytes
from tests import families
from tests.fuzz import strategies as fz
from tests.fuzz.harness import entry_fn

pytestmark = pytest.mark.fuzz

LAST_STEP = 9


def run_entry(fn, record, micros):
    if isinstance(fn, _ExtractAndAggregateFn):
        return _run_aggregating_entry(fn, record, micros)
    if isinstance(fn, _ExtractAndGroupFn):
        return _run_grouping_entry(fn, record, micros)
    if isinstance(fn, _ExtractAndAggregatePrivateFn):
        return _run_aggregating_private_entry(fn, record, micros)
    if 'timestamp' in inspect.signature(fn.process).parameters:
        if 'window' in inspect.signature(fn.process).parameters:
            return fz.extract_tagged(fn, record, micros)
        return fz.extract(fn, record, micros)
    return fz._split(list(fn.process(record)))


def _run_aggregating_entry(fn, record, micros):
    """An entry that sums its bundle (event level, public keys): one record in a bundle of
    its own; its partial sums are turned back into the per-record shape (unit, (key index,
    step, (shard, slot, units))) for the checks, and must hold exactly that one record."""
    fn.start_bundle()
    valid, dead, other = fz.extract(fn, record, micros)
    assert not valid, valid                  # kept records leave only at the end of the bundle
    driver = fn._driver                      # pylint: disable=protected-access
    for out in fn.finish_bundle():
        unit, (shard, (step, positions, values)) = out.value
        assert list(out.windows) == [GlobalWindow()] and out.timestamp.micros == \
            driver.clock.step_end(step) - 1
        if getattr(driver, 'is_ratio', False):   # one record: every coordinate of its key
            slots, coordinates = positions.tolist(), values.tolist()
            slot, units = min(slots), tuple(u for _, u in sorted(zip(slots, coordinates)))
            assert slots == list(range(slot, slot + len(slots))) or sorted(slots) == list(
                range(slot, slot + len(slots)))
        else:
            (slot,), (units,) = positions.tolist(), values.tolist()
        key_index = slot // driver.bins_per_key * driver.num_shards + shard
        valid.append((unit, (key_index, step, (shard, slot, units))))
    return valid, dead, other


def _run_grouping_entry(fn, record, micros):
    """The user-level entry, which groups its bundle per unit shard: one record in a bundle of
    its own; its group is turned back into the per-record shape (unit, (key id, step, payload,
    rendering)) for the checks, and must hold exactly that one record, under its unit's
    encoding and shard, timestamped at the record."""
    fn.start_bundle()
    valid, dead, other = fz._split(list(fn.process(record, timestamp=Timestamp(micros=micros))
                                        or ()))
    assert not valid, valid                  # groups leave only at the end of the bundle
    for out in fn.finish_bundle():
        shard, units = out.value
        assert list(out.windows) == [GlobalWindow()] and out.timestamp.micros == micros
        ((encoded, unit, ((item, at),)),) = units
        assert encoded == key_bytes(unit) and shard == unit_shard(encoded) and at == micros
        valid.append((unit, item))
    return valid, dead, other


def _run_aggregating_private_entry(fn, record, micros):
    """The same for private keys (event level): the partial ``{key: (per-bin units,
    records)}`` of the one record, back in the per-record shape (unit, (key, step, (shard,
    key, bin, units, unit))). Learnt keys persist across bundles, so later records of a key
    take the fast path of counts."""
    fn.start_bundle()
    valid, dead, other = fz.extract(fn, record, micros)
    assert not valid, valid
    driver = fn._driver                      # pylint: disable=protected-access
    for out in fn.finish_bundle():
        unit, (shard, (step, payload)) = out.value
        assert list(out.windows) == [GlobalWindow()] and out.timestamp.micros == \
            driver.clock.step_end(step) - 1
        [(key, (units, records))] = payload.items()
        assert records == 1 and len(units) == driver.bins_per_key and shard == \
            driver.private_keys.shard_of(key)
        bin_index = next((i for i, u in enumerate(units) if u), 0)
        assert all(u == 0 for i, u in enumerate(units) if i != bin_index)
        valid.append((unit, (key, step, (shard, key, bin_index, units[bin_index], unit))))
    return valid, dead, other


def _good_key(key):
    return type(key) is str and key in families.KEYS


def _good_unit(unit):
    return isinstance(unit, str) and unit in ('u1', 'u2', 'u3')


def _in_clock(micros):
    return fz.START <= micros < fz.END


def _check_one_outcome(valid, dead, other, stage='ExtractAndValidate'):
    assert not other, other
    assert len(valid) + len(dead) == 1, (valid, dead)
    for d in dead:
        assert d.stage == stage and d.reason


# -- continual (public / user-level / private keys; count, sum, histogram) ----------------------

CONTINUAL = ['ContinualCountPerKey', 'ContinualCountPerKey/user', 'ContinualCountPerKey/private',
             'ContinualSumPerKey', 'ContinualHistogramPerKey', 'ContinualQuantilesPerKey',
             'ContinualQuantilesPerKey/user', 'ContinualQuantilesPerKey/private',
             'ContinualCountPerKey/window', 'ContinualCountPerKey/per_step/private',
             'ContinualMeanPerKey', 'ContinualVariancePerKey']
#: Families whose record adds a tuple of coordinates (count, centred sum[, squares]) per key.
RATIOS = ('ContinualMeanPerKey', 'ContinualVariancePerKey')


def _continual_good(name, record, micros):
    if not (isinstance(record, tuple) and len(record) == 3 and _in_clock(micros)):
        return False
    key, value, unit = record
    if not _good_key(key):
        return False
    if name.endswith(('user', 'private')) and not _good_unit(unit):
        return False
    if name.startswith('ContinualSumPerKey') or name in RATIOS:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value)
    if name == 'ContinualHistogramPerKey':
        return type(value) is str and value in families.BINS
    if name.startswith('ContinualQuantilesPerKey'):   # any real number (±inf clamped), not NaN
        return isinstance(value, numbers.Real) and not isinstance(value, bool) and \
            not math.isnan(value)
    return True


def check_continual(name, transform, fn, record, micros):
    driver = transform.driver
    valid, dead, other = run_entry(fn, record, micros)
    _check_one_outcome(valid, dead, other)
    if _continual_good(name, record, micros):
        assert valid, (name, record, micros, dead)
    for unit, (key_id, step, payload, *_) in valid:
        assert 0 <= step <= LAST_STEP
        units = payload[-2] if driver.private_keys is not None else payload[-1]
        if getattr(driver, 'is_ratio', False):   # (w_count, centred sum[, square]), each ≤ D
            assert type(units) is tuple and len(units) == driver.bins_per_key
            assert units[0] == driver.value_bound_units
            assert all(isinstance(u, int) and abs(u) <= driver.value_bound_units
                       for u in units)
        else:
            assert isinstance(units, int) and abs(units) <= driver.value_bound_units
        if driver.private_keys is not None:
            assert type(key_id) is str
            key_id.encode('utf-8')
            key_bytes((unit, key_id))                 # 'KeyByUnitAndKey' cannot fail
        else:
            assert isinstance(key_id, int)
        if unit is not None:
            key_bytes(unit)                           # 'BoundContributions' cannot fail
    return len(valid), len(dead)


# -- sparse and dynamic -------------------------------------------------------------------------

SEGMENTED = ['SparseContinualCountPerKey', 'SparseContinualCountPerKey/private',
             'SparseContinualHistogramPerKey', 'DynamicCountPerKey']
_STR_CODER = StrUtf8Coder()


def _segmented_good(name, record, micros):
    if not (isinstance(record, tuple) and len(record) == 3 and _in_clock(micros)):
        return False
    key, value, third = record
    if not _good_key(key):
        return False
    if name.startswith('Dynamic'):
        try:
            hash(value)
        except TypeError:
            return False
        return third in (1, -1, 'insert', 'delete') and type(third) in (int, str)
    if name == 'SparseContinualHistogramPerKey':
        return type(value) is str and value in families.BINS
    return True


def check_segmented(name, transform, fn, record, micros):
    del transform
    valid, dead, other = run_entry(fn, record, micros)
    _check_one_outcome(valid, dead, other)
    if _segmented_good(name, record, micros):
        assert valid, (name, record, micros, dead)
    for key, (step, payload) in valid:
        assert type(key) is str and 0 <= step <= LAST_STEP
        _STR_CODER.encode(key)                        # the 'ReleaseSegments' key coder
        if name.startswith('Dynamic'):
            (rid, op), = payload
            hash(rid)
            assert op in (1, -1)
    return len(valid), len(dead)


# -- key selection ------------------------------------------------------------------------------

def check_select_keys(name, transform, fn, record, micros):
    del name, transform
    valid, dead, other = run_entry(fn, record, micros)
    _check_one_outcome(valid, dead, other)
    if isinstance(record, tuple) and len(record) == 3 and _good_key(record[0]) and \
            _good_unit(record[2]):
        assert valid, (record, dead)
    for unit, key in valid:
        assert type(key) is str
        key.encode('utf-8')
        hash((unit, key))
        key_bytes(unit)
    return len(valid), len(dead)


# -- growing databases (data and queries) -------------------------------------------------------

GROWING = ['WindowedPMWG', 'BBSchedulerQueries', 'BBImproverQueries', 'SmallDBGQueries',
           'ERMGQueries']


def check_growing_data(name, transform, fn, index, micros):
    del name
    valid, dead, other = run_entry(fn, index, micros)
    _check_one_outcome(valid, dead, other, stage='TagData')
    clock = transform.clock
    if isinstance(index, numbers.Integral) and not isinstance(index, bool) and \
            0 <= index < families.DOMAIN and 0 <= clock.step_of(micros) <= clock.last_step:
        assert valid, (index, dead)
    for instance, payload in valid:
        t, kind, i, _ = payload.item
        assert isinstance(instance, bytes) and t == micros and kind == RECORD
        assert type(i) is int and 0 <= i < families.DOMAIN
    return len(valid), len(dead)


def check_growing_query(name, transform, fn, query, micros):
    del name, transform
    valid, dead, other = run_entry(fn, query, micros)
    assert len(valid) + len(dead) == 1, (valid, dead)   # a refusal rides along its dead letter
    assert len(other) <= len(dead)
    return len(valid), len(dead)


#: (family, entry stage, check, which generated part it reads)
PATHS = ([(n, 'ExtractAndValidate', check_continual, 'record') for n in CONTINUAL]
         + [(n, 'ExtractAndValidate', check_segmented, 'record') for n in SEGMENTED]
         + [('SelectKeys', 'ExtractAndValidate', check_select_keys, 'record')]
         + [(n, 'TagData', check_growing_data, 'index') for n in GROWING]
         + [(n, 'TagQueries', check_growing_query, 'query') for n in GROWING])

_THIRD = st.one_of(st.sampled_from(['u1', 'u2', 'u3', 1, -1, 'insert', 'delete', 0, 2, None,
                                    'x']), fz.unhashable, st.integers())
_QUERIES = st.one_of(
    st.tuples(st.sampled_from(['q1', 'q2']), st.sampled_from(
        [LinearQuery.range(families.DOMAIN, 0, b) for b in range(1, families.DOMAIN + 1)])),
    st.tuples(st.one_of(st.text(max_size=3), fz.bad_or_good_keys()),
              st.one_of(fz.values(), st.lists(fz.values(), max_size=5))),
    fz.values(), st.dictionaries(st.text(max_size=8), fz.values(), max_size=3))
_INDICES = st.one_of(st.integers(-3, families.DOMAIN + 3), fz.values(), fz.bad_or_good_keys())


@pytest.fixture(scope='module')
def entry_paths():
    return [(name, check, part) + entry_fn(name, stage) for name, stage, check, part in PATHS]


def test_every_entry_path_dead_letters_or_keeps_each_record_exactly_once(entry_paths):
    """10^4 generated cases, each pushed through EVERY family's entry DoFn (one generation,
    every path); the kept and dead-lettered totals add up to the input, per path."""
    totals = {name + part: [0, 0, 0] for name, _, part, _, _ in entry_paths}

    @fz.FUZZ
    @given(record=fz.records(_THIRD), index=_INDICES, query=_QUERIES, micros=fz.event_micros())
    def check(record, index, query, micros):
        parts = {'record': record, 'index': index, 'query': query}
        for name, checker, part, transform, fn in entry_paths:
            kept, dead = checker(name, transform, fn, parts[part], micros)
            total = totals[name + part]
            total[0] += 1
            total[1] += kept
            total[2] += dead

    check()
    for path, (n, kept, dead) in totals.items():
        assert n >= 10_000 and n == kept + dead, (path, n, kept, dead)
        assert kept > 0 and dead > 0, (path, kept, dead)     # both outcomes were exercised
