"""Helper module (no tests): a family's DoFns as a worker runs them, without a pipeline.

* ``entry_fn(name, stage, **kw)``: the DoFn of the stage ``stage`` (e.g. 'ExtractAndValidate',
  'ReleaseSegments') of the family ``name`` (``tests.families``), taken from the built graph,
  pickled and unpickled as a runner ships it, and set up.
* ``Harness(fn, key)``: drives a stateful DoFn by hand: fake state cells, bags and timers
  (a timer is cleared when it fires, as in Beam), ``element()`` calls ``process`` and
  ``advance_to(watermark)`` fires every due timer in time order. ``snapshot()``/``restore()``
  copy the state, which is what a worker restored from a checkpoint has.
"""

import copy
import inspect

import apache_beam as beam
from apache_beam.internal import pickler
from apache_beam.transforms.core import _StateDoFnParam
from apache_beam.transforms.core import _TimerDoFnParam
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.transforms.userstate import TimerSpec
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from tests import families

__all__ = ['Harness', 'entry_fn', 'stage_fn']


class _Finder(beam.pipeline.PipelineVisitor):

    def __init__(self, stage):
        self.stage, self.found = stage, []

    def visit_transform(self, applied):
        parent = applied.full_label.rsplit('/', 1)[0]
        if parent.endswith('/' + self.stage) and hasattr(applied.transform, 'fn'):
            self.found.append(applied.transform.fn)


def entry_fn(name, stage='ExtractAndValidate', **kw):
    """(transform, the stage's DoFn as a worker gets it: pickled, unpickled, set up)."""
    transform = families.build(name, **kw)
    return transform, stage_fn(transform, stage, families.kind(name) == 'growing')


def stage_fn(transform, stage, growing=False):
    """The DoFn of ``transform``'s stage ``stage`` as a worker gets it (pickled, unpickled,
    set up)."""
    pipeline = beam.Pipeline(runner='BundleBasedDirectRunner')
    if growing:
        _ = (pipeline | 'D' >> beam.Create([1]), pipeline | 'Q' >> beam.Create([])) | transform
    else:
        _ = pipeline | beam.Create([('a', 1, 'u')]) | transform
    finder = _Finder(stage)
    pipeline.visit(finder)
    assert len(finder.found) == 1, (transform, stage, finder.found)
    fn = pickler.loads(pickler.dumps(finder.found[0]))
    if hasattr(fn, 'setup'):
        fn.setup()
    return fn


class _Cell:

    def __init__(self):
        self.value = None

    def read(self):
        return self.value

    def write(self, value):
        self.value = value

    def clear(self):
        self.value = None


class _Bag:

    def __init__(self):
        self.items = []

    def read(self):
        return list(self.items)

    def add(self, item):
        self.items.append(item)

    def clear(self):
        self.items = []


class _Timer:

    def __init__(self):
        self.micros = None

    def set(self, timestamp):
        self.micros = Timestamp.of(timestamp).micros

    def clear(self):
        self.micros = None


class Harness:
    """One key of a stateful DoFn, driven by hand (see the module docstring)."""

    def __init__(self, fn, key):
        self.fn, self.key = fn, key
        self.states, self.timers, self.outputs = {}, {}, []
        self.callbacks = {}
        for klass in type(fn).__mro__:
            for value in vars(klass).values():
                if isinstance(value, TimerSpec) and value._attached_callback is not None:
                    self.callbacks.setdefault(value.name, value._attached_callback)

    def _kwargs(self, method, micros):
        kwargs = {}
        for name, param in inspect.signature(method).parameters.items():
            default = param.default
            if isinstance(default, _StateDoFnParam):
                spec = default.state_spec
                if spec.name not in self.states:
                    self.states[spec.name] = _Bag() if isinstance(spec, BagStateSpec) else _Cell()
                kwargs[name] = self.states[spec.name]
            elif isinstance(default, _TimerDoFnParam):
                kwargs[name] = self.timers.setdefault(default.timer_spec.name, _Timer())
            elif default is beam.DoFn.KeyParam:
                kwargs[name] = self.key
            elif default is beam.DoFn.TimestampParam:
                kwargs[name] = Timestamp(micros=micros)
            elif default is beam.DoFn.WindowParam:
                kwargs[name] = GlobalWindow()
        return kwargs

    def element(self, element, micros=0):
        out = self.fn.process(element, **self._kwargs(self.fn.process, micros))
        self.outputs.extend(out or [])

    def advance_to(self, watermark, max_firings=100_000):
        for _ in range(max_firings):
            due = [(t.micros, name) for name, t in self.timers.items()
                   if t.micros is not None and t.micros <= watermark]
            if not due:
                return
            micros, name = min(due)
            self.timers[name].clear()
            callback = self.callbacks[name].__get__(self.fn)
            out = callback(**self._kwargs(callback, micros))
            self.outputs.extend(out or [])
        raise AssertionError('timers keep firing')

    def snapshot(self):
        return copy.deepcopy((self.states, {n: t.micros for n, t in self.timers.items()}))

    def restore(self, snapshot):
        states, timers = copy.deepcopy(snapshot)
        self.states = states
        for name, micros in timers.items():
            self.timers.setdefault(name, _Timer()).micros = micros
