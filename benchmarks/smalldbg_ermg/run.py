"""SmallDBG and ERMG (Cummings et al. 2018, Theorems 9 and 12): what the guarantees say next to
what the mechanisms do, and SmallDB's run time against its candidate count.

    python -m benchmarks.smalldbg_ermg.run

Prints three markdown tables (recorded in benchmarks/smalldbg_ermg/README.md):
(a) SmallDBG's γ, synthetic size m, candidate count and guarantee for small domains (ε = 1,
    β = 0.05, k = N range queries), or the construction's refusal;
(b) one SmallDB run's time at three candidate counts (mean of 5 runs);
(c) ERMG's excess regularised risk J(θ_t) − min J against the per-run guarantee α_t (ε = 0.9,
    δ = 10⁻⁶, β = 0.05, c = 0.1, Λ = 0.1, a 6-example table in R², 40 seeds).
"""

import time

import numpy as np

from beam_dp import noise
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.ermg import ermg
from beam_dp.mechanisms.ermg import regularised_risk
from beam_dp.mechanisms.smalldb import SmallDB
from beam_dp.mechanisms.smalldb import smalldb_candidates
from beam_dp.mechanisms.smalldb import smalldbg
from beam_dp.queries import LinearQuery


def _ranges(n_dom, k):
    return tuple(LinearQuery.range(n_dom, 0, b) for b in range(1, k + 1))


def smalldbg_table():
    print('| N | k | n | γ | m | C(N+m−1, m) | guarantee |')
    print('|---|---|---|---|---|---|---|')
    for n_dom, k, n in ((4, 4, 10 ** 5), (4, 4, 10 ** 6), (4, 4, 10 ** 7), (8, 8, 10 ** 5),
                        (8, 8, 10 ** 6), (16, 4, 10 ** 5)):
        try:
            m = smalldbg(queries=_ranges(n_dom, k), epsilon=1.0, beta=0.05, n=n)
            box = m.mechanism
            print(f'| {n_dom} | {k} | {n:.0e} | {m.gamma:.3f} | {box.m} | '
                  f'{smalldb_candidates(n_dom, box.m):,} | {m.guaranteed_error():.3f} |')
        except InvalidParamsError as e:
            print(f'| {n_dom} | {k} | {n:.0e} | — | — | refused: {str(e)[30:110]}… | — |')


def smalldb_timing():
    print('| N | k | m | candidates | seconds per run |')
    print('|---|---|---|---|---|')
    for n_dom, k, m, t in ((4, 4, 9, 10 ** 5), (8, 8, 10, 10 ** 5), (4, 4, 70, 10 ** 7)):
        box = SmallDB(_ranges(n_dom, k), m)
        counts = np.random.default_rng(0).multinomial(t, np.ones(n_dom) / n_dom)
        box.candidates()
        start = time.perf_counter()
        for i in range(5):
            box.run(counts, t, 0.05, None, None, noise.seeded(i))
        print(f'| {n_dom} | {k} | {m} | {len(box.candidates()):,} | '
              f'{(time.perf_counter() - start) / 5:.3f} |')


POINTS = [[0.6, 0.8], [0.6, -0.8], [-0.6, 0.8], [-0.6, -0.8], [1.0, 0.0], [0.0, -1.0]]
LABELS = [1, 1, 0, 0, 1, 0]


def ermg_table():
    mech = ermg(points=POINTS, labels=LABELS, reg=0.1, epsilon=0.9, delta=1e-6, beta=0.05,
                n=100)
    box = mech.mechanism
    share = np.array([0.3, 0.1, 0.05, 0.25, 0.2, 0.1])
    print('| t | ε_t | guarantee α_t | excess risk median | 95% | max |')
    print('|---|---|---|---|---|---|')
    for t in (10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7):
        counts = np.round(share * t).astype(int)
        t = int(counts.sum())
        eps_t, alpha_t, ln_inv_beta = mech._params_for(t)  # pylint: disable=protected-access
        best = box.minimiser(counts, t)
        floor = regularised_risk(best, box.points, box.labels, counts, t, box.reg)
        excess = [regularised_risk(np.array(box.run(counts, t, eps_t, alpha_t, ln_inv_beta,
                                                    noise.seeded(s)).theta),
                                   box.points, box.labels, counts, t, box.reg) - floor
                  for s in range(40)]
        print(f'| {t:.0e} | {eps_t:.3g} | {alpha_t:.3g} | {np.median(excess):.3g} | '
              f'{np.percentile(excess, 95):.3g} | {max(excess):.3g} |')


if __name__ == '__main__':
    print('(a) SmallDBG\n')
    smalldbg_table()
    print('\n(b) SmallDB run time\n')
    smalldb_timing()
    print('\n(c) ERMG\n')
    ermg_table()
