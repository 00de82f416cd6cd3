"""After a local batch run: how far the releases are from the truth, and a plot.

For the demo only: it reads the raw input to compute the TRUE cumulative count per station and
step (which a real deployment must never publish) and compares the releases with it: mean and
max absolute error, RMSE, and the releases' own (public) ``noise_stddev``. The true counts are of
all valid rides, before contribution bounding, so the error includes the bias of the bounds (the
rides over a bound are listed among the dead letters).

``python -m pipelines.continual_counts.summary --output_avro DIR [--input_avro GLOB]`` re-runs
the summary on a finished run's output.
"""

import collections
import dataclasses
import io
import logging
import math
import os
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import fastavro
import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_dp.errors import InvalidRecordError
from beam_dp.io.records import DeadLetter
from beam_dp.io.records import Release
from beam_dp.io.records import dead_letter_from_avro
from beam_dp.io.records import release_from_avro
from pipelines.continual_counts import pipeline as job
from pipelines.continual_counts import sample_data
from pipelines.continual_counts.events import validate_event
from pipelines.continual_counts.options import parse_args

__all__ = [
    'Summary',
    'plot_series',
    'read_avro_records',
    'summarize',
    'summarize_run',
    'true_counts',
]

_LOG = logging.getLogger(__name__)
_MICROS = 1_000_000


def _paths(pattern: str) -> List[str]:
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def read_avro_records(pattern: str) -> Iterable[dict]:
    """Every record of every Avro file matching ``pattern`` (local or gs://)."""
    for path in _paths(pattern):
        with FileSystems.open(path) as f:
            data = f.read()
        yield from fastavro.reader(io.BytesIO(data))


def _progress(items: Iterable, what: str, every: int = 10_000):
    n = 0
    for n, item in enumerate(items, 1):
        if n % every == 0:
            _LOG.info('summary: %d %s read', n, what)
        yield item


def true_counts(records: Iterable[dict], keys: Sequence[str], start_micros: int, step_micros: int,
                num_steps: int) -> np.ndarray:
    """Per-step TRUE counts, shape (keys, steps), of the valid rides of public stations."""
    index = {k: i for i, k in enumerate(keys)}
    counts = np.zeros((len(keys), num_steps), dtype=np.int64)
    for record in records:
        try:
            event = validate_event(record)
        except InvalidRecordError:
            continue
        i = index.get(event.station)
        step = (event.event_time_micros - start_micros) // step_micros
        if i is not None and 0 <= step < num_steps:
            counts[i, step] += 1
    return counts


@dataclasses.dataclass
class Summary:
    """The numbers the demo prints."""
    num_keys: int
    num_steps: int
    num_releases: int
    duplicate_releases: int
    missing_releases: int
    num_dead_letters: int
    dead_letters_by_stage: Dict[str, int]
    true_total: int
    mean_abs_error: float
    max_abs_error: float
    rmse: float
    mean_noise_stddev: float
    final_noise_stddev: float
    mechanism: str
    privacy: str
    plot_path: Optional[str] = None

    def text(self) -> str:
        stages = ', '.join(f'{k}: {v}' for k, v in sorted(self.dead_letters_by_stage.items()))
        lines = [
            'continual_counts summary',
            f'  keys x steps        : {self.num_keys} x {self.num_steps}',
            f'  releases            : {self.num_releases} (missing {self.missing_releases}, '
            f'duplicates {self.duplicate_releases})',
            f'  dead letters        : {self.num_dead_letters}' + (f' ({stages})' if stages else ''),
            f'  mechanism / privacy : {self.mechanism}; {self.privacy}',
            f'  true rides counted  : {self.true_total}',
            f'  error vs truth      : mean |err| {self.mean_abs_error:.1f}, max |err| '
            f'{self.max_abs_error:.1f}, RMSE {self.rmse:.1f}',
            f'  expected noise std  : mean {self.mean_noise_stddev:.1f}, at the last step '
            f'{self.final_noise_stddev:.1f} (RMSE / noise std = '
            f'{self.rmse / self.mean_noise_stddev if self.mean_noise_stddev else math.nan:.2f})',
        ]
        if self.plot_path:
            lines.append(f'  plot                : {self.plot_path}')
        return '\n'.join(lines)


