"""Summary of a local run: budget consumed per path and per block, and cumulative budget vs
queries for Boost (the job's ledger) and, with evaluation, its baselines (the pure presets of
``beam_dp.mechanisms.boost`` run by the pure driver on the same blocks and queries, in the same
order; evaluation only, not part of the DP job: it reads the input rows and spends no accounted
budget, so its curves are NOT private) and the dead-letter count.

Private by default (``pipelines.common.evaluation``): without evaluation everything printed and
plotted comes from the job's outputs (answers, refusals, ledger, blocks with their public sizes)
and public parameters; it says where dead letters were written, not how many. The budget of a query
is the mean over blocks of its per-block charges (Σ ledger ε / number of blocks), the paper's
"average budget consumed per block". With ``--noise gaussian`` the job's ledger is in ε at
``--delta`` (each row its increment of the block's converted ε), next to the Laplace baselines."""

import collections
import dataclasses
import glob
import os
from typing import Dict, List, Optional, Tuple

import fastavro
import numpy as np

from beam_dp import noise
from beam_dp.drivers.boost import BoostDriver
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.mechanisms.boost import preset
from beam_dp.transforms.boost import QUERY
from beam_dp.transforms.boost import ROW
from beam_dp.drivers.boost_events import run_events
from pipelines.common.launch import noise_key_scope
from pipelines.boost_queries import pipeline as job
from pipelines.boost_queries import sample_data
from pipelines.common import evaluation
from pipelines.common.plots import png_bytes

__all__ = ['BASELINES', 'Summary', 'summarize']

BASELINES = ('laplace', 'exact_cache', 'tree_exact_cache', 'vanilla_pmw', 'pmw_bypass')
PATHS = {'EXACT': 'exact cache hit (free)', 'R1': 'histogram passed the sparse-vector test',
         'R2': 'sparse-vector failure, answered with noise', 'R3': 'Laplace (histogram not ready)',
         'MIXED': 'nodes answered by different paths'}


def _read(directory: str, prefix: str) -> List[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(directory, f'{prefix}*.avro'))):
        with open(path, 'rb') as f:
            out.extend(fastavro.reader(f))
    return out


def _rows(args) -> list:
    """EVALUATION only: the raw input rows."""
    if not args.data_avro:
        return sample_data.job_rows()
    rows = []
    for path in sorted(glob.glob(args.data_avro)):
        with open(path, 'rb') as f:
            rows.extend(fastavro.reader(f))
    return rows


def _queries(args) -> list:
    """The (public) queries with their event times."""
    if args.query_avro:
        queries = [(job.query_time_micros(q, args.blocks), q) for p in sorted(
            glob.glob(args.query_avro)) for q in fastavro.reader(open(p, 'rb'))]
    else:
        queries = sample_data.job_queries()
    return queries


def _cumulative(ledger: List[Tuple[str, float]], order: List[str], blocks: int) -> np.ndarray:
    per: Dict[str, float] = collections.defaultdict(float)
    for qid, eps in ledger:
        per[qid] += eps / blocks
    return np.cumsum([per.get(q, 0.0) for q in order])


def run_baseline(name: str, args, rows, queries, rng) -> List[Tuple[str, float]]:
    """(query id, ε) ledger of the pure ``name`` preset on the same events."""
    mech = preset(name, sample_data.N, alpha=args.alpha, beta=args.beta,
                  epsilon_budget=args.epsilon)
    start = sample_data.START_SECONDS * 10 ** 6
    driver = BoostDriver(sample_data.DATASET, sample_data.SHAPE, mech, start,
                         sample_data.BLOCK_SECONDS * 10 ** 6)
    from beam_dp.drivers.clock import StepClock  # pylint: disable=import-outside-toplevel
    clock = StepClock(start, sample_data.BLOCK_SECONDS * 10 ** 6, 0, args.blocks - 1)
    items = [(ROW, r['event_time_micros'], tuple(r['attributes'])) for r in rows
             if r['dataset'] == sample_data.DATASET]
    items += [(QUERY, t, BoostQueryRecord(**q)) for t, q in queries]
    _, out, _ = run_events(driver, clock, driver.init_state(), items, 2 ** 62, rng)
    return [(r.query_id, r.epsilon) for r in out if type(r).__name__ == 'BoostLedgerRow']


