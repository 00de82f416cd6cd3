"""Noise never cancels between two transforms of one pipeline, or two jobs under one key.

Issue 21, item 1: a composite applied to two data sets (``'CityA' >> CityStats()``,
``'CityB' >> CityStats()``, each holding ``'Counts' >> ContinualCountPerKey(...)``) under one
noise key drew identical noise in both, because the address used the short label 'Counts': the
difference of the releases was the exact difference of the counts. The address now starts with
the transform's full path ('CityA/Counts'), and with the stream id of the key.
"""

import apache_beam as beam
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp import noise
from beam_dp.noise import NoiseKeyRef
from tests import families
from tests.runners import streaming_options

KEY_ENV = 'BEAM_DP_ADDRESS_PIPELINE_KEY'
_OUT = {}


class CityStats(beam.PTransform):
    """A user's composite: one beam_dp transform inside, always labelled 'Counts'."""

    def __init__(self, name, noise_key):
        super().__init__()
        self._name, self._noise_key = name, noise_key

    def expand(self, records):
        return records | 'Counts' >> families.build(self._name, noise_key=self._noise_key)


def _collect(release, tag):
    _OUT.setdefault(tag, []).append((release.key, release.step, release.value))


def _records():
    records = [(families.KEYS[i % 3], families.BINS[i % 2], f'u{i % 5}') for i in range(30)]
    return (TestStream().advance_watermark_to(0)
            .add_elements([TimestampedValue(r, 0.5 + (i % 7)) for i, r in enumerate(records)])
            .advance_watermark_to(20).advance_watermark_to_infinity())


def _run_cities(name, stream_ids=('s', 's'), nested=True):
    _OUT.clear()
    with beam.Pipeline(runner='BundleBasedDirectRunner', options=streaming_options()) as p:
        # The same rows for both cities (one TestStream: the DirectRunner does not run two in
        # step): with shared noise the releases would be equal.
        records = p | _records()
        for city, sid in zip(('CityA', 'CityB'), stream_ids):
            key = NoiseKeyRef(f'env:{KEY_ENV}', sid)
            if nested:
                out = records | city >> CityStats(name, key)
            else:
                out = records | 'Counts' + city[-1] >> families.build(name, noise_key=key)
            _ = out.releases | f'Collect{city}' >> beam.Map(_collect, city)
    return sorted(_OUT.get('CityA', [])), sorted(_OUT.get('CityB', []))


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, '7d' * 32)
    noise.secret_key.clear_key_cache()
    yield
    noise.secret_key.clear_key_cache()


@pytest.mark.parametrize('name', ['ContinualCountPerKey', 'ContinualCountPerKey/user',
                                  'ContinualHistogramPerKey', 'SparseContinualCountPerKey'])
def test_one_composite_applied_twice_draws_independent_noise(name):
    city_a, city_b = _run_cities(name)
    assert city_a and len(city_a) == len(city_b)
    assert [r[:2] for r in city_a] == [r[:2] for r in city_b]
    # Same rows, one key, one short label: only the full path tells the two apart. Before the
    # fix every release was equal (their difference the exact difference of the counts).
    shared = sum(a == b for a, b in zip(city_a, city_b))
    assert shared < len(city_a) / 2, (shared, len(city_a))
    # ... and the releases are replay-identical under the key.
    assert _run_cities(name) == (city_a, city_b)


def test_the_stream_id_separates_two_jobs_under_one_key():
    a_s, _ = _run_cities('ContinualCountPerKey', stream_ids=('s1', 's1'))
    a_t, _ = _run_cities('ContinualCountPerKey', stream_ids=('s2', 's2'))
    assert len(a_s) == len(a_t)
    assert sum(x == y for x, y in zip(a_s, a_t)) < len(a_s) / 2
    assert _run_cities('ContinualCountPerKey', stream_ids=('s1', 's1'))[0] == a_s


