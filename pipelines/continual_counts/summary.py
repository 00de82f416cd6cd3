"""After a local batch run: a summary of the releases and a plot; with evaluation, how far the
releases are from the truth.

Private by default (``pipelines.common.evaluation``): without evaluation it reads only the
releases and prints and plots released values and public parameters (ε, bounds, schedule, noise
std, output paths; that dead letters were written and where, not how many).

Evaluation (``--evaluate``, or on by default on the embedded demo data) is NOT private: it reads
the raw input to compute the TRUE cumulative count per station and step (which a real deployment
must never publish) and compares the releases with two truths:

* the truth after contribution bounding — what the transform actually counts: all valid rides
  minus the ones the per-rider bounds removed (each is a 'BoundContributions' dead letter holding
  the ride). The releases scatter around it with the releases' own (public) ``noise_stddev``:
  RMSE / noise std ≈ 1;
* the raw truth — every valid ride. The releases fall short of it by what bounding removed: the
  price of user-level privacy with small bounds, not noise.

It also counts negative releases and, with ``--postprocess``, reports the post-processed releases
(``beam_dp.postprocess``: non-negative, non-decreasing; pure post-processing).

``python -m pipelines.continual_counts.summary --output_avro DIR [--input_avro GLOB]`` re-runs
the summary on a finished run's output.
"""

import ast
import collections
import dataclasses
import io
import logging
import math
import os
import re
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
from beam_dp.postprocess import isotonic_counts
from beam_dp.postprocess import running_max_counts
from pipelines.common import evaluation
from pipelines.continual_counts import pipeline as job
from pipelines.continual_counts import sample_data
from pipelines.continual_counts.events import validate_event
from pipelines.continual_counts.options import parse_args
from pipelines.continual_counts.plot import plot_series

