"""THE release loop: the one stateful DoFn that runs every family's driver
(``beam_dp.drivers.protocol``) on Beam state and event-time timers.

The loop owns what is Beam: the state cell(s), the release timer, the end-of-input timer, the
dead-letter output and the release rows. Every decision (what is late, what a step releases,
when the next timer fires, which noise address each draw uses) is the driver's, so that
``beam_dp.testing.replay`` drives the same driver exactly as the job does.

Two variants of the same loop:

* ``single_cell_loop`` (the keyed fast path): the driver's state in ONE ReadModifyWrite cell —
  one read and one write per element (every cell written costs the SDK a pickling and a
  deep-size measurement of the value for its state cache at the bundle's commit); a driver
  with ``split``/``join`` keeps its pending contributions in a second cell ('pending') that
  only a fold rewrites;
* ``buffered_loop``: the driver's state in one cell, payloads in a pending bag (state too large
  to rewrite per element), an end-of-input flag. With a driver that gives ``state_size`` /
  ``payload_size`` estimates, cell and bag values are wrapped so that Beam's state cache sizes
  them from the estimate instead of walking every object.

The state and timer names are part of the Dataflow update contract: a family keeps its names
(``cell`` and ``timer`` arguments; the bag is 'pending', the flag 'finished', the timers
'release' (Boost: 'wake') and 'end_of_input').
The loop classes are built once per name set at import (so that workers unpickle them by
reference).

Element: ``(loop key, payload)``, payload None for a key's seed at ``start``.

THE watermark gate (``watermark_gate``): the base of the stateful stages that are not release
loops but must know what the public schedule has released (the lateness gate 'DropLate', the
user-level bound 'BoundPerUnit', the warm-up's close). Its cell and its timers walk a pure
*gate schedule* (``ReleasedChain``: the released chain of ``beam_dp.transforms.lateness``;
``CloseAt``: a one-shot close),
armed on the public schedule only, never by a record; a family's DoFn subclasses the gate and
writes only its ``process`` (what to do with an element, given what the gate says is released).
No module but this one declares a timer.
"""

from typing import Optional

import apache_beam as beam
from apache_beam.coders import BooleanCoder
from apache_beam.runners.worker.statecache import CacheAware
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.transforms.userstate import TimerSpec
from apache_beam.transforms.userstate import on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from beam_dp import noise
from beam_dp.drivers.bounding import NOTHING_RELEASED
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.protocol import UNCHANGED
from beam_dp.drivers.protocol import NoiseRoot
from beam_dp.drivers.protocol import Outcome
from beam_dp.io import state_coder
from beam_dp.io.records import DeadLetter
from beam_dp.transforms import shell
from beam_dp.transforms.state_types import STATE_CODER

__all__ = [
    'CHAIN_START',
    'CloseAt',
    'ReleasedChain',
    'buffered_loop',
    'single_cell_loop',
    'watermark_gate',
]

_END_OF_TIME = GlobalWindow().max_timestamp()


class _Sized(CacheAware):
    """A state value as held in a cell or a bag, sized for Beam's state cache from the driver's
    estimate (``size``) instead of a walk over every object it holds."""

    __slots__ = ('value', 'size')

    def __init__(self, value, size):
        self.value = value
        self.size = size

    def __reduce__(self):
        return type(self), (self.value, self.size)

    def get_referents_for_cache(self):
        return []

    def __sizeof__(self):
        return self.size


state_coder.register_wrapper(_Sized, lambda sized: sized.value)   # stored unwrapped


def _unwrap(value):
    return value.value if type(value) is _Sized else value  # pylint: disable=unidiomatic-typecheck


class _LoopFn(beam.DoFn):
    """What both variants share: the driver, the labels, the noise root, the outputs."""

    def __init__(self, driver, label: str, rng: noise.RandomSource,
                 noise_label: Optional[str] = None):
        self._driver = driver
        self._label = label            # dead letters
        self._rng = rng
        self._noise_label = label if noise_label is None else noise_label

    def setup(self):
        self._clock = self._driver.clock
        self._noise = NoiseRoot(self._rng, self._noise_label)
        self._state_size = getattr(self._driver, 'state_size', None)
        self._payload_size = getattr(self._driver, 'payload_size', None)

    def _start_timers(self, release_timer, end_timer, micros: Optional[int]) -> None:
        self._arm(release_timer, micros)
        if self._clock.last_step is None:
            # Fires only when the input ends (bounded input, drain): stops the loop, which would
            # otherwise run forever at watermark +inf.
            end_timer.set(_END_OF_TIME)

    @staticmethod
    def _arm(timer, micros: Optional[int]) -> None:
        if micros is not None:
            timer.set(Timestamp(micros=micros))

    def _emit(self, out: Outcome):
        """The outcome's dead letters and tagged outputs (the releases: ``_releases``)."""
        for dead in out.dead_letters:
            yield beam.pvalue.TaggedOutput(shell.DEAD_LETTER, DeadLetter(
                self._label, dead.stage, dead.reason, shell.render_record(dead.record),
                dead.event_time_micros))
        for tag, value in out.tagged:
            yield beam.pvalue.TaggedOutput(tag, value)

    def _outputs(self, out: Outcome):
        if not out.dead_letters and not out.tagged:
            return out.releases
        return list(out.releases) + list(self._emit(out))


