"""Field names instead of callables, on every family (``tests.families.FIELDS``).

Per family: the runner matrix's streaming input, once as tuples read by the family's callables
and once as schema'd records (Beam Rows, NamedTuples and dicts in turn) read by field names,
under the same seed and label: every output is the same (dead letters compared by stage, reason
and time: their record text is the record's own). Then the field errors: a record without the
field (or not a row) is a 'CheckFields' dead letter, a wrong configuration an
``InvalidParamsError`` at construction naming the field; and the output records are schema'd
(RowCoder; ``beam.Select`` on releases).
"""

import ast
import collections
import typing

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

import beam_dp
from beam_dp import PrivacyBudget
from beam_dp.errors import InvalidParamsError
from beam_dp.fields import Field
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import Release
from beam_dp.noise.testing import allow_seeded_noise
from tests import families
from tests.helpers import collect
from tests.helpers import collected
from tests import runner_matrix as rm
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

pytestmark = pytest.mark.usefixtures('seeded')


@pytest.fixture
def seeded():
    with allow_seeded_noise():
        yield


def _record_type(name, keys):
    cls = collections.namedtuple('Rec_' + '_'.join(sorted(keys)), sorted(keys))
    cls.__module__ = __name__
    globals()[cls.__name__] = cls
    return cls


def _as_row(convert, record, i):
    """The record as a dict, a Beam Row or a NamedTuple (by ``i``)."""
    fields = convert(record)
    if i % 3 == 0:
        return fields
    if i % 3 == 1:
        return beam.Row(**fields)
    return _record_type(None, fields)(**fields)


class _Rows(beam.DoFn):
    def __init__(self, name):
        self._name = name
        self._i = 0

    def process(self, event):
        convert = families.FIELDS[self._name][1]
        self._i += 1
        if families.kind(self._name) == 'growing':
            yield (event[0], _as_row(convert, event[1], self._i)) if event[0] == 'data' else event
        else:
            yield _as_row(convert, event, self._i)


def _apply(p, lines, name, by_fields):
    """``runner_matrix._apply`` with the events as rows and the family built by field names."""
    label = rm.label_of(name)
    extra = dict(rm.EXTRA.get(name, {}))
    if by_fields:
        extra.update(families.FIELDS[name][0])
    if name in rm.BOUNDED_ONLY:
        events = (p | f'Create{label}' >> beam.Create(rm.EVENTS[name])
                  | f'Stamp{label}' >> beam.Map(lambda e: TimestampedValue(e[1], e[0])))
    else:
        events = lines | f'Parse{label}' >> beam.FlatMap(rm._parse, name)  # pylint: disable=protected-access
    if by_fields:
        events = events | f'Rows{label}' >> beam.ParDo(_Rows(name))
    transform = families.build(name, testing_seed=rm.SEED, label=label, **extra)
    if families.kind(name) == 'growing':
        data = events | f'Data{label}' >> beam.FlatMap(lambda e: [e[1]] if e[0] == 'data' else [])
        queries = events | f'Queries{label}' >> beam.FlatMap(rm._to_query(name))  # pylint: disable=protected-access
        return (data, queries) | label >> transform
    return events | label >> transform


def _run(name, by_fields):
    collected()
    bounded = name in rm.BOUNDED_ONLY          # bounded-only transforms: a batch pipeline
    with (beam.Pipeline(runner=BATCH_RUNNER) if bounded else
          beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options())) as p:
        lines = None
        if name not in rm.BOUNDED_ONLY:
            lines = (p | 'Events' >> rm._stream([name]).with_output_types(str)  # pylint: disable=protected-access
                     | 'Identity' >> beam.Map(lambda s: s).with_output_types(str))
        out = _apply(p, lines, name, by_fields)
        for output in out._fields:
            collect(getattr(out, output), output)
    result = {}
    for output, elements in collected().items():
        if output == 'dead_letter':
            result[output] = sorted((d.stage, d.reason, d.event_time_micros) for d in elements)
        else:
            result[output] = sorted(map(repr, elements))
    return result


@pytest.mark.parametrize('name', sorted(families.FAMILIES))
def test_fields_give_the_callables_outputs(name):
    """Every output of the family read by field names from Rows/NamedTuples/dicts equals its
    output read by callables from tuples (same seed, same label: the same noise)."""
    by_callables = _run(name, False)
    by_fields = _run(name, True)
    assert by_fields == by_callables
    assert any(by_callables[o] for o in by_callables if o != 'dead_letter'), 'nothing released'


def test_every_family_lists_its_fields():
    assert set(families.FIELDS) == set(families.FAMILIES)


# -- dead letters --------------------------------------------------------------------------------


def _dead(records, transform):
    """(stage, reason) of the dead letters of ``transform`` over stamped ``records``."""
    stream = TestStream()
    for t, record in records:
        stream = stream.add_elements([TimestampedValue(record, t)])
    stream = stream.advance_watermark_to_infinity()
    collected()
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = p | stream | transform
        collect(out.dead_letter, 'dead')
    return sorted((d.stage, d.reason) for d in collected()['dead'])


def test_missing_field_and_not_a_row_are_dead_letters():
    transform = families.build('ContinualSumPerKey', key_field='key', value_field='value',
                               testing_seed=1)
    dead = _dead([(0.5, {'key': 'a', 'value': 1.0}),
                  (0.5, {'key': 'a'}),
                  (0.6, beam.Row(value=1.0)),
                  (0.7, ('a', 1.0)),
                  (0.8, {'key': 'a', 'value': None}),
                  (0.9, {'key': 'a', 'value': 'x'})], transform)
    assert dead == sorted([
        ('CheckFields', "missing field 'value'"),
        ('CheckFields', "missing field 'key'"),
        ('CheckFields', "record is not a Beam Row, NamedTuple or dict (looking for field "
                        "'key'): tuple"),
        ('CheckFields', "field 'value' is None"),
        ('ExtractAndValidate', 'value is not a number: ValueError("could not convert string '
                               'to float: \'x\'")'),
    ])


