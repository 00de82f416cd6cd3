"""Benchmark (c): bytes of counter state per key at T = 2^20.

Measures, for shards of 1, 64 and 512 keys (the sharded release loop keeps ONE counter of
dimension = keys-in-shard per shard; 512 is the default shard size):

* finite ``BinaryTreeCounter(horizon=2^20)``: ``init_state().nbytes()`` (raw numpy payload) and
  the size of the ``PublicShardState`` as the DoFn stores it in Beam state
  (``PickleCoder().encode``), both for the state built by ``KeyedReleaseDriver.init_shard`` and
  after a few real release steps
  (the finite tree's arrays have a fixed shape, so its size does not grow with t);
* the unbounded ``InfiniteTreeCounter`` after s = 2^20 - 1 and s = 2^20 steps. Stepping 2^20
  times is too slow for this benchmark (the exact samplers cost milliseconds per step, see
  README), so the state at s is built by construction: its arrays have shape (block(s), d) with
  block(s) = floor(log2 s), which the benchmark checks against states reached by really stepping
  (dimension 1 and the shard sizes) up to s = 2^S for a small S (``--check-log2-steps``).

Target: <= 1 KiB per key. Writes benchmarks/state_size/results/state_size.json and
state_size.png.

Usage: python benchmarks/state_size/run.py [--check-log2-steps 10]
"""

import argparse
import dataclasses
import json
import os
import pickle
import time

import numpy as np
from apache_beam.coders import PickleCoder

from beam_dp.accounting import PrivacyBudget
from beam_dp.mechanisms.infinite_counter import InfiniteTreeCounter
from beam_dp.mechanisms.infinite_counter import InfiniteTreeState
from beam_dp.drivers import KeyedReleaseDriver
from beam_dp.drivers import KeyLayout
from beam_dp.drivers import PublicShardState
from beam_dp.drivers import StepClock
from beam_dp.noise import seeded
from beam_dp.privacy_unit import EventLevel

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
SHARD_SIZES = (1, 64, 512)
LOG2_T = 20
CODER = PickleCoder()


def spec_for(keys_per_shard, horizon, estimator):
    keys = [f'k{i:05d}' for i in range(keys_per_shard)]
    return KeyedReleaseDriver(
        metric='count', budget=PrivacyBudget(epsilon=1.0), privacy_unit=EventLevel(),
        clock=StepClock(start_micros=0, step_micros=60_000_000), layout=KeyLayout.of(keys, 1),
        horizon_steps=horizon, estimator=estimator)


def encoded(state) -> int:
    return len(CODER.encode(state))


def finite_rows(steps_after_init):
    rows = []
    for est in ('variance_reduced', 'textbook'):
        for k in SHARD_SIZES:
            spec = spec_for(k, 1 << LOG2_T, est)
            state = spec.init_shard(0)
            init_raw = state.counter_state.nbytes()
            init_enc = encoded(state)
            rng = seeded(1).derive('state_size', k, est)
            data = np.random.default_rng(k)
            for _ in range(steps_after_init):
                positions = np.arange(k)
                _, state = spec.release_step(0, state, [(positions, data.poisson(2, k))], rng)
            rows.append({'counter': 'finite', 'estimator': est, 'horizon': 1 << LOG2_T,
                         'keys_per_shard': k, 'steps': 0,
                         'nbytes': init_raw, 'nbytes_per_key': init_raw / k,
                         'beam_state_bytes': init_enc, 'beam_state_bytes_per_key': init_enc / k,
                         'beam_state_bytes_after_steps': encoded(state),
                         'beam_state_bytes_per_key_after_steps': encoded(state) / k,
                         'steps_taken_after_init': steps_after_init})
    return rows


def constructed_infinite(counter: InfiniteTreeCounter, s: int, fill_rng) -> InfiniteTreeState:
    """A state with the shapes and dtypes the counter has after s steps (values arbitrary)."""
    d = counter.dimension
    block = s.bit_length() - 1
    reduced = counter.estimator == 'variance_reduced'

    def ints(rows):
        return fill_rng.integers(-1000, 1000, size=(rows, d)).astype(np.int64)

    def floats(rows):
        return fill_rng.normal(size=(rows, d))

    return InfiniteTreeState(
        s=s, completed=fill_rng.normal(size=d) * 1e4, completed_variance=12345.678,
        block_sum=fill_rng.integers(0, 10**6, size=d).astype(np.int64),
        open_sums=ints(block), noisy=ints(block),
        est_last=floats(block) if reduced else None, est_prev=floats(block) if reduced else None)


