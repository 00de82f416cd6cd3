"""Which source a transform gets: seeds only inside the testing opt-in, keys by reference."""

import pytest

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.noise import testing
from beam_dp.noise.keyed import KeyedRandom
from beam_dp.noise.rng import SecureRandom
from beam_dp.noise.rng import SeededRandom


@pytest.fixture
def no_opt_in(monkeypatch):
    """As in production: whatever the test session opted into, nothing is allowed here."""
    monkeypatch.setattr(testing, '_depth', 0)


def test_seed_refused_without_opt_in_with_instructions(no_opt_in):
    with pytest.raises(InvalidParamsError) as info:
        noise.noise_source('ContinualCountPerKey', testing_seed=7)
    message = str(info.value)
    for part in ('ContinualCountPerKey', 'allow_seeded_noise()', 'noise_key=', 'env:VAR'):
        assert part in message


def test_opt_in_is_scoped(no_opt_in):
    with testing.allow_seeded_noise():
        with testing.allow_seeded_noise():
            assert isinstance(noise.noise_source('T', testing_seed=3), SeededRandom)
        assert noise.noise_source('T', testing_seed=3).uint64(2).tolist() == (
            noise.seeded(3).uint64(2).tolist())
    assert not testing.seeded_noise_allowed()
    with pytest.raises(InvalidParamsError, match='refusing testing_seed'):
        noise.noise_source('T', testing_seed=3)
    testing.enable_seeded_noise_for_tests()
    try:
        assert isinstance(noise.noise_source('T', testing_seed=3), SeededRandom)
    finally:
        testing.disable_seeded_noise_for_tests()
    assert not testing.seeded_noise_allowed()


def test_key_secure_and_bad_arguments(no_opt_in):
    assert isinstance(noise.noise_source('T'), SecureRandom)
    keyed = noise.noise_source('T', noise_key=noise.NoiseKeyRef('env:SOME_VAR', 'stream-a'))
    assert isinstance(keyed, KeyedRandom) and keyed.is_secure
    assert keyed.noise_key.stream_id == 'stream-a'
    with pytest.raises(InvalidParamsError, match="T: a noise key needs the identity of the "
                                                 "stream.*stream_id="):
        noise.noise_source('T', noise_key='env:SOME_VAR')
    for bad in ('', '  ', 7, 'a\nb', 'x' * 513):
        with pytest.raises(InvalidParamsError, match='stream_id must be'):
            noise.NoiseKeyRef('env:SOME_VAR', bad)
    with pytest.raises(InvalidParamsError, match='T: noise_key'):
        noise.noise_source('T', noise_key='0123456789abcdef0123456789abcdef')
    with pytest.raises(InvalidParamsError, match='at most one'):
        noise.noise_source('T', noise_key='env:X', testing_seed=1)
    for bad in (True, 1.5, '3'):
        with pytest.raises(InvalidParamsError, match='testing_seed must be an int'):
            noise.noise_source('T', testing_seed=bad)


@pytest.mark.parametrize('runner,options', [
    (None, None), ('DirectRunner', None), ('BundleBasedDirectRunner', {}),
    ('PrismRunner', {}), (None, {'runner': 'FnApiRunner'}),
    ('FlinkRunner', {'flink_master': '[local]'}),
    ('FlinkRunner', {'flink_master': 'localhost:8081'}),
])
def test_seed_allowed_on_local_runners(runner, options):
    noise.check_runner('T', noise.seeded(1), runner, options)


@pytest.mark.parametrize('runner,options', [
    ('DataflowRunner', {}), (None, {'runner': 'TestDataflowRunner'}),
    ('FlinkRunner', {'flink_master': 'flink-jm.prod:8081'}), ('SomeNewRunner', {}),
])
def test_seed_refused_on_production_runners(runner, options):
    with pytest.raises(InvalidParamsError, match='cannot run on'):
        noise.check_runner('T', noise.seeded(1), runner, options)
    noise.check_runner('T', noise.secure_rng(), runner, options)
    noise.check_runner('T', KeyedRandom('env:X'), runner, options)


def test_runner_objects_are_recognised():
    class DataflowRunner:  # the shell passes pipeline.runner
        pass

    with pytest.raises(InvalidParamsError, match='DataflowRunner'):
        noise.check_runner('T', noise.seeded(1), DataflowRunner())


def test_using_noise_key_scopes_a_default_key(no_opt_in):
    with noise.using_noise_key('env:OUTER', stream_id='s1') as ref:
        assert ref.reference == 'env:OUTER' and ref.stream_id == 's1'
        assert noise.noise_source('T').noise_key == noise.NoiseKeyRef('env:OUTER', 's1')
        with noise.using_noise_key(None):
            assert noise.noise_source('T').noise_key.reference == 'env:OUTER'
        with noise.using_noise_key('env:INNER', stream_id='s2'):
            assert noise.noise_source('T').noise_key == noise.NoiseKeyRef('env:INNER', 's2')
        # A transform's own key without a stream takes the block's stream.
        assert noise.noise_source('T', noise_key='env:OWN').noise_key == noise.NoiseKeyRef(
            'env:OWN', 's1')
    with noise.using_noise_key('env:OUTER'):            # a block without a stream id
        with pytest.raises(InvalidParamsError, match='needs the identity of the stream'):
            noise.noise_source('T')
    assert isinstance(noise.noise_source('T'), SecureRandom)
    with pytest.raises(InvalidParamsError, match='using_noise_key: noise_key is not a reference'):
        with noise.using_noise_key('the-key-itself-0123456789abcdef0123456789'):
            pass


def test_a_transform_refuses_a_seed_outside_the_opt_in(no_opt_in):
    import beam_dp                                      # pylint: disable=import-outside-toplevel
    kwargs = dict(public_keys=['a'], start=0, step=60,
                  budget=beam_dp.PrivacyBudget(epsilon=1.0))
    with pytest.raises(InvalidParamsError, match='ContinualCountPerKey: refusing testing_seed'):
        beam_dp.ContinualCountPerKey(testing_seed=7, **kwargs)
    with testing.allow_seeded_noise():
        assert isinstance(beam_dp.ContinualCountPerKey(testing_seed=7, **kwargs).rng, SeededRandom)
    with noise.using_noise_key('env:BDP_NOISE_KEY', stream_id='tests'):
        assert isinstance(beam_dp.ContinualCountPerKey(**kwargs).rng, KeyedRandom)
    assert isinstance(beam_dp.ContinualCountPerKey(**kwargs).rng, SecureRandom)


def test_a_secret_manager_key_must_pin_its_version():
    """Review finding: 'versions/latest' could resolve to another key on a restarted worker
    (after a version was added), drawing other noise at the same addresses."""
    assert noise.NoiseKeyRef('gcpsm:projects/p/secrets/s/versions/7').scheme == 'gcpsm'
    for alias in ('latest', '0', 'v1'):
        with pytest.raises(InvalidParamsError, match='pinned version number'):
            noise.NoiseKeyRef(f'gcpsm:projects/p/secrets/s/versions/{alias}')
