"""Shared workload of the PMWG benchmarks: a growing taxi-trip database and a templated query stream.

The model is the one of ``pipelines/pmwg_queries/sample_data.py`` (the job's embedded sample data),
vectorised so that databases of 10^5-10^7 records are cheap to simulate:

* domain: 32 two-minute duration bins x 4 payment types = 128 cells (cell = bin*4 + payment);
* records arrive one per time step (t is the size, spec §1); the clock u = t / t_end in [0, 1]
  spans the sample's six hours, with a rush hour around u = 0.42 that lengthens trips
  (log-normal duration, log-mean ln(660 s) + 0.5*rush(u), sd 0.55), payments (0.55, 0.15, 0.25,
  0.05) — so the distribution drifts while the database grows;
* queries: the sample's four templates — duration ranges (40 %), payment marginals (30 %), one
  duration bin (20 %), one cell (10 %) — each a counting query (``LinearQuery``), also kept as a
  dense 0/1 row of a query matrix so that true answers and baselines are evaluated vectorised.

The synthetic data and query choice use numpy generators (test data, not DP noise); every DP
noise draw goes through ``beam_dp.noise.seeded``.
"""

import math
import os
import platform
from typing import List, Tuple

import numpy as np
from scipy.special import ndtr

from beam_dp.queries import LinearQuery
from pipelines.pmwg_queries import sample_data

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')

NUM_BINS = sample_data.NUM_BINS
NUM_PAY = len(sample_data.PAYMENTS)
SHAPE = sample_data.DOMAIN_SHAPE
N = sample_data.DOMAIN_SIZE
PAY_P = np.array([0.55, 0.15, 0.25, 0.05])
BIN_SECONDS = 60 * sample_data.BIN_MINUTES


def rush(u):
    return np.exp(-((np.asarray(u) - 0.42) / 0.12) ** 2)


def cell_probs(u: float) -> np.ndarray:
    """Distribution over the 128 cells of a record arriving at clock u in [0, 1]."""
    mu = math.log(11 * 60) + 0.5 * float(rush(u))
    edges = np.arange(1, NUM_BINS) * BIN_SECONDS
    cdf = ndtr((np.log(edges) - mu) / 0.55)
    p_bins = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    return np.outer(p_bins, PAY_P).ravel()


def grow(gen: np.random.Generator, t_from: int, t_to: int, t_end: int) -> np.ndarray:
    """Record indices for sizes t_from+1 .. t_to (a multinomial draw at the batch's mid-clock)."""
    size = t_to - t_from
    if size <= 0:
        return np.zeros(0, dtype=np.int64)
    counts = gen.multinomial(size, cell_probs((t_from + t_to) / 2 / t_end))
    return np.repeat(np.arange(N), counts)


def initial_counts(gen: np.random.Generator, n: int, t_end: int, pieces: int = 16) -> np.ndarray:
    """Histogram of the first n records (clock 0 .. n/t_end), drawn in ``pieces`` batches."""
    counts = np.zeros(N, dtype=np.int64)
    edges = np.linspace(0, n, pieces + 1).astype(np.int64)
    for a, b in zip(edges[:-1], edges[1:]):
        counts += gen.multinomial(int(b - a), cell_probs((a + b) / 2 / t_end))
    return counts


