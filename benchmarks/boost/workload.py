"""The Covid-shaped workload of the Boost benchmark (spec 002 §6.2, §6.4, §6.9), shared by our
runner and the authors' artifact runner (numpy only, so it runs in either virtualenv).

Data: 50 time blocks of n_b rows over attributes [positive 2, gender 2, age 4, ethnicity 8]
(N = 128, the artifact's attribute order). Tested-population marginals are the census ones of
the artifact's generator; positivity drifts over 5-15 % across blocks; positives' age and
ethnicity marginals drift slowly between two skewed profiles; attributes are independent given
positivity. Block counts are one multinomial draw per block.

Queries: the pool of all 34,425 rectangles (one non-empty value subset per attribute), shuffled
with a fixed seed; the workload draws pool ranks from Zipf(k) on [1, Q] (k = 0 uniform). Windows:
``monoblock`` one block; ``static`` 50 blocks, size uniform in 1..50, start uniform; ``streaming``
blocks arrive one by one (1 → 50), each query asks for the latest P blocks, P uniform in
1..available.
"""

import itertools
import json
import math
from pathlib import Path

import numpy as np

SHAPE = (2, 2, 4, 8)
N = math.prod(SHAPE)
AGE = np.array([0.224, 0.312, 0.312, 0.152])
GENDER = np.array([0.5, 0.5])
ETHNICITY = np.array([0.002, 0.15, 0.402, 0.042, 0.004, 0.006, 0.343, 0.053])
POS_AGE = (np.array([0.10, 0.55, 0.22, 0.13]), np.array([0.18, 0.45, 0.22, 0.15]))
POS_ETH = (np.array([0.002, 0.06, 0.62, 0.03, 0.006, 0.004, 0.22, 0.058]),
           np.array([0.003, 0.10, 0.50, 0.04, 0.005, 0.006, 0.28, 0.066]))
POS_GENDER = np.array([0.48, 0.52])
BLOCK_SIZE = 1_008_532
SETTINGS = ('monoblock', 'static', 'streaming')


def _outer(*marginals):
    out = marginals[0]
    for m in marginals[1:]:
        out = np.multiply.outer(out, m)
    return out


def block_distribution(t: int, blocks: int = 50) -> np.ndarray:
    """The joint distribution (shape SHAPE) of block t."""
    phase = t / max(1, blocks - 1)
    positivity = 0.05 + 0.10 * (0.5 - 0.5 * math.cos(2 * math.pi * phase))
    pos = _outer(POS_GENDER, (1 - phase) * POS_AGE[0] + phase * POS_AGE[1],
                 (1 - phase) * POS_ETH[0] + phase * POS_ETH[1])
    neg = _outer(GENDER, AGE, ETHNICITY)
    return np.stack([(1 - positivity) * neg, positivity * pos])


def blocks(seed: int = 0, count: int = 50, size: int = BLOCK_SIZE) -> np.ndarray:
    """(count, N) int64 block histograms."""
    rng = np.random.default_rng(seed)
    out = np.zeros((count, N), dtype=np.int64)
    for t in range(count):
        p = block_distribution(t, count).reshape(-1)
        out[t] = rng.multinomial(size, p / p.sum())
    return out


def query_pool(seed: int = 64):
    """(subsets list, (Q, N) dense 0/1 matrix), shuffled with ``seed``."""
    per_attr = [[list(c) for r in range(1, d + 1) for c in itertools.combinations(range(d), r)]
                for d in SHAPE]
    subsets = list(itertools.product(*per_attr))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(subsets))
    subsets = [subsets[i] for i in order]
    dense = np.zeros((len(subsets), N))
    for i, rect in enumerate(subsets):
        mask = np.zeros(SHAPE, dtype=bool)
        mask[np.ix_(*rect)] = True
        dense[i] = mask.reshape(-1)
    return subsets, dense


def zipf_ranks(k: float, pool: int, count: int, rng) -> np.ndarray:
    """0-based pool indices with P(rank x) ∝ x^-k, x ∈ [1, pool]."""
    p = 1.0 / np.power(np.arange(1, pool + 1, dtype=np.float64), k)
    return rng.choice(pool, size=count, p=p / p.sum())


def workload(setting: str, k: float, queries: int, seed: int = 1, num_blocks: int = 50,
             pool: int = 34425):
    """[(pool index, first block, last block, blocks available)] for one setting."""
    rng = np.random.default_rng([seed, int(k * 100), SETTINGS.index(setting)])
    ranks = zipf_ranks(k, pool, queries, rng)
    out = []
    per_block = max(1, queries // num_blocks)
    for i, q in enumerate(ranks.tolist()):
        if setting == 'monoblock':
            out.append((q, 0, 0, 1))
        elif setting == 'static':
            size = int(rng.integers(1, num_blocks + 1))
            start = int(rng.integers(0, num_blocks - size + 1))
            out.append((q, start, start + size - 1, num_blocks))
        else:
            available = min(num_blocks, 1 + i // per_block)
            size = int(rng.integers(1, available + 1))
            out.append((q, available - size, available - 1, available))
    return out


def write(directory: str, k_values=(0, 1), queries: int = 20000, seed: int = 1) -> None:
    """Writes blocks.npy, pool.json, pool.npy and workload_<setting>_k<k>.json."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    np.save(path / 'blocks.npy', blocks(seed))
    subsets, dense = query_pool()
    np.save(path / 'pool.npy', dense)
    (path / 'pool.json').write_text(json.dumps(subsets))
    for setting in SETTINGS:
        for k in k_values:
            rows = workload(setting, k, queries, seed)
            (path / f'workload_{setting}_k{k}.json').write_text(json.dumps(rows))


if __name__ == '__main__':
    import sys
    write(sys.argv[1] if len(sys.argv) > 1 else '/tmp/boost_bench',
          queries=int(sys.argv[2]) if len(sys.argv) > 2 else 20000)
