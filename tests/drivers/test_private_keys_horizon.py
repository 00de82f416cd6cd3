"""Private key selection with a known end (``PrivateKeys(final_share=f)``, issue 23 item 3):
the budget split, the final test's place in the shard, and an empirical DP audit on
neighbouring streams — a key with a single unit (vs. none) is released with probability ≤ δ/K,
and one unit more moves the release frequency by at most e^ε (with a loose δ so both are
measurable); a selection whose final test ignored K (calibrated to one key) fails the audit.
"""

import math

import numpy as np
import pytest
from scipy import stats

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.analysis import key_release_probability as release_probability
from beam_dp.analysis import units_needed
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.key_selection import TruncatedGeometricSelection
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.continual import ContinualCountPerKey

STEPS = 6


def _shard(keys: PrivateKeys, end=True, k=1):
    unit = UserLevel(unit_fn=len, max_keys_per_unit=k, max_steps_per_unit=1)
    return ContinualCountPerKey(keys=keys, start=0, step=60, end=60 * STEPS if end else None,
                                budget=PrivacyBudget(epsilon=1.0),
                                privacy_unit=unit).driver.private_shard


def _first_release(shard, n, seed, arrive=1):
    """The step at which a key with n units (all arriving at ``arrive``) is first released."""
    state, rng = shard.init_state(), noise.seeded(seed).derive('P')
    for step in range(STEPS):
        out, state = shard.release_step(state, {'k': ((n,), n)} if step == arrive else {}, rng)
        if out:
            return step
    return None


def test_budget_split_and_no_end_keeps_the_continual_svt():
    keys = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6))
    svt, final = keys.horizon_selection(3, True)
    assert (svt.epsilon, svt.delta) == pytest.approx((0.1, 1e-7))
    assert (final.epsilon, final.delta, final.max_partitions) == pytest.approx((0.9, 9e-7, 3))
    assert keys.horizon_selection(3, False) == (keys.selection(3), None)
    off = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), final_share=0)
    assert off.horizon_selection(3, True) == (off.selection(3), None)
    shard = _shard(keys)
    assert shard.final_step == STEPS and shard.final is not None
    assert _shard(keys, end=False).final is None


@pytest.mark.parametrize('share', [1, 1.0, -0.1, 'x', True, None])
def test_final_share_is_validated(share):
    with pytest.raises(InvalidParamsError, match='final_share'):
        PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), final_share=share)


def test_keys_are_released_at_the_end_never_back_filled_and_stay():
    shard = _shard(PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=1))
    state, rng = shard.init_state(), noise.seeded(2).derive('P')
    releases = []
    for step in range(STEPS):
        out, state = shard.release_step(state, {'mid': ((60,), 60)} if step == 1 else {}, rng)
        releases.append([(k, v[0]) for k, v, _ in out])
    # 60 units: far below the SVT's threshold at ε = 0.1, above the final test's (π(60) ≈ 1)
    assert releases[:-1] == [[]] * (STEPS - 1)
    assert [k for k, _ in releases[-1]] == ['mid']


def test_the_calculator_agrees_with_the_final_rule():
    tg = TruncatedGeometricSelection(0.9, 0.9e-6, 3)
    n = units_needed(0.5, 1.0, 1e-6, 3, steps=24, final_only=True)
    assert tg.selection_probability(n) >= 0.5 > tg.selection_probability(n - 1)
    assert units_needed(0.5, 1.0, 1e-6, 3, steps=24) <= n
    assert units_needed(0.9, 1.0, 1e-6, 3, steps=24) > units_needed(0.5, 1.0, 1e-6, 3, steps=24)
    # the SVT alone needs about 4x more units (the behaviour before a known end was used)
    assert units_needed(0.5, 1.0, 1e-6, 3, steps=24, final_share=0) > 3 * n
    for bad in (dict(p=0), dict(p=1.5), dict(p=0.5, steps=None, final_share=0)):
        args = dict(p=0.5, steps=24)
        args.update(bad)
        with pytest.raises(InvalidParamsError):
            units_needed(args.pop('p'), 1.0, 1e-6, 3, **args)


RUNS = 3000
LOOSE = PrivacyBudget(epsilon=1.0, delta=0.2)


def _frequency(shard, n):
    return sum(_first_release(shard, n, seed) is not None for seed in range(RUNS)) / RUNS


def test_audit_single_unit_key_is_released_with_probability_at_most_delta_over_k():
    for k in (1, 2):
        shard = _shard(PrivateKeys(LOOSE, num_shards=1), k=k)
        freq = _frequency(shard, 1)
        bound = LOOSE.delta / k
        assert freq <= bound + 4 * math.sqrt(bound / RUNS), (k, freq, bound)
        # and the bound is nearly spent (the final rule's π(1) = fδ/K): the audit has power
        assert freq >= 0.9 * bound - 4 * math.sqrt(bound / RUNS), (k, freq, bound)


def test_audit_one_unit_more_moves_the_release_frequency_by_at_most_e_eps():
    shard = _shard(PrivateKeys(LOOSE, num_shards=1))
    lo, hi = _frequency(shard, 3), _frequency(shard, 4)
    # (ε, δ): P[release | n+1] ≤ e^ε P[release | n] + δ, with 4σ sampling slack
    slack = 4 * math.sqrt(hi * (1 - hi) / RUNS) + 4 * math.e * math.sqrt(lo * (1 - lo) / RUNS)
    assert hi <= math.e * lo + LOOSE.delta + slack
    assert abs(hi - release_probability(4, 1.0, 0.2, 1, steps=STEPS)) < 4 * math.sqrt(
        hi * (1 - hi) / RUNS) + 0.01


def test_audit_catches_a_final_test_that_ignores_k():
    """A final rule calibrated to one key (k = 1) while units touch K = 2 keys releases a
    single-unit key with probability fδ > δ/K: the single-unit audit rejects it."""
    shard = _shard(PrivateKeys(LOOSE, num_shards=1), k=2)
    import dataclasses  # pylint: disable=import-outside-toplevel
    wrong = dataclasses.replace(shard, final=TruncatedGeometricSelection(0.9, 0.18, 1))
    hits = sum(_first_release(wrong, 1, seed) is not None for seed in range(RUNS))
    assert stats.binomtest(hits, RUNS, LOOSE.delta / 2, alternative='greater').pvalue < 1e-4
    assert np.isclose(hits / RUNS, 0.18, atol=0.03)