class _SingleCellFn(_LoopFn):
    """Base of the single-cell loops (``single_cell_loop``): subclasses bind the specs.

    A driver with ``split(state) -> (hot, cold)`` and ``join(hot, cold) -> state`` keeps the
    cold part in a second cell ('pending'), written only when the driver returns a different
    cold object: a release that leaves the pending contributions alone then rewrites (and Beam
    pickles and sizes, at every bundle's commit) only the small hot part, so the cost of a
    release does not grow with the pending steps (issue 29)."""

    def setup(self):
        super().setup()
        self._split = getattr(self._driver, 'split', None)
        self._join = getattr(self._driver, 'join', None)

    def _read(self, cell, cold_cell):
        hot = cell.read()
        if self._split is None or hot is None:
            return hot, None
        cold = cold_cell.read()
        return self._join(hot, cold), cold

    def _write(self, state, cell, cold_cell, cold_read):
        if self._split is None:
            cell.write(state)
            return
        hot, cold = self._split(state)
        cell.write(hot)
        if cold is not cold_read:
            cold_cell.write(cold)

    def _process(self, element, cell, release_timer, end_timer, cold_cell=None):
        key, payload = element
        state, cold = self._read(cell, cold_cell)
        driver = self._driver
        if state is None:
            out = driver.start(key, self._noise)
            state = out.state
            self._start_timers(release_timer, end_timer, out.timer_micros)
            if payload is None:
                self._write(state, cell, cold_cell, cold)
        if payload is None:
            return ()
        out = driver.fold(state, key, payload)
        if out.state is not UNCHANGED:
            self._write(out.state, cell, cold_cell, cold)
        self._arm(release_timer, out.timer_micros)
        return self._outputs(out)

    def _release(self, key, fired, cell, release_timer, cold_cell=None):
        state, cold = self._read(cell, cold_cell)
        out = self._driver.close(state, key, fired.micros, (), self._noise)
        if out.state is not UNCHANGED:
            self._write(out.state, cell, cold_cell, cold)
        self._arm(release_timer, out.timer_micros)
        return self._outputs(out)

    def _end(self, cell, release_timer, cold_cell=None):
        state, cold = self._read(cell, cold_cell)
        self._write(self._driver.end_of_input(state), cell, cold_cell, cold)
        release_timer.clear()


class _BufferedFn(_LoopFn):
    """Base of the buffered loops (``buffered_loop``): subclasses bind the specs."""

    def _wrap(self, state):
        size = self._state_size
        return state if size is None or state is None else _Sized(state, size(state))

    def _process(self, element, cell, pending, release_timer, end_timer):
        key, payload = element
        stored = cell.read()
        driver = self._driver
        if stored is None:
            out = driver.start(key, self._noise)
            if out.state is not None:
                cell.write(self._wrap(out.state))
            self._start_timers(release_timer, end_timer, out.timer_micros)
            state = out.state
        else:
            state = _unwrap(stored)
        if payload is None:
            return ()
        out = driver.fold(state, key, payload)
        if out.keep:
            if out.stored is not None:      # the payload without what it carried in flight
                payload = out.stored
            size = self._payload_size
            pending.add(payload if size is None else _Sized(payload, size(payload)))
        return self._apply(out, cell, pending, release_timer)

    def _apply(self, out: Outcome, cell, pending, release_timer):
        """Writes what ``out`` says (the pending bag, the state, the timers); its outputs."""
        if out.pending is not None:
            pending.clear()
            size = self._payload_size
            for item in out.pending:
                pending.add(item if size is None else _Sized(item, size(item)))
        if out.state is not UNCHANGED:
            cell.write(self._wrap(out.state))
        if release_timer is not None:
            self._arm(release_timer, out.timer_micros)
        return self._outputs(out)

    def _release(self, key, fired, cell, pending, finished, release_timer, end_timer=None):
        """The release timer fired: the driver's ``close`` (``expire``: every state and timer
        of the key is cleared)."""
        if finished.read():
            return ()
        items = [_unwrap(item) for item in pending.read()]
        out = self._driver.close(_unwrap(cell.read()), key, fired.micros, items, self._noise)
        if out.expire:
            for state in (cell, pending, finished, release_timer, end_timer):
                if state is not None:
                    state.clear()
            return self._outputs(out)
        return self._apply(out, cell, pending, release_timer)

    def _end(self, key, cell, pending, finished, release_timer):
        if finished.read():
            return ()
        finished.write(True)
        release_timer.clear()
        end = getattr(self._driver, 'end_of_input', None)
        if end is None:
            return ()
        items = [_unwrap(item) for item in pending.read()]
        out = end(_unwrap(cell.read()), key, items, self._noise)
        return self._apply(out._replace(timer_micros=None), cell, pending, None)


