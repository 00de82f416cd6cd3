"""Pipeline tier for the per-step and sliding-window outputs (``output='per_step'`` /
``('window', W)``) of ContinualCountPerKey, ContinualSumPerKey and ContinualHistogramPerKey:
every key released at every step, values equal to the seeded pure reference
(``beam_dp.testing.replay`` of the same driver), ``Release.mechanism`` naming the window
counter and ``Release.noise_stddev`` its exact closed form, at event and user level, with
public keys on the BundleBasedDirectRunner and on Prism; private keys: the first release of a
selected key counts its selection step alone (no back-fill into a window), parity with the
shard state machine; argument errors."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel
from beam_dp import noise
from beam_dp.accounting import rho_for_epsilon_delta
from beam_dp.mechanisms.window import WindowCounter
from tests import runners
from tests.helpers import NOISE_FREE
from tests.helpers import run_stream
from tests.transforms.test_continual_counters import KEYS
from tests.transforms.test_continual_counters import STEP
from tests.transforms.test_continual_counters import _bin
from tests.transforms.test_continual_counters import _check_parity
from tests.transforms.test_continual_counters import _events

pytestmark = pytest.mark.pipeline


@pytest.mark.parametrize('output, budget, mechanism', [
    ('per_step', PrivacyBudget(epsilon=1.0), 'window[W=1]/fresh_per_step/discrete_laplace'),
    (('window', 3), PrivacyBudget(epsilon=1.0), 'window[W=3]/fresh_per_step/discrete_laplace'),
    (('window', 30), PrivacyBudget(rho=0.5),
     'window[W=30]/tree[k=5,levels=2]/range_decomposition/discrete_gaussian'),
])
def test_counts_per_step_and_window_match_the_reference(output, budget, mechanism):
    steps = 12
    transform = ContinualCountPerKey(public_keys=KEYS, start=0, step=STEP, end=steps * STEP,
                                     budget=budget, output=output, testing_seed=17,
                                     label='Counts')
    assert transform.driver.mechanism_name == mechanism
    _check_parity(transform, _events(steps), steps)


def test_sum_window_at_user_level_matches_the_reference():
    steps = 10
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2, max_contributions_per_step=1,
                     max_steps_per_unit=4)
    transform = ContinualSumPerKey(public_keys=KEYS, start=0, step=STEP, end=steps * STEP,
                                   lower=0.0, upper=2.0, value_fn=lambda r: 1.5,
                                   budget=PrivacyBudget(epsilon=2.0), privacy_unit=unit,
                                   output=('window', 4), testing_seed=17, label='Sums')
    _check_parity(transform, _events(steps), steps, value=lambda k, u: 1.5)


def test_histogram_per_step_at_user_level_matches_the_reference():
    steps = 9
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2, max_contributions_per_step=1,
                     max_steps_per_unit=4, max_total_contributions=3)
    transform = ContinualHistogramPerKey(
        public_keys=KEYS, start=0, step=STEP, end=steps * STEP, bins=['even', 'odd'],
        value_fn=lambda r: _bin(*r), budget=PrivacyBudget(rho=0.25), privacy_unit=unit,
        output='per_step', testing_seed=17, label='Hist')
    assert transform.driver.noise_stddev(0) == transform.driver.noise_stddev(8)
    _check_parity(transform, _events(steps), steps, value=_bin)


def _exact_windows(window, steps=8):
    """Noise-free window counts of key 'a' with 2 records per step."""
    stream = TestStream().advance_watermark_to(0)
    for s in range(steps):
        stream = stream.add_elements([TimestampedValue(('a', None), s * STEP + 1)] * 2)
    stream = stream.advance_watermark_to(steps * STEP + 1).advance_watermark_to_infinity()
    t = ContinualCountPerKey(public_keys=['a'], start=0, step=STEP, end=steps * STEP,
                             budget=NOISE_FREE, output=('window', window), label='W')
    return stream, t, [('a', s, 2.0 * min(s + 1, window)) for s in range(steps)]


@pytest.mark.parametrize('window', [1, 3, 5])
def test_noise_free_windows_are_the_exact_window_sums(window):
    stream, t, expected = _exact_windows(window)
    run_stream(stream, t, expected=expected,
               extract=lambda r: (r.key, r.step, round(r.value, 6)))


@pytest.mark.integration
@pytest.mark.prism
@runners.requires_prism
def test_on_prism_windows_match_the_reference():
    """The same parity on Prism (a portable runner: state, timers and the loop for real)."""
    steps = 8
    transform = ContinualCountPerKey(public_keys=KEYS, start=0, step=STEP, end=steps * STEP,
                                     budget=PrivacyBudget(rho=0.5), output=('window', 5),
                                     testing_seed=17, label='Counts')
    options = PipelineOptions(runners.prism_options(streaming=True))
    _check_parity_on(transform, steps, options)


def _check_parity_on(transform, steps, options):
    from tests.transforms import test_continual_counters as tcc  # pylint: disable=import-outside-toplevel
    events = _events(steps)
    source = tcc.helpers.stream([((k, u), t) for k, u, t in events], steps * STEP // 2,
                                steps * STEP + 1)
    run_stream(source, transform,
               extract=lambda r: (r.key, r.step, tuple(r.values) or (r.value,), r.mechanism,
                                  r.noise_stddev),
               expected=tcc._matches_reference(transform, events, steps, lambda k, u: None),
               runner='PrismRunner', options=options)


def test_private_keys_per_step_first_release_is_the_selection_step_alone():
    stream = TestStream().advance_watermark_to(0)
    for s in range(4):
        stream = stream.add_elements([TimestampedValue(('big', None), s * STEP + 1)] * 40)
    stream = stream.add_elements([TimestampedValue((f'solo{i}', None), 5) for i in range(20)])
    stream = stream.advance_watermark_to(300).advance_watermark_to_infinity()
    select = PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2)
    t = ContinualCountPerKey(keys=select, start=0, step=STEP, end=240, budget=NOISE_FREE,
                             output='per_step', testing_seed=4, label='PK')
    machine = t.driver.private_shard
    state, chosen = machine.init_state(), []
    rng = noise.seeded(4).derive('PK')
    for s in range(4):
        contributions = {'big': ((40,), 40)}
        if s == 0:
            contributions.update({f'solo{i}': ((1,), 1) for i in range(20)})
        out, state = machine.release_step(state, contributions, rng)
        chosen += [(k, s, round(v[0], 6)) for k, v, _ in out]
    assert chosen and all(k == 'big' and v == 40.0 for k, _, v in chosen)
    run_stream(stream, t, expected=chosen)


@pytest.mark.parametrize('kwargs, match', [
    (dict(output='daily'), "output must be 'cumulative', 'per_step' or"),
    (dict(output=('window', 0)), 'output must be'),
    (dict(output=('window', 2.5)), 'output must be'),
    (dict(output=('window', 7), mechanism='blt'), 'leave mechanism and estimator'),
    (dict(output='per_step', estimator='textbook'), 'leave mechanism and estimator'),
])
def test_bad_outputs_are_refused_at_construction(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        ContinualCountPerKey(public_keys=KEYS, start=0, step=STEP, end=10 * STEP,
                             budget=PrivacyBudget(rho=0.5), **kwargs)


def test_window_one_is_per_step_and_lists_are_accepted():
    kw = dict(public_keys=KEYS, start=0, step=STEP, budget=PrivacyBudget(rho=0.5))
    a = ContinualCountPerKey(output=('window', 1), **kw).driver
    b = ContinualCountPerKey(output=['window', 1], **kw).driver
    assert a.output == b.output == 'per_step'
    assert np.isfinite(a.noise_stddev(10 ** 6))   # no horizon needed


def test_epsilon_delta_budget_picks_the_better_noise_and_skips_an_unsamplable_gaussian():
    """(ε, δ): the pure counter at ε or the Gaussian one at the converted ρ, whichever has the
    smaller worst case; a sum at user level whose Gaussian σ² is outside the exact sampler's
    range runs the pure one instead of refusing."""
    kw = dict(public_keys=KEYS, start=0, step=STEP, budget=PrivacyBudget(epsilon=1.0, delta=1e-6))
    for window in (7, 1000):
        chosen = ContinualCountPerKey(output=('window', window), **kw).driver.counter(1)
        pure = WindowCounter(window=window, epsilon=1.0)
        gauss = WindowCounter(window=window, rho=rho_for_epsilon_delta(1.0, 1e-6))
        assert chosen.worst_variance() == min(pure.worst_variance(), gauss.worst_variance())
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=16, max_contributions_per_step=4,
                     max_steps_per_unit=365, max_total_contributions=400)
    small = ContinualSumPerKey(lower=0.0, upper=1.0, privacy_unit=unit, output='per_step',
                               **kw).driver       # user level: the Gaussian's node bound wins
    assert small.mechanism_name == 'window[W=1]/fresh_per_step/discrete_gaussian'
    big = ContinualSumPerKey(lower=0.0, upper=20000.0, grid_bits=0, privacy_unit=unit,
                             output='per_step', **kw).driver      # σ² past the sampler's range
    assert big.mechanism_name == 'window[W=1]/fresh_per_step/discrete_laplace'
