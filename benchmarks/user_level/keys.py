"""Continual private key selection vs PipelineDP's batch partition selection (issue 23 item 3).

The page-view stream of issue 23: 2,000 users, 40 Zipf-popular pages (s = 1) and 20 pages with a
single user each, 24 hourly steps. Each user makes 1 + Poisson(4) views, each at a uniform hour
on a Zipf page; ``solo_page<i>`` is viewed once by its own user. User level K = 3, m = 2, S = 3
(the counts' bounds; the selection counts distinct users once per key, so only K matters),
selection (ε, δ) = (1, 1e-6).

* beam_dp: ``ContinualCountPerKey(keys=PrivateKeys(...), privacy_unit=UserLevel(K=3, m=2, S=3),
  end=24 h)``'s private-keys shards (``KeyedReleaseDriver.private_shard``), driven without Beam
  on the records bounded as 'BoundPerUnit' bounds them (first K keys of a user in time order),
  over ``--seeds`` noise seeds. ``final_share=0.9`` (the default with a known end) and
  ``final_share=0`` (the continual SVT alone: the behaviour before issue 23).
* PipelineDP 0.3.1: ``DPEngine.select_partitions`` (LocalBackend, truncated geometric,
  max_partitions_contributed = 3) on the same rows, ``--seeds`` runs (its noise is pydp's, not
  seedable), and its exact expectation (Σ probability_of_keep over the pages after its
  bounding is not exact: it samples K pages per user, so the mean over runs is the figure).

Run: python benchmarks/user_level/keys.py   (writes results/keys.json and results/keys.png)
"""

import argparse
import json
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
# pylint: disable=wrong-import-position

from beam_dp import noise
from beam_dp.accounting import PrivacyBudget
from beam_dp.analysis import units_needed
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.privacy_unit import UserLevel
from beam_dp.transforms.continual import ContinualCountPerKey

OUT = pathlib.Path(__file__).resolve().parent / 'results'
USERS, PAGES, SOLO, STEPS, HOUR = 2000, 40, 20, 24, 3600
K, M, S = 3, 2, 3
EPS, DELTA = 1.0, 1e-6


