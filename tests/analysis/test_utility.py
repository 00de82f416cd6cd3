"""Utility analysis: closed forms match each mechanism's release_variance, the selector picks
the lowest expected error, the CLI prints and plots."""

import pytest

from beam_dp.accounting import PrivacyBudget
from beam_dp.analysis import best_pure_counter
from beam_dp.analysis import counter_variances
from beam_dp.analysis import expected_error
from beam_dp.analysis import select_counter
from beam_dp.analysis.__main__ import main
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import BinaryTreeCounter
from beam_dp.mechanisms import InfiniteTreeCounter
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter
from beam_dp.mechanisms.blt import BLTCounter
from beam_dp.mechanisms.kary_tree import KaryTreeCounter
from beam_dp.mechanisms.per_step import PerStepCounter
from beam_dp.mechanisms.unbounded_tree import UnboundedTreeCounter


@pytest.mark.parametrize('mechanism', [
    BinaryTreeCounter(horizon=300, epsilon=1.0),
    BinaryTreeCounter(horizon=300, rho=0.5, estimator='textbook'),
    InfiniteTreeCounter(epsilon=1.0),
    InfiniteTreeCounter(rho=0.5, estimator='textbook'),
    KaryTreeCounter(horizon=300, epsilon=1.0, k=7),
    BalancedTreeCounter(horizon=300, epsilon=1.0, k=9),
    BalancedTreeCounter(horizon=300, rho=0.5, k=5, split='uniform'),
    UnboundedTreeCounter(epsilon=0.7, l1_sensitivity=2.0),
    PerStepCounter(rho=0.2),
    BLTCounter(rho=0.5, horizon=300),
    BLTCounter(rho=0.5, design_horizon=256),
])
def test_vectorised_variances_equal_release_variance(mechanism):
    curve = counter_variances(mechanism, 300)
    for t in (1, 2, 3, 7, 8, 63, 64, 127, 255, 256, 299, 300):
        assert curve[t - 1] == pytest.approx(mechanism.release_variance(t), rel=1e-9)


def test_zcdp_picks_blt_and_reports_the_issue_numbers():
    report = expected_error(PrivacyBudget(rho=0.5), 2 ** 16)
    assert report.chosen.name == 'blt'
    by_name = {e.name: e for e in report.estimates}
    assert by_name['binary_tree[variance_reduced]'].rmse == pytest.approx(8.65, abs=0.01)
    assert by_name['sqrt_factorization'].max_std == pytest.approx(4.60, abs=0.01)
    assert by_name['blt'].max_std <= 1.02 * by_name['sqrt_factorization'].max_std
    assert isinstance(select_counter(PrivacyBudget(rho=0.5), 2 ** 16), BLTCounter)


def test_pure_epsilon_daily_year():
    report = expected_error(PrivacyBudget(epsilon=1.0), 366)
    by_name = {e.name: e for e in report.estimates}
    assert report.chosen.name.startswith('balanced_tree')
    assert report.chosen.rmse == pytest.approx(10.32, abs=0.01)     # k = 33, two levels
    assert report.chosen.rmse < by_name['kary_tree[k=20]'].rmse < by_name[
        'per_step_summed'].rmse < by_name['infinite_tree[variance_reduced]'].rmse
    assert by_name['infinite_tree[variance_reduced]'].rmse == pytest.approx(28.2, abs=0.05)
    unbounded = expected_error(PrivacyBudget(epsilon=1.0), None, evaluation_horizon=366)
    # Issue 24: without an end the unbounded negative-digit tree (was: per-step noise summed).
    assert unbounded.chosen.name == 'unbounded_tree[k=13]'
    assert unbounded.chosen.rmse == pytest.approx(17.21, abs=0.01)
    by_name = {e.name: e for e in unbounded.estimates}
    assert by_name['per_step_summed'].rmse == pytest.approx(18.38, abs=0.01)
    short = expected_error(PrivacyBudget(epsilon=1.0), None, evaluation_horizon=319)
    assert short.chosen.name == 'per_step_summed'          # the crossover: 320 steps


