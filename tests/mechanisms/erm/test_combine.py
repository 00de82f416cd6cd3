"""Weighted averages of published ERM models (``beam_dp.mechanisms.erm.combine``): the weights,
equality to a hand computation, the online form, the chain variance on a real continual run,
and that the weights read only public noise scales (the post-processing argument)."""

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import ContinualReleaseSchedule
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import ReleasedModel
from beam_dp.mechanisms.erm import RunningCombination
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import clip_features
from beam_dp.mechanisms.erm import combine_releases
from beam_dp.mechanisms.erm import inverse_variance_weights
from beam_dp.mechanisms.erm.combine import chain_scales
from beam_dp.mechanisms.erm.combine import noise_variance
from beam_dp.mechanisms.erm.combine import scales_of
from beam_dp.noise.l2_laplace import l2_laplace


def _model(rid, weights, scale, center=None):
    return ReleasedModel(release_id=rid, weights=np.asarray(weights, dtype=np.float64),
                         noise_scale=scale, eps_noise=1.0, n_nominal=8, center_id=center)


def test_weights_by_hand():
    # D = 3: v = 4·b²; b = 1, 2, 0.5 -> 1/v ∝ 1, 1/4, 4 -> / 5.25
    np.testing.assert_allclose(inverse_variance_weights([4.0, 16.0, 1.0]),
                               np.array([1.0, 0.25, 4.0]) / 5.25)
    models = [_model('a', [1, 2, 3], 1.0), _model('b', [5, 0, -1], 2.0),
              _model('c', [0, 0, 8], 0.5)]
    avg, a = combine_releases(models)
    np.testing.assert_allclose(a, np.array([1.0, 0.25, 4.0]) / 5.25)
    hand = (np.array([1, 2, 3]) + 0.25 * np.array([5, 0, -1]) + 4 * np.array([0, 0, 8])) / 5.25
    np.testing.assert_allclose(avg, hand)
    assert noise_variance(2.0, 3) == 16.0


def test_equal_scales_give_the_running_mean_and_zero_variance_wins():
    models = [_model(str(i), np.arange(4) * i, 0.7) for i in range(5)]
    avg, a = combine_releases(models)
    np.testing.assert_allclose(a, np.full(5, 0.2))
    np.testing.assert_allclose(avg, np.mean([m.weights for m in models], axis=0))
    exact = models[:2] + [_model('x', [9, 9, 9, 9], 0.0), _model('y', [1, 1, 1, 1], 0.0)]
    avg, a = combine_releases(exact)
    np.testing.assert_allclose(a, [0, 0, 0.5, 0.5])
    np.testing.assert_allclose(avg, [5, 5, 5, 5])


def test_weights_read_only_public_scales():
    """Post-processing: two runs with the same public scales and different released weights
    get the same coefficients (the weights never see a model, a label or a count)."""
    rng = np.random.default_rng(3)
    scales = [0.3, 1.1, 0.05, 2.0]
    a1 = combine_releases([_model(str(i), rng.normal(size=6), b) for i, b in enumerate(scales)])[1]
    a2 = combine_releases([_model(str(i), rng.normal(size=6) * 100, b)
                           for i, b in enumerate(scales)])[1]
    np.testing.assert_array_equal(a1, a2)


def test_running_combination_matches_batch():
    rng = np.random.default_rng(0)
    models = [_model(str(i), rng.normal(size=5), float(s))
              for i, s in enumerate(rng.uniform(0.1, 3, 7))]
    run = RunningCombination()
    for n, m in enumerate(models, 1):
        run = run.add(m)
        np.testing.assert_allclose(run.average(), combine_releases(models[:n])[0])
    run = run.add(_model('exact', np.ones(5), 0.0))
    np.testing.assert_allclose(run.average(), np.ones(5))


def _continual_events():
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
    mech = ERMRelease(ContinualReleaseSchedule(2, 5.0), PSGD(loss, mu=0.5, passes=1), 8, 4,
                      update_psgd=PSGD(loss, mu=2.0, passes=1))
    rng, state, events = np.random.default_rng(1), mech.init_state(), []
    for _ in range(7):
        x = clip_features(rng.normal(size=(8, 4)), 1.0)
        out, state = mech.step(state, (x, rng.integers(0, 3, 8)), noise.seeded(5))
        events.extend(out)
    return events


