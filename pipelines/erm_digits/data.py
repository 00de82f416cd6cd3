"""The job's public configuration and its embedded data.

Two streams, each a public ``Dataset`` configuration (dimension, classes, block size, model
constants, number of blocks on the public clock): ``digits`` (scikit-learn's bundled
``load_digits``, 8×8 pixels mapped from their public range [0, 16] to [−1, 1], no download)
and ``drift`` (a 4-class Gaussian mixture in 20 dimensions whose class-to-mean assignment
rotates at a known block: a concept drift).
Preprocessing is data-independent (spec 003 trap T7): fixed scalings, the public seeds below.

An input record is a dict ``{'stream', 'event_time_micros', 'features', 'label'}``
(``INPUT_SCHEMA`` in Avro); block b of a stream is event time
[START + b·STEP, START + (b+1)·STEP).
"""

from typing import List, NamedTuple, Optional, Tuple

import fastavro
import numpy as np

__all__ = [
    'DATASETS',
    'Dataset',
    'INPUT_SCHEMA',
    'START_SECONDS',
    'STEP_SECONDS',
    'embedded',
    'end_seconds',
    'records_of',
]

START_SECONDS = 1_700_000_000          # public start of block 0 (2023-11-14T22:13:20Z)
STEP_SECONDS = 60                      # one block per minute of event time
PUBLIC_SEED = 20240611                 # the data order and the synthetic means (public)

INPUT_SCHEMA = fastavro.parse_schema({
    'type': 'record', 'name': 'ERMExample', 'namespace': 'beam_dp.jobs',
    'doc': 'One labelled example of the ERM job.',
    'fields': [{'name': 'stream', 'type': 'string'},
               {'name': 'event_time_micros', 'type': 'long'},
               {'name': 'features', 'type': {'type': 'array', 'items': 'double'}},
               {'name': 'label', 'type': 'long'}]})


class Dataset(NamedTuple):
    """Public configuration of one stream (what the transforms are built with)."""
    name: str
    feature_dim: int
    num_classes: int
    records_per_block: int
    blocks: int
    mu: float
    passes: int
    batch_size: int
    blocks_per_base: int
    levels: int
    drift_block: Optional[int] = None
    base_fraction: float = 0.5
    update_mu: Optional[float] = None
    ftrl_mu: float = 0.002           # μ of the DP-FTRL release (benchmarks/erm's values)


DATASETS = (
    # benchmarks/erm: B = 8·b0, ¾ of ε to the prefix bases, updates at μ = 1 (0.80 at ε = 100
    # vs 0.19 with B = 4·b0, ½/½ and one μ); the first release is after 8 blocks.
    Dataset('digits', 64, 10, 64, 21, mu=0.01, passes=10, batch_size=4, blocks_per_base=8,
            levels=3, base_fraction=0.75, update_mu=1.0),
    Dataset('drift', 20, 4, 64, 36, mu=0.2, passes=3, batch_size=16, blocks_per_base=4,
            levels=3, drift_block=14, ftrl_mu=0.2),
)


class Embedded(NamedTuple):
    """x, y in stream order (block b = rows [b·n, (b+1)·n)); tests: one (x, y) per regime."""
    x: np.ndarray
    y: np.ndarray
    tests: Tuple[Tuple[np.ndarray, np.ndarray], ...]


def _digits(ds: Dataset) -> Embedded:
    from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(PUBLIC_SEED).permutation(len(y))
    n = ds.blocks * ds.records_per_block
    train, test = order[:n], order[n:]
    x = x / 8.0 - 1.0                        # public pixel range [0, 16] -> [-1, 1]
    return Embedded(x[train], y[train], ((x[test], y[test]),))


def _mixture(rng, centres: np.ndarray, count: int):
    labels = rng.integers(0, len(centres), count)
    return centres[labels] + rng.standard_normal((count, centres.shape[1])), labels


def _drift(ds: Dataset) -> Embedded:
    rng = np.random.default_rng(PUBLIC_SEED)
    centres = rng.standard_normal((ds.num_classes, ds.feature_dim))
    centres *= 3.0 / np.linalg.norm(centres, axis=1, keepdims=True)
    regimes = (centres, np.roll(centres, 1, axis=0))
    split = ds.drift_block * ds.records_per_block
    total = ds.blocks * ds.records_per_block
    parts = [_mixture(rng, regimes[0], split), _mixture(rng, regimes[1], total - split)]
    scale = 1.0 / (np.sqrt(ds.feature_dim) + 3.0)          # public: most rows are not clipped
    tests = tuple((tx * scale, ty) for tx, ty in (_mixture(rng, c, 1000) for c in regimes))
    return Embedded(np.vstack([p[0] for p in parts]) * scale,
                    np.concatenate([p[1] for p in parts]), tests)


def embedded(ds: Dataset) -> Embedded:
    return _digits(ds) if ds.name == 'digits' else _drift(ds)


def records_of(ds: Dataset, data: Embedded) -> List[dict]:
    """The stream's records, ``records_per_block`` per block, spread over each block's minute."""
    n = ds.records_per_block
    out = []
    for i, (x, y) in enumerate(zip(data.x, data.y)):
        block, slot = divmod(i, n)
        micros = (START_SECONDS + block * STEP_SECONDS) * 1_000_000 + (
            (2 * slot + 1) * STEP_SECONDS * 1_000_000) // (2 * n)
        out.append({'stream': ds.name, 'event_time_micros': micros,
                    'features': [float(v) for v in x], 'label': int(y)})
    return out


def end_seconds(ds: Dataset) -> int:
    """The public end of the embedded stream (its last block's end)."""
    return START_SECONDS + ds.blocks * STEP_SECONDS
