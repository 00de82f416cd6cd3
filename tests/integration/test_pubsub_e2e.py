"""End to end on a real Pub/Sub (the Cloud SDK emulator): the continual-counts job, streaming.

The test starts the emulator itself (``gcloud beta emulators pubsub start`` on a free loopback
port; stopped, JVM included, in the fixture's teardown), creates the topics and subscriptions
with google-cloud-pubsub, and runs ``python -m pipelines.continual_counts`` twice at once in
subprocesses on the streaming DirectRunner (``BundleBasedDirectRunner``, named explicitly: the
switching DirectRunner would first try Prism), each on its own subscription of one input topic:

* ε = 10⁶ (noise ≪ 1): every release equals the true running count;
* ε = 1 with ``--noise_key=file:...`` (a secret noise key; the jobs take no seed): every release
  equals ``beam_dp.testing.replay`` driven by the same keyed source (same noise, release for
  release) and lies within 6·noise_stddev of the truth.

It publishes a realistic stream: each step's rides (Avro, event time in the ``event_time``
attribute, epoch millis) in real time at the start of their step, a rider riding twice in one
step (the second ride is cut by the contribution bound), a station with no rides, malformed
messages (not Avro, trailing bytes, empty rider id, unknown station) and one ride published after
its step was released (late). It then checks that every step of every public key is released
exactly once on the output topic, and that each bad input is on the dead-letter topic with its
reason; finally it terminates the jobs and checks that they exit.

Timing: the DirectRunner's Pub/Sub reader sets the watermark to the wall clock after each pull,
so the schedule is laid out in wall-clock time: ``start`` leaves the jobs time to come up (they
prove they are up by dead-lettering a first malformed message), steps are 4 s with 2 s of
allowed lateness, and rides are published ~4-6 s before their step is released.
"""

import collections
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests import runners

pytestmark = [pytest.mark.integration, pytest.mark.pubsub, runners.requires_pubsub_emulator]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT = 'beam-dp-e2e'
STATIONS = ['Central', 'Harbour', 'Museum', 'Idle']    # 'Idle' never has a ride
STEP_SECONDS = 4
LATENESS_SECONDS = 2
STEPS = 5
SEED = 20240602
# Wall-clock seconds between launching the jobs and the start of step 0. A job must be up
# (reading its subscription) before step 0 starts; it usually takes 10-20 s here.
STARTUP_SECONDS = float(os.environ.get("BEAM_DP_E2E_STARTUP_SECONDS", "45"))
EMULATOR_START_TIMEOUT = 90
RESULT_TIMEOUT = 60          # after the last release is due
MAX_STDDEVS = 6.0


