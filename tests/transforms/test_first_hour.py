"""Issue 16, a new user's first hour: no silent truncation, explicit bounds and signatures, dead
letters that show the input, and errors that do not send users to the source."""

import inspect

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import MIN_TIMESTAMP

import beam_dp
from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import ContinualCountPerKey
from beam_dp import ContinualHistogramPerKey
from beam_dp import ContinualSumPerKey
from beam_dp import DynamicCountPerKey
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import SparseContinualCountPerKey
from beam_dp import SparseContinualHistogramPerKey
from beam_dp import UserLevel
from beam_dp.drivers.clock import NO_EVENT_TIME_MICROS

from tests.helpers import NOISE_FREE
from tests.runners import BATCH_RUNNER

HOUR = 3600
START = 1_717_286_400                      # 2024-06-02T00:00:00Z
EPS = PrivacyBudget(epsilon=1.0)

# Every continual transform, built with the arguments it needs (keys 'a', 'b'; hourly steps).
CONTINUAL = {
    'ContinualCountPerKey': lambda **kw: ContinualCountPerKey(**kw),
    'ContinualSumPerKey': lambda **kw: ContinualSumPerKey(lower=0.0, upper=10.0, **kw),
    'ContinualHistogramPerKey': lambda **kw: ContinualHistogramPerKey(bins=['x', 'y'], **kw),
    'SparseContinualCountPerKey': lambda **kw: SparseContinualCountPerKey(**kw),
    'SparseContinualHistogramPerKey': lambda **kw: SparseContinualHistogramPerKey(
        bins=['x', 'y'], **kw),
    'DynamicCountPerKey': lambda **kw: DynamicCountPerKey(**kw),
}


def _purchases(hours=6):
    """Timestamped ('a'|'b', value) records, one every 20 minutes for ``hours`` hours."""
    return [TimestampedValue(('a' if i % 2 else 'b', 'x', +1), START + 1200 * i)
            for i in range(3 * hours)]


# -- 1. bounded input needs a public end -----------------------------------------------------------

@pytest.mark.parametrize('name', sorted(CONTINUAL))
def test_bounded_input_without_end_is_refused_at_expansion(name):
    transform = CONTINUAL[name](public_keys=['a', 'b'], start=START, step=HOUR, budget=EPS)
    p = beam.Pipeline(runner=BATCH_RUNNER)
    records = p | beam.Create(_purchases())
    assert records.is_bounded
    with pytest.raises(InvalidParamsError, match=rf'^{name}: the input PCollection is bounded '
                       r'\(batch\) but no end was given: pass end=.*must not depend on the data'):
        _ = records | transform


def test_refusal_happens_before_the_budget_is_spent():
    accountant = BudgetAccountant(EPS)
    transform = ContinualCountPerKey(public_keys=['a'], start=START, step=HOUR, budget=EPS,
                                     accountant=accountant)
    p = beam.Pipeline(runner=BATCH_RUNNER)
    with pytest.raises(InvalidParamsError, match='no end was given'):
        _ = p | beam.Create([]) | transform
    assert accountant.ledger == ()


