"""The segmented driver (pure): the step clock translation, the skip-ahead schedule, and that
driving a key timer by timer gives exactly what one pass gives (what the DoFn relies on)."""

import random

import pytest

from beam_dp import PrivacyBudget
from beam_dp import noise
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.drivers.segmented import CounterDriver
from beam_dp.drivers.segmented import KeyDriver
from beam_dp.drivers.segmented import KeyState
from beam_dp.drivers.segmented import mechanism_tick
from beam_dp.mechanisms.sparse_counter import SparseCounter

from tests.helpers import segment_one_pass
from tests.helpers import NOISE_FREE_EPSILON

NOISE_FREE_COUNTER = SparseCounter(NOISE_FREE_EPSILON)


def driver(epsilon=1.0, private=False, c_theta=1.0):
    selection = None
    if private:
        selection = PrivateKeys(budget=PrivacyBudget(epsilon=2.0, delta=1e-3)).selection(1)
    return CounterDriver(SparseCounter(epsilon, c_theta=c_theta), selection)


def test_step_zero_is_the_mechanisms_tick_one():
    assert mechanism_tick(0) == 1
    assert mechanism_tick(7) == 8
    assert mechanism_tick(7, origin_step=3) == 5


def test_public_key_starts_before_step_zero_and_wakes_at_its_forced_close():
    d = CounterDriver(NOISE_FREE_COUNTER, None)
    state = d.init_state(None, noise.seeded(0), private=False)
    assert (state.last_step, state.origin_step) == (-1, 0)
    # C4 with no data: forced closes at ticks 2, 4, 16 = steps 1, 3, 15.
    assert d.next_wake(state, []) == 1
    assert d.next_wake(state, [0, 5]) == 0


def test_noise_free_closes_at_data_steps_and_forced_steps():
    d = CounterDriver(NOISE_FREE_COUNTER, None)
    out, state = segment_one_pass(d, 'a', 'L', 0, [(5, (3,)), (5, (1,))], 40)
    # Forced at ticks 2, 4 (steps 1, 3); the SVT halts at the data (step 5 = tick 6); the next
    # forced close is tick 6² = 36 (step 35).
    assert [c.step for c in out.closes] == [1, 3, 5, 35]
    assert [c.answer for c in out.closes] == [(0.0,), (0.0,), (4.0,), (4.0,)]
    assert state.last_step == 40 and out.rejected == ()


def _timer_by_timer(d, events, until, seed, private):
    """What the DoFn does: buffer, fire at next_wake, process the due batches, re-arm."""
    base = noise.seeded(seed)
    rng, sel = base.derive('L', 'key', 'k'), base.derive('L', 'select', 'k')
    pending = sorted(events)
    state = None if private else d.init_state(None, rng, False)
    wake = pending[0][0] if state is None else d.next_wake(state, [s for s, _ in pending])
    closes = []
    while wake is not None and wake <= until:
        due = [e for e in pending if e[0] <= wake]
        pending = [e for e in pending if e[0] > wake]
        if state is None:
            state = d.init_state(min(s for s, _ in due), None, True)
        out, state = d.process(state, due, wake, rng, sel)
        closes.extend(out.closes)
        wake = d.next_wake(state, [s for s, _ in pending])
    return closes


@pytest.mark.parametrize('private', [False, True])
@pytest.mark.parametrize('seed', range(4))
def test_timer_by_timer_equals_one_pass(seed, private):
    rnd = random.Random(seed)
    events = [(rnd.randrange(0, 200), (rnd.randrange(1, 30),)) for _ in range(25)]
    d = driver(private=private)
    ref, _ = segment_one_pass(d, 'k', 'L', seed, events, 250, private=private)
    assert _timer_by_timer(d, events, 250, seed, private) == list(ref.closes)
    assert ref.closes, 'forced closes at least'


def test_a_candidate_wakes_at_its_first_data_step_and_starts_at_selection():
    d = driver(private=True)
    state = d.init_state(4, None, private=True)
    assert state.last_step == 3 and state.origin_step is None
    assert d.next_wake(state, [9]) == 4
    base = noise.seeded(1)
    out, state = d.process(state, [(4, (500,))], 4, base.derive('L', 'key', 'k'),
                           base.derive('L', 'select', 'k'))
    assert state.origin_step == 4          # selected at its first step (500 units)
    assert out.closes and out.closes[0].step == 4 and out.closes[0].answer[0] > 400


def test_batches_at_one_step_merge():
    d = CounterDriver(NOISE_FREE_COUNTER, None)
    one, _ = segment_one_pass(d, 'a', 'L', 3, [(2, (5,))], 10)
    split, _ = segment_one_pass(d, 'a', 'L', 3, [(2, (2,)), (2, (3,))], 10)
    assert one == split


def test_key_state_names_what_it_holds():
    fields = set(KeyState.__dataclass_fields__)
    assert fields == {'last_step', 'selection', 'origin_step', 'candidate_input',
                      'mechanism_state', 'registry'}


def test_wake_times_come_from_the_clock_and_stop_after_the_last_step():
    clock = StepClock(start_micros=1_000, step_micros=10, allowed_lateness_micros=5, last_step=3)
    d = CounterDriver(NOISE_FREE_COUNTER, None, clock)
    assert d.wake_micros(0) == 1_015          # end of step 0 + lateness
    assert d.wake_micros(3) == 1_045
    assert d.wake_micros(4) is None and d.wake_micros(None) is None


def test_split_due():
    due, rest = KeyDriver.split_due([(3, 'a'), (1, 'b'), (5, 'c'), (3, 'd')], 3)
    assert due == [(3, 'a'), (1, 'b'), (3, 'd')] and rest == [(5, 'c')]


def test_a_never_selected_candidate_does_not_wake_every_step():
    """Issue 13: a candidate's timer wakes at its data steps and its drawn-ahead selection test
    only (``advance_lazy``), not every step; the releases are those of one pass."""
    d = CounterDriver(SparseCounter(1.0), PrivateKeys(
        budget=PrivacyBudget(epsilon=1.0, delta=1e-6)).selection(1), StepClock(0, 60))
    events = [(3, (1,)), (40, (1,))]
    base = noise.seeded(5)
    rng, sel = base.derive('L', 'key', 'k'), base.derive('L', 'select', 'k')
    state, wakes, pending, wake = None, [], list(events), 3
    while wake is not None and wake <= 10_000:
        wakes.append(wake)
        due = [e for e in pending if e[0] <= wake]
        pending = [e for e in pending if e[0] > wake]
        state = state or d.init_state(min(s for s, _ in due), None, True)
        out, state = d.process(state, due, wake, rng, sel)
        assert not out.closes
        wake = d.next_wake(state, [s for s, _ in pending])
    assert wakes[:2] == [3, 40] and len(wakes) <= 4 and state.origin_step is None
    assert d.wake_micros(d.next_wake(state, [])) is None or d.next_wake(state, []) > 10_000
