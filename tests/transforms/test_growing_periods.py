"""Per-period instances of the growing-database families (``period=``): the same answers as the
per-period key they replace, and their state expires: cleared by the release loop once the
period's last step is released, so that the state held stays bounded over a long job."""

import apache_beam as beam
import pytest
from apache_beam.utils.timestamp import Timestamp

from beam_dp.drivers.growing import GrowingItem
from beam_dp.drivers.growing import QUERY
from beam_dp.drivers.growing import RECORD
from beam_dp.drivers.growing import instance_key
from beam_dp.errors import InvalidParamsError
from beam_dp.io import state_coder
from beam_dp.queries import LinearQuery
from beam_dp.testing import replay
from beam_dp.testing.replay import Element
from beam_dp.testing.replay import Watermark
from beam_dp.transforms.bb_scheduler import BBSchedulerQueries
from beam_dp.transforms.shell import key_bytes
from tests.transforms.test_bb_transforms import scheduler_args
from tests.transforms.test_pmwg_transform import LABEL
from tests.transforms.test_pmwg_transform import N
from tests.transforms.test_pmwg_transform import SEED
from tests.transforms.test_pmwg_transform import as_dict
from tests.transforms.test_pmwg_transform import pmwg
from tests.transforms.test_pmwg_transform import run

PERIOD = 30          # seconds: three steps of 10 s (CLOCK of test_pmwg_transform)
Q = LinearQuery.range(N, 0, N)


