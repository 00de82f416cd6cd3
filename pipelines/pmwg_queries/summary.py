"""Summary of a local run: answers and refusals; with evaluation, the error against the truth.

Private by default (``pipelines.common.evaluation``): without evaluation it reads only the
answers (the releases) and prints their statuses and public parameters, and says where dead
letters were written, not how many.

With evaluation (``--evaluate``, or on by default on the embedded demo data; NOT private) the
truth is recomputed here from the input files: the answer to a query at size t is compared with
the query on the first t valid trips in event-time order (the order the transform uses), and the
dead letters are counted. A uniform-histogram baseline (the answer PMWG gives before any update)
is reported alongside, so the DP error can be judged.
"""

import collections
import dataclasses
import glob
import os
from typing import Dict, List, Optional

import fastavro
import numpy as np

from beam_dp.io.queries import answer_from_avro
from beam_dp.io.queries import query_from_avro
from pipelines.common import evaluation
from pipelines.pmwg_queries import pipeline as job
from pipelines.pmwg_queries import sample_data

__all__ = ['STATUS_MEANINGS', 'Summary', 'summarize']


#: What each answer status means (the 'status' column of the summary).
STATUS_MEANINGS = {
    'easy': 'answered from the public synthetic histogram: the sparse vector found the query '
            'close enough to it (spends no budget)',
    'hard': 'answered with fresh noise, then used to update the histogram (spends budget; at '
            'most a public cap of hard queries)',
    'NOT_STARTED': 'refused: fewer trips than the initial size n had arrived when the query did',
    'HALTED': 'refused: the hard-query cap or the budget is used up (for ever)',
    'LATE': 'refused: the query arrived after its step was released (the public clock)',
    'BUDGET_EXHAUSTED': 'refused: the privacy budget of this instance is used up',
    'UNKNOWN_QUERY': 'refused: the mechanism cannot answer this query',
    'INVALID_QUERY': 'refused: the query record is malformed (it is also a dead letter)',
    'below': 'no value: below the sparse-vector threshold',
}
_ORDER = ('easy', 'hard', 'below', 'NOT_STARTED', 'HALTED', 'BUDGET_EXHAUSTED', 'UNKNOWN_QUERY',
          'INVALID_QUERY', 'LATE')


@dataclasses.dataclass
class Summary:
    """What the job prints. ``errors``, ``baseline_errors`` and ``dead_letters`` are evaluation
    (exact figures of the input, not private): empty / None unless evaluation is on."""
    statuses: Dict[str, int]
    errors: List[float]
    baseline_errors: List[float]
    alpha: float
    dead_letters: Optional[int]
    windowed: bool
    answers_path: str = ''
    refusals_path: str = ''
    dead_letters_path: str = ''
    epsilon: float = 0.0
    initial_size: int = 0
    banner: str = ''

    def text(self) -> str:
        total = sum(self.statuses.values())
        lines = [f'PMWG queries summary ({total} queries, ε={self.epsilon:g} per trip, '
                 f'initial size n={self.initial_size})']
        if self.banner:
            lines.append(f'  {self.banner}')
        lines.append(f'  answers written to  : {self.answers_path}')
        if self.refusals_path:
            lines.append(f'  refusals written to : {self.refusals_path}')
        if self.dead_letters is None:
            lines.append(f'  dead letters        : written to {self.dead_letters_path} '
                         f'(malformed trips or queries; as sensitive as the input; not counted '
                         f'here)')
        else:
            lines.append(f'  dead letters        : {self.dead_letters} (malformed trips or '
                         f'queries; evaluation, NOT private), in {self.dead_letters_path}')
        lines.append('  answers by status:')
        for status in sorted(self.statuses, key=lambda k: (_ORDER + (k,)).index(k)):
            lines.append(f'    {status:<16} {self.statuses[status]:>6}  '
                         f'{STATUS_MEANINGS.get(status, "")}')
        if self.errors and not self.windowed:
            e, b = np.array(self.errors), np.array(self.baseline_errors)
            lines.append('  -- evaluation (exact figures of the input, NOT private) --')
            lines.append('  error units: a linear query is answered on the NORMALISED histogram '
                         '(the fraction of the trips so far it counts, in [0, 1]); error = '
                         '|clip(answer, 0, 1) - true fraction|')
            lines.append(f'  error (easy + hard) : over {e.size} answered queries mean '
                         f'{e.mean():.4f}, median {np.median(e):.4f}, p95 '
                         f'{np.quantile(e, 0.95):.4f}, max {e.max():.4f}; within alpha='
                         f'{self.alpha:g}: {np.mean(e <= self.alpha):.1%}')
            lines.append(f'  uniform baseline    : mean {b.mean():.4f}, max {b.max():.4f} (every '
                         f'answer from the uniform histogram, PMWG\'s answer before any update; '
                         f'at this sample\'s size PMWG does not beat it: benchmarks/pmwg/)')
        return '\n'.join(lines)


def _read(pattern: str) -> List[dict]:
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path, 'rb') as f:
            out.extend(fastavro.reader(f))
    return out


def _statuses(answers) -> Dict[str, int]:
    statuses = collections.Counter()
    for a in answers:
        statuses[a.refusal or ('below' if a.value is None else
                               'hard' if a.hard else 'easy')] += 1
    return dict(statuses)


def _errors(args, answers):
    """EVALUATION (not private): |answer − truth| and |uniform baseline − truth| per answered
    query, the truth computed from the raw trips."""
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
    errors, baseline = [], []
    for a in answers:
        query = queries.get(a.query_id)
        if a.value is None or query is None or not a.t:
            continue
        counts = np.bincount(cells[:a.t], minlength=args.domain_size)
        truth = query.evaluate(counts) / a.t
        errors.append(abs(min(1.0, max(0.0, a.value)) - truth))
        baseline.append(abs(query.evaluate(np.full(args.domain_size, 1 / args.domain_size))
                            - truth))
    return errors, baseline


def summarize(args) -> Summary:
    """The summary of a finished local run; reads the input and counts the dead letters only
    when evaluation is on (``args.evaluate``)."""
    answers = [answer_from_avro(r) for prefix in (job.ANSWERS_PREFIX, job.REFUSALS_PREFIX)
               for r in _read(os.path.join(args.output_avro, f'{prefix}*'))]
    out = args.dead_letter_avro or args.output_avro
    errors, baseline, dead = [], [], None
    if getattr(args, 'evaluate', False):
        errors, baseline = _errors(args, answers)
        dead = len(_read(os.path.join(out, 'dead_letters*')))
    return Summary(_statuses(answers), errors, baseline, args.alpha, dead,
                   bool(args.window_seconds),
                   answers_path=os.path.join(args.output_avro, f'{job.ANSWERS_PREFIX}-*.avro'),
                   refusals_path=os.path.join(args.output_avro, f'{job.REFUSALS_PREFIX}-*.avro'),
                   dead_letters_path=os.path.join(out, f'{job.DEAD_LETTERS_PREFIX}-*.avro'),
                   epsilon=args.epsilon, initial_size=job.INITIAL_SIZE,
                   banner=evaluation.banner(args))
