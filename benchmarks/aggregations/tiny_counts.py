"""Means at tiny counts: what the clamp to [lower, upper] does when the noisy count is near 0.

For n records per key (all at one value x: at the midpoint, or near the upper bound), released
once at the last of T = 30 daily steps (event level, pure ε = 1, the counter 'auto' picks),
with RUNS keys as independent runs of one shard: the RMS error, the bias (mean error) and the
noise (sd) of the released mean, the median reported ``mean_stddev`` (delta method) and how
often the release sits on a bound (clamped). Pure driver, no Beam.

  python benchmarks/aggregations/tiny_counts.py            # writes results/tiny_counts.md
"""

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# pylint: disable=wrong-import-position

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.drivers import mean as ratio
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.privacy_unit import EventLevel

LOWER, UPPER = -60.0, 180.0
STEPS = 30
RUNS = 4000
COUNTS = (0, 1, 3, 10, 30, 100, 300, 1000)
VALUES = (60.0, 170.0)


def measure(n: int, x: float, epsilon: float = 1.0):
    keys = [f'k{i}' for i in range(RUNS)]
    drv = KeyedReleaseDriver(metric='mean', budget=PrivacyBudget(epsilon=epsilon),
                             privacy_unit=EventLevel(),
                             clock=StepClock(0, 1, last_step=STEPS - 1),
                             layout=KeyLayout.of(keys, 1), lower=LOWER, upper=UPPER)
    one = n * np.array(ratio.coordinates('mean', LOWER, UPPER, drv.grid_bits, x))
    contributions = [(np.arange(2 * RUNS, dtype=np.int64), np.tile(one, RUNS))] if n else []
    state, rng = drv.init_shard(0), noise.seeded(17)
    for step in range(STEPS):
        est, state = drv.release_step(0, state, contributions if step == 0 else [],
                                      rng.derive(step))
    sigma = drv.noise_stddev(STEPS - 1)
    values, extra = ratio.finish('mean', LOWER, UPPER, est, sigma)
    err = values - x
    return dict(n=n, x=x, count_sd=sigma, rmse=float(np.sqrt(np.mean(err ** 2))),
                bias=float(np.mean(err)), noise=float(np.std(err)),
                reported_sd=float(np.median(extra[:, 2])),
                clamped=float(np.mean((values <= LOWER) | (values >= UPPER))))


def main():
    rows = [measure(n, x) for x in VALUES for n in COUNTS]
    lines = ['# Means at tiny counts (`python benchmarks/aggregations/tiny_counts.py`)', '',
             f'[{LOWER:g}, {UPPER:g}], event level, ε = 1, T = {STEPS} steps (released at the '
             f'last), {RUNS} runs per row; the count\'s noise sd σ = {rows[0]["count_sd"]:.2f}.',
             '', '| true value | n | RMSE | bias | noise sd | median reported sd | on a bound |',
             '|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['x']:g} | {r['n']} | {r['rmse']:.2f} | {r['bias']:+.2f} | "
                     f"{r['noise']:.2f} | {r['reported_sd']:.2f} | {100 * r['clamped']:.1f}% |")
    text = '\n'.join(lines) + '\n'
    out = pathlib.Path(__file__).resolve().parent / 'results' / 'tiny_counts.md'
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(text)


if __name__ == '__main__':
    main()