def _single_cell_class(cell_name: str):
    cell_spec = ReadModifyWriteStateSpec(cell_name, STATE_CODER)
    cold_spec = ReadModifyWriteStateSpec('pending', STATE_CODER)
    release_spec = TimerSpec('release', TimeDomain.WATERMARK)
    end_spec = TimerSpec('end_of_input', TimeDomain.WATERMARK)

    class SingleCellLoop(_SingleCellFn):
        """The single-cell release loop (state cell '%s'; 'pending' for a split driver)."""
        CELL = cell_spec
        COLD_CELL = cold_spec
        RELEASE_TIMER = release_spec
        END_TIMER = end_spec

        def process(self, element, cell=beam.DoFn.StateParam(cell_spec),
                    release_timer=beam.DoFn.TimerParam(release_spec),
                    end_timer=beam.DoFn.TimerParam(end_spec),
                    cold_cell=beam.DoFn.StateParam(cold_spec)):
            return self._process(element, cell, release_timer, end_timer, cold_cell)

        @on_timer(release_spec)
        def release(self, key=beam.DoFn.KeyParam, fired=beam.DoFn.TimestampParam,
                    cell=beam.DoFn.StateParam(cell_spec),
                    release_timer=beam.DoFn.TimerParam(release_spec),
                    cold_cell=beam.DoFn.StateParam(cold_spec)):
            return self._release(key, fired, cell, release_timer, cold_cell)

        @on_timer(end_spec)
        def end_of_input(self, cell=beam.DoFn.StateParam(cell_spec),
                         release_timer=beam.DoFn.TimerParam(release_spec),
                         cold_cell=beam.DoFn.StateParam(cold_spec)):
            self._end(cell, release_timer, cold_cell)

    return SingleCellLoop


def _buffered_class(cell_name: str, timer_name: str = 'release'):
    cell_spec = ReadModifyWriteStateSpec(cell_name, STATE_CODER)
    pending_spec = BagStateSpec('pending', STATE_CODER)
    finished_spec = ReadModifyWriteStateSpec('finished', BooleanCoder())
    release_spec = TimerSpec(timer_name, TimeDomain.WATERMARK)
    end_spec = TimerSpec('end_of_input', TimeDomain.WATERMARK)

    class BufferedLoop(_BufferedFn):
        """The buffered release loop."""
        CELL = cell_spec
        PENDING = pending_spec
        FINISHED = finished_spec
        RELEASE_TIMER = release_spec
        END_TIMER = end_spec

        def process(self, element, cell=beam.DoFn.StateParam(cell_spec),
                    pending=beam.DoFn.StateParam(pending_spec),
                    release_timer=beam.DoFn.TimerParam(release_spec),
                    end_timer=beam.DoFn.TimerParam(end_spec)):
            return self._process(element, cell, pending, release_timer, end_timer)

        @on_timer(release_spec)
        def release(self, key=beam.DoFn.KeyParam, fired=beam.DoFn.TimestampParam,
                    cell=beam.DoFn.StateParam(cell_spec),
                    pending=beam.DoFn.StateParam(pending_spec),
                    finished=beam.DoFn.StateParam(finished_spec),
                    release_timer=beam.DoFn.TimerParam(release_spec),
                    end_timer=beam.DoFn.TimerParam(end_spec)):
            return self._release(key, fired, cell, pending, finished, release_timer, end_timer)

        @on_timer(end_spec)
        def end_of_input(self, key=beam.DoFn.KeyParam, cell=beam.DoFn.StateParam(cell_spec),
                         pending=beam.DoFn.StateParam(pending_spec),
                         finished=beam.DoFn.StateParam(finished_spec),
                         release_timer=beam.DoFn.TimerParam(release_spec)):
            return self._end(key, cell, pending, finished, release_timer)

    return BufferedLoop


