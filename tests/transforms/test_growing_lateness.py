"""Lateness before 'AnswerQueries' (``WindowedPMWG``, ``BBSchedulerQueries``,
``BBImproverQueries``, fixed windows) is decided by the public window deadlines, never by
another record of the same (key, window), once the transform has a public ``start``.

A fixed window's instance is closed by its 'expire' timer (window end - 1 µs + allowed
lateness), armed by the instance's first item: without the gate, a record arriving after the
deadline was dead-lettered when an earlier record had opened the instance (it is closed) and
counted when none had (it opens the instance). With ``start=`` a 'GateLateRecords' stage
(``beam_dp.transforms.lateness``) dead-letters it in both cases, at stage 'AnswerQueries' with
the same reason; DirectRunner (streaming, TestStream) and Prism. Likewise a query arriving
after its window's deadline was refused HALTED when a record had opened the instance and
answered at t = 0 (NOT_STARTED) when none had: 'GateLateQueries' refuses it HALTED in both.
"""

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms import window
from apache_beam.transforms.window import TimestampedValue

from beam_dp import InvalidParamsError
from beam_dp.queries import LinearQuery
from beam_dp.transforms.bb_scheduler import BBSchedulerQueries
from beam_dp.drivers.growing import closed_reason as _closed_reason
from beam_dp.drivers.growing import late_window_reason as _late_reason
from tests import runners
from tests.transforms.test_bb_transforms import N as BB_DOMAIN
from tests.transforms.test_bb_transforms import scheduler_args
from tests.transforms.test_pmwg_transform import N as PMWG_DOMAIN
from tests.transforms.test_pmwg_transform import make_stream
from tests.transforms.test_pmwg_transform import pmwg
from tests.transforms.test_segment_lateness import direct_pipeline
from tests.transforms.test_segment_lateness import prism_pipeline

#: Windows of 100 s from t = 100 s: [100, 200) is the window of the records below.
START_S, WID = 100, (100_000_000, 200_000_000)
LATE = ('AnswerQueries', _late_reason(WID, 0))           # allowed_lateness 0 (default)


def _batches(with_other):
    """The other record (t = 150) of the window before its deadline (optionally); the watermark
    passes the deadline (199.999999 s); then the late record (t = 160)."""
    first = [('data', 2, 150.0)] if with_other else []
    return [(120, first), (250, []), (260, [('data', 3, 160.0)])]


def _bb(**kwargs):
    return BBSchedulerQueries(**scheduler_args(domain_fn=lambda r: r, **kwargs))


FAMILIES = {'pmwg': pmwg, 'bb_scheduler': _bb}


def _records(with_other):
    """The same as one untagged TestStream of records (Prism runs no multi-output TestStream:
    it stalls on one, with or without the gate)."""
    stream = TestStream().advance_watermark_to(0)
    for watermark, events in _batches(with_other):
        if events:
            stream = stream.add_elements([TimestampedValue(v, ts) for _, v, ts in events])
        stream = stream.advance_watermark_to(watermark)
    return stream.advance_watermark_to_infinity()


def _pipeline(pipeline, family, with_other, start=START_S, tagged=True):
    with pipeline as p:
        if tagged:
            streams = p | make_stream(_batches(with_other))
            data, queries = streams['data'], streams['queries']
        else:
            data, queries = p | _records(with_other), p | 'NoQueries' >> beam.Create([])
        data = data | 'WD' >> beam.WindowInto(window.FixedWindows(100))
        queries = queries | 'WQ' >> beam.WindowInto(window.FixedWindows(100))
        out = (data, queries) | 'T' >> FAMILIES[family](start=start)
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.reason)), equal_to([LATE]))


ON_PRISM = pytest.param('prism', 'pmwg', id='prism-pmwg', marks=[
    pytest.mark.integration, pytest.mark.prism, runners.requires_prism])


@pytest.mark.pipeline
@pytest.mark.parametrize('runner, family', [('direct', f) for f in sorted(FAMILIES)]
                         + [ON_PRISM])
@pytest.mark.parametrize('with_other', [False, True])
def test_a_late_record_is_dead_lettered_with_or_without_another_record_of_its_window(
        runner, family, with_other):
    if runner == 'direct':
        _pipeline(direct_pipeline(), family, with_other)
    else:
        _pipeline(prism_pipeline(), family, with_other, tagged=False)


