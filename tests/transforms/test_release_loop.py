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
    assert single.COLD_CELL.name == 'pending'      # the public shards' pending sums (issue 29)
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


class _Cell:
    def __init__(self):
        self.value, self.writes = None, 0

    def read(self):
        return self.value

    def write(self, value):
        self.value, self.writes = value, self.writes + 1


class _Timer:
    def set(self, when):
        self.when = when

    def clear(self):
        pass


def test_single_cell_loop_keeps_pending_sums_in_their_own_cell_that_releases_never_rewrite():
    """Issue 29: the pending sums of every future step are written by folds only; a release
    rewrites the small shard state, so its cost does not grow with the pending steps. The
    releases equal those of the driver run on the joined state."""
    import numpy as np   # pylint: disable=import-outside-toplevel
    from apache_beam.utils.timestamp import Timestamp   # pylint: disable=import-outside-toplevel
    from beam_dp.drivers.keyed import ShardPartial   # pylint: disable=import-outside-toplevel
    from tests.drivers.test_keyed import spec   # pylint: disable=import-outside-toplevel
    from beam_dp.accounting import PrivacyBudget   # pylint: disable=import-outside-toplevel
    keyed = spec(budget=PrivacyBudget(epsilon=1.0))
    driver = keyed.loop_driver()
    fn = release_loop.single_cell_loop(driver, 'L', noise.seeded(5))
    fn.setup()
    cell, pending, timer, end = _Cell(), _Cell(), _Timer(), _Timer()
    for step in range(3):
        list(fn._process((1, ShardPartial(step, np.array([0]), np.array([step + 1]))), cell,
                         timer, end, pending))
    assert pending.writes == 3 and cell.value.pending_contributions.tail == ()
    got = []
    for step in range(3):
        fired = Timestamp(micros=keyed.clock.release_time_micros(step))
        got.extend(fn._release(1, fired, cell, timer, pending))
    assert pending.writes == 3                     # no release rewrote the pending sums
    assert [r.step for r in got] == [0, 0, 1, 1, 2, 2]
    # The same releases from the driver on one state, as ``replay`` runs it.
    state = driver.start(1, None).state
    for step in range(3):
        state = driver.fold(state, 1, ShardPartial(step, np.array([0]), np.array([step + 1]))).state
    root = protocol.NoiseRoot(noise.seeded(5), 'L')
    want = []
    for step in range(3):
        out = driver.close(state, 1, keyed.clock.release_time_micros(step), (), root)
        want.extend(out.releases)
        state = out.state
    assert [tuple(r) for r in got] == [tuple(r) for r in want]
