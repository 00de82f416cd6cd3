"""``final_share`` in ``beam_dp.analysis``: ``final_share_error`` and ``user_level_error(
release_final_share=...)`` predict exactly the ``noise_stddev`` the transform's releases carry,
at the last step and at every step before it; the command lines print them."""

import json
import math

import pytest

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp.accounting import PrivacyBudget
from beam_dp.analysis import FinalShareError
from beam_dp.analysis import final_share_error
from beam_dp.analysis import user_level_error
from beam_dp.analysis.__main__ import main
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import InvalidParamsError
from beam_dp.privacy_unit import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import replay

DAY = 86400
BUDGETS = [PrivacyBudget(epsilon=1.0), PrivacyBudget(rho=0.5),
           PrivacyBudget(epsilon=1.0, delta=1e-6), PrivacyBudget(epsilon=0.3, delta=1e-3)]
IDS = ['eps', 'rho', 'eps_delta', 'eps_big_delta']


def _count(budget, steps, share, **kw):
    return ContinualCountPerKey(public_keys=['a', 'b'], start=0, step=DAY, end=steps * DAY,
                                budget=budget, final_share=share, **kw).driver


@pytest.mark.parametrize('budget', BUDGETS, ids=IDS)
@pytest.mark.parametrize('share', [0, 0.3, 0.9])
@pytest.mark.parametrize('steps', [1, 2, 40, 365])
def test_prediction_is_the_drivers_noise_stddev_at_every_step(budget, share, steps):
    pred = final_share_error(budget, steps, share)
    drv = _count(budget, steps, share)
    assert isinstance(pred, FinalShareError) and pred.mechanism == drv.mechanism_name
    assert pred.final_stddev == pytest.approx(drv.noise_stddev(steps - 1), rel=1e-12)
    assert len(pred.stddevs) == steps
    for step in sorted({0, 1, steps // 2, steps - 2, steps - 1} & set(range(steps))):
        assert pred.stddevs[step] == pytest.approx(drv.noise_stddev(step), rel=1e-9)
    whole = _count(budget, steps, None)
    assert pred.without_final_stddev == pytest.approx(whole.noise_stddev(steps - 1), rel=1e-9)
    if steps > 1:
        before = [drv.noise_stddev(s) for s in range(steps - 1)]
        assert pred.other_max_std == pytest.approx(max(before), rel=1e-9)
        assert pred.other_rmse == pytest.approx(
            math.sqrt(sum(x * x for x in before) / len(before)), rel=1e-9)
    else:
        assert math.isnan(pred.other_rmse) and math.isnan(pred.other_max_std)
    if share:
        # the combination: never worse than either part, and not below one batch release
        assert pred.final_stddev <= min(pred.continual_final_stddev, pred.one_shot_stddev)
        assert pred.final_stddev >= pred.batch_stddev * (1 - 1e-12)
    else:
        assert pred.final_stddev == pytest.approx(pred.without_final_stddev)


def test_the_docs_table():
    """docs/continual_counts.md, "The last step of a known end": T = 365, event-level count."""
    got = {(str(b), f): (round(p.stddevs[182], 2), round(p.final_stddev, 2),
                         round(p.batch_stddev, 2))
           for b in BUDGETS[:2] for f in (0, 0.5, 0.9)
           for p in [final_share_error(b, 365, f)]}
    eps, rho = str(BUDGETS[0]), str(BUDGETS[1])
    assert got[(eps, 0)] == (12.54, 10.61, 1.36)
    assert got[(eps, 0.5)][:2] == (25.28, 2.78) and got[(eps, 0.9)][:2] == (126.75, 1.52)
    assert got[(rho, 0)] == (2.83, 2.94, 1.0)
    assert got[(rho, 0.5)][:2] == (4.01, 1.34) and got[(rho, 0.9)][:2] == (8.96, 1.05)


def test_histogram_sensitivities_and_a_named_mechanism():
    drv = ContinualHistogramPerKey(public_keys=['a'], start=0, step=DAY, end=30 * DAY,
                                   bins=['x', 'y', 'z'], budget=PrivacyBudget(rho=0.2),
                                   mechanism='kary_tree', final_share=0.5).driver
    l1, l2 = drv.sensitivity()
    pred = final_share_error(PrivacyBudget(rho=0.2), 30, 0.5, mechanism='kary_tree',
                             dimension=3, l1_sensitivity=l1, l2_sensitivity=l2)
    assert pred.mechanism == drv.mechanism_name
    assert [round(x, 9) for x in pred.stddevs] == [round(drv.noise_stddev(s), 9)
                                                    for s in range(30)]


def test_the_releases_carry_the_predicted_stddevs():
    budget, steps = PrivacyBudget(epsilon=1.0), 24
    drv = _count(budget, steps, 0.7)
    events = keyed_events(drv, [('ab'[i % 2], i % steps, None) for i in range(100)], steps)
    releases = replay(drv.loop_driver(), events, label='X', seed=1).releases
    pred = final_share_error(budget, steps, 0.7)
    assert {r.step for r in releases} == set(range(steps))
    for r in releases:
        assert r.noise_stddev == pytest.approx(pred.stddevs[r.step], rel=1e-12)


USER = UserLevel(unit_fn=len, max_keys_per_unit=3, max_contributions_per_step=2,
                 max_steps_per_unit=10)


@pytest.mark.parametrize('budget', BUDGETS[:3], ids=IDS[:3])
@pytest.mark.parametrize('share', [0, 0.5])
def test_user_level_public_keys(budget, share):
    steps = 48
    out = user_level_error(USER, budget, steps, release_final_share=share)
    drv = ContinualCountPerKey(public_keys=['k'], start=0, step=DAY, end=steps * DAY,
                               budget=budget, privacy_unit=USER, final_share=share).driver
    assert out.mechanism == drv.mechanism_name
    assert out.noise == pytest.approx(drv.noise_stddev(steps - 1), rel=1e-12)
    assert out.final_share.final_stddev == out.noise
    for step in (0, 20, steps - 2):
        assert out.final_share.stddevs[step] == pytest.approx(drv.noise_stddev(step), rel=1e-9)
    plain = user_level_error(USER, budget, steps)
    assert plain.final_share is None
    assert out.final_share.without_final_stddev == pytest.approx(plain.noise, rel=1e-9)
    if share:
        assert out.noise < plain.noise


@pytest.mark.parametrize('first_step', [1, 17])
def test_user_level_private_keys(first_step):
    steps, selection = 40, PrivacyBudget(epsilon=1.0, delta=1e-6)
    out = user_level_error(USER, PrivacyBudget(rho=0.5), steps, key_selection=selection,
                           first_step=first_step, release_final_share=0.6)
    drv = ContinualCountPerKey(keys=PrivateKeys(selection), start=0, step=DAY,
                               end=steps * DAY, budget=PrivacyBudget(rho=0.5),
                               privacy_unit=USER, final_share=0.6).driver
    n = steps - first_step + 1
    assert out.final_share.steps == n
    assert out.noise == pytest.approx(drv.counter_noise_stddev(n, n), rel=1e-12)
    assert out.final_share.stddevs[n // 2] == pytest.approx(
        drv.counter_noise_stddev(n // 2 + 1), rel=1e-9)


@pytest.mark.parametrize('call, match', [
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 10, 1.0), r'in \[0, 1\)'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 10, -0.1), r'in \[0, 1\)'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 10, None), 'final_share'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 10, 'half'), 'final_share'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 10, math.nan), 'final_share'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), None, 0.5), 'known last step'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 0, 0.5), 'horizon'),
    (lambda: final_share_error(1.0, 10, 0.5), 'budget'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 10, 0.5, mechanism='blt'),
     'zCDP'),
    (lambda: final_share_error(PrivacyBudget(epsilon=1.0), 10, 0.5, l1_sensitivity=1,
                               l2_sensitivity=2), 'exceeds'),
    (lambda: user_level_error(USER, PrivacyBudget(rho=0.5), 10, release_final_share=1),
     'release_final_share'),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(InvalidParamsError, match=match):
        call()


