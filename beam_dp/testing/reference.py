"""Pure-Python reference of the keyed continual transforms, for parity tests.

Given the same ``testing_seed`` and transform label, ``reference_releases`` computes exactly the
releases the Beam transform emits (same noise, same values), from the already-bounded
contributions. It drives the transform's own driver (``transform.driver``) the way a notebook
would: ``extract`` per record, one pre-aggregated contribution per (shard, step) (``add_pending``),
and
``release_public_step`` per shard and step, under the same noise addresses as the DoFn.
"""

import collections
from typing import Dict, Iterable, List, Tuple

import numpy as np

from beam_dp import noise
from beam_dp.drivers.keyed import KeyedReleaseDriver

__all__ = [
    'reference_releases',
]


def _identity(value):
    return value


def reference_releases(driver: KeyedReleaseDriver, label: str, seed: int,
                       contributions: Iterable[Tuple[str, int, object]],
                       steps: int) -> Dict[Tuple[str, int], List[float]]:
    """{(key, step): per-bin released values} for steps 0..steps-1 (public keys).

    Args:
      seed: the ``testing_seed``, or the transform's random source (``transform.rng``, e.g. a
        ``KeyedRandom`` for a ``noise_key``: the releases a run with that key emits).
      contributions: (key, step, value) after bounding: value is the raw record value for sums
        (it is clamped and snapped by the driver), the bin label for histograms, ignored for
        counts.
    """
    per_step = collections.defaultdict(lambda: collections.defaultdict(int))
    for key, step, value in contributions:
        micros = driver.clock.step_bounds(step)[0]
        _, _, shard, flat, units = driver.extract(key, micros, value, _identity)
        per_step[(shard, step)][flat] += units
    base = seed if isinstance(seed, noise.RandomSource) else noise.seeded(seed)
    out = {}
    for shard in range(driver.layout.num_shards):
        state = driver.init_shard(shard)
        for step in range(steps):
            sums = per_step.get((shard, step), {})
            if sums:
                pending = (step, np.fromiter(sums.keys(), np.int64, len(sums)),
                           np.fromiter(sums.values(), np.int64, len(sums)))
                state = driver.add_pending(state, pending)
            rows, state = driver.release_public_step(shard, state,
                                                     base.derive(label, shard, step))
            for key, row, _ in rows:
                out[(key, step)] = row
    return out
