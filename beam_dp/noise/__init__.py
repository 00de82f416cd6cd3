"""The only source of randomness in beam_dp: random sources and exact discrete samplers."""

from beam_dp.noise.address import canonical_key
from beam_dp.noise.address import encode_address
from beam_dp.noise.keyed import KeyedRandom
from beam_dp.noise.l2_laplace import l2_laplace
from beam_dp.noise.pmf import discrete_gaussian_pmf
from beam_dp.noise.pmf import discrete_gaussian_variance
from beam_dp.noise.pmf import discrete_laplace_pmf
from beam_dp.noise.pmf import discrete_laplace_variance
from beam_dp.noise.rng import RandomSource
from beam_dp.noise.rng import SecureRandom
from beam_dp.noise.rng import SeededRandom
from beam_dp.noise.rng import secure_rng
from beam_dp.noise.rng import seeded
from beam_dp.noise.samplers import as_rational_up
from beam_dp.noise.samplers import bernoulli_exp
from beam_dp.noise.samplers import check_noise_scale
from beam_dp.noise.samplers import discrete_gaussian
from beam_dp.noise.samplers import discrete_laplace
from beam_dp.noise.samplers import noise_scale_problem
from beam_dp.noise.samplers import samplable
from beam_dp.noise.samplers import uniform_below
from beam_dp.noise.secret_key import NoiseKeyRef
from beam_dp.noise.sources import check_runner
from beam_dp.noise.sources import noise_source
from beam_dp.noise.sources import using_noise_key

__all__ = [
    'KeyedRandom',
    'NoiseKeyRef',
    'RandomSource',
    'SecureRandom',
    'SeededRandom',
    'as_rational_up',
    'bernoulli_exp',
    'canonical_key',
    'check_noise_scale',
    'check_runner',
    'discrete_gaussian',
    'discrete_gaussian_pmf',
    'discrete_gaussian_variance',
    'discrete_laplace',
    'discrete_laplace_pmf',
    'discrete_laplace_variance',
    'encode_address',
    'l2_laplace',
    'noise_scale_problem',
    'noise_source',
    'samplable',
    'secure_rng',
    'seeded',
    'uniform_below',
    'using_noise_key',
]
