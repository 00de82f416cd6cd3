"""Pipeline tier: ``ContinualQuantilesPerKey`` on TestStream in streaming mode (DirectRunner and
Prism named explicitly): releases for every key and step (empty steps too), dead letters with
their reasons, seeded parity with ``beam_dp.testing.replay`` at event and user level, public
and private keys, and construction-time checks."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import ContinualQuantilesPerKey
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import QuantileRelease
from beam_dp import UserLevel
from beam_dp.testing import keyed_events
from beam_dp.testing import replay
from tests import runners
from tests.helpers import NOISE_FREE
from tests.helpers import collect
from tests.helpers import collected
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

STEP = 60


def tv(record, seconds):
    return TimestampedValue(record, seconds)


def quantiles(**kwargs):
    params = dict(public_keys=['a', 'b'], start=0, step=STEP, end=240, lower=0.0, upper=16.0,
                  depth=4, percentiles=(25, 50, 75), budget=NOISE_FREE)
    params.update(kwargs)
    return ContinualQuantilesPerKey(**params)


def _row(r):
    return r.key, r.step, tuple(round(v, 6) for v in r.values), type(r).__name__


def _run(stream, transform, runner=DIRECT_RUNNER, options=None):
    """Runs the transform; returns (sorted releases as (key, step, values rounded, type),
    sorted dead letters as (stage, reason up to its first colon))."""
    opts = options if options is not None else streaming_options()
    collected()
    with beam.Pipeline(runner=runner, options=opts) as p:
        out = p | stream | transform
        collect(out.releases | 'R' >> beam.Map(_row), 'releases')
        collect(out.dead_letter | 'D' >> beam.Map(
            lambda d: (d.stage, d.reason.split(':')[0].split(' ')[0]
                       if d.reason.startswith('key') else d.reason.split(':')[0])), 'dead')
    got = collected()
    return sorted(got['releases']), sorted(got['dead'])


def _stream(records, until=300):
    stream = TestStream().advance_watermark_to(0)
    stream = stream.add_elements([tv(r, t) for r, t in records])
    return stream.advance_watermark_to(until).advance_watermark_to_infinity()


RECORDS = ([(('a', v), 5 + i) for i, v in enumerate([1.5, 2.5, 3.5, 4.5])]   # step 0
           + [(('a', v), 130 + i) for i, v in enumerate([9.5, 10.5, 11.5, 12.5])]   # step 2
           + [(('b', 100.0), 70)])                                     # clamped to 16, step 1


@pytest.mark.pipeline
def test_every_key_and_step_is_released_with_noise_free_quantiles():
    releases, dead = _run(_stream(RECORDS + [(('a', 'x'), 6), (('zz', 1.0), 7),
                                             (('a', float('nan')), 8)]), quantiles())
    table = {(k, s): v for k, s, v, _ in releases}
    assert {name for *_, name in releases} == {'QuantileRelease'}
    assert sorted(table) == [(k, s) for k in 'ab' for s in range(4)]
    # Exact counts (ε huge): buckets of width 1; 4 values in [1, 5): quartiles inside them.
    assert table[('a', 0)] == (2.0, 3.0, 4.0)
    assert table[('a', 1)] == table[('a', 0)]                # empty step: cumulative, same
    # 8 values, one per bucket 1-4 and 9-12: rank 2, 4 and 6 end buckets 2, 4 and 10.
    assert table[('a', 2)] == (3.0, 5.0, 11.0)
    assert table[('b', 0)] == (0.5, 0.5, 0.5)     # no record: the middle of the first bucket
    assert table[('b', 1)] == (15.25, 15.5, 15.75)           # 100 clamped into the last bucket
    assert dead == [('ExtractAndValidate', 'key'), ('ExtractAndValidate', 'value is NaN'),
                    ('ExtractAndValidate', 'value is not a number')]


def _parity(transform, records, contributions):
    expected = replay(transform.loop_driver(), keyed_events(transform.driver, contributions, 4),
                      label=transform.label, seed=7, end_input=False).releases
    releases, _ = _run(_stream(records), transform)
    want = sorted((r.key, r.step, tuple(round(v, 6) for v in r.values), 'QuantileRelease')
                  for r in expected)
    assert releases == want


@pytest.mark.pipeline
@pytest.mark.parametrize('layout', ['tree', 'flat'])
def test_parity_with_replay_under_a_seed(layout):
    rng = np.random.default_rng(1)
    records = [(('a' if i % 3 else 'b', float(rng.uniform(0, 16))), int(rng.integers(0, 240)))
               for i in range(80)]
    t = quantiles(budget=PrivacyBudget(epsilon=1.0), testing_seed=7, layout=layout, label='Q')
    _parity(t, records, [(k, s // STEP, v) for (k, v), s in records])


@pytest.mark.pipeline
def test_user_level_parity_with_replay_under_a_seed():
    unit = UserLevel(unit_fn=lambda r: r[2], max_keys_per_unit=2, max_contributions_per_step=2,
                     max_steps_per_unit=4)
    records = [(('a' if i % 2 else 'b', float(i % 16), f'u{i % 5}'), 10 + 23 * (i % 10))
               for i in range(20)]   # each unit: ≤ 2 keys, ≤ 2 records per step: all kept
    t = quantiles(budget=PrivacyBudget(rho=0.5), privacy_unit=unit, testing_seed=7,
                  label='QU')
    assert t.driver.resolved_layout == 'tree'
    _parity(t, records, [(r[0], s // STEP, r[1]) for r, s in records])


@pytest.mark.pipeline
def test_private_keys_release_only_selected_keys():
    records = [((f'k{i % 2}', float(i % 16), f'u{i}'), 5 + (i % 200)) for i in range(400)]
    records += [(('rare', 3.0, 'u-rare'), 9)]
    unit = UserLevel(unit_fn=lambda r: r[2], max_keys_per_unit=1, max_contributions_per_step=1,
                     max_steps_per_unit=1)
    t = ContinualQuantilesPerKey(
        keys=PrivateKeys(PrivacyBudget(epsilon=1.0, delta=1e-6), num_shards=2), start=0,
        step=STEP, end=240, lower=0.0, upper=16.0, depth=3, budget=PrivacyBudget(epsilon=1.0),
        privacy_unit=unit, testing_seed=3)
    releases, dead = _run(_stream(records), t)
    assert {k for k, *_ in releases} == {'k0', 'k1'}
    assert not dead


@pytest.mark.integration
@pytest.mark.prism
@runners.requires_prism
def test_on_prism_the_same_releases_as_replay():
    rng = np.random.default_rng(2)
    records = [(('a' if i % 3 else 'b', float(rng.uniform(0, 16))), int(rng.integers(0, 240)))
               for i in range(40)]
    t = quantiles(budget=PrivacyBudget(epsilon=1.0), testing_seed=7, label='QP')
    expected = replay(t.loop_driver(), keyed_events(
        t.driver, [(k, s // STEP, v) for (k, v), s in records], 4), label='QP', seed=7,
        end_input=False).releases
    releases, _ = _run(_stream(records), t, runner=None,
                       options=PipelineOptions(runners.prism_options(streaming=True)))
    assert releases == sorted((r.key, r.step, tuple(round(v, 6) for v in r.values),
                               'QuantileRelease') for r in expected)


def test_construction_checks_name_the_parameter():
    with pytest.raises(InvalidParamsError, match='lower'):
        ContinualQuantilesPerKey(public_keys=['a'], start=0, step=60, end=120, upper=1.0,
                                 budget=NOISE_FREE)
    with pytest.raises(InvalidParamsError, match='percentiles'):
        quantiles(percentiles=50)
    with pytest.raises(InvalidParamsError, match='percentiles'):
        quantiles(percentiles=(50, 120))
    with pytest.raises(InvalidParamsError, match='bins'):
        quantiles(bins=['x'])
    t = quantiles()
    assert isinstance(t.driver.describe()['buckets'], int)
    assert QuantileRelease._fields[:4] == ('key', 'step', 'step_start_micros', 'step_end_micros')


def fractions(*args, **kwargs):
    """``quantiles()`` without its default percentiles; a positional argument is ``quantiles=``."""
    if args:
        kwargs['quantiles'] = args[0]
    return quantiles(**{'percentiles': None, **kwargs})


def test_quantiles_are_fractions_and_small_percentiles_warn(caplog):
    """``quantiles=`` takes numpy's fractions; ``percentiles=[0.5]`` (the 0.5th percentile, a
    likely mistake for the median) is kept, with a warning that names ``quantiles=``."""
    assert fractions([0.5, 0.9]).driver.percentiles == (50.0, 90.0)
    assert fractions().driver.percentiles == (50.0,)
    with caplog.at_level('WARNING', logger='beam_dp.transforms.quantiles'):
        assert fractions(percentiles=[0.5]).driver.percentiles == (0.5,)
    assert 'quantiles=[0.5]' in caplog.text
    caplog.clear()
    with caplog.at_level('WARNING', logger='beam_dp.transforms.quantiles'):
        fractions(percentiles=[0, 50])
    assert caplog.text == ''
    with pytest.raises(InvalidParamsError, match='not both'):
        fractions(percentiles=[50], quantiles=[0.5])
    for bad in ([50], [], 'x', [float('nan')], [-0.1]):
        with pytest.raises(InvalidParamsError, match='quantiles'):
            fractions(bad)
