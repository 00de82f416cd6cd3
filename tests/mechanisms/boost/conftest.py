"""Shared fixtures of the Boost mechanism tests: a small domain and blocks of n rows."""

import numpy as np

from beam_dp.queries import LinearQuery

N = 8
P = np.array([0.1, 0.2, 0.05, 0.15, 0.1, 0.1, 0.2, 0.1])
QUERIES = [LinearQuery.from_vector(v) for v in np.eye(N)] + [LinearQuery.range(N, 0, 4),
                                                            LinearQuery.range(N, 2, 7)]


def blocks(count, n=10_000, seed=0, p=P):
    rng = np.random.default_rng(seed)
    return [rng.multinomial(n, p) for _ in range(count)]


def sealed(mech, count, n=10_000, seed=0, p=P):
    state = mech.init_state()
    for c in blocks(count, n, seed, p):
        state = mech.add_data(state, c)
    return state
