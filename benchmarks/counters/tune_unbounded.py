"""Tunes the node budget of ``UnboundedTreeCounter`` (beam_dp/mechanisms/unbounded_tree.py).

The schedule (a_h for the first node of level h; v_h(E) for the other level-h nodes whose last
step lies in epoch E) is the solution of a convex program: the mean release variance over
t = 1..T is Σ_c C_c(T)·2/w_c² (c: a weight class; C_c(T) the mean number of class-c nodes in the
prefix decompositions of t = 1..T, counted exactly for every t ≤ 2^24), convex in w, and the
privacy constraints (module docstring of unbounded_tree.py: every step's nodes spend ≤ ε) are
linear in w. It minimises R subject to

    mean variance(T) ≤ R · (known-horizon balanced tree's mean variance at horizon T)

for T on a grid of 16 points per octave from 2^4 to 2^24 (counts exact) and of 2 points per
octave from 2^24.5 to 2^40 = MAX_STEPS (counts and the infinite tree's mean variance estimated
from 4000 uniformly drawn steps per T), and, with --vs-infinite F, ≤ the infinite tree's mean
variance / F for 2^10 ≤ T ≤ 2^24. Being convex (in log w), the optimum is global
for the family: the printed R is the best worst-case ratio any per-level, per-epoch budget of
the negative-digit k-ary tree can reach.

    python benchmarks/counters/tune_unbounded.py --k 13 [--tail 0.02] [--vs-infinite 3.1]

prints the ratio, the schedule as a Python literal for unbounded_tree.py (weights rounded down),
and writes results/unbounded_schedule_k<k>.json. Needs scipy (the ``bench`` extra); ~5 min on
the shared VM.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..'))

from beam_dp.mechanisms.counter_selection import counter_variances  # noqa: E402
from beam_dp.mechanisms import InfiniteTreeCounter  # noqa: E402
from beam_dp.mechanisms.balanced_tree import BalancedTreeCounter  # noqa: E402
from beam_dp.mechanisms.balanced_tree import levels_for  # noqa: E402
from beam_dp.mechanisms.balanced_tree import segments  # noqa: E402

TMAX = 2 ** 24
RESULTS = os.path.join(os.path.dirname(__file__), 'results')


def grid(lo=4, hi=24, per_octave=16):
    ts = {int(round(2 ** (e + f / per_octave))) for e in range(lo, hi) for f in range(per_octave)}
    ts.add(2 ** hi)
    return np.array(sorted(t for t in ts if 2 ** lo <= t <= 2 ** hi))


def epochs(x, k):
    out = np.ones(x.shape, dtype=np.int64)
    bound, power = (k - 1) // 2, k
    while True:
        above = x > bound
        if not above.any():
            return out
        out += above
        power *= k
        bound = (power - 1) // 2


def class_counts(k, ts, tmax=TMAX):
    """C[c][i]: Σ_{t ≤ ts[i]} (number of class-c nodes in segments(t)) / ts[i]."""
    levels = levels_for(tmax, k)
    half = (k - 1) // 2
    t = np.arange(1, tmax + 1, dtype=np.int64)
    digits, u = [], t + (k ** levels - 1) // 2
    for _ in range(levels):
        digits.append(u % k - half)
        u = u // k
    counts = {}
    upper = np.zeros_like(t)
    for h in reversed(range(levels)):
        span, d = k ** h, digits[h]
        lower = upper + d * span
        first = np.where(d > 0, upper // span, np.where(d < 0, lower // span, 0))
        for i in range(half):
            used = np.abs(d) > i
            if not used.any():
                break
            j = first + i
            e = epochs((j + 1) * span, k)
            shared = used & (j == 0)
            if shared.any():
                counts[('a', h)] = counts.get(('a', h), 0) + np.cumsum(shared)[ts - 1]
            for epoch in np.unique(e[used & (j > 0)]).tolist():
                mask = used & (j > 0) & (e == epoch)
                key = ('v', h, int(epoch))
                counts[key] = counts.get(key, 0) + np.cumsum(mask)[ts - 1]
        upper = lower
    return levels, {key: c / ts for key, c in counts.items()}


def sampled_counts(k, ts, samples, seed=0):
    """C[c][i] estimated from ``samples`` steps drawn uniformly from 1..ts[i] (for T > 2^24),
    and the infinite tree's mean variance on the same steps."""
    gen = np.random.default_rng(seed)
    infinite = InfiniteTreeCounter(epsilon=1.0)
    counts, inf = {}, []
    for i, horizon in enumerate(ts.tolist()):
        steps = gen.integers(1, horizon + 1, size=samples)
        inf.append(np.mean([infinite.release_variance(int(t)) for t in steps]))
        for t in steps.tolist():
            for h, (first, count, _) in enumerate(segments(t, k, levels_for(t, k))):
                for j in range(first, first + count):
                    key = ('a', h) if j == 0 else ('v', h, levels_for((j + 1) * k ** h, k))
                    counts.setdefault(key, np.zeros(len(ts)))[i] += 1 / samples
    return counts, np.array(inf)


