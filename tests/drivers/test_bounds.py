"""BoundsChooser (pure): per-unit statistics, validation, the noise it predicts is the release's,
the bias it predicts from exact histograms matches the records actually lost, and the choice is
the minimum of its own objective."""

import itertools
import math

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounds import STATISTICS
from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.drivers.bounds import unit_statistics
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.errors import InvalidParamsError
from beam_dp.privacy_unit import UserLevel

RELEASE = PrivacyBudget(rho=0.5)
HIST = PrivacyBudget(rho=0.05)


def _units(n=3000, seed=0, horizon=30):
    """Synthetic units: {(key, step): records} with heavy-tailed totals."""
    rng = np.random.default_rng(seed)
    units = []
    for _ in range(n):
        keys = int(rng.integers(1, 5))
        cells = {}
        for k in range(keys):
            steps = rng.choice(horizon, size=int(rng.integers(1, horizon)), replace=False)
            for s in steps:
                cells[(f'k{k}', int(s))] = int(rng.geometric(0.5))
        units.append(cells)
    return units


def test_unit_statistics():
    cells = {('a', 0): 2, ('a', 3): 1, ('b', 0): 5}
    assert unit_statistics(cells) == (2, 5, 2, 8)
    with pytest.raises(InvalidParamsError):
        unit_statistics({})
    with pytest.raises(InvalidParamsError):
        unit_statistics({('a', 0): 0})


@pytest.mark.parametrize('kwargs, match', [
    (dict(budget=None), 'budget must be a PrivacyBudget'),
    (dict(budget=HIST, non_private_histograms=True), 'pass budget=None'),
    (dict(release_budget=1.0), 'release_budget'),
    (dict(horizon=0), 'horizon'),
    (dict(mechanism='magic'), 'mechanism'),
    (dict(key_share=0.0), 'key_share'),
    (dict(shares=(0.5, 0.5, 0.5, 0.5)), 'shares'),
    (dict(shares=(1, 1)), 'shares'),
    (dict(per_octave=0), 'per_octave'),
    (dict(non_private_histograms='yes'), 'non_private_histograms'),
])
def test_validation(kwargs, match):
    args = dict(budget=HIST, release_budget=RELEASE, horizon=30)
    args.update(kwargs)
    with pytest.raises(InvalidParamsError, match=match):
        BoundsChooser(**args)


def test_cost_is_the_budget_composed():
    assert BoundsChooser(HIST, RELEASE, 30).privacy_cost().rho == pytest.approx(0.05)
    eps = BoundsChooser(PrivacyBudget(epsilon=0.2), RELEASE, 30).privacy_cost()
    assert eps.epsilon == pytest.approx(0.2) and eps.delta == 0
    assert BoundsChooser(None, RELEASE, 30, non_private_histograms=True).privacy_cost().is_zero


@pytest.mark.parametrize('release', [PrivacyBudget(rho=0.5), PrivacyBudget(epsilon=1.0)])
def test_predicted_noise_is_the_release_drivers(release):
    chooser = BoundsChooser(HIST, release, 30)
    driver = KeyedReleaseDriver(
        metric='count', budget=release,
        privacy_unit=UserLevel(len, 3, 2, 10, 25), clock=StepClock(0, 5, last_step=29),
        layout=KeyLayout.of(['a', 'b'], 1))
    sd, name = chooser.predicted_noise(3, 2, 10, 25)
    assert sd == pytest.approx(driver.noise_stddev(29)) and name == driver.mechanism_name


def _true_lost(units, k, m, s, c):
    """Records lost to UserLevel(K, m, S, C) applied in key order, then step order."""
    lost = 0
    for cells in units:
        keys = sorted({key for key, _ in cells})[:k]
        kept = 0
        for key in keys:
            steps = sorted(st for kk, st in cells if kk == key)[:s]
            kept += sum(min(m, cells[(key, st)]) for st in steps)
        lost += sum(cells.values()) - min(kept, c)
    return lost