def _named(cls, name: str):
    cls.__name__ = cls.__qualname__ = name
    globals()[name] = cls
    return cls


# One class per cell name a family uses (state names are kept across the port).
_SINGLE_CELL = {name: _named(_single_cell_class(name), f'SingleCellLoop_{name}')
                for name in ('shard_state',)}
_BUFFERED = {(name, timer): _named(_buffered_class(name, timer), f'BufferedLoop_{name}_{timer}')
             for name, timer in (('shard_state', 'release'), ('key_state', 'release'),
                                 ('stream_state', 'release'), ('driver_state', 'wake'))}


def single_cell_loop(driver, label: str, rng: noise.RandomSource, *, cell: str = 'shard_state',
                     noise_label: Optional[str] = None) -> beam.DoFn:
    """The single-cell loop running ``driver`` (a ``SingleCellDriver``) for the transform
    ``label`` (dead letters), drawing noise at ``noise_label`` (default ``label``)."""
    return _SINGLE_CELL[cell](driver, label, rng, noise_label)


def buffered_loop(driver, label: str, rng: noise.RandomSource, *, cell: str,
                  timer: str = 'release', noise_label: Optional[str] = None) -> beam.DoFn:
    """The buffered loop running ``driver`` (a ``BufferedDriver``): state cell ``cell``,
    release timer ``timer``. A driver with ``end_of_input(state, key, pending, noise) -> Outcome``
    is called when the input ends, with the payloads still pending (to refuse or process
    them)."""
    return _BUFFERED[(cell, timer)](driver, label, rng, noise_label)


# --- The watermark gate ---------------------------------------------------------------------

#: The released chain's cell when a key's gate starts: nothing released, step 0 armed.
CHAIN_START = (NOTHING_RELEASED, 0)


class ReleasedChain:
    """The gate schedule of the *released chain* (pure; no Beam): the gate's cell holds
    ``(released_through, armed step)``; started on a key's first element (its launch seed or
    data, in any order) it arms step 0's release time (and, without a last step, the
    end-of-input timer); each firing marks the armed step released and arms the next step's
    release time, until the clock's last step (or until the input ends). The armed step is
    None once the chain ended. O(1) state and work per firing.

    A gate schedule: ``start() -> (cell, timer µs, arm end-of-input?)``, ``fire(cell) ->
    (cell or UNCHANGED, next timer µs or None)``, ``end(cell) -> cell``, ``released(cell)``
    (what a family's ``process`` is given)."""

    __slots__ = ('clock',)

    def __init__(self, clock: StepClock):
        self.clock = clock

    def start(self):
        clock = self.clock
        return CHAIN_START, clock.release_time_micros(0), clock.last_step is None

    def fire(self, chain):
        """The watermark passed the armed step's release time: it is released."""
        if chain is None or chain[1] is None:     # not started, or ended
            return UNCHANGED, None
        armed = chain[1]
        clock = self.clock
        return ((armed, armed + 1 if clock.is_released(armed + 1) else None),
                clock.next_release_time_micros(armed))

    @staticmethod
    def end(chain):
        """The input ended (bounded input, drain; a clock without a last step): the chain
        stops (it would otherwise run for ever at watermark +inf)."""
        return (chain or CHAIN_START)[0], None

    @staticmethod
    def released(chain) -> int:
        return chain[0]


class CloseAt:
    """The gate schedule of a one-shot close (pure; e.g. the warm-up's end): the cell holds
    False (open) from a key's first element until the watermark passes ``micros``, then True
    (closed); no end-of-input timer (it fires once)."""

    __slots__ = ('micros',)

    def __init__(self, micros: int):
        self.micros = micros

    def start(self):
        return False, self.micros, False

    @staticmethod
    def fire(closed):
        return True, None

    @staticmethod
    def end(closed):
        return closed

    @staticmethod
    def released(closed) -> bool:
        return closed