def infinite_rows(check_log2):
    rows, checks = [], []
    for est in ('variance_reduced', 'textbook'):
        for k in SHARD_SIZES:
            spec = spec_for(k, None, est)
            counter = spec.counter(k)
            fill = np.random.default_rng(k)
            # Check the construction against really stepped states.
            rng = seeded(2).derive(est, k)
            zero = np.zeros(k, dtype=np.int64)
            real, t0 = counter.init_state(), time.perf_counter()
            for s in ((1 << check_log2) - 1, 1 << check_log2):
                while real.s < s:
                    _, real = counter.step(real, zero, rng)
                secs = time.perf_counter() - t0
                built = constructed_infinite(counter, s, fill)
                same = all(getattr(real, f.name) is None and getattr(built, f.name) is None or
                           np.shape(getattr(real, f.name)) == np.shape(getattr(built, f.name))
                           for f in dataclasses.fields(InfiniteTreeState))
                checks.append({'estimator': est, 'keys_per_shard': k, 's': s,
                               'stepped_nbytes': real.nbytes(), 'constructed_nbytes': built.nbytes(),
                               'stepped_beam_state_bytes':
                                   encoded(PublicShardState(s, real)),
                               'constructed_beam_state_bytes':
                                   encoded(PublicShardState(s, built)),
                               'shapes_match': bool(same), 'stepping_seconds_cumulative': secs})
            for s in ((1 << LOG2_T) - 1, 1 << LOG2_T):
                built = constructed_infinite(counter, s, fill)
                enc = encoded(PublicShardState(s, built))
                rows.append({'counter': 'infinite', 'estimator': est, 'keys_per_shard': k,
                             'steps': s, 'nbytes': built.nbytes(),
                             'nbytes_per_key': built.nbytes() / k, 'beam_state_bytes': enc,
                             'beam_state_bytes_per_key': enc / k, 'constructed': True})
    return rows, checks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--check-log2-steps', type=int, default=10)
    parser.add_argument('--steps-after-init', type=int, default=3)
    parser.add_argument('--out', default=os.path.join(RESULTS, 'state_size.json'))
    parser.add_argument('--plot', default=os.path.join(RESULTS, 'state_size.png'))
    args = parser.parse_args()
    os.makedirs(RESULTS, exist_ok=True)
    t0 = time.perf_counter()
    rows = finite_rows(args.steps_after_init)
    inf_rows, checks = infinite_rows(args.check_log2_steps)
    rows += inf_rows
    # Pickled per-key overhead floor: what one empty PublicShardState costs.
    results = {'benchmark': 'state_size', 'log2_T': LOG2_T, 'target_bytes_per_key': 1024,
               'coder': 'apache_beam.coders.PickleCoder (the release loop\'s shard_state cell)',
               'rows': rows, 'construction_checks': checks,
               'wall_seconds': time.perf_counter() - t0}
    for r in rows:
        r['target_met'] = r['beam_state_bytes_per_key'] <= 1024
    with open(args.out, 'w') as f:
        json.dump(results, f, indent=1)
    print('| counter | estimator | s | keys/shard | nbytes/key | Beam state bytes/key | <= 1 KiB |')
    print('|---|---|---|---|---|---|---|')
    for r in rows:
        s = r['steps'] if r['counter'] == 'infinite' else f"any <= 2^{LOG2_T}"
        print(f"| {r['counter']} | {r['estimator']} | {s} | {r['keys_per_shard']} | "
              f"{r['nbytes_per_key']:.1f} | {r['beam_state_bytes_per_key']:.1f} | "
              f"{'yes' if r['target_met'] else 'NO'} |")
    print('\nconstruction checks (stepped vs constructed):')
    for c in checks:
        print(c)
    plot(rows, args.plot)


def plot(rows, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.5))
    groups = [('finite', 'variance_reduced', None), ('finite', 'textbook', None),
              ('infinite', 'variance_reduced', 1 << LOG2_T), ('infinite', 'textbook', 1 << LOG2_T)]
    width = 0.2
    for i, (counter, est, s) in enumerate(groups):
        vals = [next(r['beam_state_bytes_per_key'] for r in rows
                     if r['counter'] == counter and r['estimator'] == est
                     and r['keys_per_shard'] == k and (s is None or r['steps'] == s))
                for k in SHARD_SIZES]
        x = np.arange(len(SHARD_SIZES)) + (i - 1.5) * width
        ax.bar(x, vals, width, label=f'{counter} / {est}')
        for xi, val in zip(x, vals):
            ax.text(xi, val, f'{val:.0f}', ha='center', va='bottom', fontsize=7)
    ax.axhline(1024, color='k', ls='--', lw=1, label='target 1 KiB/key')
    ax.set_xticks(np.arange(len(SHARD_SIZES)))
    ax.set_xticklabels([f'{k} key(s)/shard' for k in SHARD_SIZES])
    ax.set_yscale('log')
    ax.set_ylabel('pickled Beam state bytes per key')
    ax.set_title('Counter state per key at T = 2^20 (PublicShardState via PickleCoder)')
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == '__main__':
    main()