# -- the emulator -----------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _descendants(pid: int):
    """All live descendants of ``pid`` (via /proc), children first."""
    children = collections.defaultdict(list)
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat', encoding='utf-8') as f:
                fields = f.read().rsplit(')', 1)[1].split()
            children[int(fields[1])].append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _stop_process_tree(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group of ``proc`` and every descendant (the emulator's JVM), then
    SIGKILL what is left."""
    tree = [proc.pid] + _descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        for pid in tree:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc.poll()
            alive = [p for p in tree if os.path.exists(f'/proc/{p}') and not _is_zombie(p)]
            if not alive:
                return
            time.sleep(0.2)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


@pytest.fixture(scope='module')
def emulator(tmp_path_factory):
    """``host:port`` of a running Pub/Sub emulator; stopped (JVM included) afterwards."""
    port = _free_port()
    host = f'127.0.0.1:{port}'
    data_dir = tmp_path_factory.mktemp('pubsub-emulator')
    log_path = data_dir / 'emulator.log'
    with open(log_path, 'wb') as log:
        proc = subprocess.Popen(
            ['gcloud', 'beta', 'emulators', 'pubsub', 'start', f'--host-port={host}',
             f'--data-dir={data_dir}', '--quiet'],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    try:
        deadline = time.monotonic() + EMULATOR_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f'Pub/Sub emulator exited with {proc.returncode}:\n'
                            f'{log_path.read_text(errors="replace")[-3000:]}')
            try:
                with urllib.request.urlopen(f'http://{host}/', timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f'Pub/Sub emulator not ready after {EMULATOR_START_TIMEOUT}s:\n'
                            f'{log_path.read_text(errors="replace")[-3000:]}')
            time.sleep(0.5)
        yield host
    finally:
        tree = [proc.pid] + _descendants(proc.pid)
        _stop_process_tree(proc)
        survivors = [p for p in tree if os.path.exists(f'/proc/{p}') and not _is_zombie(p)]
        assert not survivors, f'emulator processes still alive: {survivors}'


# -- helpers -----------------------------------------------------------------------------------------

class _Pubsub:
    """Admin + publish + pull against the emulator."""

    def __init__(self, host):
        os.environ['PUBSUB_EMULATOR_HOST'] = host
        from google.cloud import pubsub_v1  # pylint: disable=import-outside-toplevel
        self.publisher = pubsub_v1.PublisherClient()
        self.subscriber = pubsub_v1.SubscriberClient()

    def topic(self, name):
        path = self.publisher.topic_path(PROJECT, name)
        self.publisher.create_topic(name=path)
        return path

    def subscription(self, topic, name):
        path = self.subscriber.subscription_path(PROJECT, name)
        self.subscriber.create_subscription(name=path, topic=topic, ack_deadline_seconds=60)
        return path

    def publish(self, topic, data: bytes, **attributes):
        return self.publisher.publish(topic, data, **attributes)

    def drain(self, subscription):
        """Everything available now (acknowledged): [(data, attributes)]."""
        out = []
        while True:
            response = self.subscriber.pull(
                request={'subscription': subscription, 'max_messages': 500,
                         'return_immediately': True}, timeout=10)
            if not response.received_messages:
                return out
            out.extend((m.message.data, dict(m.message.attributes))
                       for m in response.received_messages)
            self.subscriber.acknowledge(request={
                'subscription': subscription,
                'ack_ids': [m.ack_id for m in response.received_messages]})


def _noise_key_file(tmp_path):
    """A 32-byte secret noise key in a file (the same for every job of the test)."""
    path = tmp_path / 'noise.key'
    if not path.exists():
        path.write_bytes(hashlib.sha256(f'beam_dp e2e {SEED}'.encode()).digest())
    return path


class _Job:
    """One ``python -m pipelines.continual_counts`` subprocess and its topics."""

    def __init__(self, ps, name, input_topic, epsilon, start, end, tmp_path):
        self.name = name
        self.epsilon = epsilon
        self.input_subscription = ps.subscription(input_topic, f'{name}-in')
        self.output_topic = ps.topic(f'{name}-releases')
        self.output_subscription = ps.subscription(self.output_topic, f'{name}-releases-check')
        self.dead_topic = ps.topic(f'{name}-dead')
        self.dead_subscription = ps.subscription(self.dead_topic, f'{name}-dead-check')
        self.log_path = tmp_path / f'{name}.log'
        self.argv = [
            sys.executable, '-m', 'pipelines.continual_counts',
            '--runner=BundleBasedDirectRunner', '--streaming',
            f'--input_subscription={self.input_subscription}',
            f'--output_topic={self.output_topic}',
            f'--dead_letter_topic={self.dead_topic}',
            '--timestamp_attribute=event_time',
            f'--epsilon={epsilon}',
            f'--step_seconds={STEP_SECONDS}',
            f'--allowed_lateness_seconds={LATENESS_SECONDS}',
            f'--public_keys={",".join(STATIONS)}',
            f'--start={start}', f'--end={end}',
            f'--noise_key=file:{_noise_key_file(tmp_path)}', '--stream_id=tests', '--ledger=none',
            '--progress_every=50',
        ]
        self.proc = None
        self.releases = []
        self.dead = []

    def launch(self, env):
        with open(self.log_path, 'wb') as log:
            self.proc = subprocess.Popen(self.argv, cwd=REPO, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def log_tail(self, chars=4000):
        try:
            return self.log_path.read_text(errors='replace')[-chars:]
        except OSError:
            return ''

    def check_alive(self):
        if self.proc.poll() is not None:
            pytest.fail(f'job {self.name} exited early with {self.proc.returncode}:\n'
                        f'{self.log_tail()}')

    def collect(self, ps):
        from pipelines.common import pubsub_codec  # pylint: disable=import-outside-toplevel
        for data, attributes in ps.drain(self.output_subscription):
            release = pubsub_codec.decode_release(data)
            assert attributes['key'] == release.key and attributes['step'] == str(release.step)
            self.releases.append(release)
        for data, _ in ps.drain(self.dead_subscription):
            self.dead.append(pubsub_codec.decode_dead_letter(data))

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _stop_process_tree(self.proc, timeout=10)
            return None


def _ride(rider, station, event_time_s, duration=600.0):
    from pipelines.continual_counts.events import RideEvent  # pylint: disable=import-outside-toplevel
    from pipelines.continual_counts.events import encode_event  # pylint: disable=import-outside-toplevel
    micros = int(round(event_time_s * 1e6))
    return encode_event(RideEvent(rider, station, micros, duration)), micros


def _plan(start):
    """The rides per step: [(step, rider, station, event_time_s)], deterministic."""
    rides = []
    pattern = {'Central': [3, 1, 4, 0, 2], 'Harbour': [1, 0, 2, 5, 1], 'Museum': [0, 2, 0, 1, 3]}
    for step in range(STEPS):
        for station, per_step in pattern.items():
            for i in range(per_step[step]):
                t = start + step * STEP_SECONDS + 0.3 + (i * 0.37) % (STEP_SECONDS * 0.5)
                rides.append((step, f'rider-{station}-{step}-{i}', station, t))
    return rides


# -- the test ----------------------------------------------------------------------------------------

def test_continual_counts_end_to_end_on_the_pubsub_emulator(emulator, tmp_path):
    from beam_dp import ContinualCountPerKey  # pylint: disable=import-outside-toplevel
    from beam_dp import PrivacyBudget  # pylint: disable=import-outside-toplevel
    from beam_dp import UserLevel  # pylint: disable=import-outside-toplevel
    from beam_dp import noise  # pylint: disable=import-outside-toplevel
    from beam_dp.testing import keyed_events  # pylint: disable=import-outside-toplevel
    from beam_dp.testing import release_table  # pylint: disable=import-outside-toplevel
    from beam_dp.testing import replay  # pylint: disable=import-outside-toplevel

    began = time.monotonic()
    ps = _Pubsub(emulator)
    input_topic = ps.topic('rides')
    start = int(time.time() + STARTUP_SECONDS)
    end = start + STEPS * STEP_SECONDS
    exact = _Job(ps, 'exact', input_topic, 1e6, start, end, tmp_path)
    noisy = _Job(ps, 'noisy', input_topic, 1.0, start, end, tmp_path)
    jobs = [exact, noisy]
    env = dict(os.environ, PUBSUB_EMULATOR_HOST=emulator, PYTHONUNBUFFERED='1')
    env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
    for job in jobs:
        job.launch(env)
    try:
        # Malformed inputs. The first also tells when both jobs are up: its dead letter is out.
        probe = b'\x00not avro\xff'
        ps.publish(input_topic, probe, event_time=str(int(time.time() * 1000))).result()
        deadline = time.monotonic() + max(STARTUP_SECONDS + 30, 90)
        while not all(job.dead for job in jobs):
            for job in jobs:
                job.check_alive()
                job.collect(ps)
            if time.monotonic() > deadline:
                pytest.fail('jobs not reading after %.0fs:\n%s' % (
                    time.monotonic() - began,
                    '\n'.join(f'--- {j.name}\n{j.log_tail()}' for j in jobs)))
            time.sleep(0.5)
        ready_in = time.monotonic() - began
        print(f'jobs reading after {ready_in:.1f}s (step 0 starts at {STARTUP_SECONDS:.0f}s)')
        if time.time() > start - 1:
            pytest.fail(f'the jobs took {ready_in:.0f}s to come up, more than the '
                        f'{STARTUP_SECONDS:.0f}s planned before step 0; raise '
                        f'BEAM_DP_E2E_STARTUP_SECONDS')
        now_ms = str(int(time.time() * 1000))
        good, _ = _ride('rider-x', 'Central', start + 1.0)
        ps.publish(input_topic, good + b'\x00\x01', event_time=now_ms).result()   # trailing bytes
        empty_rider, _ = _ride('   ', 'Central', start + 1.0)
        ps.publish(input_topic, empty_rider, event_time=now_ms).result()
        unknown, _ = _ride('rider-y', 'Nowhere', start + 1.0)
        ps.publish(input_topic, unknown, event_time=now_ms).result()

        # The rides, in real time: each ride is published at its event time. Traffic never
        # stops (rides after the public end keep coming, and are dead-lettered): the reader's
        # watermark only moves when a pull returns messages.
        schedule = [(t, rider, station) for _, rider, station, t in _plan(start)]
        # Same rider, same station, same step, twice: one of the two rides is cut (m = 1).
        schedule += [(start + STEP_SECONDS + 0.5 + k, 'rider-twice', 'Harbour') for k in (0, 1)]
        schedule.sort()
        truth_events = [(station, int((t - start) // STEP_SECONDS))
                        for t, rider, station in schedule if rider != 'rider-twice']
        truth_events.append(('Harbour', 1))
        expected_keys = {(k, s) for k in STATIONS for s in range(STEPS)}
        late_published = False
        tail = 0
        tail_next = 0.0
        next_collect = 0.0
        deadline = end + LATENESS_SECONDS + RESULT_TIMEOUT
        futures = []
        while True:
            now = time.time()
            while schedule and schedule[0][0] <= now:
                t, rider, station = schedule.pop(0)
                data, micros = _ride(rider, station, t)
                futures.append(ps.publish(input_topic, data, event_time=str(micros // 1000)))
            if not schedule and now >= tail_next:
                # After the last planned ride: a ride after the public end every 0.5 s.
                data, micros = _ride(f'rider-after-{tail}', 'Central', max(now, end) + 1)
                futures.append(ps.publish(input_topic, data, event_time=str(micros // 1000)))
                tail += 1
                tail_next = now + 0.5
            if now >= next_collect:
                for f in futures:
                    f.result(timeout=30)
                futures = []
                for job in jobs:
                    job.check_alive()
                    job.collect(ps)
                next_collect = now + 0.5
                if not late_published and all(
                        any(r.step == 0 for r in job.releases) for job in jobs):
                    # Step 0 is out on both jobs: a ride of step 0 now is late.
                    data, micros = _ride('rider-late', 'Museum', start + 1.5)
                    ps.publish(input_topic, data, event_time=str(micros // 1000)).result()
                    late_published = True
                done = all({(r.key, r.step) for r in job.releases} >= expected_keys
                           and any(d.stage == 'ReleaseNoisyValues' for d in job.dead)
                           for job in jobs)
                if done or now > deadline:
                    break
            time.sleep(0.05)
        time.sleep(1.0)                 # anything released twice would be out by now
        for job in jobs:
            job.collect(ps)

        # Clean cancellation.
        for job in jobs:
            code = job.stop()
            assert code is not None, f'job {job.name} did not exit after SIGTERM'
            assert job.proc.poll() is not None

        # -- checks ------------------------------------------------------------------------------
        truth = collections.Counter(truth_events)
        cumulative = {}
        for key in STATIONS:
            running = 0
            for s in range(STEPS):
                running += truth[(key, s)]
                cumulative[(key, s)] = running

        unit = UserLevel(unit_fn=lambda r: r.rider_id, max_keys_per_unit=2,
                         max_contributions_per_step=1, max_steps_per_unit=3)
        spec = ContinualCountPerKey(
            public_keys=STATIONS, start=start, step=STEP_SECONDS, end=end,
            budget=PrivacyBudget(epsilon=1.0), privacy_unit=unit,
            allowed_lateness=LATENESS_SECONDS, key_fn=lambda r: r.station).driver
        keyed = noise.KeyedRandom(noise.NoiseKeyRef(f'file:{_noise_key_file(tmp_path)}',
                                                    stream_id='tests'))   # the job's --stream_id
        reference = release_table(replay(spec.loop_driver(), keyed_events(
            spec, [(k, s, None) for k, s in truth_events], steps=STEPS),
            label='ContinualCountPerStation', rng=keyed, end_input=False).releases)

        for job in jobs:
            log = job.log_tail()
            released = collections.Counter((r.key, r.step) for r in job.releases)
            assert set(released) == expected_keys, (job.name, sorted(released), log)
            assert all(n == 1 for n in released.values()), (
                job.name, {k: n for k, n in released.items() if n > 1})
            for r in job.releases:
                lo = (start + r.step * STEP_SECONDS) * 1_000_000
                assert (r.step_start_micros, r.step_end_micros) == (lo, lo + STEP_SECONDS * 10**6)
                assert r.epsilon == pytest.approx(job.epsilon) and r.metric == 'count'
                assert r.noise_stddev >= 0 if job is exact else r.noise_stddev > 0
                true_value = cumulative[(r.key, r.step)]
                if job is exact:
                    assert r.value == pytest.approx(true_value, abs=1e-6), (r, true_value)
                else:
                    assert abs(r.value - true_value) <= MAX_STDDEVS * r.noise_stddev, (
                        r, true_value)
                    assert r.value == reference[(r.key, r.step)][0], (
                        r, reference[(r.key, r.step)])

            reasons = [(d.stage, d.reason) for d in job.dead]
            def has(stage, text, reasons=reasons):
                return any(s == stage and text in r for s, r in reasons)
            assert has('parse_pubsub', 'payload is not an Avro'), reasons
            assert has('parse_pubsub', 'trailing byte'), reasons
            assert has('parse_pubsub', 'rider_id is empty'), reasons
            assert has('ExtractAndValidate', "key 'Nowhere' is not in the public key set"), reasons
            assert has('BoundContributions', 'max_contributions_per_step=1'), reasons
            # User level: 'BoundContributions' already knows step 0 is released (its shards'
            # clocks are seeded and hold its output watermark until they fire; issue 13), so the
            # late ride is dead-lettered there, with the release stage's reason.
            assert has('BoundContributions', 'late: step 0 was already released'), reasons
            late = [d for d in job.dead if d.reason.startswith('late:')]
            # Only the deliberately late ride (no on-time ride was late, or truth would be off).
            assert len(late) == 1 and 'rider-late' in late[0].record, late
        print(f'end to end in {time.monotonic() - began:.1f}s')
        assert time.monotonic() - began < 240, 'the end-to-end test took over 4 minutes'
    finally:
        for job in jobs:
            if job.proc is not None and job.proc.poll() is None:
                _stop_process_tree(job.proc, timeout=10)
