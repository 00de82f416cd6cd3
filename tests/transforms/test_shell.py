"""The shared transform shell: argument parsing, the one budget protocol, the noise source, and
deterministic key coders for every stateful DoFn of the keyed transforms."""

import logging

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import SelectKeys
from beam_dp import UserLevel
from beam_dp.accounting import PrivacyCost
from beam_dp.noise import SeededRandom
from beam_dp.transforms import shell

from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER

pytestmark = pytest.mark.pipeline


class _TwoCosts(shell.ShellTransform):
    """A minimal family: two costs, checked at construction, recorded at expand."""

    def __init__(self, epsilon, **kwargs):
        super().__init__(**kwargs)
        self._epsilon = epsilon
        self.check_budget()

    def privacy_costs(self):
        return [(f'{self.label}/First', PrivacyCost(epsilon=self._epsilon)),
                (self.label, PrivacyCost(epsilon=self._epsilon))]

    def expand(self, pcoll):
        self.spend_budget()
        return pcoll


def test_all_costs_are_checked_together_at_construction_and_recorded_once_at_expand():
    acc = BudgetAccountant(PrivacyBudget(epsilon=1.0))
    with pytest.raises(BudgetExceededError, match='asks for'):
        _TwoCosts(0.6, accountant=acc)             # each fits alone, not both
    assert acc.ledger == ()
    t = _TwoCosts(0.4, accountant=acc, label='T')
    assert acc.ledger == () and t.privacy_cost().epsilon == pytest.approx(0.8)
    p = beam.Pipeline(runner=BATCH_RUNNER)
    _ = p | beam.Create([]) | t
    assert [e.label for e in acc.ledger] == ['T/First', 'T']


def test_noise_source_and_errors_name_the_public_transform():
    assert isinstance(shell.noise_source('X', 3), SeededRandom)
    for bad in (True, 1.5, 'x'):
        with pytest.raises(InvalidParamsError, match='X: testing_seed must be an int or None'):
            shell.noise_source('X', bad)
    for transform, extra in ((ContinualCountPerKey, {}),
                             (ContinualSumPerKey, {'lower': 0.0, 'upper': 1.0})):
        with pytest.raises(InvalidParamsError, match=f'^{transform.__name__}: testing_seed'):
            transform(public_keys=['a'], start=0, step=60, budget=PrivacyBudget(epsilon=1.0),
                      testing_seed=True, **extra)
    with pytest.raises(InvalidParamsError, match='^ContinualSumPerKey: grid_bits must be at most'):
        ContinualSumPerKey(public_keys=['a'], start=0, step=60, budget=PrivacyBudget(epsilon=1.0),
                           lower=0.0, upper=1.0, grid_bits=31)
    with pytest.raises(InvalidParamsError, match='^SelectKeys: accountant must be a Budget'):
        SelectKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6), accountant=3)


def test_parse_clock_and_key_set():
    clock = shell.parse_clock('T', start=10, step=60, end=130, allowed_lateness=5)
    assert (clock.start_micros, clock.step_micros, clock.last_step) == (10_000_000, 60_000_000, 1)
    assert clock.allowed_lateness_micros == 5_000_000
    with pytest.raises(InvalidParamsError, match='^T: end must be after start, got 10.'):
        shell.parse_clock('T', start=10, step=60, end=10)
    with pytest.raises(InvalidParamsError, match='^T: tick must be positive'):
        shell.parse_clock('T', start=0, step=0, step_name='tick')
    keys = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6))
    assert shell.parse_key_set('T', None, keys) == (None, keys)
    assert shell.parse_key_set('T', None, ['a']) == (['a'], None)
    with pytest.raises(InvalidParamsError, match='^T: give either public_keys or keys'):
        shell.parse_key_set('T', ['a'], ['b'])
    with pytest.raises(InvalidParamsError, match='^T: public_keys must be a collection'):
        shell.parse_key_set('T', 'ab', None)


def test_no_stateful_dofn_has_a_non_deterministic_key_coder(caplog):
    """Public and private keys, event and user level: Beam logs no coder warning."""
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=2, max_contributions_per_step=2,
                     max_steps_per_unit=3)
    select = PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6))
    common = dict(start=0, step=60, end=120, budget=PrivacyBudget(epsilon=1.0))
    transforms = [
        ContinualCountPerKey(public_keys=['a'], **common),
        ContinualSumPerKey(public_keys=['a'], privacy_unit=unit, lower=0, upper=1, **common),
        ContinualHistogramPerKey(keys=select, bins=['u1'], privacy_unit=unit, **common),
        ContinualCountPerKey(keys=select, **common),
    ]
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with caplog.at_level(logging.WARNING):
        for i, transform in enumerate(transforms):
            with beam.Pipeline(runner=DIRECT_RUNNER, options=options) as p:
                _ = (p | TestStream().advance_watermark_to(0)
                     .add_elements([TimestampedValue(('a', 'u1'), 5)])
                     .advance_watermark_to_infinity()
                     | f'T{i}' >> transform)
    coder_warnings = [r.getMessage() for r in caplog.records if 'deterministic' in r.getMessage()]
    assert coder_warnings == []