@pytest.mark.pipeline
def test_a_record_of_a_window_before_start_is_dead_lettered_as_before_the_start():
    with direct_pipeline() as p:
        streams = p | make_stream([(10, [('data', 1, 50.0), ('data', 2, 150.0)])])
        data = streams['data'] | 'WD' >> beam.WindowInto(window.FixedWindows(100))
        queries = streams['queries'] | 'WQ' >> beam.WindowInto(window.FixedWindows(100))
        out = (data, queries) | 'T' >> pmwg(start=START_S)
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.reason.split(':')[0])),
                    equal_to([('AnswerQueries', 'event time is before the release start')]))


def _labels(pcoll_of, **kwargs):
    pipeline = beam.Pipeline(runner=runners.DIRECT_RUNNER)
    data, queries = pcoll_of(pipeline)
    _ = (data, queries) | 'T' >> pmwg(**kwargs)
    labels = []

    class _Labels(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, applied):
            labels.append(applied.full_label)

    pipeline.visit(_Labels())
    return {label for label in labels if label.startswith('T/')}


def test_the_gate_runs_with_start_fixed_windows_and_an_unbounded_input_only():
    def streamed(p):
        streams = p | make_stream([(10, [('data', 1, 150.0)])])
        return tuple(streams[t] | f'W{t}' >> beam.WindowInto(window.FixedWindows(100))
                     for t in ('data', 'queries'))

    def batch(p):
        return tuple(p | f'C{t}' >> beam.Create([]) | f'W{t}' >> beam.WindowInto(
            window.FixedWindows(100)) for t in ('data', 'queries'))

    assert 'T/GateLateRecords' in _labels(streamed, start=START_S)
    with pytest.raises(InvalidParamsError, match='start must be set for an unbounded input'):
        _labels(streamed)
    assert not any('GateLateRecords' in label for label in _labels(batch, start=START_S))


@pytest.mark.parametrize('start, match', [('soon', 'start must be a time'),
                                          (-5, 'start must be positive'),
                                          (1_700_000_000_000, 'looks like milliseconds')])
def test_a_bad_start_is_refused_at_construction_naming_it(start, match):
    for family in FAMILIES.values():
        with pytest.raises(InvalidParamsError, match=match):
            family(start=start)


DOMAIN = {'pmwg': PMWG_DOMAIN, 'bb_scheduler': BB_DOMAIN}


def _late_query_batches(family, with_record):
    """A record (t = 150) of the window before its deadline (optionally); the watermark passes
    the deadline; then a query of that window (t = 160)."""
    first = [('data', 2, 150.0)] if with_record else []
    query = LinearQuery.range(DOMAIN[family], 0, DOMAIN[family])
    return [(120, first), (250, []), (260, [('queries', ('late_q', query), 160.0)])]


def _late_query_inputs(p, family, with_record, tagged):
    """(data, queries) in fixed windows: from a multi-output TestStream, or (Prism) from one
    TestStream of (tag, value) split in two."""
    batches = _late_query_batches(family, with_record)
    if tagged:
        streams = p | make_stream(batches)
        data, queries = streams['data'], streams['queries']
    else:
        stream = TestStream().advance_watermark_to(0)
        for watermark, events in batches:
            if events:
                stream = stream.add_elements(
                    [TimestampedValue((t, v), ts) for t, v, ts in events])
            stream = stream.advance_watermark_to(watermark)
        both = p | stream.advance_watermark_to_infinity()
        data, queries = (both | f'Split{tag}' >> beam.FlatMap(
            lambda e, tag=tag: [e[1]] if e[0] == tag else []) for tag in ('data', 'queries'))
    return (data | 'WD' >> beam.WindowInto(window.FixedWindows(100)),
            queries | 'WQ' >> beam.WindowInto(window.FixedWindows(100)))


@pytest.mark.pipeline
@pytest.mark.parametrize('runner, family', [('direct', f) for f in sorted(FAMILIES)]
                         + [ON_PRISM])
@pytest.mark.parametrize('with_record', [False, True])
def test_a_late_query_is_refused_halted_with_or_without_a_record_of_its_window(
        runner, family, with_record):
    # Before 'GateLateQueries': HALTED with the record (it opened the instance, closed at the
    # deadline), NOT_STARTED at t = 0 without (the query opened a fresh instance).
    halted = ('late_q', 'HALTED', _closed_reason(WID), 160_000_000, 0.0)
    direct = runner == 'direct'
    with (direct_pipeline() if direct else prism_pipeline()) as p:
        inputs = _late_query_inputs(p, family, with_record, tagged=direct)
        out = inputs | 'T' >> FAMILIES[family](start=START_S)
        assert_that(out.answers | beam.Map(lambda a: (
            a.query_id, a.refusal, a.message, a.timestamp, a.epsilon_spent)), equal_to([halted]))
        assert_that(out.dead_letter, equal_to([]), label='NoDeadLetters')