def page_views(seed: int = 0):
    """[(hour, user, page)] sorted by hour (then user, page): the stream of the issue."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, PAGES + 1)
    w /= w.sum()
    rows = []
    for u in range(USERS):
        for _ in range(rng.poisson(4) + 1):
            rows.append((int(rng.integers(STEPS)), f'u{u}', f'page{rng.choice(PAGES, p=w):02d}'))
    for i in range(SOLO):
        rows.append((int(rng.integers(STEPS)), f'solo{i}', f'solo_page{i:02d}'))
    rows.sort()
    return rows


def bounded_steps(rows):
    """Per step {page: ((kept records,), new distinct users)}: 'BoundPerUnit' on the rows in
    time order (first K pages per user, S steps per (user, page), m records per step)."""
    keys, steps_used, per_step = {}, {}, [dict() for _ in range(STEPS)]
    for hour, user, page in rows:
        held = keys.setdefault(user, [])
        first = page not in held
        if first and len(held) >= K:
            continue
        used = steps_used.setdefault((user, page), {})
        if hour not in used and len(used) >= S:
            continue
        if used.get(hour, 0) >= M:
            continue
        used[hour] = used.get(hour, 0) + 1
        if first:
            held.append(page)
        records, new = per_step[hour].get(page, ((0,), 0))
        per_step[hour][page] = ((records[0] + 1,), new + int(first))
    return per_step


def distinct_users(per_step):
    out = {}
    for step in per_step:
        for page, (_, new) in step.items():
            out[page] = out.get(page, 0) + new
    return out


def beam_dp_run(per_step, final_share: float, seed: int):
    """Keys released (first release step per key) by the private-keys shards."""
    keys = PrivateKeys(PrivacyBudget(epsilon=EPS, delta=DELTA), num_shards=1,
                       final_share=final_share)
    t = ContinualCountPerKey(keys=keys, budget=PrivacyBudget(epsilon=1.0), start=0, step=HOUR,
                             end=STEPS * HOUR, privacy_unit=UserLevel(
                                 unit_fn=lambda r: r[1], max_keys_per_unit=K,
                                 max_contributions_per_step=M, max_steps_per_unit=S))
    shard = t.driver.private_shard
    state, first = shard.init_state(), {}
    rng = noise.seeded(seed).derive('Keys')
    for step in range(STEPS):
        out, state = shard.release_step(state, per_step[step], rng)
        for key, _, _ in out:
            first.setdefault(key, step)
    return first


def pipelinedp_run(rows):
    import pipeline_dp  # pylint: disable=import-outside-toplevel
    engine = pipeline_dp.DPEngine(pipeline_dp.NaiveBudgetAccountant(EPS, DELTA),
                                  pipeline_dp.LocalBackend())
    params = pipeline_dp.SelectPartitionsParams(max_partitions_contributed=K)
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[1],
                                            partition_extractor=lambda r: r[2])
    result = engine.select_partitions(rows, params, extractors)
    engine._budget_accountant.compute_budgets()  # pylint: disable=protected-access
    return set(result)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seeds', type=int, default=50)
    ap.add_argument('--data-seed', type=int, default=0)
    args = ap.parse_args()
    t0 = time.time()
    rows = page_views(args.data_seed)
    per_step = bounded_steps(rows)
    truth = distinct_users(per_step)
    pages = [p for p in truth if p.startswith('page')]
    solos = [p for p in truth if p.startswith('solo')]
    res = {'config': dict(users=USERS, zipf_pages=PAGES, solo_pages=SOLO, steps=STEPS, K=K, m=M,
                          S=S, epsilon=EPS, delta=DELTA, seeds=args.seeds,
                          data_seed=args.data_seed, records=len(rows)),
           'distinct_users_per_page': dict(sorted(truth.items()))}
    for name, share in (('beam_dp_final_share_0.9', 0.9), ('beam_dp_svt_only', 0.0)):
        released_by_step = np.zeros((args.seeds, STEPS))
        solo_hits = 0
        for seed in range(args.seeds):
            first = beam_dp_run(per_step, share, seed)
            for key, step in first.items():
                if key in pages:
                    released_by_step[seed, step:] += 1
            solo_hits += sum(1 for k in first if k in solos)
        res[name] = dict(final_share=share,
                         mean_pages_released=float(released_by_step[:, -1].mean()),
                         min_pages_released=int(released_by_step[:, -1].min()),
                         mean_released_by_step=released_by_step.mean(axis=0).tolist(),
                         solo_pages_released=solo_hits, solo_trials=SOLO * args.seeds,
                         units_needed_p50=units_needed(0.5, EPS, DELTA, K, steps=STEPS,
                                                       final_share=share),
                         units_needed_p90=units_needed(0.9, EPS, DELTA, K, steps=STEPS,
                                                       final_share=share))
    try:
        from pydp.algorithms import partition_selection as ps  # pylint: disable=import-outside-toplevel
        import pipeline_dp  # pylint: disable=import-outside-toplevel,unused-import
        counts, solo_hits = [], 0
        for _ in range(args.seeds):
            kept = pipelinedp_run(rows)
            counts.append(sum(1 for k in kept if k in pages))
            solo_hits += sum(1 for k in kept if k in solos)
        strat = ps.create_truncated_geometric_partition_strategy(EPS, DELTA, K)
        res['pipelinedp'] = dict(
            version='pipeline-dp 0.3.1', mean_pages_released=float(np.mean(counts)),
            min_pages_released=int(np.min(counts)), solo_pages_released=solo_hits,
            solo_trials=SOLO * args.seeds,
            expected_on_beam_dp_bounding=float(sum(strat.probability_of_keep(truth[p])
                                                   for p in pages)),
            smallest_n_p50=min(n for n in range(1, 1000) if strat.probability_of_keep(n) >= 0.5))
    except ImportError:
        res['pipelinedp'] = 'not installed (pip install pipeline-dp==0.3.1)'
    if isinstance(res['pipelinedp'], dict):
        res['ratio_final_share_0.9_vs_pipelinedp'] = (
            res['beam_dp_final_share_0.9']['mean_pages_released']
            / res['pipelinedp']['mean_pages_released'])
        res['ratio_svt_only_vs_pipelinedp'] = (res['beam_dp_svt_only']['mean_pages_released']
                                               / res['pipelinedp']['mean_pages_released'])
    res['seconds'] = round(time.time() - t0, 1)
    OUT.mkdir(exist_ok=True)
    (OUT / 'keys.json').write_text(json.dumps(res, indent=1))
    plot(res)
    print(json.dumps({k: v for k, v in res.items() if k != 'distinct_users_per_page'
                      and not isinstance(v, dict)}, indent=1))
    for name in ('beam_dp_final_share_0.9', 'beam_dp_svt_only', 'pipelinedp'):
        r = res[name]
        if isinstance(r, dict):
            print(name, {k: v for k, v in r.items() if k != 'mean_released_by_step'})


def plot(res):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = np.arange(1, STEPS + 1)
    for name, label in (('beam_dp_final_share_0.9', 'beam_dp, known end (final_share=0.9)'),
                        ('beam_dp_svt_only', 'beam_dp, continual SVT only (before)')):
        ax.step(steps, res[name]['mean_released_by_step'], where='post', label=label)
    if isinstance(res['pipelinedp'], dict):
        ax.axhline(res['pipelinedp']['mean_pages_released'], color='k', ls='--',
                   label='PipelineDP 0.3.1 batch (whole day)')
    ax.set_xlabel('hour (step)')
    ax.set_ylabel('Zipf pages released (of 40), mean')
    ax.set_title('Private key selection, K=3, ε=1, δ=1e-6')
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / 'keys.png', dpi=110)


if __name__ == '__main__':
    main()