def test_timestamp_field_sets_the_event_time():
    """``timestamp_field``: the record's field, not the element timestamp, places it in a step
    (all records arrive stamped 0; a bad time is a dead letter)."""
    import datetime
    records = [
        (0, {'key': 'a', 'at': 0.5}),
        (0, {'key': 'a', 'at': datetime.datetime(1970, 1, 1, 0, 0, 3, tzinfo=datetime.timezone.utc)}),
        (0, {'key': 'b', 'at': 20.0}),              # after the end: dead-lettered as usual
        (0, {'key': 'b', 'at': 'noon'}),
    ]
    collected()
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        out = (p | beam.Create([r for _, r in records])
               | 'Count' >> families.build('ContinualCountPerKey', key_field='key',
                                           timestamp_field='at', testing_seed=3))
        collect(out.releases, 'got')
        collect(out.dead_letter, 'dead')
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        ref = (p | beam.Create([('a', 0.5), ('a', 3.0)])
               | beam.Map(lambda r: TimestampedValue((r[0],), r[1]))
               | 'Count' >> families.build('ContinualCountPerKey', testing_seed=3))
        collect(ref.releases, 'want')
    result = collected()
    got = [(r.key, r.step, r.value) for r in result['got']]
    want = [(r.key, r.step, r.value) for r in result['want']]
    dead = [(d.stage, d.reason) for d in result['dead']]
    assert sorted(got) == sorted(want) and got
    assert ('CheckFields', "field 'at' is not a time (seconds since the epoch, a Beam Timestamp "
                           "or an aware datetime): 'noon'") in dead
    assert len(dead) == 2


# -- construction errors ---------------------------------------------------------------------------


@pytest.mark.parametrize('kwargs, match', [
    (dict(key_fn=lambda r: r[0], key_field='key'), 'give either key_fn or key_field'),
    (dict(key_field=3), 'key_field must be a field name'),
    (dict(key_field=''), 'key_field must be a field name'),
    (dict(timestamp_field=['t']), 'timestamp_field must be a field name'),
    (dict(value_field='v'), 'value_field is not an argument of ContinualCountPerKey'),
])
def test_configuration_errors_name_the_field(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        families.build('ContinualCountPerKey', **kwargs)


def test_multi_field_callable_needs_all_its_fields():
    with pytest.raises(InvalidParamsError, match='record_id_field needs op_field too'):
        families.build('DynamicCountPerKey', record_id_field='id')


def test_undecorated_families_check_fields_too():
    with pytest.raises(InvalidParamsError, match='give either domain_fn or domain_field'):
        beam_dp.WindowedPMWG(budget=beam_dp.PrivacyBudget(epsilon=1.0), alpha=0.3, n=30,
                             domain_size=4, domain_fn=lambda r: r, domain_field='index',
                             start=0, step=1)
    with pytest.raises(InvalidParamsError, match='value_field is not an argument of WindowedPMWG'):
        beam_dp.WindowedPMWG(budget=beam_dp.PrivacyBudget(epsilon=1.0), alpha=0.3, n=30,
                             domain_size=4, value_field='v', domain_field='index', start=0,
                             step=1)
    with pytest.raises(InvalidParamsError, match='unit_fn or privacy_unit_field, not both'):
        beam_dp.UserLevel(unit_fn=lambda r: r, privacy_unit_field='u', max_steps_per_unit=1)
    with pytest.raises(InvalidParamsError, match='privacy_unit_field must be a field name'):
        beam_dp.UserLevel(privacy_unit_field=7, max_steps_per_unit=1)
    assert beam_dp.UserLevel(privacy_unit_field='u', max_steps_per_unit=1).unit_fn == Field('u')


# -- schema'd outputs ------------------------------------------------------------------------------


def test_output_records_have_row_coders():
    from beam_dp.io import coders
    for record_type in coders.RECORD_TYPES:
        coder = beam.coders.registry.get_coder(record_type)
        assert isinstance(coder, beam.coders.RowCoder), record_type
    assert isinstance(beam.coders.registry.get_coder(Release), beam.coders.RowCoder)
    assert isinstance(beam.coders.registry.get_coder(DeadLetter), beam.coders.RowCoder)


def test_releases_are_schemad_rows_downstream():
    """``beam.Select`` (a schema transform) on the releases and dead letters of a transform
    read by field names from Beam Rows."""
    transform = families.build('ContinualCountPerKey', key_field='key', testing_seed=5)
    collected()
    with beam.Pipeline(runner=DIRECT_RUNNER, options=streaming_options()) as p:
        rows = (p | beam.Create([beam.Row(key='a', t=0.5), beam.Row(key='zz', t=0.5)])
                | beam.Map(lambda r: TimestampedValue(r, r.t)))
        out = rows | transform
        assert out.releases.element_type is Release
        assert out.dead_letter.element_type is DeadLetter
        collect(out.releases | 'SelectKeyStep' >> beam.Select(key='key', step='step'), 'keys')
        collect(out.dead_letter | 'SelectStage' >> beam.Select('stage', 'reason'), 'dead')
    got = collected()
    assert sorted((r.key, r.step) for r in got['keys']) == [
        (k, s) for k in families.KEYS for s in range(10)]
    assert [(r.stage, r.reason) for r in got['dead']] == [
        ('ExtractAndValidate', "key 'zz' is not in the public key set")]
