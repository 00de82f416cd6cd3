"""Summary of a local run: the published models; with evaluation, their accuracy and a plot.

Private by default (``pipelines.common.evaluation``): without evaluation it reads only the
released models and prints, per stream and method, which blocks published a model, the output
paths and ε; it says where dead letters were written, not how many, and writes no plot.

Evaluation (NOT private; not part of the DP job):

* on the embedded demo data (on by default): test accuracy of every published model next to the
  non-private model of the same release, and ``accuracy.png``. The non-private models are the
  same schedule run by the pure driver (``ERMLoop`` under ``beam_dp.testing.replay``) at
  ε = ∞ on the embedded data (DP-FTRL: the same blocks with exact prefix sums, no counter noise); the drift
  stream is scored on the test set of the regime its block belongs to;
* on the user's input (``--evaluate``): the accuracy of every published model on the valid input
  records of its stream (the training data: not a test accuracy), the dead-letter count, and
  ``accuracy.png``.
"""

import dataclasses
import glob
import math
import os
from typing import Dict, List, Optional, Tuple

import fastavro
import numpy as np

from beam_dp import noise
from beam_dp.drivers.erm import ERMLoop
from beam_dp.drivers.erm import ERMStreamDriver
from beam_dp.io.erm import model_release_from_avro
from beam_dp.mechanisms.erm import clip_features
from beam_dp.mechanisms.erm import ftrl
from beam_dp.testing import replay
from beam_dp.testing import stream_events
from pipelines.common import evaluation
from pipelines.common.plots import png_bytes
from pipelines.erm_digits import data
from pipelines.erm_digits import pipeline as job

__all__ = ['Summary', 'summarize']

#: Printed name of each of the job's methods (``pipeline.METHODS``) and the algo of its models.
_NAMES = {'Continual': 'Continual', 'Sliding': 'Sliding', 'Ftrl': 'DP-FTRL'}
_ALGOS = {'Sliding': ('alg5',), 'Ftrl': ('dp_ftrl',), 'Continual': ('alg2', 'alg4')}


@dataclasses.dataclass
class Summary:
    """What the job prints.

    published[(dataset, method)] = blocks that published a model (from the releases: private).
    EVALUATION only (None / empty when evaluation is off): rows[(dataset, method)] =
    [(block, private accuracy, non-private accuracy or NaN)], ``dead_letters``.
    """
    published: Dict[Tuple[str, str], List[int]]
    epsilon: float
    models_path: str
    dead_letters_path: str = ''
    banner: str = ''
    rows: Dict[Tuple[str, str], List[Tuple[int, float, float]]] = dataclasses.field(
        default_factory=dict)
    dead_letters: Optional[int] = None
    accuracy_of: str = ''
    plot_path: str = ''

    def text(self) -> str:
        lines = [f'ERM summary: the published models (ε={self.epsilon:g} per example in each '
                 f'transform, {len(job.METHODS)}ε in total; event-level, pure DP)']
        if self.banner:
            lines.append(f'  {self.banner}')
        lines.append(f'  models written to : {self.models_path}')
        if self.dead_letters is None:
            lines.append(f'  dead letters      : written to {self.dead_letters_path} (as '
                         f'sensitive as the input; not counted here)')
        else:
            lines.append(f'  dead letters      : {self.dead_letters} (evaluation, NOT private), '
                         f'in {self.dead_letters_path}')
        if not self.rows:
            for (name, method), blocks in sorted(self.published.items()):
                span = f'blocks {blocks[0]}..{blocks[-1]}' if blocks else 'none'
                lines.append(f'  {name} / {method}: published models: {len(blocks)} ({span})')
            return '\n'.join(lines)
        reference = any(not math.isnan(r[2]) for rows in self.rows.values() for r in rows)
        lines.append(f'  -- evaluation (NOT private): {self.accuracy_of} --')
        for (name, method), rows in sorted(self.rows.items()):
            if not rows:
                lines.append(f'  {name} / {method}: nothing to score (no published model, or '
                             f'no valid input record of the stream)')
                continue
            lines.append(f'  {name} / {method}: block: private'
                         + (' (non-private)' if reference else ''))
            cells = [f'{b:>3}: {a:.3f}' + (f' ({n:.3f})' if reference else '')
                     for b, a, n in rows]
            for i in range(0, len(cells), 5):
                lines.append('    ' + '   '.join(cells[i:i + 5]))
            if rows:
                acc = np.array([r[1] for r in rows])
                ref = np.array([r[2] for r in rows])
                lines.append(f'    mean {acc.mean():.3f}'
                             + (f' (non-private {ref.mean():.3f})' if reference else '')
                             + f', final {acc[-1]:.3f}'
                             + (f' ({ref[-1]:.3f})' if reference else ''))
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
    out = replay(ERMLoop(clear, math.inf, driver.mechanism.loss.num_classes),
                 stream_events(clear, ds.name, inputs, until_block=ds.blocks - 1),
                 label=transform.label, rng=noise.secure_rng(), end_input=False)
    return {r.release_id: np.asarray(r.weights) for r in out.releases}


