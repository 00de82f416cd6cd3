"""A deterministic synthetic taxi-trip stream and query workload: the job's embedded sample data.

``python -m pipelines.pmwg_queries.sample_data`` regenerates ``data/trips.avro`` and
``data/queries.avro`` (the committed files are its output; regenerating gives the same bytes).

Model (test data, not DP noise, so a seeded numpy generator is fine): 12,000 trips over six hours
of one morning, arrivals following a rush-hour profile; each trip has a duration (log-normal,
longer in the rush hour) bucketed into 32 two-minute bins (the last bin holds ≥ 62 min) and one of
4 payment types, so the domain is 32 × 4 = 128 cells (C order: cell = bin·4 + payment). Queries
(1,200, spread over the same six hours) come from four templates: duration ranges ("trips
shorter than k minutes", "between a and b minutes"), payment-type marginals, one duration bin,
and one cell. A few malformed trips and queries exercise the dead-letter path.
"""

import argparse
import datetime
import os
from typing import Any, Dict, List, Tuple

import fastavro
import numpy as np

from beam_dp.io.queries import QUERY_SCHEMA
from beam_dp.io.queries import query_to_avro
from beam_dp.queries import LinearQuery

__all__ = [
    'DATA_DIR',
    'DOMAIN_SHAPE',
    'DOMAIN_SIZE',
    'QUERIES_PATH',
    'SAMPLE_START',
    'TRIPS_PATH',
    'TRIP_SCHEMA',
    'cell_of',
    'generate_queries',
    'generate_trips',
    'main',
]

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
TRIPS_PATH = os.path.join(DATA_DIR, 'trips.avro')
QUERIES_PATH = os.path.join(DATA_DIR, 'queries.avro')
SAMPLE_START = datetime.datetime(2024, 6, 3, 6, tzinfo=datetime.timezone.utc)   # a Monday 06:00
SPAN_SECONDS = 6 * 3600
SEED = 20240603
NUM_TRIPS = 12_000
NUM_QUERIES = 1_200
BIN_MINUTES = 2
NUM_BINS = 32
PAYMENTS = ('card', 'cash', 'app', 'voucher')
DOMAIN_SHAPE = (NUM_BINS, len(PAYMENTS))
DOMAIN_SIZE = NUM_BINS * len(PAYMENTS)

TRIP_SCHEMA: Dict[str, Any] = {
    'type': 'record', 'name': 'Trip', 'namespace': 'pipelines.pmwg_queries',
    'fields': [
        {'name': 'trip_id', 'type': 'string'},
        {'name': 'event_time_micros', 'type': 'long'},
        {'name': 'duration_seconds', 'type': 'double'},
        {'name': 'payment', 'type': 'string'},
    ],
}


