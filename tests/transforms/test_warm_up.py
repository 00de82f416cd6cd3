"""WarmUpContinualCountPerKey in Beam: streaming (TestStream on the BundleBasedDirectRunner)
and batch (FnApiRunner) runs release exactly what the pure reference
(``beam_dp.drivers.warm_up.replay``) computes with the same noise — the bounds chosen at run
time reach the bounding stage and the release loop, the warm-up steps are not released, every
step from W on is — late warm-up records and unknown keys are dead-lettered, and the budget is
checked at construction."""

import random

import apache_beam as beam
import pytest

from beam_dp import PrivacyBudget
from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.drivers.warm_up import replay
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.transforms.warm_up import WarmUpContinualCountPerKey
from tests.helpers import collect
from tests.helpers import collected
from tests.helpers import pipeline
from tests.helpers import stream
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER

KEYS = ['a', 'b', 'c']
W = 3
STEPS = 10


def _records(seed=0, units=40):
    """((key, unit), time in s) sorted by time: heavy units spill over every bound."""
    r = random.Random(seed)
    out = []
    for u in range(units):
        p = 0.9 if u < 4 else 0.25
        for t in range(STEPS * 10):
            if r.random() < p:
                out.append(((r.choice('abc'), f'u{u}'), t + 0.5))
    return sorted(out, key=lambda x: x[1])


def _transform(**kw):
    args = dict(public_keys=KEYS, start=0, step=10, end=STEPS * 10,
                budget=PrivacyBudget(rho=2.0), unit_fn=lambda r: r[1], warm_up_steps=W,
                testing_seed=7, key_share=0.3)
    args.update(kw)
    return WarmUpContinualCountPerKey(**args)


def _script(records, extra_after=()):
    script = []
    for s in range(STEPS):
        script.append([x for x in records if s * 10 <= x[1] < (s + 1) * 10])
        script.append((s + 1) * 10)
        if s == W:      # the warm-up closed at 30 s: these warm-up records are late
            script.append(list(extra_after))
    return script


