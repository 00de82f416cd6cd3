"""On a real Pub/Sub (the Cloud SDK emulator): ``--lateness=arrival`` counts a ride iff its own
publish time is before its claimed step's end + allowed lateness, whatever other rides claim.

The continual-counts job runs in a subprocess (streaming ``BundleBasedDirectRunner``, ε = 10⁶ so
releases are the exact counts) with ``--lateness=arrival``: it reads the subscription without a
timestamp attribute (element timestamp = the publish time the emulator sets), takes each ride's
claimed event time from its ``event_time_micros`` field, and 'ArrivalTimeLateness' decides
lateness per message. The test publishes, in wall-clock time, rides whose claims and publish
times are chosen around the deadlines (step 4 s, lateness 2 s, ≥ 1 s from any deadline):

* a ride claiming step 4 (a far-future claim) published in step 0: counted in step 4, and it
  makes no one late — on a watermark estimated from claims (Kafka CreateTime, Pub/Sub
  ``timestamp_attribute`` on Dataflow) such a claim can push the watermark past step 0;
* a ride of step 0 published after step 0 ended but before its deadline: counted in step 0;
* rides published after their step's deadline (steps 0 and 1): dead-lettered at
  'ArrivalTimeLateness' with the record;
* a ride claiming a time before the start: dead-lettered there;
* filler rides of a station outside the public keys every 0.5 s (the reader's watermark moves
  with traffic), dead-lettered at 'ExtractAndValidate'.

A second subscription on the input topic reads every message's real publish time; the expected
releases and dead letters are computed from those by the rule (and must equal the planned fates,
so the test exercises each case). Then: every step of every station released exactly once, each
value the running count of the rides the rule accepts, and exactly the late rides dead-lettered.
"""

import collections
import os
import time

import pytest

from tests import runners
from tests.integration.test_pubsub_e2e import LATENESS_SECONDS
from tests.integration.test_pubsub_e2e import REPO
from tests.integration.test_pubsub_e2e import RESULT_TIMEOUT
from tests.integration.test_pubsub_e2e import STARTUP_SECONDS
from tests.integration.test_pubsub_e2e import STEP_SECONDS
from tests.integration.test_pubsub_e2e import _Job
from tests.integration.test_pubsub_e2e import _Pubsub
from tests.integration.test_pubsub_e2e import _ride
from tests.integration.test_pubsub_e2e import _stop_process_tree
from tests.integration.test_pubsub_e2e import emulator  # noqa: F401  pylint: disable=unused-import

pytestmark = [pytest.mark.integration, pytest.mark.pubsub, runners.requires_pubsub_emulator]

STATIONS = ['Central', 'Harbour', 'Museum', 'Idle']
STEPS = 5

#: (publish at, seconds after start; rider; station; claimed event time, seconds after start;
#: planned fate: the step it is counted in, or the dead-letter reason's start).
PLAN = [
    (0.5, 'on-time-0', 'Central', 1.0, 0),
    (0.8, 'far-future', 'Harbour', 4 * STEP_SECONDS + 1.0, 4),
    (2.0, 'before-start', 'Central', -100.0, 'event time is before the release start'),
    (STEP_SECONDS + 0.5, 'after-step-0', 'Museum', 3.0, 0),          # deadline: 6 s
    (STEP_SECONDS + 3.5, 'late-0', 'Museum', 2.0, 'late: step 0'),
    (2 * STEP_SECONDS + 1.0, 'on-time-1', 'Central', STEP_SECONDS + 2.0, 1),   # deadline: 10 s
    (2 * STEP_SECONDS + 3.5, 'late-1', 'Harbour', STEP_SECONDS + 1.0, 'late: step 1'),
]


