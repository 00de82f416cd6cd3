"""``Release`` records from a driver's rows (pure): what every family's driver releases.

Built as plain tuples in ``Release``'s field order (a keyword construction costs ~1 µs a
release, and a keyed family releases every key at every step).
"""

from typing import Iterable, List, Sequence, Tuple

from beam_dp.drivers.clock import StepClock
from beam_dp.io.records import Release

__all__ = [
    'RELEASE_METADATA',
    'array_releases',
    'release_fields',
    'releases',
]

#: ``Release`` fields between ``values`` and ``noise_stddev``: a driver's release metadata.
RELEASE_METADATA = Release._fields[6:-1]


def release_fields(metadata: dict) -> tuple:
    """A driver's release metadata as the ``RELEASE_METADATA`` fields of a ``Release``."""
    if set(metadata) != set(RELEASE_METADATA):
        raise ValueError(f'release metadata must be {RELEASE_METADATA}, got {sorted(metadata)}')
    return tuple(metadata[name] for name in RELEASE_METADATA)


def releases(clock: StepClock, step: int, rows: Iterable[Tuple[str, list, float]],
             fields: tuple, histogram: bool) -> List[Release]:
    """``Release`` records of one step from (key, per-bin values, noise sd) rows; ``fields``
    from ``release_fields``. The value is ``float(sum(row))``."""
    start, end = clock.step_bounds(step)
    new = tuple.__new__
    return [new(Release, (key, step, start, end, float(sum(row)), row if histogram else [],
                          *fields, stddev)) for key, row, stddev in rows]


def array_releases(clock: StepClock, step: int, keys: Sequence[str], estimates, stddev: float,
                   fields: tuple, histogram: bool) -> List[Release]:
    """``releases`` straight from an estimates array of shape (keys, bins), one noise sd (the
    keyed fast path: no per-key rows)."""
    start, end = clock.step_bounds(step)
    new = tuple.__new__
    f0, f1, f2, f3, f4, f5 = fields   # locals: no star-unpacking per release
    if histogram:
        return [new(Release, (key, step, start, end, float(sum(row)), row, f0, f1, f2, f3, f4,
                              f5, stddev)) for key, row in zip(keys, estimates.tolist())]
    values = (estimates[:, 0] + 0.0).tolist()   # = float(sum([x])): -0.0 becomes 0.0 there too
    return [new(Release, (key, step, start, end, value, [], f0, f1, f2, f3, f4, f5, stddev))
            for key, value in zip(keys, values)]
