"""ERM benchmark: Watson et al. continual / sliding-window release vs the independent-block
baseline vs DP-FTRL on beam_dp's counters, at equal privacy (see README.md).

    .venv/bin/python -m benchmarks.erm.run            # ~7 min on a shared box; results.json
    .venv/bin/python -m benchmarks.erm.run --extra    # + DP-FTRL on the infinite tree and BLT
    .venv/bin/python -m benchmarks.erm.run --part=gauss   # only the stationary-mixture sweep

Every Watson-style model goes through the real pure driver (``ERMStreamDriver.add`` + ``close_through`` in one pass, ``_one_pass``):
records timestamped by block, blocks padded to n_max, models noised and ledger-checked.
Accuracy = test accuracy of each *published* model; per run we keep the mean over releases and
the final release; tables show the median over seeds.
"""

import json
import math
import pathlib
import sys
import time
from typing import NamedTuple

import numpy as np

from beam_dp import noise
from beam_dp.drivers.erm import ERMStreamDriver
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import ContinualReleaseSchedule
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import IndependentBlocks
from beam_dp.mechanisms.erm import RunningCombination
from beam_dp.mechanisms.erm import SlidingWindowChain
from beam_dp.mechanisms.erm import SoftmaxCrossEntropy
from beam_dp.mechanisms.erm import clip_features
from benchmarks.erm import streams
from benchmarks.erm.dpftrl import run_dpftrl

HERE = pathlib.Path(__file__).resolve().parent
INF = math.inf
EPSILONS = (0.1, 1.0, 10.0, 100.0, INF)
SEEDS = (0, 1, 2, 3, 4)


def reference(driver, stream, inputs, rng, until_block=None):
    """The driver's one pass over ('record', micros, x, y) / ('watermark', micros) inputs
    (the Beam job's reference is ``beam_dp.testing.replay`` of ``ERMLoop``; the same
    releases): an object with ``events``."""
    state, events, last_seen = driver.init_state(), [], -1
    for item in inputs:
        if item[0] == 'watermark':
            through = driver.last_final_block(int(item[1]))
            if through >= state.next_block:
                out, state = driver.close_through(state, through, rng, stream)
                events.extend(out)
            continue
        state, bad = driver.add(state, [tuple(item[1:])])
        if not bad:
            last_seen = max(last_seen, driver.clock.step_of(item[1]))
    final = last_seen if until_block is None else until_block
    if final >= state.next_block:
        out, state = driver.close_through(state, final, rng, stream)
        events.extend(out)
    return _OnePass(tuple(events))


class _OnePass(NamedTuple):
    events: tuple


def _design(x):
    return clip_features(np.hstack([x, np.ones((len(x), 1))]), 1.0)