def data_period(record):
    """The per-period key the ``period=`` argument replaces (epoch-aligned periods): records
    are (domain element, event time), query ids 'q<period>'."""
    return int(record[1] // PERIOD)


def query_period(query):
    return int(query[0][1:])


def periodic(**kwargs):
    return pmwg(domain_fn=lambda r: r[0], n=21, **kwargs)


def _events(periods: int, per_step: int = 12):
    """Per 10 s step: ``per_step`` records; per period: a query in its second step (the third
    step of every period is empty: the instance must expire on the period's clock anyway)."""
    events = []
    for period in range(periods):
        base = period * PERIOD
        events += [('data', (i % 4, base + 0.5 + i * 9 / per_step), base + 0.5 + i * 9 / per_step)
                   for i in range(per_step)]
        events += [('data', (i % 4, base + 10.5 + i * 9 / per_step),
                    base + 10.5 + i * 9 / per_step)
                   for i in range(per_step)]
        events.append(('queries', (f'q{period:04d}', Q), base + 19.9))
    return events


def _replay_events(events, period_micros, until_seconds):
    """The loop's input (as 'TagData' / 'TagQueries' key the items), a watermark every step."""
    out, steps = [], {}
    for kind, value, ts in events:
        steps.setdefault(int(ts // 10), []).append((kind, value, ts))
    for step in range(int(until_seconds // 10)):
        for kind, value, ts in sorted(steps.get(step, []), key=lambda e: e[2]):
            micros = Timestamp.of(ts).micros
            key = instance_key(None, False, micros, period_micros)
            item = ((micros, RECORD, value[0], value[0]) if kind == 'data'
                    else (micros, QUERY, value[0], value))
            out.append(Element(key_bytes(key), GrowingItem(key, item)))
        out.append(Watermark(Timestamp.of((step + 1) * 10).micros))
    return out


def _held_bytes(replayed) -> int:
    """What the loop holds in state after the replay: every key's cell and pending items,
    encoded as the job stores them."""
    return sum(len(state_coder.encode(state)) for state in replayed.states.values()
               if state is not None) + sum(len(state_coder.encode(item))
                                           for items in replayed.pending.values()
                                           for item in items)


def test_expired_instances_leave_no_state_and_the_state_held_stays_bounded():
    """Driver level (``replay`` drives the loop's driver as the job does): over 10, 40 and 160
    periods, the live instances and the bytes held stay those of the period in flight, while the
    per-period key without ``period=`` (the same answers) keeps every instance for ever."""
    transform = periodic(period=PERIOD, end=None)
    keyed = periodic(data_key_fn=data_period, query_key_fn=query_period, end=None)
    held = {}
    for periods in (10, 40, 160):
        # the next period in flight: its first step released, its second not yet
        events = _replay_events(_events(periods + 1), PERIOD * 1_000_000, periods * PERIOD + 15)
        expiring = replay(transform.loop_driver(), events, label=LABEL, seed=SEED,
                          end_input=False)
        growing = replay(keyed.loop_driver(), events, label=LABEL, seed=SEED, end_input=False)
        # The same answers (the instance key and every noise address are the per-period key's).
        assert expiring.releases == growing.releases
        assert len([a for a in expiring.releases if a.refusal is None]) == periods
        # Bounded: the instance of the period in flight only.
        assert len(expiring.states) == 1
        held[periods] = _held_bytes(expiring)
        # Without expiry: one instance per period, for ever.
        assert len(growing.states) == periods + 1
        assert _held_bytes(growing) > periods * 50
    assert 0 < max(held.values()) == min(held.values()) < 2_000, held


def test_an_instance_without_items_in_its_last_steps_still_expires_at_its_period_end():
    transform = periodic(period=PERIOD, end=None)
    events = _replay_events(_events(1)[:5], PERIOD * 1_000_000, 25)    # step 0 only
    first = replay(transform.loop_driver(), events, label=LABEL, seed=SEED, end_input=False)
    assert len(first.states) == 1           # waits for the period's last step (20 s to 30 s)
    events.append(Watermark(Timestamp.of(30).micros))
    after = replay(transform.loop_driver(), events, label=LABEL, seed=SEED, end_input=False)
    assert after.states == {} and after.releases == first.releases


def test_period_pipeline_equals_the_per_period_key_and_late_items_never_reopen_an_instance():
    """Pipeline tier (TestStream, streaming): the answers of ``period=`` are those of the
    per-period key (its replay: the same as its job); a record and a query of an expired period arriving late are dead-lettered
    and refused 'LATE' by the lateness gate, never answered by a new instance."""
    events = _events(4)
    batches = [(10 * (s + 1), [e for e in events if 10 * s < e[2] <= 10 * (s + 1)])
               for s in range(12)]
    late = [('data', (1, 5.0), 5.0), ('queries', ('late', Q), 6.0)]       # period 0, after its end
    batches.insert(5, (55, late))
    keyed = periodic(data_key_fn=data_period, query_key_fn=query_period, end=None)
    want = as_dict(replay(keyed.loop_driver(), _replay_events(events, PERIOD * 1_000_000, 125),
                          label=LABEL, seed=SEED).releases)
    assert len(want) == 4 and all(status != 'NOT_STARTED' for status, _, _ in want.values())

    def check(answers):
        got = as_dict(answers)
        assert got.pop('late')[0] == 'LATE'
        assert got == want

    def check_dead(dead):
        assert [d.reason for d in dead] == [
            'late: step 0 was already released (allowed lateness 0s)']

    run(batches, periodic(period=PERIOD, end=120), check, check_dead)


def test_scheduler_period_replay_expires_too():
    transform = BBSchedulerQueries(**scheduler_args(domain_fn=lambda r: r[0], end=None,
                                                    period=PERIOD, testing_seed=SEED))
    events = _replay_events(_events(20, per_step=60), PERIOD * 1_000_000, 20 * PERIOD + 5)
    out = replay(transform.loop_driver(), events, label=LABEL, seed=SEED, end_input=False)
    assert len(out.states) <= 1
    assert len({r.epoch for r in out.tagged['releases']}) >= 1
    assert len(out.tagged['releases']) >= 20        # every period ran its box


@pytest.mark.parametrize('kwargs, match', [
    ({'period': 0}, 'period'),
    ({'period': PERIOD, 'data_key_fn': data_period}, 'both data_key_fn and query_key_fn'),
])
def test_period_validation(kwargs, match):
    with pytest.raises(InvalidParamsError, match=match):
        pmwg(**kwargs)


def test_the_old_window_hint_names_period():
    from apache_beam.transforms import window
    with pytest.raises(InvalidParamsError, match='period=<seconds>'):
        with beam.Pipeline() as p:
            data = p | 'D' >> beam.Create([1]) | 'W' >> beam.WindowInto(window.FixedWindows(10))
            queries = p | 'Q' >> beam.Create([]) | 'WQ' >> beam.WindowInto(
                window.FixedWindows(10))
            _ = (data, queries) | pmwg(period=PERIOD)