def cell_of(trip: Dict[str, Any]) -> int:
    """The domain element of a trip: duration bin · 4 + payment index.

    Raises:
      ValueError: for a missing, negative or non-finite duration or an unknown payment type.
    """
    duration = float(trip['duration_seconds'])
    if not np.isfinite(duration) or duration < 0:
        raise ValueError(f'duration_seconds must be finite and >= 0, got {duration!r}')
    b = min(NUM_BINS - 1, int(duration // (60 * BIN_MINUTES)))
    return b * len(PAYMENTS) + PAYMENTS.index(trip['payment'])


def _start_micros() -> int:
    return int(SAMPLE_START.timestamp()) * 1_000_000


def generate_trips(seed: int = SEED) -> List[Dict[str, Any]]:
    rng = np.random.default_rng(seed)
    # Rush-hour arrival profile: a base rate plus a peak around 08:30.
    grid = np.linspace(0, 1, 10_000)
    rate = 0.4 + np.exp(-((grid - 0.42) / 0.12) ** 2)
    cdf = np.cumsum(rate) / rate.sum()
    offsets = np.sort(np.interp(rng.random(NUM_TRIPS), cdf, grid)) * SPAN_SECONDS
    trips = []
    for i, off in enumerate(offsets):
        rush = np.exp(-((off / SPAN_SECONDS - 0.42) / 0.12) ** 2)
        duration = float(np.exp(rng.normal(np.log(11 * 60) + 0.5 * rush, 0.55)))
        payment = PAYMENTS[int(rng.choice(4, p=(0.55, 0.15, 0.25, 0.05)))]
        trips.append({'trip_id': f't{i:05d}', 'event_time_micros': _start_micros() + int(off * 1e6),
                      'duration_seconds': round(duration, 1), 'payment': payment})
    for j, k in enumerate((500, 4_000, 9_000)):     # malformed: dead-lettered by the job
        bad = dict(trips[k], trip_id=f'bad{j}')
        bad['duration_seconds' if j != 1 else 'payment'] = -5.0 if j != 1 else 'bitcoin'
        trips.insert(k, bad)
    return trips


def _template(rng) -> Tuple[str, LinearQuery]:
    kind = int(rng.choice(4, p=(0.4, 0.3, 0.2, 0.1)))
    if kind == 0:
        a = int(rng.integers(0, NUM_BINS // 2))
        b = int(rng.integers(a + 1, NUM_BINS + 1))
        if rng.random() < 0.5:
            a = 0
        return 'duration_range', LinearQuery.range(DOMAIN_SIZE, a * 4, b * 4)
    if kind == 1:
        return 'payment_marginal', LinearQuery.marginal(DOMAIN_SHAPE, (1,),
                                                        (int(rng.integers(0, 4)),))
    if kind == 2:
        return 'duration_bin', LinearQuery.marginal(DOMAIN_SHAPE, (0,),
                                                    (int(rng.integers(0, 12)),))
    return 'cell', LinearQuery.marginal(DOMAIN_SHAPE, (0, 1), (int(rng.integers(0, 12)),
                                                               int(rng.integers(0, 4))))


def generate_queries(seed: int = SEED + 1) -> List[Dict[str, Any]]:
    """Query records: the Avro query plus ``event_time_micros`` and ``template``."""
    rng = np.random.default_rng(seed)
    out = []
    for j in range(NUM_QUERIES):
        name, query = _template(rng)
        record = query_to_avro(query, f'q{j:05d}-{name}')
        record['event_time_micros'] = _start_micros() + int((j + 0.5) / NUM_QUERIES
                                                            * SPAN_SECONDS * 1e6)
        record['template'] = name
        out.append(record)
    bad = dict(out[600], id='q-bad-range')
    bad['params'] = dict(bad['params'], start=5, stop=500, shape=[], dims=[], values=[])
    bad['kind'] = 'RANGE'
    out.insert(601, bad)
    return out


def query_record_schema() -> Dict[str, Any]:
    """QUERY_SCHEMA plus the query's event time and template name (the job's query files)."""
    import copy  # pylint: disable=import-outside-toplevel
    schema = copy.deepcopy(QUERY_SCHEMA)
    schema['name'] = 'TimedLinearQuery'
    schema['fields'] = schema['fields'] + [
        {'name': 'event_time_micros', 'type': 'long'},
        {'name': 'template', 'type': 'string', 'default': ''}]
    return schema


def write(trips_path: str = TRIPS_PATH, queries_path: str = QUERIES_PATH) -> None:
    os.makedirs(DATA_DIR, exist_ok=True)
    with open(trips_path, 'wb') as f:
        fastavro.writer(f, TRIP_SCHEMA, generate_trips(), codec='deflate',
                        sync_marker=b'beam_dp.trips.v1')
    with open(queries_path, 'wb') as f:
        fastavro.writer(f, query_record_schema(), generate_queries(), codec='deflate',
                        sync_marker=b'beam_dp.query.v1')


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--trips_output', default=TRIPS_PATH)
    parser.add_argument('--queries_output', default=QUERIES_PATH)
    args = parser.parse_args(argv)
    write(args.trips_output, args.queries_output)


if __name__ == '__main__':
    main()
