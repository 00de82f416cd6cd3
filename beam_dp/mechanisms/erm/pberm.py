"""Alg 3 / Alg 7, PBERM: private biased-regularised ERM toward a previously *released* model
(spec 003 §2.5).

    w = argmin_w (1/n) Σ_{i∈D_new} ℓ(w; z_i) + (μ/2)‖w − w_g‖²,   release w + ν

solved by ``PSGD`` started at and regularised toward the centre w_g. The centre must be a
``ReleasedModel`` (a noised, accounted release), never pre-noise weights: the privacy proof
treats w_g as public post-processing (trap T4), so anything else raises here.

Normalisation is always by the true nominal n of the data range (Alg 3 as printed divides a
2^j·b0-point sum by b0, which loses the geometric series; spec 003 [FIX]). Alg 3 and Alg 7
differ only in the ε a job is calibrated to, which the schedules choose:

* Alg 3 (constant scale 4L/(μ·b0·ε) whatever n = 2^j·b0): eps_noise = ε/2^{j+1};
* Alg 7 (size-aware scale 4L/(μ·2^j·b0·ε), used with subsampling): eps_noise = ε/2.
"""

import numpy as np

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.erm.psgd import PSGD
from beam_dp.mechanisms.erm.psgd import ReleasedModel
from beam_dp.noise import RandomSource

__all__ = [
    'pberm_release',
]


def pberm_release(psgd: PSGD, center: ReleasedModel, x, y, n_nominal: int, eps_noise: float,
                  rng: RandomSource, release_id: str) -> ReleasedModel:
    """PBERM: ``psgd`` regularised toward and started at the released model ``center``."""
    if not isinstance(center, ReleasedModel):
        raise InvalidParamsError(
            f'pberm_release: center must be a ReleasedModel (a noised release), got '
            f'{type(center).__name__}; pre-noise weights void the privacy proof (trap T4).')
    return psgd.release(np.asarray(x, dtype=np.float64), y, n_nominal, eps_noise, rng,
                        release_id, center=center)
