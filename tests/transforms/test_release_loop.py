"""The release loop (``beam_dp.transforms.release_loop``) and the driver protocol's constants."""

from apache_beam.transforms.window import GlobalWindow

from beam_dp import noise
from beam_dp.drivers import protocol
from beam_dp.transforms import release_loop


def test_end_of_time_is_the_end_of_the_global_window():
    assert protocol.END_OF_TIME_MICROS == GlobalWindow().max_timestamp().micros


def test_loop_keeps_the_state_and_timer_names_of_the_update_contract():
    single = release_loop.single_cell_loop(None, 'L', None)
    assert (single.CELL.name, single.RELEASE_TIMER.name, single.END_TIMER.name) == (
        'shard_state', 'ts-release', 'ts-end_of_input')
    for cell, timer in (('shard_state', 'release'), ('key_state', 'release'),
                        ('stream_state', 'release'), ('driver_state', 'wake')):
        fn = release_loop.buffered_loop(None, 'L', None, cell=cell, timer=timer)
        assert (fn.CELL.name, fn.PENDING.name, fn.FINISHED.name, fn.RELEASE_TIMER.name,
                fn.END_TIMER.name) == (cell, 'pending', 'finished', f'ts-{timer}',
                                       'ts-end_of_input')


def test_noise_root_draws_at_label_then_parts():
    base = noise.seeded(3)
    root = protocol.NoiseRoot(base, 'Counts')
    assert root.derive(1, 2).uint64(4).tolist() == base.derive('Counts', 1, 2).uint64(4).tolist()


def test_unchanged_pickles_to_itself():
    import pickle   # pylint: disable=import-outside-toplevel
    assert pickle.loads(pickle.dumps(protocol.UNCHANGED)) is protocol.UNCHANGED