def _published(models) -> Dict[Tuple[str, str], List[int]]:
    """(dataset, method) → sorted blocks of its published models (from the releases)."""
    out = {}
    for ds in data.DATASETS:
        for method in job.METHODS:
            out[(ds.name, _NAMES[method])] = sorted(
                m.t_block for m in models
                if m.stream == ds.name and m.published and m.algo in _ALGOS[method])
    return out


def _mine(models, ds, method):
    return sorted((m for m in models if m.stream == ds.name and m.published
                   and m.algo in _ALGOS[method]), key=lambda m: (m.t_block, m.release_id))


def _demo_rows(args, models):
    """EVALUATION on the embedded data: test accuracy, private and non-private."""
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
            out = []
            for m in _mine(models, ds, method):
                regime = int(ds.drift_block is not None and m.t_block >= ds.drift_block)
                x, y = tests[regime]
                out.append((m.t_block, loss.accuracy(np.asarray(m.weights), x, y),
                            loss.accuracy(clear[m.release_id], x, y)))
            rows[(ds.name, _NAMES[method])] = out
    return rows


def _valid(ds: data.Dataset, record: dict) -> bool:
    try:
        return (record.get('stream') == ds.name and len(record['features']) == ds.feature_dim
                and 0 <= int(record['label']) < ds.num_classes
                and all(math.isfinite(v) for v in record['features']))
    except (TypeError, ValueError, KeyError):
        return False


def _input_rows(args, models):
    """EVALUATION on the user's input: accuracy of each published model on the valid input
    records of its stream (its training data; no non-private reference)."""
    records = _read(args.input_avro)
    rows = {}
    for ds in data.DATASETS:
        mine = [r for r in records if _valid(ds, r)]
        x = clip_features(np.hstack([np.array([r['features'] for r in mine], dtype=float)
                                     .reshape(len(mine), ds.feature_dim),
                                     np.ones((len(mine), 1))]), 1.0)
        y = np.array([int(r['label']) for r in mine], dtype=np.int64)
        transforms = job.transforms_for(ds, args.epsilon, args.end_seconds)
        for method, transform in zip(job.METHODS, transforms):
            loss = transform.driver.mechanism.loss
            rows[(ds.name, _NAMES[method])] = [
                (m.t_block, loss.accuracy(np.asarray(m.weights), x, y), math.nan)
                for m in _mine(models, ds, method)] if len(y) else []
    return rows


def summarize(args) -> Summary:
    """The summary of a finished local run; reads the input and counts the dead letters only
    when evaluation is on (``args.evaluate``)."""
    models = [model_release_from_avro(r)
              for r in _read(os.path.join(args.output_avro, f'{job.MODELS_PREFIX}*'))]
    dead_dir = args.dead_letter_avro or args.output_avro
    summary = Summary(_published(models), args.epsilon,
                      os.path.join(args.output_avro, f'{job.MODELS_PREFIX}-*.avro'),
                      os.path.join(dead_dir, f'{job.DEAD_LETTERS_PREFIX}-*.avro'),
                      evaluation.banner(args))
    if not getattr(args, 'evaluate', False):
        return summary
    summary.dead_letters = len(_read(os.path.join(dead_dir, f'{job.DEAD_LETTERS_PREFIX}*')))
    if args.input_avro:
        summary.rows = _input_rows(args, models)
        summary.accuracy_of = ('accuracy on your input records of the stream (the training '
                               'data, not a test set)')
    else:
        summary.rows = _demo_rows(args, models)
        summary.accuracy_of = ('test accuracy on the embedded test set, next to the '
                               'non-private model of the same release')
    if not getattr(args, 'no_plot', False):
        summary.plot_path = plot(summary, os.path.join(args.output_avro, 'accuracy.png'))
    return summary


def plot(summary: Summary, path: str) -> str:
    """EVALUATION only: accuracy over blocks, one panel per dataset: private models (solid) and,
    on the demo data, non-private ones (dashed)."""
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
            if not all(math.isnan(r[2]) for r in rows):
                ax.plot(blocks, [r[2] for r in rows], color=colour, ls='--',
                        label=f'{method} non-private')
        if ds.drift_block is not None:
            ax.axvline(ds.drift_block, color='grey', lw=0.8)
        ax.set_title(f'{ds.name} (ε={summary.epsilon:g} per transform)')
        ax.set_xlabel('block (minute of event time)')
        ax.set_ylabel('accuracy (evaluation: NOT private)')
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    fig.tight_layout()
    png = png_bytes(fig, dpi=100)
    plt.close(fig)
    with open(path, 'wb') as f:
        f.write(png)
    return path
