"""Pipeline tier of ``ContinualERM(algorithm='dp_ftrl')`` on TestStream in streaming mode:
seeded parity with the pure driver's ``reference`` on every block (both streams, empty blocks,
late and malformed records dead-lettered, element order), bit-identical replays under a noise
key, refused windowing, the budget checked at construction through the accountant, and the
arguments of the other algorithm refused by name."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.transforms import window

from beam_dp.noise import NoiseKeyRef
from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import ContinualERM
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp.mechanisms.erm import DPFTRL
from beam_dp.mechanisms.per_step import PerStepCounter
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options
from tests.transforms.test_erm_transform import COMMON
from tests.transforms.test_erm_transform import LAST_BLOCK
from tests.transforms.test_erm_transform import SEED
from tests.transforms.test_erm_transform import _batch_run
from tests.transforms.test_erm_transform import check_dead
from tests.transforms.test_erm_transform import check_equal
from tests.transforms.test_erm_transform import expected
from tests.transforms.test_erm_transform import make_records
from tests.transforms.test_erm_transform import stream_of

pytestmark = pytest.mark.pipeline

FTRL = {k: v for k, v in COMMON.items() if k != 'passes'}     # passes is Alg 4's


def ftrl(**kw):
    return ContinualERM(**{'algorithm': 'dp_ftrl', **FTRL, 'testing_seed': SEED, **kw})


@pytest.mark.parametrize('counter, order_seed', [('auto', None), ('auto', 3),
                                                 ('balanced_tree', 5)])
def test_streaming_parity_with_reference_on_every_block(counter, order_seed):
    records = make_records()
    transform = ftrl(counter=counter)
    assert isinstance(transform.driver.mechanism, DPFTRL)
    if counter == 'auto':
        assert isinstance(transform.driver.mechanism.counter, PerStepCounter)    # T = 8
    want_releases, want_ledger = expected(transform, 'ERM', records)
    assert {(r.stream, r.t_block) for r in want_releases} == {
        (s, b) for s in 'ab' for b in range(LAST_BLOCK + 1)}
    assert {r.algo for r in want_releases} == {'dp_ftrl'}
    assert all(row.worst_bound == 4.0 and row.eps_cost == 4.0 for row in want_ledger)
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream_of(records, order_seed) | 'ERM' >> transform
        assert_that(out.releases, check_equal(want_releases), label='Releases')
        assert_that(out.ledger, check_equal(want_ledger), label='Ledger')
        assert_that(out.dead_letter, check_dead, label='Dead')


def test_noise_key_replays_bit_identical(monkeypatch):
    monkeypatch.setenv('BDP_ERM_FTRL_TEST_KEY', '0123456789abcdef' * 4)
    key = dict(testing_seed=None, noise_key=NoiseKeyRef('env:BDP_ERM_FTRL_TEST_KEY', 'tests'))
    first = _batch_run(ftrl(**key), 'f1')
    again = _batch_run(ftrl(**key), 'f2')
    fresh = _batch_run(ftrl(testing_seed=None), 'f3')
    models = [r.weights for r in first if hasattr(r, 'weights')]
    assert first == again and len(models) == 2 * (LAST_BLOCK + 1)
    assert models != [r.weights for r in fresh if hasattr(r, 'weights')]


def test_sliding_windows_input_is_refused():
    from apache_beam.testing.test_stream import TestStream
    p = beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options())
    windowed = (p | TestStream().advance_watermark_to_infinity()
                | beam.WindowInto(window.SlidingWindows(30, 10)))
    with pytest.raises(InvalidParamsError, match='SlidingWindows'):
        _ = windowed | ftrl()


def test_budget_checked_at_construction_through_the_accountant():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=5.0))
    transform = ftrl(accountant=accountant)
    assert transform.privacy_cost().epsilon == 4.0
    with pytest.raises(BudgetExceededError):     # 6 > 5, before any pipeline exists
        ftrl(accountant=accountant, budget=PrivacyBudget(epsilon=6.0))
    p = beam.Pipeline(runner=BATCH_RUNNER)
    _ = p | 'A' >> beam.Create([]) | 'ERM1' >> transform       # spends 4 at expand
    with pytest.raises(BudgetExceededError):
        _ = p | 'B' >> beam.Create([]) | 'ERM2' >> ftrl(accountant=accountant,
                                                        budget=PrivacyBudget(epsilon=2.0))
    with pytest.raises(InvalidParamsError, match='pure epsilon'):
        ftrl(budget=PrivacyBudget(rho=1.0))


@pytest.mark.parametrize('kwargs, says', [
    (dict(blocks_per_base=2), 'ContinualERM: blocks_per_base=2 applies to algorithm=.alg4'),
    (dict(update_mu=2.0), 'update_mu'),
    (dict(passes=3), 'passes'),
    (dict(batch_size=4), 'batch_size'),
    (dict(reproduce_paper=True), 'reproduce_paper'),
    (dict(sampling=True), 'sampling'),
    (dict(max_level=2), 'max_level'),
    (dict(variant='chain'), 'variant'),
    (dict(base_fraction=0.25), 'base_fraction'),
    (dict(counter='blt'), 'counter'),
    (dict(end=None), 'end='),
    (dict(counter='binary_tree', end=None), 'end='),
    (dict(grid_bits=-1), 'grid_bits'),
    (dict(learning_rate=0.0), 'learning_rate'),
    (dict(algorithm='ftrl'), 'algorithm'),
])
def test_bad_or_other_algorithm_arguments_are_refused_by_name(kwargs, says):
    with pytest.raises(InvalidParamsError, match=says):
        ftrl(**kwargs)


@pytest.mark.parametrize('kwargs', [dict(learning_rate=1.0), dict(grid_bits=4),
                                    dict(counter='per_step')])
def test_dp_ftrl_arguments_are_refused_with_alg4(kwargs):
    with pytest.raises(InvalidParamsError, match="applies to algorithm='dp_ftrl' only"):
        ContinualERM(blocks_per_base=2, **{**COMMON, **kwargs})


def test_unbounded_stream_runs_on_an_infinite_horizon_counter():
    for counter in ('infinite_tree', 'per_step'):
        assert ftrl(end=None, counter=counter).driver.mechanism.horizon is None
