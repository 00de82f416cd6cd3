"""Lateness before 'AnswerQueries' (``WindowedPMWG``, ``BBSchedulerQueries``,
``BBImproverQueries``) is decided by the public step clock, never by another record of the same
key.

The release loop learns that a key's step is released from the key's own timer, which its first
item arms: without the gate, a record arriving after its step's deadline would be dead-lettered
when an earlier record of its key had armed (and fired) the step, and counted when none had. The
'GateLateRecords' stage (``beam_dp.transforms.lateness``) dead-letters it in both cases, at
stage 'AnswerQueries' with the one late reason; DirectRunner (streaming, TestStream) and Prism.
Likewise a query arriving after its step's deadline: 'GateLateQueries' refuses it 'LATE' (on
the ``refusals`` output) in both cases.
"""

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

from beam_dp import InvalidParamsError
from beam_dp.queries import LinearQuery
from beam_dp.transforms.bb_scheduler import BBSchedulerQueries
from beam_dp.drivers.clock import late_reason
from tests import runners
from tests.transforms.test_bb_transforms import N as BB_DOMAIN
from tests.transforms.test_bb_transforms import scheduler_args
from tests.transforms.test_pmwg_transform import N as PMWG_DOMAIN
from tests.transforms.test_pmwg_transform import make_stream
from tests.transforms.test_pmwg_transform import pmwg
from tests.transforms.test_segment_lateness import direct_pipeline
from tests.transforms.test_segment_lateness import prism_pipeline

#: Steps of 100 s from t = 100 s: [100, 200) is step 0, the step of the records below.
START_S, STEP_S, END_S = 100, 100, 1000
LATE = ('AnswerQueries', late_reason(0, 0))           # allowed_lateness 0 (default)


def _batches(with_other):
    """The other record (t = 150) of the window before its deadline (optionally); the watermark
    passes the deadline (199.999999 s); then the late record (t = 160)."""
    first = [('data', 2, 150.0)] if with_other else []
    return [(120, first), (250, []), (260, [('data', 3, 160.0)])]


def _bb(**kwargs):
    return BBSchedulerQueries(**scheduler_args(domain_fn=lambda r: r, **{**_CLOCK, **kwargs}))


def _pmwg(**kwargs):
    return pmwg(**{**_CLOCK, **kwargs})


_CLOCK = dict(start=START_S, step=STEP_S, end=END_S)


FAMILIES = {'pmwg': _pmwg, 'bb_scheduler': _bb}


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
        out = (data, queries) | 'T' >> FAMILIES[family](start=start)
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.reason)), equal_to([LATE]))


ON_PRISM = pytest.param('prism', 'pmwg', id='prism-pmwg', marks=[
    pytest.mark.integration, pytest.mark.prism, runners.requires_prism])


@pytest.mark.pipeline
@pytest.mark.parametrize('runner, family', [('direct', f) for f in sorted(FAMILIES)]
                         + [ON_PRISM])
@pytest.mark.parametrize('with_other', [False, True])
def test_a_late_record_is_dead_lettered_with_or_without_another_record_of_its_key(
        runner, family, with_other):
    if runner == 'direct':
        _pipeline(direct_pipeline(), family, with_other)
    else:
        _pipeline(prism_pipeline(), family, with_other, tagged=False)


@pytest.mark.pipeline
def test_a_record_before_start_is_dead_lettered_as_before_the_start():
    with direct_pipeline() as p:
        streams = p | make_stream([(10, [('data', 1, 50.0), ('data', 2, 150.0)])])
        out = (streams['data'], streams['queries']) | 'T' >> _pmwg()
        assert_that(out.dead_letter | beam.Map(lambda d: (d.stage, d.reason.split(':')[0])),
                    equal_to([('TagData', 'event time is before the release start')]))


def _labels(pcoll_of, **kwargs):
    pipeline = beam.Pipeline(runner=runners.DIRECT_RUNNER)
    data, queries = pcoll_of(pipeline)
    _ = (data, queries) | 'T' >> _pmwg(**kwargs)
    labels = []

    class _Labels(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, applied):
            labels.append(applied.full_label)

    pipeline.visit(_Labels())
    return {label for label in labels if label.startswith('T/')}


def test_the_gate_runs_on_an_unbounded_input_only():
    def streamed(p):
        streams = p | make_stream([(10, [('data', 1, 150.0)])])
        return streams['data'], streams['queries']

    def batch(p):
        return tuple(p | f'C{t}' >> beam.Create([]) for t in ('data', 'queries'))

    assert {'T/GateLateRecords', 'T/GateLateQueries'} <= _labels(streamed)
    assert not any('GateLate' in label for label in _labels(batch))


@pytest.mark.parametrize('start, match', [('soon', 'start must be a time'),
                                          (-5, 'start must be non-negative'),
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
    """(data, queries): from a multi-output TestStream, or (Prism) from one TestStream of
    (tag, value) split in two."""
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
    return data, queries


@pytest.mark.pipeline
@pytest.mark.parametrize('runner, family', [('direct', f) for f in sorted(FAMILIES)]
                         + [ON_PRISM])
@pytest.mark.parametrize('with_record', [False, True])
def test_a_late_query_is_refused_late_with_or_without_a_record_of_its_key(
        runner, family, with_record):
    # Without 'GateLateQueries': refused with the record (its step was released), answered
    # (NOT_STARTED at t = 0) without (the query would open the key's first step).
    halted = ('late_q', 'LATE', late_reason(0, 0), 160_000_000, 0.0)
    direct = runner == 'direct'
    with (direct_pipeline() if direct else prism_pipeline()) as p:
        inputs = _late_query_inputs(p, family, with_record, tagged=direct)
        out = inputs | 'T' >> FAMILIES[family](start=START_S)
        assert_that(out.answers, equal_to([]), label='NoAnswers')
        assert_that(out.refusals | beam.Map(lambda a: (
            a.query_id, a.refusal, a.message, a.timestamp, a.epsilon_spent)), equal_to([halted]))
        assert_that(out.dead_letter, equal_to([]), label='NoDeadLetters')