def test_a_top_level_transform_keeps_its_address():
    """A transform applied at the top level has full path == label: its addresses (and so the
    releases of an existing job under its key and stream) are those of the short label, which
    the seeded parity tests against the reference drivers (addressed by the label) check."""
    _OUT.clear()
    key = NoiseKeyRef(f'env:{KEY_ENV}', 's')
    with beam.Pipeline(runner='BundleBasedDirectRunner', options=streaming_options()) as p:
        transform = families.build('ContinualCountPerKey', noise_key=key)
        out = p | _records() | 'Counts' >> transform
        _ = out.releases | beam.Map(_collect, 'top')
    assert transform.noise_label == 'Counts'
    top = sorted(_OUT['top'])
    nested = _run_cities('ContinualCountPerKey', nested=True)[0]
    assert top != nested


def test_the_noise_label_is_the_full_path():
    seen = []

    class Probe(beam.PTransform):
        def expand(self, records):
            transform = families.build('ContinualCountPerKey')
            out = records | 'Inner' >> transform
            seen.append(transform.noise_label)
            return out

    p = beam.Pipeline(runner='BundleBasedDirectRunner', options=streaming_options())
    records = p | _records()
    _ = records | 'Outer' >> Probe()
    _ = records | 'Other' >> Probe()
    assert seen == ['Outer/Inner', 'Other/Inner']


class _SameRepr:
    def __repr__(self):
        return 'same'


def test_growing_database_instance_keys_are_canonical():
    """Before: ('k', 1) and ['k', 1] (or 1 and numpy.int64(1)) were two WindowedPMWG instances
    (two state keys) whose noise addresses encoded alike, so they answered with identical noise.
    Now they are one instance; a key with no canonical form is a dead letter."""
    import numpy as np                               # pylint: disable=import-outside-toplevel
    from apache_beam.utils.timestamp import Timestamp  # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.clock import StepClock     # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.growing import RECORD      # pylint: disable=import-outside-toplevel
    from beam_dp.transforms.growing_entry import TagFn as _TagFn  # pylint: disable=import-outside-toplevel

    def tag(key):
        fn = _TagFn(RECORD, 'PMWG', 'pmwg', lambda r: r[0], lambda r: r[1], 4,
                    StepClock(0, 1_000_000))
        return list(fn.process((key, 1), Timestamp(micros=10)))

    def instance(key):
        [(state_key, item)] = tag(key)
        return state_key, item.key

    assert instance(('k', 1)) == instance(['k', 1]) == (instance(('k', 1))[0], ('k', 1))
    assert instance(1) == instance(np.int64(1))
    assert instance('a') == instance(np.str_('a'))
    assert instance(('k', 1))[0] != instance(('k', 2))[0]
    [dead] = tag(_SameRepr())
    assert 'no canonical encoding' in dead.value.reason


def test_a_direct_expand_call_inside_a_composite_is_refused():
    """Review finding: ``Transform(...).expand(pcoll)`` inside a composite ran under the short
    label (the node being expanded is the composite), so two such composites shared noise."""
    from beam_dp.errors import InvalidParamsError  # pylint: disable=import-outside-toplevel

    class Direct(beam.PTransform):
        def expand(self, records):
            return families.build('ContinualCountPerKey').expand(records)

    p = beam.Pipeline(runner='BundleBasedDirectRunner', options=streaming_options())
    with pytest.raises(InvalidParamsError, match=r'apply it with `pcoll \| ContinualCountPerKey'):
        _ = p | _records() | 'CityA' >> Direct()


def test_boost_query_ids_are_canonical():
    """Review finding: a numpy.str_ query id passed the type check and reached the keyed noise
    address uncanonicalised, where the encoder raised inside the DoFn."""
    import numpy as np                               # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.boost_events import parse_query  # pylint: disable=import-outside-toplevel
    from beam_dp.io.boost import BoostQueryRecord    # pylint: disable=import-outside-toplevel
    fields = {name: [] if name in ('subsets', 'vector') else 0
              for name in BoostQueryRecord._fields}
    record = BoostQueryRecord(**{**fields, 'query_id': np.str_('q1'), 'dataset': np.str_('d')})
    parsed = parse_query(record)
    assert type(parsed.query_id) is str and type(parsed.dataset) is str


def test_a_seeded_source_refuses_what_a_keyed_one_refuses():
    with pytest.raises(TypeError, match='not canonical'):
        noise.seeded(1).derive('T', ['k'])
    with pytest.raises(TypeError, match='not canonical'):
        noise.seeded(1).derive('boost', 'd', __import__('numpy').str_('q'))
