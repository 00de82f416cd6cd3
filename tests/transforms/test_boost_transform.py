"""BoostQueries: blocks sealed by timers (empty ones included), late rows dead-lettered and never
changing a sealed block, seeded parity with the pure driver (criterion 29), replay idempotency
(criterion 30), refusals, noise_key bit-identical re-runs, streaming with TestStream."""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms.window import TimestampedValue

from beam_dp.noise import NoiseKeyRef
from beam_dp import PrivacyBudget
from beam_dp.errors import InvalidParamsError
from beam_dp.io.boost import BoostQueryRecord
from beam_dp.io.boost import boost_to_avro
from beam_dp.drivers.boost_events import BoostItem
from beam_dp.mechanisms.boost import Readiness
from beam_dp.testing import replay
from beam_dp.transforms.boost import QUERY
from beam_dp.transforms.boost import ROW
from beam_dp.transforms.boost import BoostQueries
from tests import helpers

SHAPE = (2, 4)
STEP = 10                      # seconds per block
US = 10 ** 6


def _transform(**kw):
    args = dict(public_datasets=['covid', 'flu'], shape=list(SHAPE),
                budget=PrivacyBudget(epsilon=10.0), start=0, step=STEP, end=5 * STEP,
                readiness=Readiness(c0=2, s0=1), testing_seed=7)
    args.update(kw)
    return BoostQueries(**args)