def test_predicted_bias_from_exact_histograms_tracks_the_true_loss():
    units = _units(n=800)
    chooser = BoundsChooser(None, RELEASE, 30, key_share=1.0, non_private_histograms=True)
    hists = chooser.release(chooser.exact_counts(unit_statistics(u) for u in units), None)
    total = sum(sum(u.values()) for u in units)
    # C alone binding: the estimate is within the bucket resolution
    for c in (8, 16, 40):
        true = _true_lost(units, 99, 99, 99, c)
        assert chooser.predicted_bias(hists, 1 << 20, 1 << 20, 1 << 20, c) == pytest.approx(
            true, rel=0.25, abs=0.01 * total)
    # K, m, S binding: conservative (never far below the truth, and not absurdly above)
    for k, m, s in ((1, 99, 99), (99, 1, 99), (99, 99, 5), (2, 2, 10)):
        true = _true_lost(units, k, m, s, 1 << 30)
        pred = chooser.predicted_bias(hists, k, m, s, 1 << 30)
        assert 0.6 * true <= pred <= 2.5 * true + 0.01 * total, (k, m, s, pred, true)


def test_choice_is_the_minimum_of_its_objective_on_the_candidate_grid():
    units = _units(n=500, seed=2)
    chooser = BoundsChooser(PrivacyBudget(epsilon=0.5), PrivacyBudget(epsilon=1.0), 30,
                            key_share=0.3, per_octave=1)
    stats = [unit_statistics(u) for u in units]
    hists = chooser.release(chooser.exact_counts(stats), noise.seeded(4))
    rec = chooser.choose(hists)
    caps = {'steps_per_key': 30}
    grid = [chooser.candidates(hists[n], caps.get(n)) for n in STATISTICS]
    best = min(chooser.predict(hists, *b)[2] for b in itertools.product(*grid))
    assert rec.predicted_error <= best * 1.05
    b, n, e, _ = chooser.predict(hists, rec.max_keys_per_unit, rec.max_contributions_per_step,
                                 rec.max_steps_per_unit, rec.max_total_contributions)
    assert (b, n, e) == (rec.predicted_bias, rec.predicted_noise, rec.predicted_error)
    assert math.isclose(e, math.hypot(b, n))


def test_run_is_seeded_and_records_the_histograms():
    units = _units(n=300, seed=3)
    chooser = BoundsChooser(HIST, RELEASE, 30)
    stats = [unit_statistics(u) for u in units]
    a = chooser.run(stats, noise.seeded(9))
    assert a == chooser.run(stats, noise.seeded(9))
    assert a.private and a.rho == pytest.approx(0.05) and a.epsilon == 0
    assert len(a.total_contributions) == len(a.bucket_edges) == len(chooser.edges)
    unit = a.to_user_level(len)
    assert isinstance(unit, UserLevel) and unit.max_total_contributions == a.max_total_contributions
    exact = BoundsChooser(None, RELEASE, 30, non_private_histograms=True).run(stats, None)
    assert not exact.private and sum(exact.keys_per_unit) == 300


def test_empty_input_still_gives_a_recommendation():
    chooser = BoundsChooser(HIST, RELEASE, 30)
    rec = chooser.run([], noise.seeded(1))
    assert rec.max_keys_per_unit >= 1 and rec.predicted_noise > 0


def test_analysis_user_level_error_is_the_choosers_prediction():
    from beam_dp.analysis import user_level_error
    units = _units(n=400, seed=5)
    chooser = BoundsChooser(HIST, RELEASE, 30, key_share=0.2)
    rec = chooser.run([unit_statistics(u) for u in units], noise.seeded(6))
    unit = rec.to_user_level(len)
    out = user_level_error(unit, RELEASE, 30, histograms=rec, key_share=0.2)
    assert out.bias == pytest.approx(rec.predicted_bias)
    assert out.noise == pytest.approx(rec.predicted_noise)
    assert out.total == pytest.approx(rec.predicted_error) and out.mechanism == rec.mechanism
    public = user_level_error(UserLevel(len, 2, 1, 5), RELEASE, 30)
    assert public.bias is None and public.total == public.noise > 0
    with pytest.raises(InvalidParamsError, match='UserLevel'):
        user_level_error('K=2', RELEASE, 30)
    with pytest.raises(InvalidParamsError, match='BoundsRecommendation'):
        user_level_error(unit, RELEASE, 30, histograms={'a': 1})
