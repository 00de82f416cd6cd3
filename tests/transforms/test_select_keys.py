"""SelectKeys (bounded input): only privately selected keys come out; user-level bounding;
single-unit keys at most δ; budgets and validation."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to

from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import EventLevel
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import UserLevel
from beam_dp.transforms.select_keys import SelectKeys

from tests.runners import BATCH_RUNNER

BUDGET = PrivacyBudget(epsilon=1.0, delta=1e-6)


def _user(unit_fn=lambda r: r[1], max_keys_per_unit=1, **bounds):
    bounds.setdefault('max_steps_per_unit', 1)
    return UserLevel(unit_fn=unit_fn, max_keys_per_unit=max_keys_per_unit, **bounds)


@pytest.mark.parametrize('method', ['truncated_geometric', 'laplace', 'gaussian'])
def test_large_keys_selected_single_unit_keys_not(method):
    records = ([('big', f'u{i}') for i in range(300)] + [(f'solo{i}', 'x') for i in range(30)]
               + [('one_user', 'z')] * 500)
    t = SelectKeys(budget=BUDGET, privacy_unit=_user(), method=method, testing_seed=1)
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = p | beam.Create(records) | t
        assert_that(out.keys, equal_to(['big']))


def test_user_level_bounding_dead_letters_extra_keys_and_counts_units_once():
    records = [(f'k{j}', 'u') for j in range(5)] + [(None, 'v'), (3, 'w')]
    t = SelectKeys(budget=BUDGET, privacy_unit=_user(max_keys_per_unit=2),
                   testing_seed=0)

    def check(dead):
        reasons = sorted(d.reason for d in dead)
        assert len(reasons) == 5, reasons
        assert sum('max_keys_per_unit=2' in r for r in reasons) == 3
        assert sum(r.startswith('key must be a string') for r in reasons) == 2

    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = p | beam.Create(records) | t
        assert_that(out.keys, equal_to([]), label='NoKeys')
        assert_that(out.dead_letter, check, label='Dead')


def test_event_level_and_exact_single_unit_probability():
    rule = SelectKeys(budget=BUDGET).rule
    assert rule.selection_probability(1) <= BUDGET.delta
    assert rule.selection_probability(200) > 0.99
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = p | beam.Create([('a',)] * 100 + [('b',)]) | SelectKeys(budget=BUDGET,
                                                                     testing_seed=3)
        assert_that(out.keys, equal_to(['a']))


def test_budget_checked_at_construction_and_recorded_once_when_applied():
    acc = BudgetAccountant(PrivacyBudget(epsilon=1.0, delta=1e-5))
    with pytest.raises(BudgetExceededError, match='asks for'):
        SelectKeys(budget=PrivacyBudget(epsilon=1.5, delta=1e-6), accountant=acc)
    t = SelectKeys(budget=PrivacyBudget(epsilon=0.6, delta=1e-6), accountant=acc, label='Sel')
    assert acc.ledger == ()
    p = beam.Pipeline(runner=BATCH_RUNNER)
    _ = p | beam.Create([]) | t
    assert [e.label for e in acc.ledger] == ['Sel']
    with pytest.raises(BudgetExceededError, match='asks for'):
        SelectKeys(budget=PrivacyBudget(epsilon=0.6, delta=1e-6), accountant=acc)


@pytest.mark.parametrize('kwargs, match', [
    ({'budget': PrivacyBudget(epsilon=1.0)}, 'SelectKeys: budget must have epsilon > 0 and delta > 0'),
    ({'budget': 3}, 'SelectKeys: budget must be a PrivacyBudget'),
    ({'method': 'exp'}, "SelectKeys: method must be one of 'truncated_geometric', 'laplace', 'gaussian'"),
    ({'key_fn': 1}, 'SelectKeys: key_fn must be callable'),
    ({'privacy_unit': len}, r'SelectKeys: privacy_unit must be EventLevel\(\) or UserLevel'),
    ({'unit_fn': len}, r'SelectKeys: unit_fn is not an argument of SelectKeys: the privacy unit '
                       r'is one argument: use privacy_unit=UserLevel\(unit_fn='),
    ({'unit_fn': len, 'max_keys_per_unit': 3},
     r'SelectKeys: unit_fn, max_keys_per_unit are not arguments of SelectKeys: .*'
     r'max_keys_per_unit=K'),
    ({'epsilon': 1.0}, r'use budget=PrivacyBudget\(epsilon=1.0\)'),
    ({'testing_seed': 1.5}, 'SelectKeys: testing_seed must be an int'),
])
def test_validation(kwargs, match):
    params = dict(budget=BUDGET)
    params.update(kwargs)
    with pytest.raises(InvalidParamsError, match=match):
        SelectKeys(**params)


def test_same_selection_for_user_level_whatever_the_bounds_that_do_not_apply():
    """Only unit_fn and K apply: m, S, C and max_units leave the rule and the keys unchanged
    (so the continual transform's UserLevel can be passed as is); EventLevel is the default."""
    records = [('big', f'u{i}') for i in range(300)] + [(f'k{j}', 'u0') for j in range(4)]
    plain = SelectKeys(budget=BUDGET, privacy_unit=_user(max_keys_per_unit=2), testing_seed=5)
    other = SelectKeys(budget=BUDGET, testing_seed=5, privacy_unit=_user(
        max_keys_per_unit=2, max_contributions_per_step=7, max_steps_per_unit=48,
        max_total_contributions=3, max_units=10))
    for t in (plain, other):
        assert t.rule.selection_probability(1) == plain.rule.selection_probability(1)
    assert (SelectKeys(budget=BUDGET).rule.selection_probability(3)
            == SelectKeys(budget=BUDGET, privacy_unit=EventLevel()).rule.selection_probability(3))
    assert (SelectKeys(budget=BUDGET).rule.selection_probability(3)
            != plain.rule.selection_probability(3))
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        data = p | beam.Create(records)
        for name, t in (('Plain', plain), ('Other', other)):
            out = data | name >> t
            assert_that(out.keys, equal_to(['big']), label=f'{name}Keys')


def test_output_type():
    p = beam.Pipeline(runner=BATCH_RUNNER)
    out = p | beam.Create([('a',)]) | SelectKeys(budget=BUDGET)
    assert out.keys.element_type is str