def summarize(releases: Sequence[Release], dead_letters: Sequence[DeadLetter], keys: Sequence[str],
              truth_per_step: np.ndarray) -> Tuple[Summary, np.ndarray, np.ndarray, np.ndarray]:
    """Summary plus the (keys, steps) arrays of released values, truth and noise std."""
    keys = list(keys)
    index = {k: i for i, k in enumerate(keys)}
    num_steps = truth_per_step.shape[1]
    released = np.full((len(keys), num_steps), np.nan)
    stddev = np.full((len(keys), num_steps), np.nan)
    seen = collections.Counter()
    for r in releases:
        i = index.get(r.key)
        if i is None or not 0 <= r.step < num_steps:
            continue
        seen[(i, r.step)] += 1
        released[i, r.step] = r.value
        stddev[i, r.step] = r.noise_stddev
    truth = np.cumsum(truth_per_step, axis=1)
    present = ~np.isnan(released)
    err = np.abs(released - truth)[present]
    stages = collections.Counter(d.stage for d in dead_letters)
    first = releases[0] if releases else None
    summary = Summary(
        num_keys=len(keys), num_steps=num_steps, num_releases=len(releases),
        duplicate_releases=sum(c - 1 for c in seen.values() if c > 1),
        missing_releases=int((~present).sum()), num_dead_letters=len(dead_letters),
        dead_letters_by_stage=dict(stages), true_total=int(truth_per_step.sum()),
        mean_abs_error=float(err.mean()) if err.size else math.nan,
        max_abs_error=float(err.max()) if err.size else math.nan,
        rmse=float(np.sqrt((err ** 2).mean())) if err.size else math.nan,
        mean_noise_stddev=float(np.nanmean(stddev)) if present.any() else math.nan,
        final_noise_stddev=float(np.nanmean(stddev[:, -1])) if present[:, -1].any() else math.nan,
        mechanism=first.mechanism if first else '-',
        privacy=(f'epsilon={first.epsilon:g}, delta={first.delta:g}, {first.privacy_unit}'
                 if first else '-'))
    return summary, released, truth, stddev


def plot_series(path: str, keys: Sequence[str], released: np.ndarray, truth: np.ndarray,
                stddev: np.ndarray, step_hours: float, title: str, num_plots: int = 4) -> str:
    """Released vs true cumulative series of ``num_plots`` keys (busiest, two middle, quietest)."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    order = np.argsort(-truth[:, -1], kind='stable')
    picks = sorted({int(order[int(round(q * (len(order) - 1)))])
                    for q in np.linspace(0, 1, num_plots)}, key=lambda i: -truth[i, -1])
    fig, axes = plt.subplots(1, len(picks), figsize=(4.2 * len(picks), 3.6), squeeze=False)
    hours = (np.arange(truth.shape[1]) + 1) * step_hours
    for ax, i in zip(axes[0], picks):
        ax.plot(hours, truth[i], color='black', lw=1.5, label='true (cumulative)')
        ax.plot(hours, released[i], color='tab:blue', lw=1.2, marker='.', ms=3,
                label='released (DP)')
        ax.fill_between(hours, truth[i] - 2 * stddev[i], truth[i] + 2 * stddev[i],
                        color='tab:blue', alpha=0.12, label='true ± 2 noise std')
        ax.set_title(keys[i], fontsize=9)
        ax.set_xlabel('hours since start')
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('rides from station')
    axes[0][0].legend(fontsize=7, loc='upper left')
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=110)
    plt.close(fig)
    with FileSystems.create(path) as f:
        f.write(buffer.getvalue())
    return path


def _join(directory: str, pattern: str) -> str:
    return FileSystems.join(directory, pattern)


def summarize_run(args) -> Summary:
    """Summary of a finished batch run configured by ``args`` (``options.parse_args``)."""
    keys = sorted(job.public_keys(args))
    start = round(args.start * _MICROS)
    step = args.step_seconds * _MICROS
    releases = [release_from_avro(r) for r in _progress(
        read_avro_records(_join(args.output_avro, f'{job.RELEASES_PREFIX}*.avro')), 'releases')]
    dead = []
    if args.dead_letter_avro:
        dead = [dead_letter_from_avro(r) for r in read_avro_records(
            _join(args.dead_letter_avro, f'{job.DEAD_LETTERS_PREFIX}*.avro'))]
    if args.end is not None:
        num_steps = -(-(round(args.end * _MICROS) - start) // step)
    else:
        num_steps = max((r.step for r in releases), default=-1) + 1
    if args.horizon_steps is not None:
        num_steps = min(num_steps, args.horizon_steps)
    truth = true_counts(_progress(read_avro_records(args.input_avro or sample_data.RIDES_PATH),
                                  'input events'), keys, start, step, num_steps)
    summary, released, cumulative, stddev = summarize(releases, dead, keys, truth)
    if args.plot:
        plot_dir = os.path.dirname(args.plot)
        if plot_dir and not FileSystems.exists(plot_dir):
            FileSystems.mkdirs(plot_dir)
        summary.plot_path = plot_series(
            args.plot, keys, released, cumulative, stddev, args.step_seconds / 3600,
            f'beam_dp continual counts ({summary.privacy}; {summary.mechanism})')
    return summary


def main(argv=None) -> None:
    logging.basicConfig(level=logging.INFO)
    args, _ = parse_args(argv)
    print(summarize_run(args).text())


if __name__ == '__main__':
    main(sys.argv[1:])