def _reference(transform, records):
    return replay(transform.plan, [(u, k, int(t // 10)) for (k, u), t in records],
                  noise.seeded(7), transform.noise_label)


def _released(c):
    return sorted((r.key, r.step, r.value, r.noise_stddev) for r in c['r'])


def test_streaming_releases_what_the_reference_computes():
    records = _records()
    late = [(('a', 'u1'), 15.0), (('b', 'u99'), 25.0)]
    unknown = [(('zzz', 'u1'), 55.0)]
    t = _transform()
    with pipeline(runner=DIRECT_RUNNER) as p:
        out = p | stream(*_script(records + unknown, late)) | t
        collect(out.releases, 'r')
        collect(out.bounds, 'b')
        collect(out.dead_letter, 'd')
    c = collected()
    rec, bounds, ref = _reference(t, records)
    assert len(c['b']) == 1 and c['b'][0] == rec
    assert _released(c) == sorted(ref)
    assert {r.step for r in c['r']} == set(range(W, STEPS))       # warm-up not released
    assert len(c['r']) == len(KEYS) * (STEPS - W)
    reasons = [(d.stage, d.reason) for d in c['d']]
    assert sum(1 for s, why in reasons if s == 'WarmUpStatistics' and why.startswith('late')) == 2
    assert sum(1 for s, _ in reasons if s == 'ExtractAndValidate') == 1
    bound = [why for s, why in reasons if s == 'BoundContributions']
    assert bound and all(why.startswith('contribution bound') for why in bound)
    kept = sum(v for k, s, v, _ in ref if s == STEPS - 1)
    assert bounds.c < max(sum(1 for (_, u), _ in records if u == 'u0'), 1)   # C binds
    assert len(bound) > 0 and kept > 0


def test_batch_releases_what_the_reference_computes():
    records = _records(seed=3)
    t = _transform(budget=PrivacyBudget(epsilon=3.0))
    with pipeline(streaming=False, runner=BATCH_RUNNER) as p:
        out = (p | beam.Create(records) | beam.MapTuple(beam.window.TimestampedValue) | t)
        collect(out.releases, 'r')
        collect(out.bounds, 'b')
    c = collected()
    rec, _, ref = _reference(t, records)
    assert c['b'] == [rec]
    assert _released(c) == sorted(ref)


def test_the_budget_is_checked_at_construction_and_recorded():
    accountant = BudgetAccountant(PrivacyBudget(rho=1.9))
    with pytest.raises(BudgetExceededError):
        _transform(accountant=accountant)
    accountant = BudgetAccountant(PrivacyBudget(rho=2.0))
    t = _transform(accountant=accountant, bounds_share=0.2)
    costs = dict(t.privacy_costs())
    assert costs[f'{t.label}/ChooseBounds'].rho == pytest.approx(0.4)
    assert costs[t.label].rho == pytest.approx(1.6)


@pytest.mark.parametrize('kw, needle', [(dict(warm_up_steps=STEPS), 'warm_up_steps'),
                                        (dict(public_keys='abc'), 'public_keys'),
                                        (dict(unit_fn=3), 'unit_fn'),
                                        (dict(end=None), 'horizon')])
def test_bad_arguments_are_refused(kw, needle):
    with pytest.raises(InvalidParamsError, match=needle):
        _transform(**kw)


def _check_default_bounds(c, t, records):
    rec, bounds, ref = _reference(t, records)
    assert c['b'] == [rec]
    assert _released(c) == sorted(ref)
    assert {r.step for r in c['r']} == set(range(STEPS))             # warm-up released too
    assert len(c['r']) == len(KEYS) * STEPS
    warm = [x for x in ref if x[1] < W]
    assert len(warm) == len(KEYS) * W and all(x[3] > 0 for x in warm)
    return ref


def test_streaming_default_bounds_releases_the_warm_up_as_the_reference_computes():
    """DIRECT_RUNNER (BundleBasedDirectRunner, streaming TestStream)."""
    records = _records(seed=5)
    late = [(('b', 'u99'), 25.0)]
    t = _transform(warm_up_release='default_bounds', fallback=(2, 1, 2, 0))
    with pipeline(runner=DIRECT_RUNNER) as p:
        out = p | stream(*_script(records, late)) | t
        collect(out.releases, 'r')
        collect(out.bounds, 'b')
        collect(out.dead_letter, 'd')
    c = collected()
    _check_default_bounds(c, t, records)
    # the warm-up release bounds the heavy units at the fallback bounds
    warm = [d for d in c['d'] if d.stage == 'BoundContributions' and d.event_time_micros
            < W * 10_000_000]
    late_letters = [d for d in warm if d.event_time_micros == 25_000_000]
    assert len(late_letters) == 1 and late_letters[0].reason.startswith('late')
    bound = [d for d in warm if d not in late_letters]
    assert bound and all(d.reason.startswith('contribution bound') for d in bound)
    # the late warm-up record is also late for the statistics (one dead letter per use)
    assert sum(1 for d in c['d'] if d.stage == 'WarmUpStatistics') == 1


def test_batch_default_bounds_releases_what_the_reference_computes():
    records = _records(seed=6)
    t = _transform(budget=PrivacyBudget(epsilon=3.0), warm_up_release='default_bounds')
    with pipeline(streaming=False, runner=BATCH_RUNNER) as p:
        out = (p | beam.Create(records) | beam.MapTuple(beam.window.TimestampedValue) | t)
        collect(out.releases, 'r')
        collect(out.bounds, 'b')
    _check_default_bounds(collected(), t, records)


def test_default_bounds_costs_are_exact_checked_and_recorded():
    accountant = BudgetAccountant(PrivacyBudget(rho=2.0))
    t = _transform(accountant=accountant, bounds_share=0.2, warm_up_release='default_bounds',
                   warm_up_share=0.25)
    costs = dict(t.privacy_costs())
    assert costs[f'{t.label}/ChooseBounds'].rho == pytest.approx(0.4)
    assert costs[f'{t.label}/WarmUpRelease'].rho == pytest.approx(0.5)
    assert costs[t.label].rho == pytest.approx(1.1)
    assert sum(x.rho for x in costs.values()) == pytest.approx(2.0, rel=1e-12)
    with pytest.raises(BudgetExceededError):
        _transform(accountant=BudgetAccountant(PrivacyBudget(rho=1.99)),
                   warm_up_release='default_bounds')
    with pipeline(runner=DIRECT_RUNNER) as p:
        _ = p | stream(*_script(_records(units=3))) | t
    spent = {e.label: e.cost for e in accountant.ledger}
    assert spent[f'{t.label}/WarmUpRelease'].rho == pytest.approx(0.5)
    assert accountant.spent().rho == pytest.approx(2.0)


@pytest.mark.parametrize('kw, needle', [
    (dict(warm_up_release='hold'), 'warm_up_release'),
    (dict(warm_up_release='default_bounds', warm_up_share=0.95), 'warm_up_share'),
    (dict(warm_up_release='default_bounds', bounds_share=0.5, warm_up_share=0.5),
     'warm_up_share')])
def test_bad_warm_up_release_arguments_are_refused(kw, needle):
    with pytest.raises(InvalidParamsError, match=needle):
        _transform(**kw)
