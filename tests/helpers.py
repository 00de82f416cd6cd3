"""What the tests share (helper module, no tests here): the noise-free budget, the pipeline on
the runner ``tests/runners.py`` names, the TestStream builder and the in-process collector.

Usage::

    from tests.helpers import NOISE_FREE, run, run_stream, stream

    run_stream(stream([(('a', 1), 5), (('a', 2), 6)], 200), counts(),
               expected=[('a', 0, 2.0), ...], dead=[('BoundContributions', 'late: ...')])
    got = run(lambda p: {'releases': (p | stream(...) | transform).releases})

``run`` and ``collect`` keep the records in this process: they work on the DirectRunner
variants only (on Prism or Flink, check with ``assert_that``).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Union

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.transforms.window import TimestampedValue

from beam_dp import PrivacyBudget
from beam_dp import noise
from tests.runners import BATCH_RUNNER
from tests.runners import DIRECT_RUNNER
from tests.runners import streaming_options

#: ε of a budget whose noise never moves a release (exact answers: tests the wiring, not the
#: noise): its scales round up to the samplers' grid 2^-20, where a draw is 0 but with
#: negligible probability.
NOISE_FREE_EPSILON = 1e7
NOISE_FREE = PrivacyBudget(epsilon=NOISE_FREE_EPSILON)


def pipeline(streaming: bool = True, runner: Optional[str] = None, **options) -> beam.Pipeline:
    """A pipeline on the runner ``tests/runners.py`` names: in streaming mode on
    ``DIRECT_RUNNER`` unless ``streaming=False`` (then batch, on ``BATCH_RUNNER``)."""
    opts = streaming_options(**options) if streaming else PipelineOptions(**options)
    return beam.Pipeline(runner=runner or (DIRECT_RUNNER if streaming else BATCH_RUNNER),
                         options=opts)


Script = Union[float, int, List[tuple], tuple]


def stream(*script: Script) -> TestStream:
    """A TestStream at watermark 0 that plays ``script`` in order, then ends (watermark to +∞).

    Each item is either a number (advance the watermark to it, in seconds) or a sequence of
    ``(element, seconds)`` pairs (add them, stamped; an empty sequence adds nothing).
    """
    out = TestStream().advance_watermark_to(0)
    for item in script:
        if isinstance(item, (int, float)):
            out = out.advance_watermark_to(item)
        elif item:
            out = out.add_elements([TimestampedValue(e, t) for e, t in item])
    return out.advance_watermark_to_infinity()


_COLLECTED: Dict[str, list] = {}


def _keep(record, name):
    _COLLECTED[name].append(record)


def collect(pcoll, name: str) -> None:
    """Keeps every element of ``pcoll`` under ``name`` (read back by ``collected``)."""
    _COLLECTED[name] = []
    _ = pcoll | f'Collect[{name}]' >> beam.Map(_keep, name)


def collected() -> Dict[str, list]:
    """What ``collect`` kept since the last call, by name (and forgets it)."""
    out = {name: list(records) for name, records in _COLLECTED.items()}
    _COLLECTED.clear()
    return out


def run(build: Callable[[beam.Pipeline], Optional[Dict[str, beam.PCollection]]],
        streaming: bool = True, runner: Optional[str] = None, **options) -> Dict[str, list]:
    """Builds a pipeline with ``build(p)``, runs it to the end and returns what it collected:
    the PCollections ``build`` returns (by name) and any ``collect`` it called."""
    _COLLECTED.clear()
    with pipeline(streaming, runner, **options) as p:
        for name, pcoll in (build(p) or {}).items():
            collect(pcoll, name)
    return collected()


def key_step_value(release):
    """(key, step, value rounded to 6 digits): what most release checks compare."""
    return release.key, release.step, round(release.value, 6)


def stage_reason(dead_letter):
    """(stage, reason) of a dead letter."""
    return dead_letter.stage, dead_letter.reason


def reason(dead_letter):
    """The reason of a dead letter."""
    return dead_letter.reason


def run_stream(source, transform, *, expected=None, extract=key_step_value, dead=None,
               dead_extract=stage_reason, runner: str = DIRECT_RUNNER, options=None) -> None:
    """Runs ``p | source | transform`` in streaming mode and checks, with ``assert_that``, its
    releases (``extract`` of each against ``expected``) and its dead letters (``dead_extract``
    of each against ``dead``). Each is a list (equal in any order), a matcher called with the
    list, or ``None`` (no check)."""
    opts = options if options is not None else streaming_options()
    with beam.Pipeline(runner=runner, options=opts) as p:
        out = p | source | transform
        if expected is not None:
            assert_that(out.releases | 'Extract' >> beam.Map(extract), _matcher(expected),
                        label='CheckReleases')
        if dead is not None:
            assert_that(out.dead_letter | 'Reasons' >> beam.Map(dead_extract),
                        _matcher(dead), label='CheckDeadLetters')


def _matcher(expected):
    return equal_to(expected) if isinstance(expected, list) else expected


def segment_one_pass(driver, key, label, seed, events, until, private=False):
    """A segmented driver's one pass over ``events`` (step, payload) up to step ``until``
    (``KeyDriver.process``), at the transform's noise addresses ((label, 'key', key) and
    (label, 'select', key); ``SegmentLoop`` does it timer by timer)."""
    base = noise.seeded(seed)
    rng, sel_rng = base.derive(label, 'key', key), base.derive(label, 'select', key)
    first = min((s for s, _ in events), default=None)
    return driver.process(driver.init_state(first, rng, private), events, until, rng, sel_rng)
