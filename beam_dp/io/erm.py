"""Output records of the continual / sliding-window private ERM transforms (spec 003 §8.1).

``ModelRelease`` is one released (noised) model: its weights, the block range of its data, the
schedule level, the release id of the model it was regularised toward, the noise scale and the
per-record ε it spent. ``ERMLedgerRow`` is the audit side output: every model's charge to its
block range and the ledger's bound on any record's total after it. Both are NamedTuples with a
fastavro schema; ``*_to_avro`` / ``*_from_avro`` convert losslessly.

The pure driver does not import this module; the DoFn turns the pure driver's events into these records
(``model_release_from_event``, ``ledger_row_from_event``) and registers ``RowCoder`` for them.

``privacy`` says what a record guarantees: ``EVENT_LEVEL`` for the honest calibration, or
``psgd.NOT_DP_LABEL`` for ``reproduce_paper=True`` (the paper's data-dependent constants).
"""

from typing import List, NamedTuple, Optional

import fastavro

from beam_dp.io.avro import MICROS
from beam_dp.io.avro import record_schema
from beam_dp.io.records import _datetime_to_micros
from beam_dp.mechanisms.erm.psgd import NOT_DP_LABEL

__all__ = [
    'ERMLedgerRow',
    'ERM_LEDGER_SCHEMA',
    'EVENT_LEVEL',
    'MODEL_RELEASE_SCHEMA',
    'ModelRelease',
    'ledger_row_from_avro',
    'ledger_row_from_event',
    'ledger_row_to_avro',
    'model_release_from_avro',
    'model_release_from_event',
    'model_release_to_avro',
]

EVENT_LEVEL = 'event-level epsilon-DP (one record; substitution, blocks padded to n_max)'


class ModelRelease(NamedTuple):
    """One released model.

    stream: the stream key. release_id: unique within the stream (e.g. 'a4:large:t12').
    algo / kind / level: the schedule ('alg2', 'alg4', 'alg5', 'independent', 'naive',
    'dp_ftrl'), the job kind ('node', 'base', 'large', 'small', 'fine_tune', 'block', 'prefix')
    and level. block_lo, block_hi:
    the data's block range [lo, hi). t_block: index of the block whose close released it.
    block_start_micros: event time of block_lo's start. center_release_id: the released model it
    was regularised toward ('' if trained from scratch). noise_scale: b of the L2-Laplace noise.
    eps_cost_per_record: what each record of the range paid for it. epsilon_total: the
    transform's total ε. published: the schedule's output model (else an internal chain model,
    equally noised and accounted). n_nominal: records it was normalised by. num_classes,
    feature_dim: the weights' shape for softmax (K × d, row-major). privacy: the guarantee.

    DP-FTRL (``ContinualERM(algorithm='dp_ftrl')``): algo 'dp_ftrl', kind 'prefix', level 0,
    release_id 'ftrl:t<b>', center_release_id '' (regularised toward 0, not a release);
    [block_lo, block_hi) = [b, b+1), the one block whose gradients this release added to the
    counter (the block its ledger row charges; the model depends on blocks 0..b through the
    counter's prefix sum); n_nominal = (b+1)·n_max; noise_scale = the standard deviation of one
    weight's noise (not an L2-Laplace b); eps_cost_per_record = ε, paid once by each record of
    block b for the whole release.
    """
    stream: str
    release_id: str
    algo: str
    kind: str
    level: int
    block_lo: int
    block_hi: int
    t_block: int
    block_start_micros: int
    center_release_id: str
    noise_scale: float
    eps_cost_per_record: float
    epsilon_total: float
    published: bool
    n_nominal: int
    num_classes: int
    feature_dim: int
    weights: List[float]
    privacy: str


class ERMLedgerRow(NamedTuple):
    """One charge: release_id charged eps_cost to every record of blocks [block_lo, block_hi)
    of component; worst_bound bounds any record's total afterwards; budget is ε (∞: none)."""
    stream: str
    release_id: str
    component: str
    block_lo: int
    block_hi: int
    eps_cost: float
    worst_bound: float
    budget: float
    privacy: str


def _schema(record, doc: str, overrides=None) -> dict:
    """The parsed Avro schema of a NamedTuple record, field by field from its annotations."""
    return fastavro.parse_schema(record_schema(record, doc, types=overrides))


MODEL_RELEASE_SCHEMA = _schema(
    ModelRelease, 'One differentially private model released by a continual/sliding-window ERM.',
    {'block_start_micros': MICROS})
ERM_LEDGER_SCHEMA = _schema(
    ERMLedgerRow, 'One per-record privacy charge of an ERM release, with the running worst-case '
    'bound.')


def model_release_to_avro(release: ModelRelease) -> dict:
    d = release._asdict()
    d['weights'] = [float(w) for w in d['weights']]
    return d


def model_release_from_avro(record: dict) -> ModelRelease:
    fields = dict(record)
    value = fields['block_start_micros']
    if hasattr(value, 'timestamp'):       # fastavro decodes timestamp-micros to datetime
        fields['block_start_micros'] = _datetime_to_micros(value)
    fields['weights'] = list(fields['weights'])
    return ModelRelease(**fields)


def ledger_row_to_avro(row: ERMLedgerRow) -> dict:
    return row._asdict()


def ledger_row_from_avro(record: dict) -> ERMLedgerRow:
    return ERMLedgerRow(**record)


def _privacy(event) -> str:
    return NOT_DP_LABEL if event.model.not_dp else EVENT_LEVEL


def model_release_from_event(stream: str, event, epsilon_total: float, num_classes: int,
                             feature_dim: int, block_start_micros: int) -> ModelRelease:
    """The record of a ``ReleaseEvent`` of ``beam_dp.mechanisms.erm`` (what the driver returns)."""
    job, model = event.job, event.model
    return ModelRelease(
        stream=str(stream), release_id=job.job_id, algo=job.algo, kind=job.kind,
        level=int(job.level), block_lo=int(job.lo), block_hi=int(job.hi), t_block=int(event.t) - 1,
        block_start_micros=int(block_start_micros), center_release_id=job.center or '',
        noise_scale=float(model.noise_scale), eps_cost_per_record=float(job.eps_cost),
        epsilon_total=float(epsilon_total), published=bool(job.publish),
        n_nominal=int(model.n_nominal), num_classes=int(num_classes),
        feature_dim=int(feature_dim), weights=[float(w) for w in model.weights],
        privacy=_privacy(event))


def ledger_row_from_event(stream: str, event, budget: Optional[float]) -> ERMLedgerRow:
    job = event.job
    return ERMLedgerRow(
        stream=str(stream), release_id=job.job_id, component=job.component, block_lo=int(job.lo),
        block_hi=int(job.hi), eps_cost=float(job.eps_cost), worst_bound=float(event.ledger_worst),
        budget=float('inf') if budget is None else float(budget), privacy=_privacy(event))