def solve(k, tail, vs_infinite, log2_far=40, samples=4000):
    from scipy.optimize import minimize
    near = grid()
    far = np.array([int(2 ** (e / 2)) for e in range(49, 2 * log2_far + 1)])
    ts = np.concatenate([near, far])
    balanced = np.array([BalancedTreeCounter(horizon=int(t), epsilon=1.0).mean_variance()
                         for t in ts])
    infinite = np.cumsum(counter_variances(InfiniteTreeCounter(epsilon=1.0), TMAX))[near - 1] / near
    _, counts = class_counts(k, near)
    far_counts, far_infinite = sampled_counts(k, far, samples)
    infinite = np.concatenate([infinite, far_infinite])
    L = levels_for(2 ** log2_far, k)
    counts = {key: np.concatenate([counts.get(key, np.zeros(len(near))),
                                   far_counts.get(key, np.zeros(len(far)))])
              for key in set(counts) | set(far_counts)}
    keys = [('a', h) for h in range(L)] + [('v', h, e) for e in range(1, L + 2) for h in range(e)]
    index = {key: i for i, key in enumerate(keys)}
    A = np.zeros((len(ts), len(keys)))
    for key, c in counts.items():
        A[:, index[key]] = 2 * c                    # Laplace variance 2·b², b = 1/w at ε = 1

    def tail_sum(n):                                 # A_n of the schedule, table part + formula
        return (lambda w: sum(w[index[('a', h)]] for h in range(n, L))
                + tail * (L + 1) / (max(n, L) + 1))

    def formula(epoch):                              # v(E) for E ≥ L + 2 (formula epochs)
        return (1 - tail * (L + 1) / epoch) / epoch  # A_{E-1} = tail (L+1)/E for E-1 ≥ L

    cons = []
    for e in range(1, L + 2):
        for top in ('a', 'v'):
            def share(x, e=e, top=top):
                w = np.exp(x[:-1])
                s = sum(w[index[('v', h, e)]] for h in range(e - 1))
                if top == 'a':
                    s += (w[index[('a', e - 1)]] if e - 1 < L
                          else tail * (L + 1) / (e * (e + 1)))
                else:
                    s += w[index[('v', e - 1, e)]]
                return 1 - s - tail_sum(e)(w)
            cons.append({'type': 'ineq', 'fun': share})
    mono = [(index[('v', h, e)], index[('v', h, e + 1)]) for e in range(1, L + 1)
            for h in range(e)]
    cons.append({'type': 'ineq', 'fun': lambda x: np.array([x[i] - x[j] for i, j in mono])})
    last = [index[('v', h, L + 1)] for h in range(L + 1)]
    cons.append({'type': 'ineq', 'fun': lambda x: np.exp(x[last]) - formula(L + 2)})
    cons.append({'type': 'ineq', 'fun': lambda x: x[-1] * balanced - A @ np.exp(-2 * x[:-1])})
    if vs_infinite:
        late = (ts >= 2 ** 10) & (ts <= TMAX)
        cons.append({'type': 'ineq', 'fun': lambda x: (
            infinite[late] / vs_infinite - A[late] @ np.exp(-2 * x[:-1]))})
    x0 = np.append(np.full(len(keys), math.log(0.5 / L)), 100.0)
    res = minimize(lambda x: x[-1], x0, constraints=cons, method='SLSQP',
                   options={'maxiter': 3000, 'ftol': 1e-10})
    w = np.floor(np.exp(res.x[:-1]) * 1e6) / 1e6          # round down: never more budget
    ours = A @ w ** -2.0
    within = ts <= TMAX
    shared = tuple(float(w[index[('a', h)]]) for h in range(L))
    table = tuple(tuple(float(w[index[('v', h, e)]]) for h in range(e)) for e in range(1, L + 2))
    return dict(k=k, tail=tail, success=bool(res.success), message=res.message,
                max_ratio_vs_balanced=float((ours / balanced)[within].max()),
                worst_t=int(ts[within][(ours / balanced)[within].argmax()]),
                min_gain_vs_infinite_2_10_2_24=float(
                    (infinite / ours)[within & (ts >= 1024)].min()),
                beyond_2_24=[dict(t=int(t), vs_balanced=float(r), vs_infinite=float(g))
                             for t, r, g in zip(ts[~within], (ours / balanced)[~within],
                                                (infinite / ours)[~within])],
                shared=shared, table=table)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--k', type=int, default=13)
    parser.add_argument('--tail', type=float, default=0.005)
    parser.add_argument('--vs-infinite', type=float, default=0.0)
    args = parser.parse_args()
    out = solve(args.k, args.tail, args.vs_infinite)
    print(json.dumps({key: val for key, val in out.items() if key not in ('shared', 'table')},
                     indent=1))
    print(f'_register(Schedule(\n    k={out["k"]}, tail={out["tail"]},\n    shared={out["shared"]},'
          f'\n    table=(')
    for row in out['table']:
        print(f'        {row},')
    print('    )))')
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f'unbounded_schedule_k{args.k}.json'), 'w') as f:
        json.dump(out, f, indent=1)


if __name__ == '__main__':
    main()