class _GateFn(beam.DoFn):
    """What every watermark gate shares (``watermark_gate`` binds the specs). A subclass sets
    ``self._schedule`` (a gate schedule, e.g. ``ReleasedChain``; None: the gate is not used)
    and calls ``self._gate(cell, timer, end_timer)`` in its ``process``."""

    _schedule = None

    def _gate(self, cell, timer, end_timer):
        """On every element of a key: what its gate released; on the key's first element (in
        any order: its seed or data) the schedule starts."""
        value = cell.read()
        if value is None:
            value, micros, until_end = self._schedule.start()
            cell.write(value)
            _LoopFn._arm(timer, micros)
            if until_end:
                end_timer.set(_END_OF_TIME)
        return self._schedule.released(value)

    def _fire(self, cell, timer):
        value, micros = self._schedule.fire(cell.read())
        _LoopFn._arm(timer, micros)
        if value is not UNCHANGED:
            cell.write(value)

    def _stop(self, cell, timer):
        cell.write(self._schedule.end(cell.read()))
        timer.clear()

    def _fired(self, key, fired_state):
        """With ``watermark_gate(fired_state=...)``: what a firing outputs (after the schedule
        moved)."""
        return ()


def _gate_class(cell_name: str, timer_name: str, end_name: Optional[str],
                fired_spec=None):
    cell_spec = ReadModifyWriteStateSpec(cell_name, STATE_CODER)
    timer_spec = TimerSpec(timer_name, TimeDomain.WATERMARK)
    end_spec = None if end_name is None else TimerSpec(end_name, TimeDomain.WATERMARK)

    class WatermarkGate(_GateFn):
        """A watermark gate: its cell ``RELEASED``, its timer ``RELEASED_TIMER`` and the
        ``END_TIMER`` (None: none); a subclass's ``process`` takes them as
        ``beam.DoFn.StateParam(RELEASED)`` / ``beam.DoFn.TimerParam(...)``. With a
        ``FIRED_STATE`` (the family's state its firing works on) each firing then calls
        ``self._fired(key, fired_state)`` and outputs what it returns."""
        RELEASED = cell_spec
        RELEASED_TIMER = timer_spec
        END_TIMER = end_spec
        FIRED_STATE = fired_spec

    if fired_spec is None:
        def advance_released(self, released_state=beam.DoFn.StateParam(cell_spec),
                             released_timer=beam.DoFn.TimerParam(timer_spec)):
            """The watermark passed the armed time (O(1): no other state is read)."""
            self._fire(released_state, released_timer)
    else:
        def advance_released(self, released_state=beam.DoFn.StateParam(cell_spec),
                             released_timer=beam.DoFn.TimerParam(timer_spec),
                             key=beam.DoFn.KeyParam,
                             fired_state=beam.DoFn.StateParam(fired_spec)):
            """The watermark passed the armed time: the schedule moves, then the family's
            ``_fired``."""
            self._fire(released_state, released_timer)
            return self._fired(key, fired_state)
    WatermarkGate.advance_released = on_timer(timer_spec)(advance_released)

    if end_spec is not None:
        def end_of_input(self, released_state=beam.DoFn.StateParam(cell_spec),
                         released_timer=beam.DoFn.TimerParam(timer_spec)):
            """The input ended: the schedule stops."""
            self._stop(released_state, released_timer)
        WatermarkGate.end_of_input = on_timer(end_spec)(end_of_input)
    return WatermarkGate


#: The gate classes, one per name set (built once: workers unpickle a subclass by reference).
_GATES = {}


def watermark_gate(cell: str = 'released_through', timer: str = 'released',
                   end: Optional[str] = 'end_of_input', fired_state=None):
    """The watermark gate base class with state cell ``cell``, timer ``timer`` and end-of-input
    timer ``end`` (None: none), names of the Dataflow update contract (the default set is the
    released chain's, used by 'DropLate' and 'BoundPerUnit'). Subclass it at module level: set
    ``self._schedule`` (``ReleasedChain``, ``CloseAt``) and call ``self._gate(...)`` from
    ``process``; with ``fired_state`` (a state spec of the family) define
    ``_fired(key, fired_state)``: what each firing outputs (e.g. the warm-up's close)."""
    names = (cell, timer, end, None if fired_state is None else fired_state.name)
    gate = _GATES.get(names)
    if gate is None:
        name = 'WatermarkGate_' + '_'.join(n for n in names if n is not None)
        gate = _GATES[names] = _named(_gate_class(cell, timer, end, fired_state), name)
    elif fired_state is not None and gate.FIRED_STATE is not fired_state:
        raise ValueError(f'watermark_gate{names}: another {fired_state.name!r} spec')
    return gate


watermark_gate()     # the released chain's gate, built at import
