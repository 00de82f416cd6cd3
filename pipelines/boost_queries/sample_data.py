"""The embedded data of the boost_queries job: a Covid-shaped table (spec 002 §6.2, §6.9) and a
Zipf query workload (§6.4). The generator of the Boost benchmark lives here (numpy only, so it
runs in either virtualenv; ``benchmarks/boost/workload.py`` re-exports it).

Data: time blocks of n_b rows over attributes [positive 2, gender 2, age 4, ethnicity 8]
(N = 128, the artifact's attribute order). Tested-population marginals are the census ones of
the artifact's generator; positivity drifts over 5-15 % across blocks; positives' age and
ethnicity marginals drift slowly between two skewed profiles; attributes are independent given
positivity. Block counts are one multinomial draw per block.

Queries: the pool of all 34,425 rectangles (one non-empty value subset per attribute), shuffled
with a fixed seed; the workload draws pool ranks from Zipf(k) on [1, Q] (k = 0 uniform). Windows:
``monoblock`` one block; ``static`` 50 blocks, size uniform in 1..50, start uniform; ``streaming``
blocks arrive one by one (1 → 50), each query asks for the latest P blocks, P uniform in
1..available.

The job's sample (``job_rows``/``job_queries``): JOB_BLOCKS weekly blocks of JOB_BLOCK_SIZE rows
(event times spread over the week) and JOB_QUERIES streaming-setting queries at k = 1, each
stamped just after its last block is sealed.
"""

import itertools
import math

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


# -- the job's sample ----------------------------------------------------------------------------

JOB_BLOCKS = 10
JOB_BLOCK_SIZE = 2000
JOB_QUERIES = 400
JOB_ZIPF_K = 1.0
DATASET = 'covid'
BLOCK_SECONDS = 7 * 24 * 3600
START_SECONDS = 1_577_836_800          # 2020-01-01T00:00:00Z

#: Avro schema of a data row of the job (event time in microseconds).
ROW_SCHEMA = {'type': 'record', 'name': 'CovidTest', 'namespace': 'beam_dp.boost',
              'fields': [{'name': 'dataset', 'type': 'string'},
                         {'name': 'event_time_micros', 'type': 'long'},
                         {'name': 'attributes', 'type': {'type': 'array', 'items': 'long'}}]}


def job_block_counts(seed: int = 0):
    """(JOB_BLOCKS, N) histograms of the job's sample (block_distribution over JOB_BLOCKS)."""
    return blocks(seed, JOB_BLOCKS, JOB_BLOCK_SIZE)


def job_rows(seed: int = 0):
    """The sample rows as Avro dicts (``ROW_SCHEMA``), one per person tested, in time order."""
    rng = np.random.default_rng([seed, 1])
    out = []
    for b, counts in enumerate(job_block_counts(seed)):
        bins = np.repeat(np.arange(N), counts)
        offsets = np.sort(rng.integers(0, BLOCK_SECONDS * 10 ** 6, size=bins.size))
        rng.shuffle(bins)
        base = (START_SECONDS + b * BLOCK_SECONDS) * 10 ** 6
        for cell, off in zip(bins.tolist(), offsets.tolist()):
            out.append({'dataset': DATASET, 'event_time_micros': base + off,
                        'attributes': [int(x) for x in np.unravel_index(cell, SHAPE)]})
    return out


def job_queries(count: int = JOB_QUERIES, k: float = JOB_ZIPF_K, seed: int = 1):
    """[(event time micros, query dict)] of the streaming setting: query i over the latest P
    sealed blocks, stamped one second after its last block's end (when it is sealed)."""
    subsets, _ = query_pool()
    out = []
    for i, (rank, first, last, _) in enumerate(workload('streaming', k, count, seed,
                                                        JOB_BLOCKS, len(subsets))):
        micros = (START_SECONDS + (last + 1) * BLOCK_SECONDS + 1 + i % 60) * 10 ** 6
        out.append((micros, {'query_id': f'q{i:05d}', 'dataset': DATASET,
                             'subsets': [list(s) for s in subsets[rank]], 'vector': [],
                             'first_block': first, 'last_block': last, 'latest': 0}))
    return out