def _rows(blocks=(0, 1, 3), per_block=400, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for b in blocks:
        for _ in range(per_block):
            t = b * STEP + float(rng.integers(0, STEP * 1000)) / 1000
            out.append((t, ('covid', (int(rng.random() < 0.3), int(rng.integers(4))))))
    return out


def _q(qid, first, last, latest=0, subsets=([1], []), dataset='covid'):
    return BoostQueryRecord(qid, dataset, [list(s) for s in subsets], [], first, last, latest)


QUERIES = [(12.0, _q('q1', 0, 0)), (12.0, _q('q0', 0, 0, subsets=([0], [1, 2]))),
           (35.0, _q('q2', 0, 2)), (35.0, _q('q3', 1, 3)), (41.0, _q('q1', 0, 0)),
           (41.0, _q('q4', 0, 0, latest=2)), (44.0, _q('q5', 0, 9)),
           (44.0, _q('x', 0, 0, dataset='nope'))]


OUTPUTS = ('answers', 'refusals', 'ledger', 'blocks', 'dead_letter')


def _outputs(out):
    """Every output of ``out``, by name, for ``helpers.run``."""
    return {name: getattr(out, name) for name in OUTPUTS}


def _run_batch(transform, rows, queries):
    def build(p):
        data = p | 'Data' >> beam.Create([TimestampedValue(r, t) for t, r in rows])
        qs = p | 'Queries' >> beam.Create([TimestampedValue(q, t) for t, q in queries])
        return _outputs((data, qs) | transform)
    return helpers.run(build, streaming=False)


def _reference(transform, rows, queries):
    """``beam_dp.testing.replay`` of the transform's loop driver over the same events: every
    answer, refusal, ledger row and sealed block of 'covid'."""
    items = [BoostItem(ROW, round(t * US), tuple(a)) for t, (d, a) in rows if d == 'covid']
    items += [BoostItem(QUERY, round(t * US), q) for t, q in queries if q.dataset == 'covid']
    out = replay(transform.loop_driver(), [('covid', None)] + [('covid', i) for i in items],
                 label=transform.label, seed=7)
    assert out.pending['covid'] == []
    return out.releases + [r for values in out.tagged.values() for r in values]


def test_batch_parity_with_the_pure_driver_blocks_replay_and_refusals():
    transform = _transform()
    got = _run_batch(transform, _rows(), QUERIES)
    ref = _reference(transform, _rows(), QUERIES)
    answers = sorted(got['answers'])
    assert answers == sorted(r for r in ref if type(r).__name__ == 'BoostAnswerRecord')
    assert sorted(got['ledger']) == sorted(r for r in ref if type(r).__name__ ==
                                           'BoostLedgerRow')
    # Every block of both datasets is sealed, the empty ones (2, 4; all of 'flu') included.
    sizes = {(b.dataset, b.block): b.size for b in got['blocks']}
    assert sizes == {**{('covid', b): n for b, n in enumerate((400, 400, 0, 400, 0))},
                     **{('flu', b): 0 for b in range(5)}}
    # q1 replayed at t=41: the identical answer, flagged, no extra ledger row.
    q1 = [a for a in answers if a.query_id == 'q1']
    assert len(q1) == 2 and q1[0].value == q1[1].value and {a.replay for a in q1} == {False, True}
    assert sum(r.query_id == 'q1' for r in got['ledger']) == sum(
        r.query_id == 'q1' for r in ref if type(r).__name__ == 'BoostLedgerRow')
    # Refusals: the one refusal record (``QueryAnswer``), the reference's BoostRefusal reasons.
    reasons = {r.query_id: r.refusal for r in got['refusals']}
    assert reasons == {'q5': 'WINDOW_NOT_SEALED', 'x': 'WRONG_DATASET'}
    assert {r.query_id: r.reason.upper() for r in ref
            if type(r).__name__ == 'BoostRefusal'} == {'q5': 'WINDOW_NOT_SEALED'}
    assert all(r.value is None and r.mechanism == 'boost' and "dataset '" in r.message
               for r in got['refusals'])
    # No output carries a true answer: values are noisy fractions, never the exact count.
    assert all(not hasattr(a, 'true_value') for a in answers)
    for record in answers + got['ledger'] + got['blocks'] + got['refusals']:
        boost_to_avro(record)
    # Per-block ledger: consumed never exceeds the capacity.
    assert all(r.consumed <= r.capacity + 1e-9 for r in got['ledger'])


def test_streaming_late_rows_dead_lettered_and_never_change_a_sealed_block():
    transform = _transform(end=4 * STEP)
    rows = _rows(blocks=(0, 1), per_block=200)
    stream = TestStream()
    stream.advance_watermark_to(0)
    stream.add_elements([TimestampedValue(('row', r), t) for t, r in rows])
    stream.add_elements([TimestampedValue(('q', _q('a', 0, 1)), 25.0)])
    stream.advance_watermark_to(26)
    # Block 0 and 1 are sealed now: these rows are late.
    stream.add_elements([TimestampedValue(('row', ('covid', (1, 1))), 3.0),
                         TimestampedValue(('row', ('covid', (1, 2))), 15.0),
                         TimestampedValue(('row', ('covid', (0, 0))), 27.0)])
    stream.add_elements([TimestampedValue(('q', _q('b', 0, 2)), 33.0),
                         TimestampedValue(('q', _q('a', 0, 1)), 33.0)])
    stream.advance_watermark_to_infinity()
    def build(p):
        events = p | stream
        data = events | 'Rows' >> beam.FlatMap(lambda e: [e[1]] if e[0] == 'row' else [])
        qs = events | 'Qs' >> beam.FlatMap(lambda e: [e[1]] if e[0] == 'q' else [])
        return _outputs((data, qs) | transform)
    got = helpers.run(build)
    late = [d for d in got['dead_letter'] if d.reason.startswith('late: step ')]
    assert sorted(d.event_time_micros for d in late) == [3 * US, 15 * US]
    # Each holds the input record as it was (issue 21, item 6).
    assert sorted(d.record for d in late) == sorted(
        [repr(('covid', (1, 1))), repr(('covid', (1, 2)))])
    sizes = {b.block: b.size for b in got['blocks'] if b.dataset == 'covid'}
    assert sizes == {0: 200, 1: 200, 2: 1, 3: 0}
    answers = {(a.query_id, a.replay): a for a in got['answers']}
    assert answers[('a', False)].value == answers[('a', True)].value
    assert ('b', False) in answers
    # The same events through the pure driver (late rows excluded: they never entered).
    kept = rows + [(27.0, ('covid', (0, 0)))]
    queries = [(25.0, _q('a', 0, 1)), (33.0, _q('b', 0, 2)), (33.0, _q('a', 0, 1))]
    ref = _reference(transform, kept, queries)
    assert sorted(got['answers']) == sorted(
        r for r in ref if type(r).__name__ == 'BoostAnswerRecord')


@pytest.mark.parametrize('extra', [{}, dict(noise='gaussian',
                                            budget=PrivacyBudget(epsilon=2.0, delta=1e-6))])
def test_noise_key_gives_bit_identical_reruns(monkeypatch, extra):
    monkeypatch.setenv('BDP_BOOST_KEY', '0123456789abcdef' * 4)
    key = NoiseKeyRef('env:BDP_BOOST_KEY', 'tests')
    runs = [_run_batch(_transform(testing_seed=None, noise_key=key, label='B', **extra),
                 _rows(per_block=100), QUERIES[:4])['answers']
            for _ in range(2)]
    assert sorted(runs[0]) == sorted(runs[1]) and runs[0]


def test_avro_query_dicts_and_malformed_inputs_go_to_dead_letters():
    queries = [(12.0, boost_to_avro(_q('d', 0, 0))), (12.0, {'query_id': 'bad'}),
               (12.0, 'not a query')]
    rows = [(1.0, ('covid', (1, 1))), (2.0, ('covid', (5, 1))), (3.0, ('flu',)),
            (4.0, ('measles', (0, 0))), (60.0, ('covid', (0, 0)))]
    got = _run_batch(_transform(), rows, queries)
    # The Avro dict is a valid query (block 0 holds one row: Laplace at α would overdraw the
    # filter, so it is refused for budget; it is answered or refused, never dead-lettered).
    assert [r.query_id for r in got['answers'] + got['refusals']] == ['d']
    stages = sorted((d.stage, d.reason.split(':')[0][:20]) for d in got['dead_letter'])
    assert [s for s, _ in stages] == ['ExtractQueries'] * 2 + ['ExtractRows'] * 4
    assert any(r.startswith('event time is after') for _, r in stages)


def test_bad_parameters_name_the_transform():
    for kw, word in ((dict(public_datasets='covid'), 'public_datasets'),
                     (dict(preset='nope'), 'preset'),
                     (dict(budget=PrivacyBudget(epsilon=1.0, delta=1e-6)), 'budget'),
                     (dict(alpha=0.0), 'alpha'), (dict(step=0), 'step'),
                     (dict(window_bound=3), 'window_bound'),
                     (dict(cache_capacity=1), 'cache_capacity'),
                     (dict(retention_blocks=0), 'retention_blocks'),
                     (dict(replay_retention=0), 'replay_retention')):
        with pytest.raises(InvalidParamsError, match=f'BoostQueries: .*{word}'):
            _transform(**kw)
    with pytest.raises(InvalidParamsError, match='end'):
        _run_batch(_transform(end=None), [], [])


def test_state_bounds_reach_the_driver():
    t = _transform(cache_capacity=100, retention_blocks=8, replay_retention=3 * STEP)
    driver = t.driver('covid')
    assert driver.replay_retention_micros == 3 * STEP * US
    assert (driver.mechanism.cache_capacity, driver.mechanism.retention_blocks) == (100, 8)
    assert _transform().driver('flu').replay_retention_micros is None