def watson_events(stream, schedule, psgd, b0, seed, update_psgd=None):
    """Every ``ReleaseEvent`` (published or not) of the driver's reference run."""
    d = stream.x.shape[1]
    mech = ERMRelease(schedule, psgd, b0, d + 1, update_psgd=update_psgd)
    driver = ERMStreamDriver(mech, d)
    inputs = [('record', i // b0, stream.x[i], int(stream.y[i])) for i in range(len(stream.y))]
    return reference(driver, stream.name, inputs, noise.seeded(seed),
                     until_block=len(stream.y) // b0 - 1).events


def watson(stream, schedule, psgd, b0, seed, update_psgd=None):
    """[(block t−1, weights)] of the published models, via the driver's reference run."""
    return [(e.t - 1, np.asarray(e.model.weights))
            for e in watson_events(stream, schedule, psgd, b0, seed, update_psgd)
            if e.job.publish]


def inverse_variance_mean(events):
    """[(block, weights)]: after each published model, the inverse-variance weighted mean of all
    published so far (``RunningCombination('chain')``: each release's noise plus its centres';
    public noise scales only, so post-processing)."""
    scales = {e.job.job_id: (e.model.noise_scale, e.job.center) for e in events}
    run, out = RunningCombination('chain'), []
    for e in events:
        if e.job.publish:
            run = run.add(e.model, scales)
            out.append((e.t - 1, run.average()))
    return out


def final_chain(stream, schedule, psgd, b0, seed, update_psgd=None):
    """The noise budget of the last published model: for it and every centre it rests on,
    (job, records n, eps_noise, μ, E‖ν‖ = d·b), plus ‖w‖ of the same run at ε = ∞."""
    d = stream.x.shape[1]
    mech = ERMRelease(schedule, psgd, b0, d + 1, update_psgd=update_psgd)
    inputs = [('record', i // b0, stream.x[i], int(stream.y[i])) for i in range(len(stream.y))]
    res = reference(ERMStreamDriver(mech, d), stream.name, inputs, noise.seeded(seed),
                    until_block=len(stream.y) // b0 - 1)
    by_id = {e.job.job_id: e for e in res.events}
    event, chain = [e for e in res.events if e.job.publish][-1], []
    while event is not None:
        opt = psgd if event.job.center is None or update_psgd is None else update_psgd
        chain.append({'job': event.job.job_id, 'n': event.model.n_nominal,
                      'eps_noise': event.job.eps_noise, 'mu': opt.mu,
                      'noise_norm': mech.n_params * event.model.noise_scale})
        event = by_id.get(event.job.center)
    return chain


def arithmetic(stream, b0, mu, passes, batch, configs):
    """Noise norm vs weight norm of the final release at ε = 100 (seed 0), per config."""
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=stream.num_classes)
    psgd = PSGD(loss, mu=mu, passes=passes, batch_size=batch)
    out = {}
    for name, (blocks_per_base, base_fraction, update_mu) in configs.items():
        update = None if update_mu is None else PSGD(loss, mu=update_mu, passes=passes,
                                                      batch_size=batch)
        w_inf = watson(stream, ContinualReleaseSchedule(blocks_per_base, INF, base_fraction),
                       psgd, b0, 0, update)[-1][1]
        out[name] = {'chain': final_chain(stream, ContinualReleaseSchedule(
            blocks_per_base, 100.0, base_fraction), psgd, b0, 0, update),
            'weight_norm_eps_inf': float(np.linalg.norm(w_inf))}
    x = _design(stream.x)
    n = len(stream.y) // b0 * b0
    w = psgd.train(x[:n], stream.y[:n], n, None, noise.seeded(0))
    out['cumulative_oneshot'] = {'chain': [{
        'job': 'oneshot', 'n': n, 'eps_noise': 100.0, 'mu': mu,
        'noise_norm': loss.n_params(x.shape[1]) * psgd.sensitivity(n) / 100.0}],
        'weight_norm_eps_inf': float(np.linalg.norm(w))}
    return out


def running_mean(models):
    out, total = [], None
    for n, (b, w) in enumerate(models, 1):
        total = w.copy() if total is None else total + w
        out.append((b, total / n))
    return out


def ftrl(stream, loss, b0, eps, seed, noise_kind, mu, inv_eta, counter='tree', batch=16,
         l1_bound='cauchy_schwarz'):
    """DP-FTRL models per block. Defaults: the earlier rows (binary tree, 16 records per step,
    L₁ = √D·L); the new rows pass counter='auto', batch=None (one step per block) and
    l1_bound='loss'."""
    x = _design(stream.x)
    nb = len(stream.y) // b0
    xb = [x[i * b0:(i + 1) * b0] for i in range(nb)]
    yb = [stream.y[i * b0:(i + 1) * b0] for i in range(nb)]
    ws = run_dpftrl(loss, xb, yb, b0, eps, noise.seeded(seed).derive('ftrl'), mu=mu,
                    inv_eta=inv_eta, noise=noise_kind, counter=counter, batch=batch,
                    l1_bound=l1_bound)
    return list(enumerate(ws))


def score(stream, loss, models, from_block=0, common_from=None):
    """final / mean accuracy of the models at blocks ≥ from_block; 'mean_common': the mean
    over blocks ≥ common_from (the blocks at which every method has released: Alg 4 starts at
    block B/b0 − 1)."""
    tests = [(_design(tx), ty) for tx, ty in zip(stream.test_x, stream.test_y)]
    accs = [loss.accuracy(w, *tests[stream.regime(b)]) for b, w in models if b >= from_block]
    out = {'mean': float(np.mean(accs)), 'final': float(accs[-1]), 'releases': len(accs),
           'curve': [[int(b), float(loss.accuracy(w, *tests[stream.regime(b)]))]
                     for b, w in models]}
    if common_from is not None:
        out['mean_common'] = float(np.mean([a for b, a in out['curve'] if b >= common_from]))
    return out


def methods(stream, eps, seed, b0, blocks_per_base, mu, passes, batch, which, ftrl_params,
            base_fraction=0.5, update_mu=None):
    loss = SoftmaxCrossEntropy(clip_norm=1.0, num_classes=stream.num_classes)
    psgd = PSGD(loss, mu=mu, passes=passes, batch_size=batch)
    update = None if update_mu is None else PSGD(loss, mu=update_mu, passes=passes,
                                                  batch_size=batch)
    out = {}
    if 'continual' in which:
        events = watson_events(stream, ContinualReleaseSchedule(
            blocks_per_base, eps, base_fraction), psgd, b0, seed, update)
        models = [(e.t - 1, np.asarray(e.model.weights)) for e in events if e.job.publish]
        out['continual'] = models
        out['continual+avg'] = running_mean(models)
        out['continual+ivw'] = inverse_variance_mean(events)
    if 'continual_spec' in which:      # spec §9 suggestion: B = 4·b0, ½/½, one μ
        models = watson(stream, ContinualReleaseSchedule(4, eps), psgd, b0, seed)
        out['continual (B=4·b0, ½/½, one μ)'] = models
    if 'independent' in which:
        models = watson(stream, IndependentBlocks(eps), psgd, b0, seed)
        out['independent'] = models
        out['independent+avg'] = running_mean(models)
    if 'sliding' in which:
        out['sliding'] = watson(stream, SlidingWindowChain(3, eps), psgd, b0, seed, update)
    if 'ftrl' in which:
        out['ftrl_laplace'] = ftrl(stream, loss, b0, eps, seed, 'laplace', *ftrl_params)
        out['ftrl_gauss_zcdp'] = ftrl(stream, loss, b0, eps, seed, 'gaussian', *ftrl_params)
    if 'ftrl_best' in which:       # the library's best pure-ε counters, tight L₁ (README)
        out['ftrl_laplace_balanced'] = ftrl(stream, loss, b0, eps, seed, 'laplace',
                                            *ftrl_params, counter='balanced')
        out['ftrl_laplace_auto (16/step)'] = ftrl(stream, loss, b0, eps, seed, 'laplace',
                                                  *ftrl_params, counter='auto',
                                                  l1_bound='loss')
        models = ftrl(stream, loss, b0, eps, seed, 'laplace', *ftrl_params, counter='auto',
                      batch=None, l1_bound='loss')
        out['ftrl_laplace_auto'] = models
        out['ftrl_laplace_auto+avg'] = running_mean(models)
    if 'ftrl_more' in which:
        out['ftrl_laplace_infinite'] = ftrl(stream, loss, b0, eps, seed, 'laplace',
                                            *ftrl_params, counter='infinite')
        out['ftrl_laplace_infinite (L₁, 1 step/block)'] = ftrl(
            stream, loss, b0, eps, seed, 'laplace', *ftrl_params, counter='infinite',
            batch=None, l1_bound='loss')
        out['ftrl_blt_zcdp'] = ftrl(stream, loss, b0, eps, seed, 'gaussian', *ftrl_params,
                                    counter='blt')
    if 'oneshot' in which:
        x = _design(stream.x)
        n = len(stream.y) // b0 * b0
        m = psgd.release(x[:n], stream.y[:n], n, eps, noise.seeded(seed).derive('oneshot'), 'all')
        out['cumulative_oneshot'] = [(n // b0 - 1, np.asarray(m.weights))]
    return loss, out


def sweep(name, make_stream, epsilons, seeds, from_block=0, **kw):
    rows = {}
    common = max(from_block, kw['blocks_per_base'] - 1)
    for eps in epsilons:
        for seed in seeds:
            stream = make_stream(seed)
            loss, out = methods(stream, eps, seed, **kw)
            for method, models in out.items():
                oneshot = method == 'cumulative_oneshot'
                rows.setdefault(method, {}).setdefault(str(eps), []).append(
                    score(stream, loss, models, 0 if oneshot else from_block,
                          None if oneshot else common))
        print(f'  {name} eps={eps} done', flush=True)
    return rows


def median_table(rows, key):
    return {m: {e: float(np.median([r[key] for r in runs])) for e, runs in per.items()}
            for m, per in rows.items()}


def extra():
    """Adds DP-FTRL on the infinite-horizon tree (ε-DP; also with the loss's L₁ bound and one
    step per block) and on BLT (ρ = ε²/2) to results.json."""
    results = json.loads((HERE / 'results.json').read_text())
    digits = sweep('digits', streams.digits, EPSILONS, SEEDS, b0=64, blocks_per_base=8,
                   mu=0.01, passes=10, batch=4, ftrl_params=(0.002, 2.0), which=('ftrl_more',))
    gauss = sweep('gauss', lambda s: streams.gaussian_stream(s, 32, 512), EPSILONS, SEEDS[:3],
                  b0=512, blocks_per_base=8, mu=0.2, passes=3, batch=16,
                  ftrl_params=(0.2, 2.0), which=('ftrl_more',))
    drift = sweep('drift', lambda s: streams.gaussian_stream(s, 44, 128, drift_block=20),
                  (1.0, 10.0, 100.0, INF), SEEDS[:3], from_block=34, b0=128, blocks_per_base=4,
                  mu=0.2, passes=3, batch=16, ftrl_params=(0.2, 2.0), which=('ftrl_more',))
    for name, rows in (('digits_eps', digits), ('gauss_eps', gauss), ('drift_eps', drift)):
        results[name].update(rows)
    (HERE / 'results.json').write_text(json.dumps(results, indent=1))


def gauss():
    print('synthetic stationary: 4-class mixture d=20, b0=512, B=8*b0, 32 blocks, update '
          'mu=2', flush=True)
    return sweep(
        'gauss', lambda s: streams.gaussian_stream(s, 32, 512), EPSILONS, SEEDS[:3], b0=512,
        blocks_per_base=8, mu=0.2, passes=3, batch=16, ftrl_params=(0.2, 2.0), update_mu=2.0,
        which=('continual', 'independent', 'ftrl', 'ftrl_best'))


def drift_sweep():
    drift, window = 20, 7
    print(f'synthetic drift at block {drift}: b0=128, 44 blocks, sliding k=3', flush=True)
    return sweep(
        'drift', lambda s: streams.gaussian_stream(s, 44, 128, drift_block=drift),
        (1.0, 10.0, 100.0, INF), SEEDS[:3], from_block=drift + 2 * window, b0=128,
        blocks_per_base=4, mu=0.2, passes=3, batch=16, ftrl_params=(0.2, 2.0),
        which=('continual', 'independent', 'sliding', 'ftrl', 'ftrl_best'))


def main():
    if '--extra' in sys.argv:
        return extra()
    parts = {'--part=gauss': ('gauss_eps', gauss), '--part=drift': ('drift_eps', drift_sweep)}
    for flag, (key, part) in parts.items():
        if flag in sys.argv:        # re-runs one sweep (seeded: same numbers as a full run)
            results = json.loads((HERE / 'results.json').read_text())
            results[key].update(part())
            (HERE / 'results.json').write_text(json.dumps(results, indent=1))
            return None
    t0 = time.time()
    results = {}
    ftrl_digits = (0.002, 2.0)
    digits_cfg = dict(b0=64, blocks_per_base=8, mu=0.01, passes=10, batch=4, base_fraction=0.75,
                      update_mu=1.0, ftrl_params=ftrl_digits)
    print('digits: accuracy vs epsilon (b0=64, B=8*b0, mu=0.01, update mu=1, 3/4 to the '
          'bases, 10 passes)', flush=True)
    results['digits_eps'] = sweep(
        'digits', streams.digits, EPSILONS, SEEDS, **digits_cfg,
        which=('continual', 'continual_spec', 'independent', 'sliding', 'ftrl', 'ftrl_best',
               'oneshot'))
    results['digits_arith'] = arithmetic(streams.digits(0), 64, 0.01, 10, 4, {
        'continual': (8, 0.75, 1.0), 'continual (B=4·b0, ½/½, one μ)': (4, 0.5, None)})
    print('digits: cumulative one-shot PSGD at the paper reference mu=2e-3', flush=True)
    results['digits_oneshot_ref'] = sweep(
        'digits-ref', streams.digits, EPSILONS, SEEDS, b0=64, blocks_per_base=4, mu=0.002,
        passes=10, batch=1, ftrl_params=ftrl_digits, which=('oneshot',))
    print('digits: accuracy vs block size (eps in {10, 100})', flush=True)
    results['digits_block'] = {}
    for b0 in (32, 64, 128):
        results['digits_block'][str(b0)] = sweep(
            f'digits b0={b0}', streams.digits, (10.0, 100.0), SEEDS[:3],
            **{**digits_cfg, 'b0': b0}, which=('continual', 'independent', 'ftrl',
                                               'ftrl_best'))
    results['gauss_eps'] = gauss()
    results['drift_eps'] = drift_sweep()
    results['seconds'] = time.time() - t0
    (HERE / 'results.json').write_text(json.dumps(results, indent=1))
    print(f'wrote results.json in {results["seconds"]:.0f} s')


if __name__ == '__main__':
    sys.exit(main())
