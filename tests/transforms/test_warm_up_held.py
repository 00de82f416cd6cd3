"""WarmUpContinualCountPerKey(warm_up_release='held') in Beam: a streaming run (TestStream on
the BundleBasedDirectRunner, ``tests.runners.DIRECT_RUNNER``) and a batch run
(``BATCH_RUNNER``) release exactly what the pure reference (``beam_dp.drivers.warm_up.replay``)
computes with the same noise: every step from 0, steps 0..W−1 all emitted at the warm-up's
end + 1 µs (event time of their output) and the later steps at their release times; a unit's
warm-up records over the hold cap are dead-lettered ('HoldWarmUp'), counted by the
``debug_metrics`` dead-letter counter, and the costs (two parts) are exact and recorded."""

import apache_beam as beam
import pytest

from beam_dp import PrivacyBudget
from beam_dp.accounting import BudgetAccountant
from beam_dp.drivers.warm_up import hold
from tests.helpers import collect
from tests.helpers import collected
from tests.helpers import pipeline
from tests.helpers import stream
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.transforms.test_warm_up import KEYS
from tests.transforms.test_warm_up import STEPS
from tests.transforms.test_warm_up import W
from tests.transforms.test_warm_up import _records
from tests.transforms.test_warm_up import _reference
from tests.transforms.test_warm_up import _released
from tests.transforms.test_warm_up import _script
from tests.transforms.test_warm_up import _transform

_TIMES = []


def _emitted_at(release, timestamp=beam.DoFn.TimestampParam):
    _TIMES.append((release.step, timestamp.micros))
    return release


def _heavy(units=('h0', 'h1'), n=30):
    """Warm-up only: n records of one key in step 1 per unit (over a hold cap of m = 8)."""
    return [(('a', u), 10.0 + i / 100) for u in units for i in range(n)]


def _check(c, t, records):
    rec, bounds, ref = _reference(t, records)
    assert c['b'] == [rec]
    assert _released(c) == sorted(ref)
    assert {r.step for r in c['r']} == set(range(STEPS))            # every step, from 0
    assert len(c['r']) == len(KEYS) * STEPS
    part = t.plan.release_budget
    assert {(r.rho, r.epsilon) for r in c['r']} == {(part.rho or 0.0, part.epsilon or 0.0)}
    return rec, bounds, ref


