"""Pipeline tier: ContinualERM / SlidingWindowERM on TestStream in streaming mode
(BundleBasedDirectRunner, ``tests.runners.streaming_options()``): seeded parity with the pure
driver's ``reference`` (spec 003 §12 C11), releases on empty blocks, order independence (C12),
late records (C14), refused windowing and bounded input without end, budget at construction,
``reproduce_paper`` labelled not DP, bit-identical replays under a noise key."""

import random

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.transforms import window
from apache_beam.transforms.window import TimestampedValue

from beam_dp.noise import NoiseKeyRef
from beam_dp import BudgetAccountant
from beam_dp import BudgetExceededError
from beam_dp import ContinualERM
from beam_dp import InvalidParamsError
from beam_dp import PrivacyBudget
from beam_dp import SlidingWindowERM
from beam_dp.testing import replay
from beam_dp.testing import stream_events
from beam_dp.mechanisms.erm import NOT_DP_LABEL
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

SEED = 11
STEP = 10                      # seconds per block
LAST_BLOCK = 7                 # end = 80 s: blocks 0..7
COMMON = dict(start=0, step=STEP, end=STEP * (LAST_BLOCK + 1), public_streams=['a', 'b'],
              num_classes=3, feature_dim=2, records_per_block=4, mu=0.5, passes=2,
              budget=PrivacyBudget(epsilon=4.0))


def continual(**kw):
    return ContinualERM(blocks_per_base=2, **{**COMMON, 'testing_seed': SEED, **kw})


def sliding(**kw):
    return SlidingWindowERM(levels=2, **{**COMMON, 'testing_seed': SEED, **kw})


def continual_update_mu(**kw):
    return continual(update_mu=3.0, **kw)


def make_records(seed=0):
    """Stream 'a': blocks 0, 1, 3 (6 records: subsampled to 4), 5; 'b' has no data at all."""
    rng = random.Random(seed)
    out = []
    for block, n in ((0, 3), (1, 4), (3, 6), (5, 2)):
        for i in range(n):
            x = (rng.uniform(-1, 1), rng.uniform(-1, 1))
            out.append((('a', x, (i + block) % 3), block * STEP + 1 + i))
    return out


LATE = (('a', (0.1, 0.2), 1), 5)               # block 0, arrives after block 0 closed
MALFORMED = (('a', (0.1,), 1), 12)             # one feature instead of two