def test_pure_epsilon_without_end_picks_the_unbounded_tree_at_3x_below_the_infinite_tree():
    report = expected_error(PrivacyBudget(epsilon=1.0), None)            # over t ≤ 2^20
    by_name = {e.name: e for e in report.estimates}
    assert report.chosen.name == 'unbounded_tree[k=13]'
    assert report.chosen.rmse == pytest.approx(62.10, abs=0.01)
    assert by_name['infinite_tree[variance_reduced]'].rmse ** 2 > 3.35 * report.chosen.rmse ** 2
    known = expected_error(PrivacyBudget(epsilon=1.0), 2 ** 20).chosen
    assert report.chosen.rmse ** 2 < 3.4 * known.rmse ** 2                # 3.38x


@pytest.mark.parametrize('horizon', [1, 2, 5, 40, 366, 4096, 2 ** 20])
def test_choice_is_never_worse_than_per_step_noise(horizon):
    report = expected_error(PrivacyBudget(epsilon=1.0), horizon)
    per_step = next(e for e in report.estimates if e.name == 'per_step_summed')
    assert report.chosen.rmse <= per_step.rmse
    assert isinstance(best_pure_counter(horizon, 1.0), (BalancedTreeCounter, PerStepCounter,
                                                         BinaryTreeCounter))


def test_approximate_dp_compares_both_notions():
    tight = expected_error(PrivacyBudget(epsilon=1.0, delta=1e-300), 64)
    loose = expected_error(PrivacyBudget(epsilon=1.0, delta=1e-3), 2 ** 12)
    assert {e.notion for e in tight.estimates} == {'pure', 'zcdp'}
    assert loose.chosen.name == 'blt'
    assert tight.chosen.notion == 'pure'          # δ = 1e-300: Laplace beats Gaussian


def test_selector_is_a_pure_function_of_public_parameters():
    a = select_counter(PrivacyBudget(rho=0.1), None, dimension=4, l1_sensitivity=3.0,
                       l2_sensitivity=2.0, evaluation_horizon=1000)
    b = select_counter(PrivacyBudget(rho=0.1), None, dimension=4, l1_sensitivity=3.0,
                       l2_sensitivity=2.0, evaluation_horizon=1000)
    assert a == b and a.dimension == 4 and a.privacy_cost().rho == pytest.approx(0.1)


def test_bad_arguments():
    with pytest.raises(InvalidParamsError, match='budget'):
        expected_error(0.5, 10)
    with pytest.raises(InvalidParamsError, match='objective'):
        expected_error(PrivacyBudget(rho=0.5), 10, objective='median')
    with pytest.raises(InvalidParamsError, match='horizon'):
        expected_error(PrivacyBudget(rho=0.5), 0)


def test_cli_prints_the_table_and_saves_a_plot(tmp_path, capsys):
    path = tmp_path / 'errors.png'
    assert main(['--rho', '0.5', '--horizon', '1024', '--plot', str(path)]) == 0
    out = capsys.readouterr().out
    assert '<- picked' in out and 'blt' in out and 'sqrt_factorization' in out
    assert path.stat().st_size > 1000
    assert main(['--epsilon', '1', '--horizon', 'none', '--evaluation-horizon', '100',
                 '--json']) == 0
    assert '"chosen"' in capsys.readouterr().out


def test_a_counter_out_of_the_samplers_range_is_not_a_candidate():
    """A huge sensitivity puts the unbounded tree's smallest node share out of range: it is left
    out and the choice falls back on the counters that can run."""
    report = expected_error(PrivacyBudget(epsilon=1.0), None, l1_sensitivity=2.0 ** 33,
                            evaluation_horizon=100)
    names = {e.name for e in report.estimates}
    assert not any(n.startswith('unbounded_tree') for n in names)
    assert report.chosen.name in names
    assert any(n.startswith('unbounded_tree') for n in {e.name for e in expected_error(
        PrivacyBudget(epsilon=1.0), None, evaluation_horizon=100).estimates})
