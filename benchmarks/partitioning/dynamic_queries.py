"""Linear queries under insertions and deletions (Qiu & Yi's plug-in; spec 001 §13, §16).

A sliding window over a domain of N = 16 elements: one insertion per tick (element t·7 mod N),
each deleted W ticks later, so the live size n_t is W while the number of updates N_t grows.
𝒬 = the 16 prefix ranges [0, b). Compared, on the same stream and seeds, the max over 𝒬 of
|answer − f(D_t)| over the second half of the run:

* C6 ``TwoStreamCounter`` over the N bins, answers by post-processing (the recommended route
  for low-sensitivity queries, error in terms of N_t);
* C9 ``FullyDynamicCounter`` with the ``LaplaceHistogram`` plug-in;
* C9 with the ``StaticPMW`` plug-in (the paper's headline, error in terms of n_t).

Run: ``python benchmarks/partitioning/dynamic_queries.py [--quick] [--epsilon E ...]``;
writes ``results/results_dynamic_queries.json``.
"""

import argparse
import json
import pathlib
import time

import numpy as np

from beam_dp import noise
from beam_dp.mechanisms.dynamic import FullyDynamicCounter
from beam_dp.mechanisms.dynamic import TwoStreamCounter
from beam_dp.mechanisms.dynamic import Update
from beam_dp.mechanisms.plugin import LaplaceHistogram
from beam_dp.mechanisms.plugin import StaticPMW
from beam_dp.queries import LinearQuery

N = 16
QUERIES = tuple(LinearQuery.range(N, 0, b) for b in range(1, N + 1))
DENSE = np.array([q.dense() for q in QUERIES])
OUT = pathlib.Path(__file__).resolve().parent / 'results'


def run(make, seeds, until, window, histogram):
    errs, t0 = [], time.time()
    for seed in range(seeds):
        mech, rng = make(), noise.seeded(seed)
        state = mech.init_state()
        live = {}
        for t in range(1, until + 1):
            ups = [Update(f'r{t}', 1, t * 7 % N)]
            live[f'r{t}'] = t * 7 % N
            if t > window:
                ups.append(Update(f'r{t - window}', -1, live.pop(f'r{t - window}')))
            rel, state = mech.advance(state, t, ups, rng, prime=False)
            if t > until // 2:
                truth = DENSE @ np.bincount(list(live.values()), minlength=N)
                got = np.asarray(rel.answer)
                if histogram:
                    got = DENSE @ got[:N]
                errs.append(float(np.abs(got - truth).max()))
    e = np.array(errs)
    return dict(median=float(np.median(e)), p95=float(np.percentile(e, 95)),
                seconds=round(time.time() - t0, 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--epsilon', type=float, nargs='+', default=[1.0, 100.0])
    args = ap.parse_args()
    seeds, until, window = (1, 600, 100) if args.quick else (2, 2000, 200)
    out = dict(until=until, window=window, domain=N, queries=len(QUERIES), seeds=seeds,
               metric='max over the 16 prefix ranges of |error|, second half', rows=[])
    for eps in args.epsilon:
        for name, make, hist in (
                ('C6 two_stream histogram + post-processing',
                 lambda: TwoStreamCounter(eps, dimension=N), True),
                ('C9 fenwick + LaplaceHistogram plug-in',
                 lambda: FullyDynamicCounter(eps, dimension=N,
                                             plugin=LaplaceHistogram(N, QUERIES)), False),
                ('C9 fenwick + StaticPMW plug-in (alpha=0.2)',
                 lambda: FullyDynamicCounter(eps, dimension=N,
                                             plugin=StaticPMW(N, QUERIES, alpha=0.2)), False)):
            row = dict(mechanism=name, epsilon=eps, live_size=window,
                       **run(make, seeds, until, window, hist))
            out['rows'].append(row)
            print(row, flush=True)
    if not args.quick:
        OUT.mkdir(exist_ok=True)
        (OUT / 'results_dynamic_queries.json').write_text(json.dumps(out, indent=1) + '\n')


if __name__ == '__main__':
    main()
