"""ChooseContributionBounds on the DirectRunner (batch): one recommendation equal to the pure
driver's on the same units and noise address, dead letters with reasons, budget checked at
construction and recorded once, the non-private option spends nothing."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.transforms.window import TimestampedValue

from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import ChooseContributionBounds
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import noise
from beam_dp.drivers.bounds import unit_statistics
from tests.runners import direct_options

DAY = 86_400
START = 1_700_000_000
HIST = PrivacyBudget(rho=0.05)
RELEASE = PrivacyBudget(rho=0.5)


def _records():
    """(key, unit, seconds): 40 units with 1..4 keys, a few steps each."""
    out = []
    for u in range(40):
        for k in range(1 + u % 4):
            for s in range(1 + u % 7):
                for _ in range(1 + (u + s) % 3):
                    out.append((f'k{k}', f'u{u}', START + s * DAY + 60))
    return out


def _stats(records):
    cells = {}
    for key, unit, t in records:
        step = (t - START) // DAY
        cells.setdefault(unit, {}).setdefault((key, step), 0)
        cells[unit][(key, step)] += 1
    return [unit_statistics(c) for c in cells.values()]


def _transform(**kw):
    args = dict(budget=HIST, release_budget=RELEASE, horizon=10, start=START, step=DAY,
                unit_fn=lambda r: r[1], time_fn=lambda r: r[2], testing_seed=5,
                label='Bounds')
    args.update(kw)
    return ChooseContributionBounds(**args)


def test_recommendation_is_the_drivers_and_bad_records_are_dead_lettered():
    records = _records()
    bad = [('k0', None, START + 10), ('k0',), ('k0', 'u1', START - 5),
           ('k0', 'u1', START + 11 * DAY), ('k0', 'u1', 'noon')]
    t = _transform()
    expected = t.chooser.run(_stats(records), noise.seeded(5).derive(
        'Bounds', 'contribution_histograms'))

    def check_rec(recs):
        assert recs == [expected], recs

    def check_dead(dead):
        reasons = sorted(d.reason for d in dead)
        assert len(reasons) == 5, reasons
        assert any('event time is before the release start' in r for r in reasons)
        assert any('event time is after the last released step' in r for r in reasons)
        assert any('privacy unit id is None' in r for r in reasons)
        assert any('unit_fn raised' in r for r in reasons)
        assert any('time_fn' in r or 'seconds' in r for r in reasons), reasons
        assert all(d.transform == 'Bounds' for d in dead)

    with beam.Pipeline(argv=direct_options(streaming=False)) as p:
        out = p | beam.Create(records + bad) | t
        assert_that(out.recommendation, check_rec, label='Rec')
        assert_that(out.dead_letter, check_dead, label='Dead')


def test_element_timestamps_are_the_default_clock_and_empty_input_still_recommends():
    records = _records()

    def one(recs):
        assert len(recs) == 1 and recs[0].private

    with beam.Pipeline(argv=direct_options(streaming=False)) as p:
        stamped = (p | 'Rows' >> beam.Create(records)
                   | beam.Map(lambda r: TimestampedValue(r, r[2])))
        out = stamped | 'Stamped' >> _transform(time_fn=None, label='A')
        empty = p | 'None' >> beam.Create([]) | 'Empty' >> _transform(label='B')
        assert_that(out.recommendation, one, label='Rec')
        assert_that(empty.recommendation, one, label='EmptyRec')


def test_budget_checked_at_construction_and_recorded_once():
    acc = BudgetAccountant(PrivacyBudget(rho=0.1))
    with pytest.raises(BudgetExceededError):
        _transform(budget=PrivacyBudget(rho=0.2), accountant=acc)
    t = _transform(accountant=acc)
    assert acc.ledger == ()
    p = beam.Pipeline(argv=direct_options(streaming=False))
    _ = p | beam.Create(_records()) | t
    assert len(acc.ledger) == 1


def test_non_private_histograms_are_exact_and_spend_nothing():
    acc = BudgetAccountant(PrivacyBudget(rho=0.1))
    t = _transform(budget=None, non_private_histograms=True, accountant=acc, testing_seed=None)
    records = _records()

    def check(recs):
        (rec,) = recs
        assert not rec.private and sum(rec.total_contributions) == 40
        assert rec == t.chooser.run(_stats(records), None)

    with beam.Pipeline(argv=direct_options(streaming=False)) as p:
        out = p | beam.Create(records) | t
        assert_that(out.recommendation, check)
    assert acc.ledger == ()


@pytest.mark.parametrize('kw, match', [
    (dict(unit_fn=None), 'unit_fn'),
    (dict(budget=None), 'budget'),
    (dict(horizon=-1), 'horizon'),
    (dict(step=0), 'step'),
    (dict(key_share=2.0), 'key_share'),
])
def test_bad_parameters_name_the_transform(kw, match):
    with pytest.raises(InvalidParamsError, match=f'ChooseContributionBounds: .*{match}'):
        _transform(**kw)


def test_recommendation_has_a_row_coder_that_round_trips():
    from beam_dp import BoundsRecommendation
    rec = _transform().chooser.run(_stats(_records()), noise.seeded(2))
    coder = beam.coders.registry.get_coder(BoundsRecommendation)
    assert isinstance(coder, beam.coders.RowCoder)
    assert coder.decode(coder.encode(rec)) == rec