def test_cli_prints_the_final_share_prediction(capsys):
    assert main(['--epsilon', '1', '--horizon', '365', '--final-share', '0.9']) == 0
    out = capsys.readouterr().out
    assert 'final_share=0.9' in out and '1.519' in out and 'steps 1..364' in out
    assert main(['--rho', '0.5', '--horizon', '365', '--final-share', '0.5', '--json']) == 0
    data = json.loads(capsys.readouterr().out)['final_share']
    assert data['final_stddev'] == pytest.approx(
        final_share_error(PrivacyBudget(rho=0.5), 365, 0.5).final_stddev)
    assert main(['--epsilon', '1', '--final-share', '0.5']) == 2
    assert '--final-share needs a known last step' in capsys.readouterr().err
    assert main(['--epsilon', '1', '--horizon', '9', '--final-share', '1']) == 2
    assert 'final_share must be in [0, 1)' in capsys.readouterr().err


def test_user_level_cli_prints_the_final_share_prediction(capsys):
    argv = ['user-level', '--rho', '0.5', '--horizon', '48', '--K', '3', '--m', '2', '--S',
            '10', '--final-share', '0.5']
    assert main(argv) == 0
    out = capsys.readouterr().out
    expected = user_level_error(USER, PrivacyBudget(rho=0.5), 48, release_final_share=0.5)
    assert f'{expected.noise:.4g}' in out and 'steps 1..47' in out
    assert main(argv + ['--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['noise'] == pytest.approx(expected.noise)
    assert data['final_share']['other_rmse'] == pytest.approx(expected.final_share.other_rmse)
    assert main(argv + ['--key-epsilon', '1', '--key-delta', '1e-6', '--key-units', '40',
                        '--key-final-share', '0']) == 0
    assert 'P[a key with 40 units' in capsys.readouterr().out
