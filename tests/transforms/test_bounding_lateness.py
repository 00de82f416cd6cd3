"""Lateness at 'BoundPerUnit' is decided by the public schedule, never by other units (issue 13).

'BoundPerUnit' dead-letters a record whose step is already released, so a late record does not
use its unit's S. Before the fix the stage learnt that a step is released only from a timer
armed by its shard's kept steps: another unit u of the shard decided whether unit v's record,
late by the schedule, was kept here (and used v's S) or dead-lettered. Now every shard's clock
is seeded at launch and advanced by its own timer chain: on the DirectRunner (streaming,
TestStream) and on Prism, v's kept records and dead letters are the same with and without u,
for the bounding transform alone and through ``ContinualCountPerKey`` (noise-free: v's step-5
record is counted in both). The DoFn-level checks are in ``test_unit_cap.py``.
"""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to

from beam_dp import UserLevel
from beam_dp.drivers.clock import StepClock
from tests import helpers
from tests import runners
from tests.runners import DIRECT_RUNNER
from tests.transforms.test_contribution_bounding import CLOCK
from tests.transforms.test_contribution_bounding import _first
from tests.transforms.test_contribution_bounding import streaming
from tests.transforms.test_continual import STEP
from tests.transforms.test_continual import counts
from tests.helpers import run_stream
from tests.transforms.test_unit_cap import SHARD_UNITS

#: Two units of the same 'BoundPerUnit' shard.
U, V = SHARD_UNITS[0][0], SHARD_UNITS[0][1]


def _late_stream(clock, with_u, u_record, v_late, v_on_time, late_step=3):
    """u (optionally) sends ``u_record`` for step ``late_step`` before it is released; the
    watermark then passes the release time of steps 0..late_step one step at a time; then v
    sends ``v_late`` (for the released step ``late_step``) and ``v_on_time`` (two steps on)."""
    u_time = (clock.step_bounds(late_step)[0] + 1_000_000) / 1e6
    releases = [clock.release_time_micros(s) / 1e6 + 1 for s in range(late_step + 1)]
    late_t, on_time_t = (clock.step_bounds(s)[0] / 1e6 + 1 for s in (late_step, late_step + 2))
    return helpers.stream([(u_record, u_time)] if with_u else [], *releases,
                          [(v_late, late_t), (v_on_time, on_time_t)],
                          clock.release_time_micros(late_step + 4) / 1e6 + 1)


def _bounding_pipeline(pipeline, with_u):
    """S = 1 (K = m = 1) through ``BoundContributions(clock=CLOCK)``: v's step-3 record is late
    here (dead-lettered with the release stage's reason) and its step-5 record kept, with or
    without u."""
    from beam_dp.transforms.contribution_bounding import BoundContributions
    bound = UserLevel(unit_fn=_first, max_steps_per_unit=1)
    stream = _late_stream(CLOCK, with_u, (U, ('a', 3, 'u3')), (V, ('a', 3, 'v3')),
                     (V, ('a', 5, 'v5')))
    with pipeline as p:
        out = p | stream | BoundContributions(bound, clock=CLOCK)
        assert_that(out.kept | beam.Map(lambda e: e[2]),
                    equal_to(['v5'] + (['u3'] if with_u else [])), label='kept')
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.reason, d.record)),
                    equal_to([('BoundContributions', CLOCK.late_reason(3),
                               repr((V, ('a', 3, 'v3'))))]), label='dead')


@pytest.mark.pipeline
@pytest.mark.parametrize('with_u', [False, True])
def test_pipeline_another_unit_does_not_change_a_late_units_kept_records(with_u):
    _bounding_pipeline(beam.Pipeline(runner=DIRECT_RUNNER, options=streaming()), with_u)


@pytest.mark.integration
@pytest.mark.prism
@runners.requires_prism
@pytest.mark.parametrize('with_u', [False, True])
def test_on_prism_another_unit_does_not_change_a_late_units_kept_records(with_u):
    _bounding_pipeline(beam.Pipeline(options=PipelineOptions(
        runners.prism_options(streaming=True))), with_u)


@pytest.mark.pipeline
@pytest.mark.parametrize('with_u', [False, True])
def test_continual_count_counts_a_late_units_next_step_with_or_without_another_unit(with_u):
    """``ContinualCountPerKey`` (user level, S = 1, noise-free): u counts on key 'b'; v's
    record for the released step 3 of key 'a' is dead-lettered at 'BoundContributions' and its
    step-5 record is counted, so 'a' reads 1 from step 5 on, with or without u. (Before the
    fix, without u, the late record used v's S at bounding, was dropped as late at release,
    and 'a' stayed 0.)"""
    clock = StepClock(0, STEP * 1_000_000)
    unit = UserLevel(unit_fn=lambda r: r[1], max_steps_per_unit=1)
    stream = _late_stream(clock, with_u, ('b', U), ('a', V), ('a', V))
    a = [('a', s, 1.0 if s >= 5 else 0.0) for s in range(8)]
    b = [('b', s, 1.0 if with_u and s >= 3 else 0.0) for s in range(8)]
    run_stream(stream, counts(end=8 * STEP, privacy_unit=unit), expected=a + b,
               dead=equal_to([('BoundContributions', clock.late_reason(3))]))


def _stage_labels(pcoll_of):
    """Full labels of the transforms applied under 'BoundContributions'."""
    from beam_dp.transforms.contribution_bounding import BoundContributions
    pipeline = beam.Pipeline(runner='BundleBasedDirectRunner')
    _ = pcoll_of(pipeline) | 'BC' >> BoundContributions(
        UserLevel(unit_fn=_first, max_steps_per_unit=1), clock=CLOCK)
    labels = []

    class _Labels(beam.pipeline.PipelineVisitor):
        def visit_transform(self, applied):
            labels.append(applied.full_label)

    pipeline.visit(_Labels())
    return {label.split('/')[1] for label in labels if label.startswith('BC/')}


def test_the_chain_is_seeded_for_an_unbounded_input_and_absent_for_a_bounded_one():
    """Unbounded input: one seed per unit shard ('ShardSeeds' / 'SeedAtStart' / 'MergeSeeds')
    flattened before 'BoundPerUnit'. Bounded input (batch): no seeds and no chain (a batch
    runner passes no release time before the whole input is bounded: a chain would only cost
    timer firings), so nothing is late there, whatever the data."""
    seeded = _stage_labels(lambda p: p | TestStream().add_elements([('u', ('a', 0, 'x'))]))
    assert {'ShardSeeds', 'SeedAtStart', 'MergeSeeds', 'BoundPerUnit'} <= seeded
    plain = _stage_labels(lambda p: p | beam.Create([('u', ('a', 0, 'x'))]))
    assert 'BoundPerUnit' in plain and not {'ShardSeeds', 'SeedAtStart', 'MergeSeeds'} & plain