def test_chain_variance_on_a_continual_run():
    events = _continual_events()
    scales = {e.job.job_id: (e.model.noise_scale, e.job.center) for e in events}
    by_id = {e.job.job_id: e.model for e in events}
    small = next(e.model for e in events if e.job.kind == 'small')
    chain = chain_scales(small, scales)
    # small update -> its anchor (large update or base) -> ... -> a base (no centre)
    assert chain[0] == small.noise_scale and len(chain) >= 2
    assert chain[1] == by_id[small.center_id].noise_scale
    models = [e.model for e in events]
    dim = models[0].weights.size
    _, a = combine_releases(models, 'chain', scales)
    v = [sum((dim + 1) * b * b for b in chain_scales(m, scales)) for m in models]
    np.testing.assert_allclose(a, (1 / np.array(v)) / np.sum(1 / np.array(v)))
    run = RunningCombination('chain')
    for m in models:
        run = run.add(m, scales)
    np.testing.assert_allclose(run.average(), combine_releases(models, 'chain', scales)[0])
    with pytest.raises(InvalidParamsError, match='not in scales'):
        chain_scales(small, {})


def test_transform_output_records_combine_like_the_pure_models():
    """The ERM transforms emit ``ModelRelease`` records (centre '' = none, internal chain models
    with published=False): ``scales_of`` + ``combine_releases`` on them give the same average
    as on the pure ``ReleasedModel``s."""
    io_erm = pytest.importorskip('beam_dp.io.erm')
    events = _continual_events()
    records = [io_erm.ModelRelease(
        stream='s', release_id=e.job.job_id, algo=e.job.algo, kind=e.job.kind,
        level=e.job.level, block_lo=e.job.lo, block_hi=e.job.hi, t_block=e.t,
        block_start_micros=0, center_release_id=e.job.center or '',
        noise_scale=e.model.noise_scale, eps_cost_per_record=e.job.eps_cost,
        epsilon_total=5.0, published=e.job.publish, n_nominal=e.model.n_nominal,
        num_classes=3, feature_dim=4, weights=list(e.model.weights), privacy='dp')
        for e in events]
    models = [e.model for e in events]
    pure_scales = {e.job.job_id: (e.model.noise_scale, e.job.center) for e in events}
    assert scales_of(records) == pure_scales == scales_of(models)
    for cov in ('own', 'chain'):
        np.testing.assert_allclose(combine_releases(records, cov, scales_of(records))[0],
                                   combine_releases(models, cov, pure_scales)[0])


def test_bad_inputs_raise():
    with pytest.raises(InvalidParamsError, match='covariance'):
        combine_releases([_model('a', [1], 1.0)], covariance='gls')
    with pytest.raises(InvalidParamsError, match='needs scales'):
        combine_releases([_model('a', [1], 1.0)], covariance='chain')
    with pytest.raises(InvalidParamsError, match='ReleasedModel or a ModelRelease'):
        combine_releases([np.ones(3)])
    with pytest.raises(InvalidParamsError, match='non-empty'):
        combine_releases([])
    with pytest.raises(InvalidParamsError, match='cycle'):
        chain_scales(_model('a', [1], 1.0, 'b'), {'a': (1.0, 'b'), 'b': (1.0, 'a')})
    with pytest.raises(InvalidParamsError, match='same number'):
        combine_releases([_model('a', [1], 1.0), _model('b', [1, 2], 1.0)])
    with pytest.raises(InvalidParamsError, match='variances'):
        inverse_variance_weights([1.0, -1.0])
    with pytest.raises(InvalidParamsError, match='no model'):
        RunningCombination().average()
    with pytest.raises(InvalidParamsError, match='n_params'):
        noise_variance(1.0, 0)


def _coordinate_variance(scale_factor):
    rng, dim, b = noise.seeded(11), 10, 0.5
    draws = np.stack([l2_laplace(rng.derive(i), dim, b * scale_factor) for i in range(4000)])
    return float(np.mean(draws ** 2)) / noise_variance(b, dim)


@pytest.mark.statistical
def test_noise_variance_is_the_l2_laplace_coordinate_variance():
    """(D + 1)·b² per coordinate: within 5% over 4000 draws (relative sd ≈ 1%)."""
    assert _coordinate_variance(1.0) == pytest.approx(1.0, abs=0.05)


@pytest.mark.statistical
def test_noise_variance_check_has_power():
    """A sampler 30% off in scale (69% in variance) fails the same check."""
    assert _coordinate_variance(1.3) != pytest.approx(1.0, abs=0.05)
    assert _coordinate_variance(1 / 1.3) != pytest.approx(1.0, abs=0.05)
