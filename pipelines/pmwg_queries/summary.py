"""Summary of a local run: answers, refusals and error against the true answers.

The truth is recomputed here from the input files (evaluation only, not part of the DP job): the
answer to a query at size t is compared with the query on the first t valid trips in event-time
order (the order the transform uses). A uniform-histogram baseline (the answer PMWG gives before
any update) is reported alongside, so the DP error can be judged.
"""

import collections
import dataclasses
import glob
import os
from typing import Dict, List

import fastavro
import numpy as np

from beam_dp.io.queries import answer_from_avro
from beam_dp.io.queries import query_from_avro
from pipelines.pmwg_queries import pipeline as job
from pipelines.pmwg_queries import sample_data

__all__ = ['Summary', 'summarize']


@dataclasses.dataclass
class Summary:
    statuses: Dict[str, int]
    errors: List[float]
    baseline_errors: List[float]
    alpha: float
    dead_letters: int
    windowed: bool

    def text(self) -> str:
        lines = ['PMWG queries: answers by status: ' + ', '.join(
            f'{k}={v}' for k, v in sorted(self.statuses.items()))]
        lines.append(f'dead letters: {self.dead_letters}')
        if self.errors and not self.windowed:
            e, b = np.array(self.errors), np.array(self.baseline_errors)
            lines.append(f'error |clip(answer) - truth| over {e.size} answered queries: mean '
                         f'{e.mean():.4f}, median {np.median(e):.4f}, p95 '
                         f'{np.quantile(e, 0.95):.4f}, max {e.max():.4f}; within alpha='
                         f'{self.alpha:g}: {np.mean(e <= self.alpha):.1%}')
            lines.append(f'uniform-histogram baseline: mean {b.mean():.4f}, max {b.max():.4f}')
        return '\n'.join(lines)


def _read(pattern: str) -> List[dict]:
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path, 'rb') as f:
            out.extend(fastavro.reader(f))
    return out


def summarize(args) -> Summary:
    answers = [answer_from_avro(r) for r in _read(os.path.join(args.output_avro, 'answers*'))]
    dead = _read(os.path.join(args.dead_letter_avro or args.output_avro, 'dead_letters*'))
    cell = job.domain_fn(args.domain_size)
    trips = []
    for trip in _read(args.data_avro or sample_data.TRIPS_PATH):
        try:
            trips.append((trip['event_time_micros'], cell(trip)))
        except (ValueError, KeyError, TypeError):
            pass
    trips.sort()
    cells = np.array([c for _, c in trips], dtype=np.int64)
    queries = {}
    for record in _read(args.query_avro or sample_data.QUERIES_PATH):
        try:
            queries[record['id']] = query_from_avro(record)
        except Exception:  # pylint: disable=broad-except
            pass
    statuses = collections.Counter()
    errors, baseline = [], []
    for a in answers:
        statuses[a.refusal or ('hard' if a.hard else 'easy')] += 1
        query = queries.get(a.query_id)
        if a.value is None or query is None or not a.t:
            continue
        counts = np.bincount(cells[:a.t], minlength=args.domain_size)
        truth = query.evaluate(counts) / a.t
        errors.append(abs(min(1.0, max(0.0, a.value)) - truth))
        baseline.append(abs(query.evaluate(np.full(args.domain_size, 1 / args.domain_size))
                            - truth))
    return Summary(dict(statuses), errors, baseline, args.alpha, len(dead),
                   bool(args.window_seconds))