@dataclasses.dataclass
class Summary:
    paths: Dict[str, Tuple[int, float]]
    refusals: Dict[str, int]
    per_block: Dict[int, Tuple[int, float]]
    curves: Dict[str, np.ndarray]
    epsilon: float
    preset: str
    plot: str = ''
    #: EVALUATION only (an exact count of rejected input records): None when evaluation is off.
    dead_letters: Optional[int] = None
    dead_letters_path: str = ''
    banner: str = ''

    def text(self) -> str:
        answered = sum(n for n, _ in self.paths.values())
        lines = [f'Boost queries summary ({answered} answers, {sum(self.refusals.values())} '
                 f'refusals, preset {self.preset}, ε_G={self.epsilon:g} per block)']
        if self.banner:
            lines.append(f'  {self.banner}')
        lines.append('  budget by path (answers, Σ ε over blocks):')
        for path, (n, eps) in sorted(self.paths.items()):
            lines.append(f'    {path:<6} {n:>5}  {eps:9.4f}  {PATHS.get(path, "")}')
        for reason, n in sorted(self.refusals.items()):
            lines.append(f'    refused {reason}: {n}')
        lines.append('  budget by block (public size, ε consumed of ε_G):')
        for block, (size, eps) in sorted(self.per_block.items()):
            lines.append(f'    block {block:>3}  n={size:>7}  {eps:8.4f} / {self.epsilon:g}')
        lines.append('  cumulative budget after all queries (mean ε per block'
                     + ('; the baselines are evaluation, NOT private' if len(self.curves) > 1
                        else '') + '):')
        for name, curve in self.curves.items():
            lines.append(f'    {name:<18} {curve[-1] if curve.size else 0.0:9.4f}')
        if self.dead_letters is None:
            lines.append(f'  dead letters: written to {self.dead_letters_path} (as sensitive as '
                         f'the input; not counted here)')
        else:
            lines.append(f'  dead letters: {self.dead_letters} (evaluation, NOT private), in '
                         f'{self.dead_letters_path}')
        if self.plot:
            lines.append(f'  plot: {self.plot}')
        return '\n'.join(lines)


def _plot(curves: Dict[str, np.ndarray], path: str) -> str:
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use('Agg')
        from matplotlib import pyplot as plt  # pylint: disable=import-outside-toplevel
    except ImportError:
        return ''
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves.items():
        ax.plot(np.arange(1, curve.size + 1), curve, label=name)
    ax.set_xlabel('queries')
    ax.set_ylabel('cumulative budget (mean ε per block)')
    ax.set_title('Boost vs baselines (same blocks, same Zipf queries)' if len(curves) > 1
                 else 'Boost: the job\'s ledger (released)')
    ax.legend()
    fig.tight_layout()
    data = png_bytes(fig, dpi=100)
    plt.close(fig)
    with open(path, 'wb') as f:
        f.write(data)
    return path


def summarize(args) -> Summary:
    out = args.output_avro
    answers, ledger = _read(out, 'answers'), _read(out, 'ledger')
    path_of = {a['query_id']: a['path'] for a in answers if not a['replay']}
    paths: Dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    for a in answers:
        if not a['replay']:
            paths[a['path']][0] += 1
    for row in ledger:
        paths[path_of.get(row['query_id'], '?')][1] += row['epsilon']
    per_block = {b['block']: [b['size'], 0.0] for b in _read(out, 'blocks')}
    for row in ledger:
        per_block.setdefault(row['block'], [0, 0.0])[1] = max(
            per_block[row['block']][1], row['consumed'])
    refusals = collections.Counter(r['refusal']['reason'].lower()
                                   for r in _read(out, 'refusals'))
    queries = _queries(args)
    order = [q['query_id'] for _, q in sorted(queries, key=lambda t: (t[0], t[1]['query_id']))]
    gaussian = getattr(args, 'noise', 'laplace') == 'gaussian'
    job_name = f'{args.preset} (job, gaussian δ={args.delta:g})' if gaussian else \
        f'{args.preset} (job)'
    curves = {job_name: _cumulative(
        [(r['query_id'], r['epsilon']) for r in ledger], order, args.blocks)}
    evaluate = getattr(args, 'evaluate', False)
    if evaluate and not args.no_baselines:
        # EVALUATION (not private): the baselines re-run on the raw rows.
        rows = _rows(args)
        with noise_key_scope(args):
            rng = noise.noise_source('boost_queries.summary').derive('boost_queries.summary',
                                                                    'baselines')
        for name in BASELINES:
            if name != args.preset or gaussian:
                curves[name] = _cumulative(run_baseline(name, args, rows, queries, rng), order,
                                           args.blocks)
    plot = _plot(curves, os.path.join(out, 'budget_vs_queries.png'))
    dead_dir = args.dead_letter_avro or out
    dead = len(_read(dead_dir, 'dead_letters')) if evaluate else None
    return Summary({k: tuple(v) for k, v in paths.items()}, dict(refusals),
                   {k: tuple(v) for k, v in per_block.items()}, curves, args.epsilon,
                   args.preset, plot, dead, os.path.join(dead_dir, 'dead_letters-*.avro'),
                   evaluation.banner(args))