def template_query(gen: np.random.Generator) -> Tuple[str, LinearQuery]:
    """One query from the sample's four templates (same mix as sample_data._template)."""
    kind = int(gen.choice(4, p=(0.4, 0.3, 0.2, 0.1)))
    if kind == 0:
        a = int(gen.integers(0, NUM_BINS // 2))
        b = int(gen.integers(a + 1, NUM_BINS + 1))
        if gen.random() < 0.5:
            a = 0
        return 'duration_range', LinearQuery.range(N, a * NUM_PAY, b * NUM_PAY)
    if kind == 1:
        return 'payment_marginal', LinearQuery.marginal(SHAPE, (1,), (int(gen.integers(0, 4)),))
    if kind == 2:
        return 'duration_bin', LinearQuery.marginal(SHAPE, (0,), (int(gen.integers(0, 12)),))
    return 'cell', LinearQuery.marginal(SHAPE, (0, 1), (int(gen.integers(0, 12)),
                                                        int(gen.integers(0, 4))))


def query_stream(gen: np.random.Generator, count: int):
    """(kinds, queries, dense matrix count x N) of ``count`` template queries."""
    kinds, queries = [], []
    for _ in range(count):
        k, q = template_query(gen)
        kinds.append(k)
        queries.append(q)
    matrix = np.stack([q.dense() for q in queries]).astype(np.float64)
    return kinds, queries, matrix


def query_times(n: int, t_end: int, count: int, burst: int = 1) -> np.ndarray:
    """Sizes at which the ``count`` queries arrive: evenly spread over (n, t_end], in bursts of
    ``burst`` queries asked at the same size."""
    groups = -(-count // burst)
    sizes = np.linspace(n, t_end, groups + 1)[1:].round().astype(np.int64)
    return np.repeat(sizes, burst)[:count]


def cpu_model() -> str:
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_info() -> dict:
    return {'cpus': os.cpu_count(), 'cpu': cpu_model(), 'python': platform.python_version(),
            'numpy': np.__version__, 'platform': platform.platform()}


def laplace_fixed_epsilon_counts(eps_per_query: np.ndarray, budget: float) -> int:
    """How many queries (in order) a fixed per-query ε answers before the budget runs out."""
    spent = np.cumsum(eps_per_query)
    return int(np.searchsorted(spent, budget * (1 + 1e-12), side='right'))


def summarize_errors(err: np.ndarray, alpha: float) -> dict:
    err = np.abs(err)
    if err.size == 0:
        return {'max': None, 'mean': None, 'p95': None, 'frac_within_alpha': None}
    return {'max': float(err.max()), 'mean': float(err.mean()),
            'p95': float(np.quantile(err, 0.95)),
            'frac_within_alpha': float(np.mean(err <= alpha))}


def ensure_results() -> str:
    os.makedirs(RESULTS, exist_ok=True)
    return RESULTS


__all__: List[str] = ['N', 'RESULTS', 'cell_probs', 'grow', 'initial_counts', 'query_stream',
                      'query_times', 'machine_info', 'summarize_errors', 'template_query']


STATUS_CODES = {'easy': 0, 'hard': 1, 'halted': 2, 'not_started': 3}


def run_pmwg_stream(mech, gen: np.random.Generator, rng, n: int, t_end: int, queries,
                    times: np.ndarray, matrix: np.ndarray) -> dict:
    """Feeds the growing database and the query stream to one PMWG instance.

    The first n records arrive before the first query; between queries the records of sizes
    (previous query's t, this query's t] arrive through ``add_data``. Returns per-query arrays:
    ``t``, ``status`` (STATUS_CODES), ``value`` (NaN when refused), ``true`` (f(x_t), computed
    vectorised from the true histogram), and the final ledger ε. Released values are clipped to
    [0, 1] (free post-processing, spec P15).
    """
    state = mech.init_state()
    counts0 = initial_counts(gen, n, t_end)
    state = mech.add_data(state, np.repeat(np.arange(N), counts0), rng)
    q = len(queries)
    status = np.zeros(q, dtype=np.int8)
    value = np.full(q, np.nan)
    true = np.zeros(q)
    t_prev = n
    for j, (query, t) in enumerate(zip(queries, times)):
        if t > t_prev:
            state = mech.add_data(state, grow(gen, t_prev, int(t), t_end), rng)
            t_prev = int(t)
        true[j] = matrix[j] @ state.counts / state.t
        ans, state = mech.answer(state, query, rng)
        status[j] = STATUS_CODES[ans.status]
        if ans.value is not None:
            value[j] = ans.clipped          # clip to [0, 1]: free post-processing (spec P15)
    return {'t': np.asarray(times), 'status': status, 'value': value, 'true': true,
            'ledger': float(mech.ledger(state.public)), 'hard': int(state.public.hard),
            'halted': bool(state.public.halted)}


def laplace_answers(rng, true: np.ndarray, times: np.ndarray, eps_per_query) -> np.ndarray:
    """Per-query Laplace mechanism: f(x_t) + Lap(1/(ε_q t)) (sensitivity 1/t) with beam_dp's exact
    grid sampler (``grid_laplace``), vectorised over the queries sharing one (t, ε_q)."""
    from beam_dp.noise.real_laplace import grid_laplace  # pylint: disable=import-outside-toplevel
    eps = np.broadcast_to(np.asarray(eps_per_query, dtype=np.float64), true.shape)
    times = np.asarray(times, dtype=np.int64)
    out = np.empty_like(true)
    keys = np.stack([times.astype(np.float64), eps], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    for g, (t, e) in enumerate(uniq):
        idx = np.flatnonzero(inverse == g)
        t = int(t)
        out[idx] = grid_laplace(rng, true[idx], 1.0 / (float(e) * t), 1.0 / t)[0]
    return np.clip(out, 0.0, 1.0)                # free post-processing, as for PMWG


def cdp_split_epsilon(budget: float, delta: float, count: int) -> float:
    """Per-query ε_q such that ``count`` ε_q-DP answers compose (Theorem 4, zCDP) to exactly
    (budget, δ): ½Qε_q² + √(2Qε_q² ln(1/δ)) = budget."""
    two_l = 2 * math.log(1 / delta)
    s = -math.sqrt(two_l) + math.sqrt(two_l + 2 * budget)
    return s / math.sqrt(count)


def pmwg_min_alpha(n: int, epsilon: float, delta: float, beta: float, kappa: float = 1.0) -> float:
    """The smallest α the accuracy theorems certify (spec §5.6): Theorem 14 (δ = 0) or
    Theorem 24 with p = 1/2 (δ > 0)."""
    lnn = math.log(N * n)
    if delta == 0:
        return (8262 * lnn * math.log(192 * kappa * n / beta) / (n * epsilon)) ** (1 / 3)
    return (2448 * math.sqrt(lnn) * math.log(144 * kappa * n / beta)
            * math.sqrt(math.log(1 / delta)) / (n * epsilon)) ** 0.5