def stream_of(records, order_seed=None):
    """Records before the watermark passes their block; LATE after block 0's release;
    MALFORMED in block 1."""
    records = list(records)
    if order_seed is not None:
        random.Random(order_seed).shuffle(records)
    ts = TestStream().advance_watermark_to(0)
    by_block = sorted({t // STEP for _, t in records})
    for block in by_block:
        ts = ts.add_elements([TimestampedValue(r, t) for r, t in records if t // STEP == block])
        if block == 1:
            ts = ts.add_elements([TimestampedValue(MALFORMED[0], MALFORMED[1]),
                                  TimestampedValue(LATE[0], LATE[1])])
        ts = ts.advance_watermark_to((block + 1) * STEP)
    return ts.advance_watermark_to(200).advance_watermark_to_infinity()


def expected(transform, label, records):
    """ModelRelease and ledger rows of ``beam_dp.testing.replay`` for every public stream."""
    driver = transform.driver
    releases, ledger = [], []
    for stream in ('a', 'b'):
        inputs = [('record', t * 1_000_000, r[1], r[2]) for r, t in records if r[0] == stream]
        out = replay(transform.loop_driver(), stream_events(driver, stream, inputs, LAST_BLOCK),
                     label=label, seed=SEED, end_input=False)
        releases += out.releases
        ledger += out.tagged.get('ledger', [])
    return releases, ledger


def _key(r):
    return (r.stream, r.release_id)


def check_equal(want):
    def check(got):
        assert sorted(got, key=_key) == sorted(want, key=_key)
    return check


def check_dead(dead):
    reasons = sorted(d.reason for d in dead)
    assert len(reasons) == 2, reasons
    assert reasons[0].startswith('late: step 0 was already released'), reasons
    assert reasons[1] == 'malformed: features must be 2 finite numbers', reasons
    # The late dead letter holds the input record at its own time (issue 21, item 6).
    (late,) = [d for d in dead if d.reason.startswith('late')]
    assert (late.record, late.event_time_micros) == (repr(LATE[0]), LATE[1] * 1_000_000)


@pytest.mark.parametrize('make', [continual, sliding, continual_update_mu],
                         ids=['continual', 'sliding', 'continual_update_mu'])
@pytest.mark.parametrize('order_seed', [None, 3])
def test_streaming_parity_with_reference_on_every_block(make, order_seed):
    records = make_records()
    label = 'ERM'
    transform = make()
    want_releases, want_ledger = expected(transform, label, records)
    blocks_released = {(r.stream, r.t_block) for r in want_releases}
    # Every block of both streams from the first release on, including empty ones and the
    # stream 'b' that has no data at all.
    first = min(r.t_block for r in want_releases)
    assert blocks_released == {(s, b) for s in 'ab' for b in range(first, LAST_BLOCK + 1)}
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream_of(records, order_seed) | label >> transform
        assert_that(out.releases, check_equal(want_releases), label='Releases')
        assert_that(out.ledger, check_equal(want_ledger), label='Ledger')
        assert_that(out.dead_letter, check_dead, label='Dead')


@pytest.mark.parametrize('windowing, says', [
    (window.SlidingWindows(30, 10), 'SlidingWindows'),
    (window.FixedWindows(30), 'leave windowing to the transform'),
    (window.Sessions(30), 'Sessions'),
])
def test_windowed_input_is_refused_at_expansion(windowing, says):
    p = beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options())
    windowed = (p | TestStream().advance_watermark_to_infinity()
                | beam.WindowInto(windowing))
    with pytest.raises(InvalidParamsError, match=says):
        _ = windowed | sliding()


def test_bounded_input_without_end_is_refused():
    p = beam.Pipeline(runner=BATCH_RUNNER)
    with pytest.raises(InvalidParamsError, match='no end was given'):
        _ = p | beam.Create([]) | sliding(end=None)


def test_budget_checked_at_construction_and_pure_epsilon_only():
    accountant = BudgetAccountant(PrivacyBudget(epsilon=5.0))
    continual(accountant=accountant)
    with pytest.raises(BudgetExceededError):    # 6 > 5, before any pipeline exists
        sliding(accountant=accountant, budget=PrivacyBudget(epsilon=6.0))
    with pytest.raises(InvalidParamsError, match='pure epsilon'):
        sliding(budget=PrivacyBudget(rho=1.0))
    with pytest.raises(InvalidParamsError, match='public_streams'):
        sliding(public_streams='a')
    with pytest.raises(InvalidParamsError, match='SlidingWindowERM.*levels'):
        SlidingWindowERM(levels=1, **COMMON)
    with pytest.raises(InvalidParamsError, match='blocks_per_base'):
        ContinualERM(**COMMON)
    with pytest.raises(InvalidParamsError, match='ContinualERM.*update_mu'):
        continual(update_mu=0.0)


_COLLECTED = {}


def _collect(record, tag):
    _COLLECTED[tag].append(record)


def _batch_run(transform, tag):
    records = make_records()
    _COLLECTED[tag] = []
    with beam.Pipeline(runner=BATCH_RUNNER) as p:
        out = (p | beam.Create(records)
               | beam.MapTuple(lambda r, t: TimestampedValue(r, t))
               | 'ERM' >> transform)
        _ = out.releases | beam.Map(_collect, tag)
        _ = out.ledger | 'L' >> beam.Map(_collect, tag)
    return sorted(_COLLECTED.pop(tag), key=lambda r: (type(r).__name__, _key(r)))


def test_reproduce_paper_is_labelled_not_dp_in_every_output():
    got = _batch_run(sliding(reproduce_paper=True), 'paper')
    assert got and all(r.privacy == NOT_DP_LABEL for r in got)
    honest = _batch_run(sliding(), 'honest')
    assert all(r.privacy.startswith('event-level') for r in honest)


def test_noise_key_replays_bit_identical(monkeypatch):
    monkeypatch.setenv('BDP_ERM_TEST_KEY', '0123456789abcdef' * 4)
    first = _batch_run(continual(testing_seed=None, noise_key=NoiseKeyRef('env:BDP_ERM_TEST_KEY', 'tests')), 'k1')
    again = _batch_run(continual(testing_seed=None, noise_key=NoiseKeyRef('env:BDP_ERM_TEST_KEY', 'tests')), 'k2')
    fresh = _batch_run(continual(testing_seed=None), 'fresh')
    assert first == again
    models = [r for r in first if hasattr(r, 'weights')]
    assert models and [r.weights for r in models] != [
        r.weights for r in fresh if hasattr(r, 'weights')]


def test_unbounded_stream_without_end_releases_until_the_input_ends():
    records = make_records()
    transform = sliding(end=None)
    want, _ = expected(transform, 'ERM', records)

    def check(got):
        # Every block up to the last watermark (200 s: block 19) is released, no further: the
        # end-of-input timer stops the loop when the watermark jumps to infinity.
        assert max(r.t_block for r in got) == 19
        assert sorted((r for r in got if r.t_block <= LAST_BLOCK), key=_key) == sorted(
            want, key=_key)
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream_of(records) | 'ERM' >> transform
        assert_that(out.releases, check)