def test_bounded_input_with_end_releases_every_step():
    """The issue's case: a sum over six hours of purchases gave 4 releases instead of 6 per key;
    with end= every step of every key is released, idle keys included."""
    records = _purchases()
    keys = ('a', 'b', 'idle')
    expected = [(k, s, sum(1 for r in records if r.value[0] == k
                           and (r.timestamp.micros // 10**6 - START) // HOUR <= s))
                for k in keys for s in range(6)]
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = p | beam.Create(records) | ContinualSumPerKey(
            public_keys=list(keys), start=START, step=HOUR, end=START + 6 * HOUR,
            budget=NOISE_FREE, lower=0.0, upper=1.0, value_fn=lambda r: r[2])
        assert_that(out.releases | beam.Map(lambda r: (r.key, r.step, round(r.value))),
                    equal_to(expected))


def test_horizon_steps_is_a_public_end_too():
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = p | beam.Create(_purchases()) | ContinualCountPerKey(
            public_keys=['a', 'b'], start=START, step=HOUR, horizon_steps=4, budget=NOISE_FREE)
        assert_that(out.releases | beam.Map(lambda r: (r.key, r.step)),
                    equal_to([(k, s) for k in ('a', 'b') for s in range(4)]))


# -- 2. explicit bounds, own signatures and docstrings ---------------------------------------------

def _public_transforms():
    return [getattr(beam_dp, name) for name in beam_dp.__all__
            if isinstance(getattr(beam_dp, name), type)
            and issubclass(getattr(beam_dp, name), beam.PTransform)]


@pytest.mark.parametrize('transform', _public_transforms(), ids=lambda t: t.__name__)
def test_every_public_transform_lists_its_own_arguments(transform):
    params = inspect.signature(transform).parameters
    assert params and not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
                              for p in params.values()), params
    doc = inspect.getdoc(transform)
    args = doc[doc.index('Args:'):]
    for name in params:
        assert f'{name}:' in args or f'{name},' in args or f', {name}' in args, \
            f'{transform.__name__}: argument {name} is not described in the docstring'


def test_sum_bounds_are_required_and_explained():
    with pytest.raises(InvalidParamsError, match=r'^ContinualSumPerKey: missing required '
                       r'argument\(s\) lower, upper: .*no defaults'):
        ContinualSumPerKey(public_keys=['a'], start=START, step=HOUR, budget=EPS)
    params = inspect.signature(ContinualSumPerKey).parameters
    assert params['lower'].default is inspect.Parameter.empty
    assert params['upper'].default is inspect.Parameter.empty
    assert 'lower' not in inspect.signature(ContinualCountPerKey).parameters


def test_arguments_of_another_transform_are_named():
    with pytest.raises(InvalidParamsError, match=r'^ContinualCountPerKey: lower, upper are not '
                       r'arguments of ContinualCountPerKey: only ContinualSumPerKey takes value '
                       r'bounds'):
        ContinualCountPerKey(public_keys=['a'], start=START, step=HOUR, budget=EPS, lower=0,
                             upper=50)
    with pytest.raises(InvalidParamsError, match=r'lower is not an argument of '
                       r'ContinualHistogramPerKey'):
        ContinualHistogramPerKey(public_keys=['a'], bins=['x'], start=START, step=HOUR,
                                 budget=EPS, lower=0)
    with pytest.raises(InvalidParamsError, match=r'strat is not an argument of '
                       r'SparseContinualCountPerKey: did you mean start\?'):
        SparseContinualCountPerKey(public_keys=['a'], strat=START, step=HOUR, budget=EPS)


# -- 3. dead letters from bounding show the input record -------------------------------------------

def test_bounding_dead_letters_hold_the_input_record():
    unit = UserLevel(unit_fn=lambda r: r[1], max_keys_per_unit=1, max_contributions_per_step=1,
                     max_steps_per_unit=1)
    records = [TimestampedValue(('a', 'c663', 3.5), START + 10),
               TimestampedValue(('a', 'c663', 4.5), START + 20),      # 2nd in the step: over m
               TimestampedValue(('b', 'c663', 5.5), START + 30)]      # 2nd key: over K
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = p | beam.Create(records) | ContinualSumPerKey(
            public_keys=['a', 'b'], start=START, step=HOUR, end=START + HOUR, budget=EPS,
            lower=0.0, upper=10.0, value_fn=lambda r: r[2], privacy_unit=unit)
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.record)),
                    equal_to([('BoundContributions', "('a', 'c663', 4.5)"),
                              ('BoundContributions', "('b', 'c663', 5.5)")]))


# -- 5. errors that do not send users to the source ------------------------------------------------

@pytest.mark.parametrize('name', sorted(CONTINUAL))
def test_missing_start_step_budget_name_the_public_transform(name):
    with pytest.raises(InvalidParamsError, match=rf'^{name}: missing required argument\(s\) '
                       r'(budget, )?start, step(, budget)?: pass ') as info:
        CONTINUAL[name](public_keys=['a'])
    assert '_' + 'ContinualPerKey' not in str(info.value) and '__init__' not in str(info.value)


@pytest.mark.parametrize('name', sorted(CONTINUAL))
def test_epsilon_instead_of_budget_says_what_to_write(name):
    with pytest.raises(InvalidParamsError, match=r'epsilon is not an argument: use '
                       r'budget=PrivacyBudget\(epsilon=1.0\)'):
        CONTINUAL[name](public_keys=['a'], start=START, step=HOUR, epsilon=1.0)


@pytest.mark.parametrize('name', sorted(CONTINUAL))
def test_start_in_milliseconds_is_refused_at_construction(name):
    with pytest.raises(InvalidParamsError, match=rf'^{name}: start=1717286400000 is after the '
                       r'year 3000 as seconds since the epoch: it looks like milliseconds'):
        CONTINUAL[name](public_keys=['a'], start=START * 1000, step=HOUR, budget=EPS)


def test_records_without_timestamp_and_before_start_get_different_reasons():
    assert NO_EVENT_TIME_MICROS == MIN_TIMESTAMP.micros
    records = [('a', 1),                                             # beam.Create: no timestamp
               TimestampedValue(('a', 2), START - 90)]               # 90 s before the start
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = p | beam.Create(records) | ContinualCountPerKey(
            public_keys=['a'], start=START, step=HOUR, end=START + HOUR, budget=EPS)
        assert_that(out.dead_letter | beam.Map(lambda d: d.reason), equal_to([
            "record has no event timestamp (it carries Beam's minimum timestamp, as elements of "
            "beam.Create or of a file read do); the release start is 2024-06-02T00:00:00Z "
            "(1717286400 s since the epoch): give each record its event time, e.g. "
            "beam.Map(lambda r: beam.window.TimestampedValue(r, <its time in seconds>))",
            'event time is before the release start: the record is at 2024-06-01T23:58:30Z '
            '(1717286310 s since the epoch), the start is 2024-06-02T00:00:00Z (1717286400 s '
            'since the epoch)']))


def test_over_budget_message_reads_naturally():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=0.5))
    with pytest.raises(BudgetExceededError, match=r"^ContinualCountPerKey 'X' asks for ε=1 but "
                       r"the accountant has ε=0.5 left of ε=0.5 \(spent: nothing yet\)\."):
        ContinualCountPerKey(public_keys=['a'], start=START, step=HOUR, budget=EPS,
                             accountant=accountant, label='X')
