"""The load test's event stream and pipeline (imported by run.py and by the smoke test).

An unbounded-style source: ``PeriodicImpulse`` firing every ``impulse_seconds`` of wall-clock
time from ``start`` (paced: the source releases impulse ``i`` at ``start + i · impulse_seconds``,
its watermark follows; with ``start`` in the past the impulses are caught up as fast as the
runner takes them), each impulse ``i`` expanded by ``GenerateImpulseEvents`` into
``events_per_impulse`` events with event times spread over
``[start + i · impulse_seconds, start + (i + 1) · impulse_seconds)``. Every event is a function of ``(seed, i)`` only (numpy generator
per impulse), so a rerun streams the same events whatever the bundling.

Keys ~ Zipf(1.1) over the first ``active(i)`` of ``keys`` keys, units uniform over the first
``active(i)`` of ``units`` units, where ``active`` grows linearly over the first
``growth_impulses`` impulses and then stays at the full set: after that the key and unit sets stop
growing, and so must the memory of every process of the run.
"""

import math
import os
import re
import threading

import numpy as np

import apache_beam as beam
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.utils.timestamp import Timestamp

from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from beam_dp import PrivateKeys
from beam_dp import UserLevel

ZIPF_EXPONENT = 1.1


def active(total, impulse, growth_impulses):
    """How many of ``total`` ids impulse ``impulse`` draws from (all of them once grown)."""
    if impulse + 1 >= growth_impulses:
        return total
    return max(1, math.ceil(total * (impulse + 1) / growth_impulses))


class GenerateImpulseEvents(beam.DoFn):
    """impulse timestamp -> that impulse's events ``(key, unit)``, timestamped.

    With ``progress_dir``, each worker process also writes how many impulses it has expanded to
    ``progress_dir/<pid>`` (one small file write per impulse), so that the sampler can plot
    memory against events streamed rather than only against time."""

    def __init__(self, seed, start, interval, per_impulse, keys, units, growth_impulses,
                 progress_dir=None):
        self._seed, self._start, self._per_impulse = seed, start, per_impulse
        self._interval = interval
        self._keys, self._units, self._growth = keys, units, growth_impulses
        self._progress_dir = progress_dir

    def setup(self):
        p = np.arange(1, self._keys + 1, dtype=np.float64) ** -ZIPF_EXPONENT
        self._cdf = np.cumsum(p)
        self._names = [f'key-{k:05d}' for k in range(self._keys)]

    def process(self, impulse_time):
        i = int(round((float(impulse_time) - self._start) / self._interval))
        n = self._per_impulse
        rng = np.random.default_rng([self._seed, i])
        nkeys = active(self._keys, i, self._growth)
        nunits = active(self._units, i, self._growth)
        ranks = np.searchsorted(self._cdf, rng.random(n) * self._cdf[nkeys - 1])
        ranks = np.minimum(ranks, nkeys - 1).tolist()
        units = rng.integers(0, nunits, n).tolist()
        span = int(round(self._interval * 1_000_000))
        base = self._start * 1_000_000 + i * span
        offsets = (np.arange(n, dtype=np.int64) * span // n).tolist()
        names = self._names
        for k, u, off in zip(ranks, units, offsets):
            yield beam.window.TimestampedValue((names[k], f'unit-{u}'),
                                               Timestamp(micros=base + off))
        if self._progress_dir:
            _report_progress(self._progress_dir)


_DONE = {'impulses': 0}
_DONE_LOCK = threading.Lock()


def _report_progress(progress_dir):
    """Impulses expanded by this process so far -> ``progress_dir/<pid>`` (DoFn instances of
    one process share the count; each thread writes through its own temporary file)."""
    with _DONE_LOCK:
        _DONE['impulses'] += 1
        done = _DONE['impulses']
    path = os.path.join(progress_dir, str(os.getpid()))
    tmp = f'{path}.{threading.get_ident()}.tmp'
    with open(tmp, 'w', encoding='ascii') as f:
        f.write(str(done))
    with _DONE_LOCK:   # the newest count wins
        if done == _DONE['impulses']:
            os.replace(tmp, path)
        else:
            os.remove(tmp)


class CountInto(beam.DoFn):
    """A sink that keeps nothing: counts its elements in a Beam counter. With ``progress_dir``
    (releases), also writes the highest step released by this process so far to
    ``progress_dir/released_<pid>``: the sampler compares it with the wall clock to tell whether
    the whole pipeline, not only the source, keeps up."""

    def __init__(self, name, progress_dir=None):
        self._name = name
        self._progress_dir = progress_dir

    def setup(self):
        self._counter = beam.metrics.Metrics.counter('load_test', self._name)

    def process(self, element):
        self._counter.inc()
        if self._progress_dir and element.step > _RELEASED['step']:
            _report_released(self._progress_dir, element.step)
        reason = getattr(element, 'reason', None)
        if reason is not None:   # a dead letter: also count it by its reason, digits masked
            name = re.sub(r'[0-9]+', 'N', reason)[:80]
            beam.metrics.Metrics.counter('load_test', f'{self._name}: {name}').inc()


_RELEASED = {'step': -1}


def _report_released(progress_dir, step):
    with _DONE_LOCK:
        if step <= _RELEASED['step']:
            return
        _RELEASED['step'] = step
        path = os.path.join(progress_dir, f'released_{os.getpid()}')
        with open(path + '.tmp', 'w', encoding='ascii') as f:
            f.write(str(step))
        os.replace(path + '.tmp', path)


def _unit(record):
    return record[1]


def build(p, args, start, progress_dir=None):
    """The load test pipeline on ``p``; ``args`` as parsed by run.py."""
    impulses = args.events // args.events_per_impulse
    interval = args.impulse_seconds
    end = start + math.ceil(impulses * interval / args.step) * args.step
    events = (p
              | 'Impulses' >> PeriodicImpulse(start_timestamp=start,
                                              stop_timestamp=start + impulses * interval,
                                              fire_interval=interval)
              | 'Spread' >> beam.Reshuffle()
              | 'Generate' >> beam.ParDo(GenerateImpulseEvents(
                  args.seed, start, interval, args.events_per_impulse, args.keys, args.units,
                  max(1, int(impulses * args.growth_fraction)), progress_dir))
              .with_output_types(tuple[str, str]))
    outs = events | 'Count' >> ContinualCountPerKey(
        keys=PrivateKeys(budget=PrivacyBudget(epsilon=1.0, delta=1e-6)),
        start=start, step=args.step, end=end,
        budget=PrivacyBudget(epsilon=1.0), allowed_lateness=args.allowed_lateness,
        privacy_unit=UserLevel(_unit, max_keys_per_unit=args.max_keys_per_unit,
                               max_contributions_per_step=args.max_contributions_per_step,
                               max_steps_per_unit=args.max_steps_per_unit))
    _ = outs.releases | 'Releases' >> beam.ParDo(CountInto('releases', progress_dir))
    _ = outs.dead_letter | 'DeadLetters' >> beam.ParDo(CountInto('dead_letters'))
    return impulses
