"""Issue 24: the unbounded pure-ε counter (``UnboundedTreeCounter``) against the known-horizon
negative-digit tree (``BalancedTreeCounter`` built for horizon T, best k) and today's infinite
tree (``InfiniteTreeCounter``, variance-reduced), ε = 1, sensitivity 1, per bin.

* closed form: the mean release variance over t = 1..T for T = 2^4 .. 2^24 (every power of two,
  and the worst ratio over a grid of 16 points per octave), from each counter's exact closed form;
* simulation: the empirical release variance at a few t (``--sim-bins`` independent bins) over
  the closed form;
* state: bytes per key (d = 1) of real states from t = 2^24 − 2000 to 2^24 + 2000 (the run
  starts from the state at 2^24 − 2000, built node by node exactly as ``step`` holds it), and the
  worst case at 2^24 (every level in a full subtracted run);
* cost per step (wall time, d = 1) of the three counters in the same process.

    python benchmarks/counters/unbounded.py [--quick]

writes results/unbounded.json, results/unbounded.md and results/unbounded.png (matplotlib).
"""

import argparse
import json
import math
import os
import pickle
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..'))

from beam_dp import noise  # noqa: E402
from beam_dp.analysis import counter_variances  # noqa: E402
from beam_dp.mechanisms import BalancedTreeCounter  # noqa: E402
from beam_dp.mechanisms import InfiniteTreeCounter  # noqa: E402
from beam_dp.mechanisms import UnboundedTreeCounter  # noqa: E402
from beam_dp.mechanisms import _dyadic  # noqa: E402
from beam_dp.mechanisms.balanced_tree import levels_for  # noqa: E402
from beam_dp.mechanisms.balanced_tree import segments  # noqa: E402
from beam_dp.mechanisms.unbounded_tree import UnboundedTreeState  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), 'results')


def grid(hi, per_octave=16):
    ts = {int(round(2 ** (e + f / per_octave))) for e in range(4, hi) for f in range(per_octave)}
    ts.add(2 ** hi)
    return np.array(sorted(t for t in ts if 16 <= t <= 2 ** hi))


def closed_form(log2_max):
    tmax = 2 ** log2_max
    ours = UnboundedTreeCounter(epsilon=1.0)
    mean_ours = np.cumsum(ours.variances(tmax))
    mean_inf = np.cumsum(counter_variances(InfiniteTreeCounter(epsilon=1.0), tmax))
    ts = grid(log2_max)
    rows = []
    for t in ts.tolist():
        balanced = BalancedTreeCounter(horizon=t, epsilon=1.0)
        rows.append(dict(t=t, balanced_k=balanced.k, balanced=balanced.mean_variance(),
                         unbounded=mean_ours[t - 1] / t, infinite=mean_inf[t - 1] / t))
    for r in rows:
        r['unbounded_over_balanced'] = r['unbounded'] / r['balanced']
        r['infinite_over_balanced'] = r['infinite'] / r['balanced']
        r['infinite_over_unbounded'] = r['infinite'] / r['unbounded']
    return rows


def _state_at(m, t, rng):
    """The state ``step`` holds after t steps of value 1 (d = 1): the runs of segments(t), and
    per level the noise sum of an added run or the node noises of a subtracted one (each node
    drawn from its own address, as ``step`` draws it)."""
    runs = segments(t, m.k, levels_for(t, m.k))
    rows = []
    for h, (first, count, sign) in enumerate(runs):
        drawn = m._draw(h, first, count, rng)
        rows.append(drawn.sum(axis=0, keepdims=True) if sign > 0 else (
            drawn if sign < 0 else drawn[:0]))
    return UnboundedTreeState(t, _dyadic.readonly(np.array([t], dtype=np.int64)),
                              _dyadic.readonly(np.array(runs, dtype=np.int64)),
                              _dyadic.readonly(np.concatenate(rows)))


def state_sizes(log2_t, around):
    m = UnboundedTreeCounter(epsilon=1.0)
    rng = noise.seeded(3)
    state = _state_at(m, 2 ** log2_t - around, rng)
    biggest, pickled = state.nbytes(), len(pickle.dumps(state))
    for _ in range(2 * around):
        _, state = m.step(state, [1], rng)
        biggest = max(biggest, state.nbytes())
        pickled = max(pickled, len(pickle.dumps(state)))
    levels = levels_for(2 ** log2_t, m.k)
    worst = 8 + 8 + levels * 3 * 8 + levels * (m.k - 1) // 2 * 8
    return dict(t=2 ** log2_t, levels=levels, max_nbytes=biggest, max_pickled=pickled,
                worst_nbytes=worst, steps_measured=2 * around)


def simulation(ts, bins, seed=5):
    m = UnboundedTreeCounter(epsilon=1.0, dimension=bins)
    state, rng = m.init_state(), noise.seeded(seed)
    out, wanted = [], set(ts)
    for t in range(1, max(ts) + 1):
        release, state = m.step(state, np.zeros(bins, dtype=np.int64), rng.derive(t))
        if t in wanted:
            x = np.asarray(release, dtype=float)
            emp = float(np.var(x))
            kurtosis = float(np.mean((x - x.mean()) ** 4)) / emp ** 2
            closed = m.release_variance(t)
            # sd of a sample variance over its mean: √((kurtosis − 1)/n) (Laplace sums are
            # heavy-tailed: kurtosis up to 6, not the Gaussian 3).
            out.append(dict(t=t, empirical=emp, closed_form=closed, ratio=emp / closed,
                            ratio_sd=math.sqrt((kurtosis - 1) / bins)))
    return out


