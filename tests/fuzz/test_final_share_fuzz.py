"""Fuzzing ``final_share=`` (issue 25): hostile values and configurations through the public
transforms' constructors (count, sum, histogram, mean, variance, quantiles; event and user level;
public and private keys; with or without ``end``; cumulative or per-step output; named
mechanisms; budgets of every notion). Required:

* every bad configuration — a ``final_share`` that is not a real number in [0, 1) (bools,
  strings, NaN, ±inf, 1, negatives), or a non-zero one without ``end`` or with a non-cumulative
  output — raises ``InvalidParamsError`` at construction, and nothing raises anything else;
* every accepted one releases finite values with a finite positive ``noise_stddev`` at every
  step when its driver is fed random contributions (public keys through
  ``beam_dp.testing.replay``, private keys through the shard), the last step's sd being the
  driver's ``noise_stddev`` (and, for a count, ``beam_dp.analysis.final_share_error``'s);
* ``beam_dp.analysis.final_share_error`` accepts exactly the shares the transforms accept.

The records' own input path (keys, values, times) is fuzzed for every family in
tests/fuzz/test_extraction.py; this file fuzzes the new argument's.
"""

import math
import numbers

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualMeanPerKey
from beam_dp import ContinualQuantilesPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import ContinualVariancePerKey
from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.analysis import final_share_error
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import InvalidParamsError
from beam_dp.privacy_unit import EventLevel
from beam_dp.privacy_unit import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import replay

pytestmark = pytest.mark.fuzz

_SETTINGS = settings(max_examples=300, deadline=None, database=None, derandomize=True)

SHARES = st.one_of(
    st.sampled_from([None, True, False, 0, 0.0, -0.0, 0.5, 0.9, 0.999999, 1, 1.0, 1.5, -0.1,
                     -1, 1e-300, 5e-324, math.nextafter(1.0, 0.0), math.nan, math.inf,
                     -math.inf, '0.5', '', (), [0.5], {}, 2 ** 64, np.float64(0.3),
                     np.float32(0.7), np.int64(0), np.float64(math.nan), np.bool_(True)]),
    st.floats(), st.floats(0, 1, exclude_max=True), st.integers(-3, 3))
BUDGETS = st.sampled_from([PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5),
                           PrivacyBudget(epsilon=1.0, delta=1e-6), PrivacyBudget(epsilon=0.05),
                           PrivacyBudget(rho=0.01), PrivacyBudget(epsilon=8.0, delta=1e-3)])
KINDS = ['count', 'sum', 'histogram', 'mean', 'variance', 'quantiles']
KEYS = ['a', 'b', 'c']
USER = UserLevel(unit_fn=len, max_keys_per_unit=2, max_contributions_per_step=2,
                 max_steps_per_unit=4)


def _valid_share(share) -> bool:
    return (share is None or (isinstance(share, numbers.Real) and not isinstance(
        share, (bool, np.bool_)) and 0 <= float(share) < 1))


def _build(kind, share, budget, steps, has_end, output, user, private, mechanism):
    common = dict(start=0, step=1, end=steps if has_end else None, budget=budget,
                  final_share=share, privacy_unit=USER if user else EventLevel(),
                  mechanism=mechanism)
    if private:
        common['keys'] = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=1)
    else:
        common['public_keys'] = KEYS
    if kind == 'quantiles':
        return ContinualQuantilesPerKey(lower=0.0, upper=4.0, depth=2,
                                        percentiles=[50.0, 90.0], **common)
    cls = {'count': ContinualCountPerKey, 'sum': ContinualSumPerKey,
           'histogram': ContinualHistogramPerKey, 'mean': ContinualMeanPerKey,
           'variance': ContinualVariancePerKey}[kind]
    extra = dict(output=output)
    if kind in ('sum', 'mean', 'variance'):
        extra.update(lower=-1.0, upper=3.0, grid_bits=4)
    if kind == 'histogram':
        extra['bins'] = ['x', 'y']
    return cls(**common, **extra)


def _value(kind, i):
    return {'histogram': 'xy'[i % 2], 'sum': (i % 5) - 1.0, 'mean': (i % 5) - 1.0,
            'variance': (i % 5) - 1.0, 'quantiles': (i % 8) * 0.5}.get(kind)


