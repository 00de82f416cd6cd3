"""Budget per block of Boost with Laplace noise (pure ε) vs the optional Gaussian noise (ρ-zCDP
per-block filters, reported as ε at δ with the accountant's conversion) on the benchmark's
Covid-shaped workload (``workload.py``: same blocks, query pool, Zipf ranks and windows).

    .venv/bin/python benchmarks/boost/gaussian_vs_laplace.py --queries 5000 --k 1

Both run through the pure driver with the same parameters (α = 0.05, β = 10⁻³, (C0, S0) =
(100, 5), τ = 0.05); the Laplace filters hold ε_G = 10 per block, the Gaussian ones
ρ_G = rho_for_epsilon_delta(10, δ). Printed per system and setting: the mean over blocks of
the budget consumed (Laplace: ε; Gaussian: ρ and ε(ρ, δ)), and their ratio.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))

# pylint: disable=wrong-import-position
from beam_dp import PrivacyBudget
from beam_dp import noise
from beam_dp.accounting import epsilon_from_rho
from beam_dp.drivers.boost import BoostDriver
from beam_dp.drivers.boost import budget_fields
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.mechanisms.boost import Readiness
from beam_dp.mechanisms.boost import preset
from pipelines.boost_queries import sample_data

SHAPE = (2, 2, 4, 8)


def run(system, noise_kind, setting, k, queries, delta, seed=0):
    budget = (PrivacyBudget(epsilon=10.0) if noise_kind == 'laplace'
              else PrivacyBudget(epsilon=10.0, delta=delta))
    fields = budget_fields('bench', budget, noise_kind)
    fields.pop('ledger_delta', None)
    extra = {} if system in ('laplace', 'exact_cache', 'tree_exact_cache') else {
        'readiness': Readiness(c0=100, s0=5)}
    mech = preset(system, 128, alpha=0.05, beta=1e-3, tau=0.05, **fields, **extra)
    driver = BoostDriver('covid', SHAPE, mech, 0, 1)
    counts = sample_data.blocks(1)
    subsets, _ = sample_data.query_pool()
    tasks = sample_data.workload(setting, k, queries, 1)
    num_blocks = 1 if setting == 'monoblock' else 50
    state = driver.init_state()
    rng = noise.seeded(seed)
    for b in range(num_blocks):
        state, _ = driver.add_block_counts(state, b, counts[b])
    state, _ = driver.seal_until(state, num_blocks, rng)
    refused = 0
    t0 = time.perf_counter()
    for i, (q, first, last, _) in enumerate(tasks):
        record = BoostQueryRecord(str(i), 'covid', [list(s) for s in subsets[q]], [], first,
                                  last, 0)
        state, out = driver.submit(state, [record], rng)
        refused += type(out[0]).__name__ == 'BoostRefusal'
    spent = [state.mech.filters.spent(b) for b in range(num_blocks)]
    eps = spent if noise_kind == 'laplace' else [epsilon_from_rho(r, delta) for r in spent]
    return float(np.mean(spent)), float(np.mean(eps)), refused, time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--queries', type=int, default=5000)
    p.add_argument('--k', type=float, default=1.0)
    p.add_argument('--delta', type=float, default=1e-6)
    p.add_argument('--settings', default='monoblock,static')
    p.add_argument('--systems', default='laplace,exact_cache,pmw_bypass,tree_exact_cache,'
                                        'tree_pmw_bypass')
    args = p.parse_args()
    print(f'{args.queries} queries, k_zipf={args.k:g}, ε_G=10 per block, Gaussian at '
          f'δ={args.delta:g}; mean over blocks of the budget consumed')
    print(f'{"setting":<10} {"system":<18} {"Laplace ε":>10} {"Gauss ρ":>10} '
          f'{"Gauss ε(δ)":>11} {"ratio":>6} {"refused L/G":>12}')
    for setting in args.settings.split(','):
        if setting == 'monoblock':
            systems = [s for s in args.systems.split(',') if not s.startswith('tree')]
        else:
            systems = [s for s in args.systems.split(',') if s.startswith('tree')]
        for system in systems:
            _, lap, ref_l, _ = run(system, 'laplace', setting, args.k, args.queries, args.delta)
            rho, gau, ref_g, _ = run(system, 'gaussian', setting, args.k, args.queries,
                                     args.delta)
            print(f'{setting:<10} {system:<18} {lap:10.4f} {rho:10.3e} {gau:11.4f} '
                  f'{lap / gau:6.2f} {ref_l:>5}/{ref_g:<5}')


if __name__ == '__main__':
    main()