def _fate(start, publish_s, claim_s):
    """The arrival rule on the real publish time (seconds since the epoch)."""
    step = int((claim_s - start) // STEP_SECONDS)
    if claim_s < start:
        return 'event time is before the release start'
    if publish_s >= start + (step + 1) * STEP_SECONDS + LATENESS_SECONDS:
        return f'late: step {step}'
    return step


def test_arrival_lateness_on_the_pubsub_emulator(emulator, tmp_path):  # noqa: F811
    began = time.monotonic()
    ps = _Pubsub(emulator)
    input_topic = ps.topic('arrival-rides')
    audit = ps.subscription(input_topic, 'arrival-audit')      # the real publish times
    start = int(time.time() + STARTUP_SECONDS)
    end = start + STEPS * STEP_SECONDS
    job = _Job(ps, 'arrival', input_topic, 1e6, start, end, tmp_path)
    job.argv = [a for a in job.argv if not a.startswith('--timestamp_attribute')]
    job.argv.append('--lateness=arrival')
    assert f'--public_keys={",".join(STATIONS)}' in job.argv
    env = dict(os.environ, PUBSUB_EMULATOR_HOST=emulator, PYTHONUNBUFFERED='1')
    env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
    job.launch(env)
    try:
        ps.publish(input_topic, b'\x00not avro\xff', name='probe').result()
        deadline = time.monotonic() + max(STARTUP_SECONDS + 30, 90)
        while not job.dead:
            job.check_alive()
            job.collect(ps)
            if time.monotonic() > deadline:
                pytest.fail(f'job not reading after {time.monotonic() - began:.0f}s:\n'
                            f'{job.log_tail()}')
            time.sleep(0.5)
        if time.time() > start - 1:
            pytest.fail(f'the job took {time.monotonic() - began:.0f}s to come up, more than '
                        f'the {STARTUP_SECONDS:.0f}s planned before step 0; raise '
                        f'BEAM_DP_E2E_STARTUP_SECONDS')

        schedule = sorted(PLAN)
        expected_keys = {(k, s) for k in STATIONS for s in range(STEPS)}
        futures, filler, filler_next, next_collect = [], 0, 0.0, 0.0
        stop_at = end + LATENESS_SECONDS + RESULT_TIMEOUT
        while True:
            now = time.time()
            while schedule and start + schedule[0][0] <= now:
                _, rider, station, claim, _ = schedule.pop(0)
                data, _ = _ride(rider, station, start + claim)
                futures.append(ps.publish(input_topic, data, name=rider))
            if now >= filler_next and now >= start:
                data, _ = _ride(f'filler-{filler}', 'Elsewhere', now)
                futures.append(ps.publish(input_topic, data, name=f'filler-{filler}'))
                filler, filler_next = filler + 1, now + 0.5
            if now >= next_collect:
                for f in futures:
                    f.result(timeout=30)
                futures = []
                job.check_alive()
                job.collect(ps)
                next_collect = now + 0.5
                released = {(r.key, r.step) for r in job.releases}
                if (released >= expected_keys and not schedule) or now > stop_at:
                    break
            time.sleep(0.05)
        time.sleep(1.0)
        job.collect(ps)
        assert job.stop() is not None, 'the job did not exit after SIGTERM'

        # -- the rule on the real publish times ------------------------------------------------
        published = {}
        for _ in range(20):
            batch = _drain_with_publish_time(ps, audit)
            published.update(batch)
            if all(rider in published for _, rider, _, _, _ in PLAN):
                break
            time.sleep(0.5)
        counted = collections.Counter()
        late = {}
        for at, rider, station, claim, planned in PLAN:
            fate = _fate(start, published[rider], start + claim)
            assert fate == planned, (rider, 'published', published[rider] - start,
                                     'planned', at, fate)
            if isinstance(fate, int):
                counted[(station, fate)] += 1
            else:
                late[rider] = fate

        releases = collections.Counter((r.key, r.step) for r in job.releases)
        assert set(releases) == expected_keys, (sorted(releases), job.log_tail())
        assert all(n == 1 for n in releases.values()), releases
        for r in job.releases:
            truth = sum(n for (k, s), n in counted.items() if k == r.key and s <= r.step)
            assert r.value == pytest.approx(truth, abs=1e-6), (r, truth)

        # Dead letters of the planned rides: exactly the late / out-of-range ones, at
        # 'ArrivalTimeLateness', each holding its record; the far-future claim made no one late.
        planned_dead = [d for d in job.dead if 'filler-' not in d.record
                        and d.stage != 'parse_pubsub']
        by_rider = {}
        for d in planned_dead:
            riders = [rider for _, rider, _, _, _ in PLAN if f"'{rider}'" in d.record]
            assert len(riders) == 1, d
            by_rider.setdefault(riders[0], []).append(d)
        assert set(by_rider) == set(late), (by_rider, late)
        for rider, fate in late.items():
            (d,) = by_rider[rider]
            assert d.stage == 'ArrivalTimeLateness' and d.reason.startswith(fate), d
        # Fillers: dead-lettered as not public (or past the end), never as late.
        fillers = [d for d in job.dead if 'filler-' in d.record]
        assert fillers and not any(d.reason.startswith('late') for d in fillers), fillers[:3]
        assert all(d.stage in ('ExtractAndValidate', 'ArrivalTimeLateness') for d in fillers)
        print(f'arrival-time lateness on the emulator in {time.monotonic() - began:.1f}s')
    finally:
        if job.proc is not None and job.proc.poll() is None:
            _stop_process_tree(job.proc, timeout=10)


def _drain_with_publish_time(ps, subscription):
    """{name attribute: publish time (s since the epoch)} of everything available now."""
    out = {}
    while True:
        response = ps.subscriber.pull(request={'subscription': subscription,
                                               'max_messages': 500,
                                               'return_immediately': True}, timeout=10)
        if not response.received_messages:
            return out
        for m in response.received_messages:
            name = m.message.attributes.get('name')
            if name:
                out[name] = m.message.publish_time.timestamp()
        ps.subscriber.acknowledge(request={
            'subscription': subscription,
            'ack_ids': [m.ack_id for m in response.received_messages]})
