"""Pure-Python reference of the keyed continual transforms, for parity tests.

Given the same ``testing_seed`` and transform label, ``reference_releases`` computes exactly the
releases the Beam transform emits (same noise, same values), from the already-validated and
bounded contributions. Tests on every runner compare against it release for release.
"""

import collections
from typing import Dict, Iterable, List, Tuple

import numpy as np

from beam_dp import noise
from beam_dp.mechanisms.keyed_release import KeyedReleaseSpec

__all__ = [
    'reference_releases',
]


def reference_releases(spec: KeyedReleaseSpec, label: str, seed: int,
                       contributions: Iterable[Tuple[str, int, object]],
                       steps: int) -> Dict[Tuple[str, int], List[float]]:
    """{(key, step): per-bin released values} for steps 0..steps-1.

    Args:
      contributions: (key, step, value) after bounding: value is the raw record value for sums
        (it is clamped and snapped here), the bin label for histograms, ignored for counts.
    """
    per_step = collections.defaultdict(lambda: collections.defaultdict(int))
    bin_index = {b: i for i, b in enumerate(spec.bins)}
    for key, step, value in contributions:
        shard, position = spec.layout.locate(key)
        units, b = 1, 0
        if spec.metric == 'sum':
            units = spec.to_units(value)
        elif spec.metric == 'histogram':
            b = bin_index[value]
        per_step[(shard, step)][position * spec.bins_per_key + b] += units
    base = noise.seeded(seed)
    out = {}
    for shard in range(spec.layout.num_shards):
        state = spec.init_shard(shard)
        keys = spec.layout.shard_keys(shard)
        for step in range(steps):
            sums = per_step.get((shard, step), {})
            contribution = [(np.fromiter(sums.keys(), np.int64, len(sums)),
                             np.fromiter(sums.values(), np.int64, len(sums)))] if sums else []
            released, state = spec.release_step(shard, state, contribution,
                                                base.derive(label, shard, step))
            for key, row in zip(keys, released.tolist()):
                out[(key, step)] = row
    return out
