"""Pipeline tier: the secret noise key on every transform (issue 10).

* every public transform takes ``noise_key=`` (a reference; the key itself is refused without
  being echoed) and then draws from ``KeyedRandom``;
* a seeded source refuses to build on a production runner (remote Flink or Spark, any
  non-local runner such as Dataflow), with a
  message, in every family;
* a replayed pipeline (the same TestStream run twice: what a restored worker or a retried
  bundle does) releases bit-identical values under one noise key, and different values
  without one (the check has power).
"""

import re

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineRunner
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp.noise import NoiseKeyRef
import beam_dp
from beam_dp import InvalidParamsError
from beam_dp import noise
from tests import families
from tests.runners import streaming_options

pytestmark = pytest.mark.pipeline

KEY_ENV = 'BEAM_DP_TEST_NOISE_KEY'
SECRET = '3f' * 32
_OUT = []


class ManagedServiceRunner(PipelineRunner):
    """Any runner that is not a local test runner (Dataflow's own class cannot be built here
    without GCP credentials and network): a seed is refused on it."""

    def run_pipeline(self, pipeline, options):
        raise AssertionError('never run')


def _apply(name, pipeline, transform):
    if families.kind(name) == 'growing':
        data = pipeline | 'Data' >> beam.Create([1, 2])
        queries = pipeline | 'Queries' >> beam.Create([])
        return (data, queries) | transform
    return pipeline | beam.Create([('a', 1, 'u')]) | transform


@pytest.mark.parametrize('name', sorted(families.FAMILIES))
def test_every_transform_takes_a_noise_key_reference_and_refuses_the_key_itself(name):
    transform = families.build(name, noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests'))
    assert isinstance(transform.rng, noise.KeyedRandom)
    assert transform.rng.noise_key.reference == f'env:{KEY_ENV}'
    owner = type(transform).__name__
    with pytest.raises(InvalidParamsError, match=owner) as e:
        families.build(name, noise_key=SECRET)
    assert SECRET not in str(e.value)
    with pytest.raises(InvalidParamsError, match='at most one of noise_key and testing_seed'):
        families.build(name, noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests'), testing_seed=1)
    assert _documents_noise_key(type(transform)), f'{owner} does not document noise_key'


def _documents_noise_key(cls) -> bool:
    """Its docstring names noise_key, or refers to another transform ('as ``Other``') that
    does."""
    doc = cls.__doc__ or ''
    if 'noise_key' in doc:
        return True
    others = {getattr(beam_dp, n, None) for n in re.findall(r'\b[Aa]s ``(\w+)``', doc)}
    return any(_documents_noise_key(o) for o in others - {None, cls})


@pytest.mark.parametrize('name', sorted(families.FAMILIES))
@pytest.mark.parametrize('runner, argv', [
    ('FlinkRunner', ['--flink_master=flink.example.com:8081']),
    ('SparkRunner', ['--spark_master_url=spark://spark.example.com:7077']),
    (ManagedServiceRunner(), []),
])
def test_a_seeded_source_refuses_to_build_on_a_production_runner(name, runner, argv):
    pipeline = beam.Pipeline(runner=runner, options=PipelineOptions(argv))
    with pytest.raises(InvalidParamsError, match='seeds are for local test runners only'):
        _apply(name, pipeline, families.build(name, testing_seed=3))


@pytest.mark.parametrize('name', ['ContinualCountPerKey', 'WindowedPMWG'])
def test_a_keyed_or_secure_source_builds_on_a_production_runner(name):
    for kwargs in ({'noise_key': NoiseKeyRef(f'env:{KEY_ENV}', 'tests')}, {}):
        pipeline = beam.Pipeline(runner='FlinkRunner', options=PipelineOptions(
            ['--flink_master=flink.example.com:8081']))
        _apply(name, pipeline, families.build(name, **kwargs))


def test_a_seeded_source_still_builds_on_local_runners():
    for runner in ('BundleBasedDirectRunner', 'FlinkRunner'):      # Flink: embedded cluster
        pipeline = beam.Pipeline(runner=runner, options=PipelineOptions([]))
        _apply('ContinualCountPerKey', pipeline, families.build('ContinualCountPerKey',
                                                                testing_seed=3))


def _collect(release):
    _OUT.append((release.key, release.step, release.value, tuple(release.values)))


def _run_once(name, **kwargs):
    del _OUT[:]
    records = [(families.KEYS[i % 3], families.BINS[i % 2], f'u{i % 5}') for i in range(30)]
    stream = (TestStream().advance_watermark_to(0)
              .add_elements([TimestampedValue(r, 0.5 + (i % 7)) for i, r in enumerate(records)])
              .advance_watermark_to(4)
              .add_elements([TimestampedValue(r, 5.5) for r in records[:9]])
              .advance_watermark_to(20).advance_watermark_to_infinity())
    with beam.Pipeline(runner='BundleBasedDirectRunner', options=streaming_options()) as p:
        out = p | stream | families.build(name, **kwargs)
        _ = out.releases | beam.Map(_collect)
    return sorted(_OUT)


@pytest.mark.parametrize('name', ['ContinualCountPerKey/user', 'ContinualHistogramPerKey',
                                  'SparseContinualCountPerKey'])
def test_a_replayed_pipeline_releases_bit_identical_values_under_one_noise_key(
        name, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    noise.secret_key.clear_key_cache()
    first = _run_once(name, noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests'))
    replay = _run_once(name, noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests'))
    assert first and first == replay
    # Power: the releases are noisy (not the exact counts) and fresh randomness redraws them
    # (noise-free releases would make the three runs equal). Per-step noise summed, the default
    # counter for this short horizon, releases integers, so integrality proves nothing.
    fresh = [_run_once(name), _run_once(name)]
    assert fresh[0] != fresh[1] or fresh[0] != first
    # Another key, other noise.
    monkeypatch.setenv(KEY_ENV, '4a' * 32)
    noise.secret_key.clear_key_cache()
    assert _run_once(name, noise_key=NoiseKeyRef(f'env:{KEY_ENV}', 'tests')) != first
    noise.secret_key.clear_key_cache()
