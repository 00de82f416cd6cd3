"""Statistical tier of ERMG's box (spec 000 §3.6): the released θ − θ̂ has the L2-Laplace law
its calibration claims: its norm is Gamma(d, b), b = 2/(tΛε) (KS, 20,000 runs through
``ERMBox.run``), and its direction is uniform (mean of unit vectors ≈ 0); with power: the same
KS test rejects b 30% off either way."""

import numpy as np
import pytest
from scipy import stats

from beam_dp import noise
from beam_dp.mechanisms.ermg import ERMBox

pytestmark = pytest.mark.statistical

POINTS = [[0.6, 0.8], [0.6, -0.8], [-0.6, 0.8], [-0.6, -0.8], [1.0, 0.0], [0.0, -1.0]]
LABELS = [1, 1, 0, 0, 1, 0]
RUNS = 20_000


def test_output_noise_is_l2_laplace_at_the_calibrated_scale_with_power():
    box = ERMBox(POINTS, LABELS, 0.5)
    counts, t, eps = np.array([30, 10, 5, 20, 3, 7]), 75, 4.0
    theta = box.minimiser(counts, t)
    scale = box.noise_scale(eps, t)
    assert np.linalg.norm(theta) + 10 * scale < 1 / box.reg     # the projection never acts
    rng = noise.seeded(12)
    diffs = np.array([np.array(box.run(counts, t, eps, None, None, rng.derive(i)).theta) - theta
                      for i in range(RUNS)])
    norms = np.linalg.norm(diffs, axis=1)
    d = box.dim
    assert stats.kstest(norms, stats.gamma(d, scale=scale).cdf).pvalue > 1e-3
    for off in (0.7, 1.3):
        assert stats.kstest(norms, stats.gamma(d, scale=scale * off).cdf).pvalue < 1e-3
    units = diffs / norms[:, None]
    assert np.abs(units.mean(axis=0)).max() < 4 / np.sqrt(RUNS)