def _public_releases(drv, kind, steps, records, seed):
    events = keyed_events(drv, [(KEYS[k % 3], s % steps, _value(kind, i))
                                for i, (k, s) in enumerate(records)], steps=steps)
    out = replay(drv.loop_driver(), events, label='F', seed=seed).releases
    rows = []
    for r in out:
        fields = r._asdict()
        values = list(fields.get('values') or []) + [float(fields[f]) for f in ('value',
                                                                                  'count')
                                                     if f in fields]
        rows.append((r.key, r.step, values, r.noise_stddev))
    return rows


def _private_releases(drv, steps, records, seed):
    shard = drv.private_shard
    state = shard.init_state()
    bins = drv.bins_per_key
    rows = []
    for step in range(steps):
        contributions = {}
        for k, s in records:
            if s % steps == step:
                vec, units = contributions.get(KEYS[k % 3], ((0,) * bins, 0))
                contributions[KEYS[k % 3]] = (tuple(x + 30 for x in vec), units + 30)
        released, state = shard.release_step(state, contributions,
                                              noise.seeded(seed).derive(step))
        for key, value, sd in released:
            rows.append((key, step, list(np.ravel(np.asarray(value, dtype=float))), sd))
    return rows


@_SETTINGS
@given(kind=st.sampled_from(KINDS), share=SHARES, budget=BUDGETS, steps=st.integers(1, 9),
       has_end=st.booleans(), per_step=st.booleans(), user=st.booleans(),
       private=st.booleans(),
       mechanism=st.sampled_from(['auto', 'auto', 'per_step', 'blt', 'kary_tree']),
       records=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 8)), max_size=40),
       seed=st.integers(0, 3))
def test_final_share_is_refused_at_construction_or_releases_finite_values(
        kind, share, budget, steps, has_end, per_step, user, private, mechanism, records,
        seed):
    output = 'per_step' if per_step and kind != 'quantiles' else 'cumulative'
    if output != 'cumulative':
        mechanism = 'auto'
    bad = not _valid_share(share) or (_valid_share(share) and share and (
        not has_end or output != 'cumulative'))
    try:
        transform = _build(kind, share, budget, steps, has_end, output, user, private,
                           mechanism)
    except InvalidParamsError:
        return                                   # refused at construction: what is required
    assert not bad, f'accepted final_share={share!r} (end: {has_end}, output: {output})'
    drv = transform.driver
    on = drv.final_counter is not None
    assert on == bool(share), (share, drv.mechanism_name)
    rows = (_private_releases(drv, steps, records, seed) if private
            else _public_releases(drv, kind, steps, records, seed))
    if not private:
        assert {step for _, step, _, _ in rows} == set(range(steps))
    for key, step, values, sd in rows:
        assert all(math.isfinite(x) for x in values), (key, step, values)
        assert math.isfinite(sd) and sd > 0, (key, step, sd)
    if not private:
        last = [sd for _, step, _, sd in rows if step == steps - 1]
        assert last and all(sd == pytest.approx(drv.noise_stddev(steps - 1), rel=1e-12)
                            for sd in last)
        if on and kind == 'count' and not user:
            pred = final_share_error(budget, steps, share, mechanism=mechanism)
            assert last[0] == pytest.approx(pred.final_stddev, rel=1e-12)


@_SETTINGS
@given(share=SHARES, budget=BUDGETS, steps=st.integers(1, 50))
def test_the_analysis_accepts_exactly_what_the_transform_accepts(share, budget, steps):
    try:
        ContinualCountPerKey(public_keys=KEYS, start=0, step=1, end=steps, budget=budget,
                             final_share=share)
        accepted = True
    except InvalidParamsError:
        accepted = False
    try:
        pred = final_share_error(budget, steps, share)
    except InvalidParamsError:
        assert not accepted or share is None, share
        return
    assert accepted, share
    assert math.isfinite(pred.final_stddev) and pred.final_stddev > 0
    assert all(math.isfinite(x) and x > 0 for x in pred.stddevs)