def cost_per_step(steps):
    counters = {'unbounded_tree': UnboundedTreeCounter(epsilon=1.0),
                'balanced_tree[T=2^20]': BalancedTreeCounter(horizon=2 ** 20, epsilon=1.0),
                'infinite_tree': InfiniteTreeCounter(epsilon=1.0)}
    out = {}
    for name, m in counters.items():
        state, rng = m.init_state(), noise.seeded(1)
        start = time.process_time()
        for t in range(steps):
            _, state = m.step(state, [1], rng.derive(t))
        out[name] = (time.process_time() - start) / steps * 1e6
    return out


def plot(rows, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    t = [r['t'] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, label in (('balanced', 'balanced tree, horizon T known'),
                       ('unbounded', 'unbounded tree (no horizon)'),
                       ('infinite', 'infinite tree (no horizon, today)')):
        a.loglog(t, [math.sqrt(r[key]) for r in rows], label=label, base=2)
    a.set_xlabel('T'); a.set_ylabel('RMSE over t = 1..T (ε = 1)'); a.legend(); a.grid(alpha=.3)
    b.semilogx(t, [r['unbounded_over_balanced'] for r in rows], label='unbounded / balanced',
               base=2)
    b.semilogx(t, [r['infinite_over_balanced'] for r in rows], label='infinite / balanced',
               base=2)
    b.axhline(2, color='grey', ls=':', label='2× (issue target)')
    b.set_xlabel('T'); b.set_ylabel('mean-variance ratio to the known-horizon tree')
    b.legend(); b.grid(alpha=.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(result, command):
    lines = [f'# Unbounded pure-ε counter (issue 24): recorded run', '', f'`{command}`', '',
             'Mean release variance over t = 1..T (ε = 1, per bin), closed form.', '',
             '| T | balanced (k) | unbounded | infinite | unbounded / balanced | '
             'infinite / balanced | infinite / unbounded |', '|---|---|---|---|---|---|---|']
    for r in result['closed_form']:
        if r['t'] & (r['t'] - 1) == 0:
            lines.append(f"| 2^{r['t'].bit_length() - 1} | {r['balanced']:.1f} "
                         f"({r['balanced_k']}) | {r['unbounded']:.1f} | {r['infinite']:.1f} | "
                         f"{r['unbounded_over_balanced']:.2f} | {r['infinite_over_balanced']:.2f}"
                         f" | {r['infinite_over_unbounded']:.2f} |")
    s = result['summary']
    lines += ['', f"Grid of 16 points per octave, T = 16 .. 2^{result['log2_max']}: unbounded / "
              f"balanced {s['min_unbounded_over_balanced']:.2f}–"
              f"{s['max_unbounded_over_balanced']:.2f} (worst at T = "
              f"{s['worst_t_vs_balanced']}); infinite / unbounded over T ∈ [2^10, 2^"
              f"{result['log2_max']}]: ≥ {s['min_infinite_over_unbounded_from_2_10']:.2f}.", '',
              'Simulation (empirical variance of the release / closed form):', '',
              '| t | closed form | empirical | ratio (± 1 sd) |', '|---|---|---|---|']
    for r in result['simulation']:
        lines.append(f"| {r['t']} | {r['closed_form']:.1f} | {r['empirical']:.1f} | "
                     f"{r['ratio']:.3f} (± {r['ratio_sd']:.3f}) |")
    st = result['state']
    lines += ['', f"State per key (d = 1) around t = 2^{st['t'].bit_length() - 1} "
              f"({st['levels']} levels, {st['steps_measured']} real steps): max "
              f"{st['max_nbytes']} B of arrays, {st['max_pickled']} B pickled; worst case "
              f"{st['worst_nbytes']} B.", '', 'CPU time per step (d = 1, same process, '
              'shared 2-vCPU VM under load: read the ratios):', '']
    for name, us in result['cost_us_per_step'].items():
        lines.append(f'* {name}: {us:.0f} µs')
    return '\n'.join(lines) + '\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='T ≤ 2^16, fewer bins and steps')
    parser.add_argument('--sim-bins', type=int, default=12000)
    args = parser.parse_args()
    log2_max = 16 if args.quick else 24
    rows = closed_form(log2_max)
    far = [r for r in rows if r['t'] >= 2 ** 10]
    worst = max(rows, key=lambda r: r['unbounded_over_balanced'])
    result = dict(
        log2_max=log2_max, closed_form=rows,
        summary=dict(max_unbounded_over_balanced=worst['unbounded_over_balanced'],
                     worst_t_vs_balanced=worst['t'],
                     min_unbounded_over_balanced=min(r['unbounded_over_balanced'] for r in rows),
                     min_infinite_over_unbounded_from_2_10=min(
                         r['infinite_over_unbounded'] for r in far)),
        simulation=simulation((16, 100, 1000, 4096) if args.quick else
                              (16, 100, 1000, 2197), args.sim_bins),
        state=state_sizes(log2_max, 200 if args.quick else 2000),
        cost_us_per_step=cost_per_step(2000 if args.quick else 20000))
    command = 'python benchmarks/counters/unbounded.py' + (' --quick' if args.quick else '')
    tag = '_quick' if args.quick else ''
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f'unbounded{tag}.json'), 'w') as f:
        json.dump(dict(result, command=command), f, indent=1)
    text = markdown(result, command)
    with open(os.path.join(RESULTS, f'unbounded{tag}.md'), 'w') as f:
        f.write(text)
    try:
        plot(rows, os.path.join(RESULTS, f'unbounded{tag}.png'))
    except ImportError:
        print('matplotlib not installed (pip install -e .[bench]): no plot')
    print(text)


if __name__ == '__main__':
    main()
