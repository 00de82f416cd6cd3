"""Summary of a local run on the embedded data: test accuracy of every published model next to
the non-private model of the same release, and a plot of accuracy over time.

Evaluation only, not part of the DP job: the non-private models are the same schedule run by the
pure driver (``beam_dp.drivers.erm.reference``) at ε = ∞ on the embedded data (DP-FTRL: the same
blocks with exact prefix sums, no counter noise); the drift stream is scored on the test set of
the regime its block belongs to.
"""

import dataclasses
import glob
import math
import os
from typing import Dict, List, Tuple

import fastavro
import numpy as np

from beam_dp import noise
from beam_dp.drivers.erm import ERMStreamDriver
from beam_dp.drivers.erm import reference
from beam_dp.io.erm import model_release_from_avro
from beam_dp.mechanisms.erm import clip_features
from beam_dp.mechanisms.erm import ftrl
from pipelines.erm_digits import data
from pipelines.erm_digits import pipeline as job

__all__ = ['Summary', 'summarize']

#: Printed name of each of the job's methods (``pipeline.METHODS``) and the algo of its models.
_NAMES = {'Continual': 'Continual', 'Sliding': 'Sliding', 'Ftrl': 'DP-FTRL'}
_ALGOS = {'Sliding': ('alg5',), 'Ftrl': ('dp_ftrl',), 'Continual': ('alg2', 'alg4')}


@dataclasses.dataclass
class Summary:
    """rows[(dataset, method)] = [(block, private accuracy, non-private accuracy)]."""
    rows: Dict[Tuple[str, str], List[Tuple[int, float, float]]]
    epsilon: float
    dead_letters: int
    models_path: str
    plot_path: str = ''

    def text(self) -> str:
        lines = [f'ERM summary: test accuracy per published model (ε={self.epsilon:g} per '
                 f'example in each transform, {len(job.METHODS)}ε in total; event-level, pure '
                 f'DP)',
                 f'  models written to : {self.models_path}',
                 f'  dead letters      : {self.dead_letters}']
        for (name, method), rows in sorted(self.rows.items()):
            lines.append(f'  {name} / {method}: block: private (non-private)')
            cells = [f'{b:>3}: {a:.3f} ({n:.3f})' for b, a, n in rows]
            for i in range(0, len(cells), 5):
                lines.append('    ' + '   '.join(cells[i:i + 5]))
            if rows:
                acc = np.array([r[1] for r in rows])
                ref = np.array([r[2] for r in rows])
                lines.append(f'    mean {acc.mean():.3f} (non-private {ref.mean():.3f}), final '
                             f'{acc[-1]:.3f} ({ref[-1]:.3f})')
        if self.plot_path:
            lines.append(f'  plot              : {self.plot_path}')
        return '\n'.join(lines)


def _read(pattern: str) -> List[dict]:
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path, 'rb') as f:
            out.extend(fastavro.reader(f))
    return out


def _nonprivate_ftrl(ds: data.Dataset, transform, records) -> Dict[str, np.ndarray]:
    """release id → DP-FTRL's model with exact prefix sums (no counter noise): the driver's
    blocks (all of ≤ n_max records here: nothing is subsampled), the mechanism's arithmetic."""
    driver, mech = transform.driver, transform.driver.mechanism
    state, _ = driver.add(driver.init_state(), [
        (r['event_time_micros'], r['features'], r['label']) for r in records])
    pending = dict(state.pending)
    w, total, out = np.zeros(mech.n_params), 0, {}
    for b in range(ds.blocks):
        x, y = driver._block_data(pending.get(b, ()), noise.secure_rng())  # pylint: disable=protected-access
        total = total + ftrl.grid_gradient_sum(mech.loss, w, x, y, mech.grid_bits)
        w = ftrl.ftrl_weights(total, mech.grid_bits, mech.mu, (b + 1) * mech.records_per_block,
                              1.0 / mech.learning_rate)
        out[f'ftrl:t{b}'] = w
    return out


def _nonprivate(ds: data.Dataset, transform, records) -> Dict[str, np.ndarray]:
    """release id → weights of the same schedule at ε = ∞ (no noise), on the same records."""
    driver = transform.driver
    if isinstance(driver.mechanism, ftrl.DPFTRL):
        return _nonprivate_ftrl(ds, transform, records)
    mechanism = dataclasses.replace(
        driver.mechanism, schedule=dataclasses.replace(driver.mechanism.schedule,
                                                       epsilon=math.inf))
    clear = ERMStreamDriver(mechanism, driver.raw_dim, driver.clock, driver.fit_intercept)
    inputs = [('record', r['event_time_micros'], r['features'], r['label']) for r in records]
    res = reference(clear, ds.name, inputs, noise.secure_rng(), until_block=ds.blocks - 1)
    return {e.job.job_id: np.asarray(e.model.weights) for e in res.events}


def summarize(args) -> Summary:
    models = [model_release_from_avro(r)
              for r in _read(os.path.join(args.output_avro, f'{job.MODELS_PREFIX}*'))]
    dead = _read(os.path.join(args.dead_letter_avro or args.output_avro,
                              f'{job.DEAD_LETTERS_PREFIX}*'))
    rows = {}
    for ds in data.DATASETS:
        embedded = data.embedded(ds)
        records = data.records_of(ds, embedded)
        tests = [(clip_features(np.hstack([x, np.ones((len(x), 1))]), 1.0), y)
                 for x, y in embedded.tests]
        transforms = job.transforms_for(ds, args.epsilon, data.end_seconds(ds))
        for method, transform in zip(job.METHODS, transforms):
            loss = transform.driver.mechanism.loss
            clear = _nonprivate(ds, transform, records)
            mine = sorted((m for m in models if m.stream == ds.name and m.published
                           and m.algo in _ALGOS[method]),
                          key=lambda m: (m.t_block, m.release_id))
            out = []
            for m in mine:
                regime = int(ds.drift_block is not None and m.t_block >= ds.drift_block)
                x, y = tests[regime]
                out.append((m.t_block, loss.accuracy(np.asarray(m.weights), x, y),
                            loss.accuracy(clear[m.release_id], x, y)))
            rows[(ds.name, _NAMES[method])] = out
    summary = Summary(rows, args.epsilon, len(dead),
                      os.path.join(args.output_avro, f'{job.MODELS_PREFIX}-*.avro'))
    if not getattr(args, 'no_plot', False):
        summary.plot_path = plot(summary, os.path.join(args.output_avro, 'accuracy.png'))
    return summary


def plot(summary: Summary, path: str) -> str:
    """Accuracy over blocks, one panel per dataset: private (solid) and non-private (dashed)."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, axes = plt.subplots(1, len(data.DATASETS), figsize=(11, 4))
    for ax, ds in zip(axes, data.DATASETS):
        for method, colour in zip(_NAMES.values(), ('tab:blue', 'tab:orange', 'tab:green')):
            rows = summary.rows.get((ds.name, method), [])
            if not rows:
                continue
            blocks = [r[0] for r in rows]
            ax.plot(blocks, [r[1] for r in rows], color=colour, label=f'{method} (ε-DP)')
            ax.plot(blocks, [r[2] for r in rows], color=colour, ls='--',
                    label=f'{method} non-private')
        if ds.drift_block is not None:
            ax.axvline(ds.drift_block, color='grey', lw=0.8)
        ax.set_title(f'{ds.name} (ε={summary.epsilon:g} per transform)')
        ax.set_xlabel('block (minute of event time)')
        ax.set_ylabel('test accuracy')
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
