"""The release loop (``beam_dp.transforms.release_loop``) and the driver protocol's constants."""

import apache_beam as beam
from apache_beam.transforms import userstate
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.window import GlobalWindow

from beam_dp import noise
from beam_dp.drivers import protocol
from beam_dp.transforms import release_loop
from beam_dp.transforms.state_types import STATE_CODER
from tests import helpers


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


def test_watermark_gate_keeps_the_names_of_the_update_contract():
    """'DropLate' and 'BoundPerUnit' run the one released-chain gate: cell 'released_through',
    timers 'released' and 'end_of_input' (pinned in pipelines/*/state_manifest.json)."""
    from beam_dp.transforms.contribution_bounding import _BoundContributionsFn
    from beam_dp.transforms.contribution_bounding import _CappedBoundContributionsFn
    from beam_dp.transforms.lateness import _DropLateFn
    gate = release_loop.watermark_gate()
    assert (gate.RELEASED.name, gate.RELEASED_TIMER.name, gate.END_TIMER.name) == (
        'released_through', 'ts-released', 'ts-end_of_input')
    for fn in (_DropLateFn, _BoundContributionsFn, _CappedBoundContributionsFn):
        assert issubclass(fn, gate), fn


def test_released_chain_walks_the_public_schedule_only():
    """Started: step 0 armed at its release time (end-of-input armed without a last step);
    each firing releases the armed step and arms the next, until the last step; the end of
    input stops it; a firing after the end changes nothing."""
    from beam_dp.drivers.clock import StepClock
    clock = StepClock(0, 60)
    bounded = clock.limited_to(3)
    assert release_loop.ReleasedChain(clock).start() == ((-1, 0), clock.release_time_micros(0),
                                                         True)
    chain = release_loop.ReleasedChain(bounded)
    cell, micros, until_end = chain.start()
    assert until_end is False
    fired = []
    while micros is not None:
        cell, micros = chain.fire(cell)
        fired.append((cell, micros))
    assert fired == [((0, 1), bounded.release_time_micros(1)),
                     ((1, 2), bounded.release_time_micros(2)), ((2, None), None)]
    assert chain.fire(cell) == (protocol.UNCHANGED, None)
    assert chain.end((5, 6)) == (5, None) and chain.end(None) == (-1, None)
    assert chain.released((5, 6)) == 5


# A gate of the warm-up's shape (``CloseAt`` with a fired state): collects each key's values
# until the watermark passes CLOSE, then outputs them once; a value after the close is late
# ('c' is seeded, None, before any value: the gate starts at a key's first element).
_VALUES = BagStateSpec('probe_values', STATE_CODER)
_CloseGate = release_loop.watermark_gate('probe_closed', 'probe_close', None, fired_state=_VALUES)
CLOSE = 100


class _CollectUntilClose(_CloseGate):

    def __init__(self):
        self._schedule = release_loop.CloseAt(CLOSE * 1_000_000)

    def process(self, element, closed=beam.DoFn.StateParam(_CloseGate.RELEASED),
                timer=beam.DoFn.TimerParam(_CloseGate.RELEASED_TIMER),
                values=beam.DoFn.StateParam(_VALUES)):
        key, value = element
        if self._gate(closed, timer, None):
            yield 'late', key, value
        elif value is not None:
            values.add(value)

    def _fired(self, key, values):
        out = sorted(values.read())
        values.clear()
        return [('closed', key, tuple(out))]


def test_a_close_gate_fires_once_with_the_family_state_and_declares_no_end_timer():
    state, timers = userstate.get_dofn_specs(_CollectUntilClose())
    assert sorted(s.name for s in state) == ['probe_closed', 'probe_values']
    assert sorted(t.name for t in timers) == ['ts-probe_close']
    assert release_loop.watermark_gate('probe_closed', 'probe_close', None,
                                       fired_state=_VALUES) is _CloseGate
    out = helpers.run(lambda p: {'out': p | helpers.stream(
        [(('c', None), 0), (('a', 1), 10), (('b', 2), 20), (('a', 3), 30)], 50,
        [(('a', 4), 60)], CLOSE + 1,
        [(('a', 5), 110), (('c', 6), 120)]) | beam.ParDo(_CollectUntilClose())})
    assert sorted(out['out']) == [('closed', 'a', (1, 3, 4)), ('closed', 'b', (2,)),
                                  ('closed', 'c', ()), ('late', 'a', 5), ('late', 'c', 6)]
