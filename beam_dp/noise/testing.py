"""The explicit testing API that lets a seeded random source into a pipeline.

A seeded source is predictable by anyone who knows or guesses the seed, so
``beam_dp.noise.noise_source`` refuses ``testing_seed`` unless the calling code has opted in here.
Tests opt in::

    from beam_dp.noise.testing import allow_seeded_noise

    with allow_seeded_noise():
        counts = events | beam_dp.ContinualCountPerKey(..., testing_seed=7)

or once for a whole test session, from a conftest (an autouse fixture that enters
``allow_seeded_noise()``, or ``enable_seeded_noise_for_tests()`` in ``pytest_configure``).
Production code never calls any of this: launchers expose no seed, and a production pipeline
given one refuses to build. Even when opted in, ``sources.check_runner`` refuses a seeded source
on a production runner (Dataflow, or Flink/Spark with a remote master).
"""

import contextlib
import threading

__all__ = [
    'allow_seeded_noise',
    'disable_seeded_noise_for_tests',
    'enable_seeded_noise_for_tests',
    'seeded_noise_allowed',
]

_lock = threading.Lock()
_depth = 0


def seeded_noise_allowed() -> bool:
    """Whether this process has opted in to seeded noise (tests only)."""
    return _depth > 0


def enable_seeded_noise_for_tests() -> None:
    """Opts this process in until ``disable_seeded_noise_for_tests()`` (nests like the context)."""
    global _depth
    with _lock:
        _depth += 1


def disable_seeded_noise_for_tests() -> None:
    """Undoes one ``enable_seeded_noise_for_tests()``."""
    global _depth
    with _lock:
        _depth = max(0, _depth - 1)


@contextlib.contextmanager
def allow_seeded_noise():
    """Within this block, transforms accept ``testing_seed`` (tests only)."""
    enable_seeded_noise_for_tests()
    try:
        yield
    finally:
        disable_seeded_noise_for_tests()