def test_streaming_held_releases_what_the_reference_computes_at_the_warm_up_end():
    records = sorted(_records(seed=8) + _heavy(), key=lambda x: x[1])
    late = [(('b', 'u99'), 25.0)]
    t = _transform(warm_up_release='held', max_value=8)
    assert t.plan.hold_cap == (3, 8, 8, 8)
    _TIMES.clear()
    with pipeline(runner=DIRECT_RUNNER) as p:
        out = p | stream(*_script(records, late)) | t
        collect(out.releases | beam.Map(_emitted_at), 'r')
        collect(out.bounds, 'b')
        collect(out.dead_letter, 'd')
    c = collected()
    _check(c, t, records)
    # the schedule: steps 0..W−1 at the warm-up's end + 1 µs, then each at its release time
    end = t.plan.warm_up_end_micros
    for step, micros in _TIMES:
        assert micros == (end + 1 if step < W else t.plan.clock.release_time_micros(step)), step
    # the hold cap (C = 8 binds for the busy units too): each record over it dead-lettered
    # once, as many as the reference's cap drops
    capped = [d for d in c['d'] if d.stage == 'HoldWarmUp']
    warm = [(u, k, int(s // 10)) for (k, u), s in records if s < W * 10]
    assert len(capped) == hold(t.plan, warm)[1] >= 2 * (30 - 8)
    assert sum(1 for d in capped if d.record in ("('a', 'h0')", "('a', 'h1')")) == 2 * (30 - 8)
    assert all(d.reason.startswith('warm-up hold cap: ') for d in capped)
    # the late warm-up record: late for the statistics and for the held bounding (both uses)
    assert sum(1 for d in c['d'] if d.stage == 'WarmUpStatistics') == 1


def test_batch_held_releases_what_the_reference_computes_and_counts_the_capped():
    """Batch: every record is held (the bounds come after the input); a cap that binds only
    on two units' warm-up records (m over 128), counted by the dead-letter metric."""
    records = sorted(_records(seed=9) + _heavy(n=200), key=lambda x: x[1])
    t = _transform(budget=PrivacyBudget(epsilon=3.0), warm_up_release='held', max_value=128,
                   debug_metrics=True)
    assert t.plan.hold_cap == (3, 128, 10, 128)
    p = pipeline(streaming=False, runner=BATCH_RUNNER)
    out = (p | beam.Create(records) | beam.MapTuple(beam.window.TimestampedValue) | t)
    collect(out.releases, 'r')
    collect(out.bounds, 'b')
    collect(out.dead_letter, 'd')
    result = p.run()
    result.wait_until_finish()
    c = collected()
    _check(c, t, records)
    capped = [d for d in c['d'] if d.stage == 'HoldWarmUp']
    assert len(capped) == 2 * (200 - 128)
    assert {d.record for d in capped} == {"('a', 'h0')", "('a', 'h1')"}
    counters = result.metrics().query(beam.metrics.MetricsFilter().with_name(
        'dead_letters/HoldWarmUp'))['counters']
    assert [x.committed for x in counters] == [len(capped)]


def test_held_costs_are_exact_checked_and_recorded():
    accountant = BudgetAccountant(PrivacyBudget(rho=2.0))
    t = _transform(accountant=accountant, bounds_share=0.2, warm_up_release='held')
    costs = dict(t.privacy_costs())
    assert set(costs) == {f'{t.label}/ChooseBounds', t.label}
    assert costs[f'{t.label}/ChooseBounds'].rho == pytest.approx(0.4)
    assert costs[t.label].rho == pytest.approx(1.6)
    with pytest.raises(Exception, match='budget'):
        _transform(accountant=BudgetAccountant(PrivacyBudget(rho=1.99)),
                   warm_up_release='held')
    with pipeline(runner=DIRECT_RUNNER) as p:
        _ = p | stream(*_script(_records(units=3))) | t
    assert sum(e.cost.rho for e in accountant.ledger) == pytest.approx(2.0, rel=1e-12)
    assert accountant.spent().rho == pytest.approx(2.0)
    assert t.display_data()['warm_up_release'] == 'held'


# -- noise addresses -------------------------------------------------------------------------------

KEY_ENV = 'BEAM_DP_WARM_UP_HELD_KEY'


class _City(beam.PTransform):
    """A user's composite holding one held warm-up transform, always labelled 'Counts'."""

    def __init__(self, key):
        super().__init__()
        self._key = key

    def expand(self, records):
        return records | 'Counts' >> _transform(warm_up_release='held', testing_seed=None,
                                                noise_key=self._key)


def _run_cities():
    from beam_dp.noise import NoiseKeyRef  # pylint: disable=import-outside-toplevel
    records = _records(seed=4)
    with pipeline(runner=DIRECT_RUNNER) as p:
        rows = p | stream(*_script(records))
        for city in ('CityA', 'CityB'):
            out = rows | city >> _City(NoiseKeyRef(f'env:{KEY_ENV}', 's'))
            collect(out.releases, city)
    c = collected()
    return [sorted((r.key, r.step, r.value) for r in c[city]) for city in ('CityA', 'CityB')]


def test_held_noise_is_addressed_by_the_full_path_and_replays(monkeypatch):
    from beam_dp import noise  # pylint: disable=import-outside-toplevel
    monkeypatch.setenv(KEY_ENV, '5e' * 32)
    noise.secret_key.clear_key_cache()
    try:
        city_a, city_b = _run_cities()
        assert len(city_a) == len(city_b) == len(KEYS) * STEPS
        assert [r[:2] for r in city_a] == [r[:2] for r in city_b]
        # same rows, one key, one short label: only the full path separates the two
        assert sum(a == b for a, b in zip(city_a, city_b)) < len(city_a) / 2
        held_a = [r for r in city_a if r[1] < W]
        assert sum(a == b for a, b in zip(held_a, [r for r in city_b if r[1] < W])) < len(
            held_a) / 2
        assert _run_cities() == [city_a, city_b]        # bit-identical under the key
    finally:
        noise.secret_key.clear_key_cache()


def test_run_time_bounds_count_a_unit_held_over_several_calls_once():
    """Found with 'held' (every warm-up record waits for the bounds): ``_RunTimeBoundsFn``
    bounded each held call's group of a unit with its own fresh usage, so a unit held in two
    calls could count twice its bounds ('none' too, for records that came before the bounds).
    Now a unit's held records are bounded with one usage."""
    from beam_dp.drivers.warm_up import WarmUpBounds  # pylint: disable=import-outside-toplevel
    from beam_dp.privacy_unit import UserLevel  # pylint: disable=import-outside-toplevel
    from beam_dp.transforms.contribution_bounding import _RunTimeBoundsFn  # pylint: disable=import-outside-toplevel
    from beam_dp.transforms.shell import key_bytes  # pylint: disable=import-outside-toplevel
    from tests.fuzz.harness import _Bag, _Cell, _Timer  # pylint: disable=import-outside-toplevel
    fn = _RunTimeBoundsFn(UserLevel(unit_fn=len, max_keys_per_unit=1,
                                    max_contributions_per_step=1, max_steps_per_unit=1),
                          'T', None)
    cells = [_Bag(), _Cell(), _Timer(), _Timer(), _Cell(), _Bag()]
    unit = key_bytes('u')
    for call in range(3):                     # the same unit in three bundles, 2 records each
        records = tuple(((0, call, i, 'r'), 0) for i in range(2))
        assert list(fn.process((0, ((unit, 'u', records),)), *cells)) == []
    kept = list(fn.process((0, WarmUpBounds(1, 1, 1, 0)), *cells))
    counted = [x for x in kept if not hasattr(x, 'tag')]
    assert len(counted) == 1                  # K = m = S = 1: one record (was 3)