__all__ = [
    'Errors',
    'Summary',
    'read_avro_records',
    'removed_by_bounding',
    'summarize',
    'summarize_releases',
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


def removed_by_bounding(dead_letters: Iterable[DeadLetter], keys: Sequence[str],
                        start_micros: int, step_micros: int,
                        num_steps: int) -> Tuple[np.ndarray, int]:
    """Per-step counts, shape (keys, steps), of the rides contribution bounding removed, from the
    'BoundContributions' dead letters (each holds the ride it removed); and how many of those
    could not be placed (no public station in the record text, or a step outside the range)."""
    index = {k: i for i, k in enumerate(keys)}
    removed = np.zeros((len(keys), num_steps), dtype=np.int64)
    unplaced = 0
    for dead in dead_letters:
        if dead.stage != 'BoundContributions':
            continue
        i = index.get(_station_of(dead.record))
        micros = dead.event_time_micros
        step = None if micros is None else (micros - start_micros) // step_micros
        if i is None or step is None or not 0 <= step < num_steps:
            unplaced += 1
            continue
        removed[i, step] += 1
    return removed, unplaced


_STATION = re.compile(r"""station=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def _station_of(text: str) -> Optional[str]:
    """The station of a ride rendered as ``RideEvent(rider_id=..., station='...', ...)``."""
    match = _STATION.search(text or '')
    if match is None:
        return None
    try:
        return ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError):
        return None


@dataclasses.dataclass
class Errors:
    """Absolute errors of the releases against one truth."""
    mean: float
    max: float
    rmse: float

    @classmethod
    def of(cls, released: np.ndarray, truth: np.ndarray) -> 'Errors':
        err = np.abs(released - truth)[~np.isnan(released)]
        if not err.size:
            return cls(math.nan, math.nan, math.nan)
        return cls(float(err.mean()), float(err.max()), float(np.sqrt((err ** 2).mean())))

    def text(self) -> str:
        return f'mean |err| {self.mean:.1f}, max |err| {self.max:.1f}, RMSE {self.rmse:.1f}'


@dataclasses.dataclass
class Summary:
    """The numbers the job prints. Fields marked "evaluation" are exact figures of the input
    (not private): ``None`` unless evaluation is on (``pipelines.common.evaluation``)."""
    num_keys: int
    num_steps: int
    num_releases: int
    duplicate_releases: int
    missing_releases: int
    negative_releases: int
    rms_noise_stddev: float
    final_noise_stddev: float
    mechanism: str
    privacy: str
    postprocess: str = 'none'
    postprocessed: bool = False
    banner: str = ''
    bounds: str = ''
    releases_path: Optional[str] = None
    dead_letters_path: Optional[str] = None
    plot_path: Optional[str] = None
    # -- evaluation only (exact figures computed from the raw input) --
    num_dead_letters: Optional[int] = None
    dead_letters_by_stage: Optional[Dict[str, int]] = None
    true_total: Optional[int] = None
    bounded_total: Optional[int] = None
    unplaced_bounding: int = 0
    vs_bounded: Optional[Errors] = None
    vs_raw: Optional[Errors] = None
    vs_bounded_postprocessed: Optional[Errors] = None

    @property
    def evaluated(self) -> bool:
        return self.true_total is not None

    @property
    def removed_total(self) -> Optional[int]:
        if not self.evaluated:
            return None
        return self.true_total - self.bounded_total

    def text(self) -> str:
        lines = ['continual_counts summary']
        if self.banner:
            lines.append(f'  {self.banner}')
        lines += [
            f'  keys x steps        : {self.num_keys} x {self.num_steps}',
            f'  releases            : {self.num_releases} (missing {self.missing_releases}, '
            f'duplicates {self.duplicate_releases})'
            + (f' in {self.releases_path}' if self.releases_path else ''),
            f'  mechanism / privacy : {self.mechanism}; {self.privacy}',
        ]
        if self.bounds:
            lines.append(f'  bounds (public)     : {self.bounds}')
        lines += [
            f'  expected noise std  : RMS {self.rms_noise_stddev:.1f}, at the last step '
            f'{self.final_noise_stddev:.1f} (public: Release.noise_stddev)',
            f'  negative releases   : {self.negative_releases} (noise around small counts; '
            f'--postprocess isotonic gives non-negative, non-decreasing counts)',
        ]
        if self.evaluated:
            lines += self._evaluation_lines()
        else:
            if self.postprocessed:
                lines.append(f'  post-processed      : {self.postprocess} (non-negative, '
                             f'non-decreasing; no privacy cost), in the plot')
            if self.dead_letters_path:
                lines.append(f'  dead letters        : written to {self.dead_letters_path} '
                             f'(as sensitive as the input; not counted here)')
        if self.plot_path:
            lines.append(f'  plot                : {self.plot_path}')
        return '\n'.join(lines)

    def _evaluation_lines(self) -> List[str]:
        """Exact figures of the input (NOT private; evaluation only)."""
        stages = ', '.join(f'{k}: {v}' for k, v in sorted(self.dead_letters_by_stage.items()))
        ratio = (self.vs_bounded.rmse / self.rms_noise_stddev if self.rms_noise_stddev
                 else math.nan)
        removed = self.removed_total
        share = removed / self.true_total if self.true_total else 0.0
        lines = [
            '  -- evaluation (exact figures of the input, NOT private) --',
            f'  dead letters        : {self.num_dead_letters}' + (f' ({stages})' if stages else '')
            + (f' in {self.dead_letters_path}' if self.dead_letters_path else ''),
            f'  true rides counted  : {self.true_total} valid rides of public stations in the '
            f'released steps',
            f'  after bounding      : {self.bounded_total} (bounding removed {removed} = '
            f'{share:.1%}: rides over the per-rider bounds K, S, m above)'
            + (f'; {self.unplaced_bounding} bounding dead letters not placed'
               if self.unplaced_bounding else ''),
            f'  error vs bounded    : {self.vs_bounded.text()} (RMSE / noise std = '
            f'{ratio:.2f}): the DP noise alone',
            f'  error vs all rides  : {self.vs_raw.text()}: noise plus the bounding bias (the '
            f'releases miss the removed rides)',
        ]
        if self.vs_bounded_postprocessed is not None:
            lines.append(f'  post-processed      : {self.postprocess} (non-negative, '
                         f'non-decreasing; no privacy cost): vs bounded '
                         f'{self.vs_bounded_postprocessed.text()}')
        return lines


def _release_grid(releases: Sequence[Release], keys: Sequence[str], num_steps: int):
    """(released, stddev) arrays (keys, steps), NaN where missing, and per-cell release counts."""
    index = {k: i for i, k in enumerate(keys)}
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
    return released, stddev, seen


def summarize_releases(releases: Sequence[Release], keys: Sequence[str], num_steps: int,
                       postprocess: str = 'none') -> Tuple[Summary, Dict[str, np.ndarray]]:
    """Summary of the releases alone (released values and public parameters: what is printed
    when evaluation is off), plus the (keys, steps) arrays 'released', 'stddev' and
    'processed' (the post-processed releases, or None)."""
    keys = list(keys)
    released, stddev, seen = _release_grid(releases, keys, num_steps)
    present = ~np.isnan(released)
    processed = None
    if postprocess != 'none' and present.all():
        fit = isotonic_counts if postprocess == 'isotonic' else running_max_counts
        processed = fit(released)
    first = releases[0] if releases else None
    summary = Summary(
        num_keys=len(keys), num_steps=num_steps, num_releases=len(releases),
        duplicate_releases=sum(c - 1 for c in seen.values() if c > 1),
        missing_releases=int((~present).sum()),
        negative_releases=int((released[present] < 0).sum()),
        rms_noise_stddev=float(np.sqrt(np.nanmean(stddev ** 2))) if present.any() else math.nan,
        final_noise_stddev=float(np.nanmean(stddev[:, -1])) if present[:, -1].any() else math.nan,
        mechanism=first.mechanism if first else '-',
        privacy=(f'epsilon={first.epsilon:g}, delta={first.delta:g}, {first.privacy_unit}'
                 if first else '-'),
        postprocess=postprocess, postprocessed=processed is not None)
    return summary, dict(released=released, stddev=stddev, processed=processed)


def summarize(releases: Sequence[Release], dead_letters: Sequence[DeadLetter], keys: Sequence[str],
              truth_per_step: np.ndarray, removed_per_step: Optional[np.ndarray] = None,
              postprocess: str = 'none') -> Tuple[Summary, Dict[str, np.ndarray]]:
    """EVALUATION (not private): ``summarize_releases`` plus the exact figures of the input
    (dead letters, truth, bounding, errors), and the arrays 'truth' and 'bounded' (cumulative)."""
    num_steps = truth_per_step.shape[1]
    summary, arrays = summarize_releases(releases, keys, num_steps, postprocess)
    if removed_per_step is None:
        removed_per_step = np.zeros_like(truth_per_step)
    truth = np.cumsum(truth_per_step, axis=1)
    bounded = np.cumsum(truth_per_step - removed_per_step, axis=1)
    released, processed = arrays['released'], arrays['processed']
    summary.num_dead_letters = len(dead_letters)
    summary.dead_letters_by_stage = dict(collections.Counter(d.stage for d in dead_letters))
    summary.true_total = int(truth_per_step.sum())
    summary.bounded_total = int(truth_per_step.sum() - removed_per_step.sum())
    summary.vs_bounded = Errors.of(released, bounded)
    summary.vs_raw = Errors.of(released, truth)
    summary.vs_bounded_postprocessed = None if processed is None else Errors.of(processed,
                                                                               bounded)
    arrays.update(truth=truth, bounded=bounded)
    return summary, arrays


def _join(directory: str, pattern: str) -> str:
    return FileSystems.join(directory, pattern)


def _bounds(args) -> str:
    return (f'K={args.max_keys_per_unit} stations, S={args.max_steps_per_unit} steps per '
            f'station, m={args.max_contributions_per_step} rides per step (per rider); step '
            f'{args.step_seconds} s')


def summarize_run(args) -> Summary:
    """Summary of a finished batch run configured by ``args`` (``options.parse_args``).

    Reads the raw input (the truth) and counts the dead letters only when evaluation is on
    (``args.evaluate``: ``pipelines.common.evaluation``); otherwise only the releases."""
    keys = sorted(job.public_keys(args))
    start = round(args.start * _MICROS)
    step = args.step_seconds * _MICROS
    releases_glob = _join(args.output_avro, f'{job.RELEASES_PREFIX}*.avro')
    releases = [release_from_avro(r) for r in _progress(read_avro_records(releases_glob),
                                                        'releases')]
    num_steps = -(-(round(args.end * _MICROS) - start) // step)
    if args.horizon_steps is not None:
        num_steps = min(num_steps, args.horizon_steps)
    dead_glob = (_join(args.dead_letter_avro, f'{job.DEAD_LETTERS_PREFIX}*.avro')
                 if args.dead_letter_avro else None)
    if getattr(args, 'evaluate', False):
        # EVALUATION (not private): the raw input and the dead letters, counted.
        dead = [] if dead_glob is None else [
            dead_letter_from_avro(r) for r in read_avro_records(dead_glob)]
        truth = true_counts(_progress(read_avro_records(args.input_avro or sample_data.RIDES_PATH),
                                      'input events'), keys, start, step, num_steps)
        removed, unplaced = removed_by_bounding(dead, keys, start, step, num_steps)
        summary, arrays = summarize(releases, dead, keys, truth, removed, args.postprocess)
        summary.unplaced_bounding = unplaced
    else:
        summary, arrays = summarize_releases(releases, keys, num_steps, args.postprocess)
    summary.banner = evaluation.banner(args)
    summary.bounds = _bounds(args)
    summary.releases_path = releases_glob
    summary.dead_letters_path = dead_glob
    if args.plot:
        plot_dir = os.path.dirname(args.plot)
        if plot_dir and not FileSystems.exists(plot_dir):
            FileSystems.mkdirs(plot_dir)
        summary.plot_path = plot_series(
            args.plot, keys, arrays['released'], arrays['stddev'], args.step_seconds / 3600,
            f'beam_dp continual counts ({summary.privacy}; {summary.mechanism})',
            truth=arrays.get('truth'), bounded=arrays.get('bounded'),
            processed=arrays['processed'], processed_label=args.postprocess)
    return summary


def main(argv=None) -> None:
    logging.basicConfig(level=logging.INFO)
    args, _ = parse_args(argv)
    print(summarize_run(args).text())


if __name__ == '__main__':
    main(sys.argv[1:])
