"""Wrong arguments raise errors saying what to write instead.

The public transforms did (``arguments.public``); the parameter classes a user writes next to them
(``UserLevel``, ``PrivateKeys``, ``PrivacyBudget``) and the transforms without a public signature
(``ChooseContributionBounds``, ``WarmUpContinualCountPerKey``) raised Python's bare ``TypeError``,
and a ``UserLevel`` bound or a PipelineDP name passed to a transform got no hint. A delta cost
(private keys) on an accountant without delta said only "a smaller budget or a larger one".
"""

import dataclasses

import pytest

import beam_dp
from beam_dp import InvalidParamsError

EPS = beam_dp.PrivacyBudget(epsilon=1.0)
CLOCK = dict(start=0, step=60, end=600)


@pytest.mark.parametrize('kwargs, message', [
    (dict(unit_fn=len, max_keys=3, max_steps_per_unit=2),
     r'^UserLevel: max_keys is not an argument of UserLevel: did you mean max_keys_per_unit\?; '
     r'UserLevel takes: unit_fn, max_keys_per_unit, '),
    (dict(privacy_id_fn=len, max_steps_per_unit=2),
     r'privacy_id_fn is not an argument of UserLevel: write unit_fn=<record → unit id>'),
    (dict(unit_fn=len, max_partitions_contributed=2, max_steps_per_unit=2),
     r'write max_keys_per_unit=K \(max_partitions_contributed is PipelineDP\'s name\)'),
    (dict(unit_fn=len, K=2, S=3),
     r'K is not an argument of UserLevel: write max_keys_per_unit=K; S is not an argument of '
     r'UserLevel: write max_steps_per_unit=S'),
])
def test_user_level_names_what_to_write(kwargs, message):
    with pytest.raises(InvalidParamsError, match=message):
        beam_dp.UserLevel(**kwargs)


def test_private_keys_and_budget_name_what_to_write():
    with pytest.raises(InvalidParamsError, match=r'^PrivateKeys: epsilon, delta are not arguments '
                       r'of PrivateKeys: the selection budget is one argument: '
                       r'budget=PrivacyBudget\(epsilon=ε_s, delta=δ\)'):
        beam_dp.PrivateKeys(epsilon=1.0, delta=1e-6)
    with pytest.raises(InvalidParamsError, match=r'^PrivacyBudget: eps is not an argument of '
                       r'PrivacyBudget: did you mean epsilon\?'):
        beam_dp.PrivacyBudget(eps=1.0)


def test_the_checked_classes_still_construct_replace_and_compare():
    unit = beam_dp.UserLevel(len, 2, 1, 3)                     # positional, as the dataclass
    assert unit == beam_dp.UserLevel(unit_fn=len, max_keys_per_unit=2, max_steps_per_unit=3)
    assert dataclasses.replace(unit, max_keys_per_unit=4).max_keys_per_unit == 4
    assert beam_dp.PrivateKeys(budget=beam_dp.PrivacyBudget(epsilon=1.0, delta=1e-6),
                               final_share=0).final_share == 0
    assert EPS.split(0.5, 0.5)[0] == beam_dp.PrivacyBudget(epsilon=0.5)


def test_a_user_level_bound_passed_to_a_transform_points_to_user_level():
    with pytest.raises(InvalidParamsError, match=r'max_contributions_per_step is not an argument '
                       r'of ContinualCountPerKey: max_contributions_per_step is an argument of '
                       r'UserLevel: pass privacy_unit=UserLevel\(unit_fn='):
        beam_dp.ContinualCountPerKey(public_keys=['a'], budget=EPS, max_contributions_per_step=2,
                                     **CLOCK)
    with pytest.raises(InvalidParamsError, match=r"PipelineDP's max_partitions_contributed is "
                       r"UserLevel's max_keys_per_unit: pass privacy_unit=UserLevel"):
        beam_dp.ContinualSumPerKey(public_keys=['a'], budget=EPS, lower=0, upper=1,
                                   max_partitions_contributed=2, **CLOCK)


def test_pipeline_dp_value_bounds_point_to_lower_and_upper_only_where_they_apply():
    with pytest.raises(InvalidParamsError, match=r'min_value is not an argument of '
                       r'ContinualMeanPerKey: write lower=<smallest value a record counts for> '
                       r"\(min_value is PipelineDP's name\)"):
        beam_dp.ContinualMeanPerKey(public_keys=['a'], budget=EPS, min_value=0, max_value=1,
                                    **CLOCK)
    with pytest.raises(InvalidParamsError) as raised:             # a count takes no bounds
        beam_dp.ContinualCountPerKey(public_keys=['a'], budget=EPS, min_value=0, **CLOCK)
    assert 'write lower=' not in str(raised.value)


def test_transforms_without_a_public_signature_explain_too():
    with pytest.raises(InvalidParamsError, match=r'^ChooseContributionBounds: epsilon is not an '
                       r'argument: use budget=PrivacyBudget\(epsilon=0.1\); '
                       r'ChooseContributionBounds takes: budget, release_budget, '):
        beam_dp.ChooseContributionBounds(epsilon=0.1, release_budget=EPS, horizon=10, start=0,
                                         step=60, unit_fn=len)
    with pytest.raises(InvalidParamsError, match=r'^WarmUpContinualCountPerKey: warmup_steps is '
                       r'not an argument of WarmUpContinualCountPerKey: did you mean '
                       r'warm_up_steps\?'):
        beam_dp.WarmUpContinualCountPerKey(public_keys=['a'], budget=EPS, unit_fn=len,
                                           warmup_steps=2, start=0, step=60)
    # the field-name twins are still accepted by those constructors
    beam_dp.ChooseContributionBounds(budget=EPS, release_budget=EPS, horizon=10, start=0, step=60,
                                     privacy_unit_field='u', key_field='k', time_field='t')


def test_a_delta_cost_on_an_accountant_without_delta_says_to_give_it_one():
    from beam_dp.accounting import PrivacyCost              # pylint: disable=import-outside-toplevel
    accountant = beam_dp.BudgetAccountant(EPS)
    with pytest.raises(beam_dp.BudgetExceededError, match=r"^ContinualCountPerKey "
                       r"'ContinualCountPerKey/SelectKeys' asks for ε=0.5, δ=1e-06, but the "
                       r"accountant's budget \(ε=1\) has no delta: give it one, e.g. "
                       r"BudgetAccountant\(PrivacyBudget\(epsilon=1, delta=1e-06\)\)"):
        beam_dp.ContinualCountPerKey(
            keys=beam_dp.PrivateKeys(budget=beam_dp.PrivacyBudget(epsilon=0.5, delta=1e-6)),
            budget=beam_dp.PrivacyBudget(epsilon=0.5), accountant=accountant, **CLOCK)
    with pytest.raises(beam_dp.BudgetExceededError, match=r"asks for ρ=0.1, but the accountant's "
                       r"budget \(ε=1\) has no delta \(a zCDP cost converts to"):
        accountant.spend('X', PrivacyCost(rho=0.1))
    assert not accountant.ledger
    with_delta = beam_dp.BudgetAccountant(beam_dp.PrivacyBudget(epsilon=1.0, delta=1e-6))
    with_delta.spend('X', PrivacyCost(epsilon=0.5, delta=1e-6))        # fits: recorded
    assert [e.label for e in with_delta.ledger] == ['X']
