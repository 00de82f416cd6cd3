"""What 'ReleaseNoisyValues' does when a runner sends a step's data and that step's fired release
timer in ONE Fn API ``Elements`` message (docs/runners.md, "A new job that starts on a backlog").

The Python SDK harness queues a message's timers before its data (``data_plane._GrpcDataChannel.
_read_inputs``: ``for timer in elements.timers`` then ``for data in elements.data``), and the
bundle processor consumes that queue in order, so the step is released first and its data is
dead-lettered as late. Sent in two messages (data first), the data is counted. These tests drive
the harness's real ``BundleProcessor`` and gRPC data channel with hand-made messages, as a
portable runner does; they pin the SDK behaviour that the docs rely on (Flink 2.62 and Prism
never send on-time data in one message with its step's fired timer: see the docs).
"""

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.coders.coder_impl import create_InputStream
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker import bundle_processor
from apache_beam.runners.worker import data_plane
from apache_beam.runners.worker import sdk_worker
from apache_beam.runners.worker import statecache
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_dp.noise import NoiseKeyRef
from beam_dp import ContinualCountPerKey
from beam_dp import PrivacyBudget
from beam_dp.io.records import DeadLetter

START, STEP = 1_700_000_000, 5
KEY_ENV = 'BEAM_DP_HARNESS_ORDER_TEST_KEY'
Elements = beam_fn_api_pb2.Elements


@pytest.fixture(autouse=True)
def noise_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, '5a' * 32)


def release_stage(monkeypatch):
    """The ProcessBundleDescriptor of the stage holding 'ReleaseNoisyValues', as the FnApiRunner
    builds it (releases go through a GroupByKey so that they leave the stage as data)."""
    seen = []
    register = worker_handlers.WorkerHandlerManager.register_process_bundle_descriptor
    monkeypatch.setattr(worker_handlers.WorkerHandlerManager,
                        'register_process_bundle_descriptor',
                        lambda self, d: (seen.append(d), register(self, d))[1])
    with beam.Pipeline(runner=FnApiRunner()) as p:
        out = (p | beam.Create([('a', START + 1)])
               | beam.Map(lambda kv: TimestampedValue(kv, kv[1]))
               | ContinualCountPerKey(public_keys=['a', 'b'], start=START, step=STEP,
                                      end=START + 2 * STEP, budget=PrivacyBudget(epsilon=1.0),
                                      noise_key=NoiseKeyRef('env:' + KEY_ENV, 'tests'), label='Counts'))
        _ = (out.releases | beam.Map(lambda r: (r.key, (r.step, r.value))) | beam.GroupByKey())
    return next(d for d in seen if any('ReleaseNoisyValues' in t.unique_name
                                       for t in d.transforms.values()))


class _Channel(data_plane._GrpcDataChannel):  # pylint: disable=protected-access
    """The SDK's gRPC data channel, its input fed by hand through ``_read_inputs``."""

    def sent(self):
        self.close()
        return list(self._write_outputs())


class _Factory(data_plane.DataChannelFactory):
    channel = None

    def create_data_channel(self, remote_grpc_port, data_stream_id=None):
        return self.channel

    def create_data_channel_from_url(self, url, data_stream_id=None):
        return self.channel

    def close(self):
        pass


class Harness:
    """One 'ReleaseNoisyValues' bundle processor with its state kept across bundles."""

    def __init__(self, descriptor):
        self.factory = _Factory()
        self.state = worker_handlers.StateServicer()
        self.processor = bundle_processor.BundleProcessor(
            frozenset(), descriptor,
            sdk_worker.GlobalCachingStateHandler(statecache.StateCache(0), self.state),
            self.factory)
        ops = self.processor.ops.values()
        self.source = next(o for o in ops if isinstance(o, bundle_processor.DataInputOperation))
        self.sinks = [o for o in ops if isinstance(o, bundle_processor.DataOutputOperation)]
        self.release = next(k for k in self.processor.timers_info if k[1].endswith('release'))

    def data(self, bundle, values=(), last=True):
        impl = self.source.windowed_coder_impl
        out = [Elements.Data(instruction_id=bundle, transform_id=self.source.transform_id,
                             data=b''.join(impl.encode_nested(v) for v in values))]
        if last:
            out.append(Elements.Data(instruction_id=bundle,
                                     transform_id=self.source.transform_id, is_last=True))
        return out

    def timers(self, bundle, fired=b'', last=True):
        out = [Elements.Timers(instruction_id=bundle, transform_id=self.release[0],
                               timer_family_id=self.release[1], timers=fired)] if fired else []
        if last:
            out.extend(Elements.Timers(instruction_id=bundle, transform_id=t,
                                       timer_family_id=f, is_last=True)
                       for t, f in self.processor.timers_info)
        return out

    def run(self, bundle, messages):
        """Runs one bundle fed ``messages``; returns (set timers as bytes, decoded outputs)."""
        self.factory.channel = _Channel()
        self.factory.channel._read_inputs(iter(messages))  # pylint: disable=protected-access
        with self.state.process_instruction_id(bundle):
            self.processor.process_bundle(bundle)
        self.processor.reset()
        sent = self.factory.channel.sent()
        timers = b''.join(t.timers for m in sent for t in m.timers if t.timers)
        outputs = []
        for sink in self.sinks:
            for data in (d for m in sent for d in m.data if d.data):
                if data.transform_id == sink.transform_id:
                    stream = create_InputStream(data.data)
                    while stream.size() > 0:
                        outputs.append(sink.windowed_coder_impl.decode_from_stream(
                            stream, True).value)
        return timers, outputs


def step0(monkeypatch, together):
    """The seed sets step 0's timer (bundle 1); bundle 2 brings a partial sum of step 0 (3
    records of key 'a') and that timer, fired: in one message or data first in its own."""
    harness = Harness(release_stage(monkeypatch))
    seed = WindowedValue((0, None), Timestamp(START), [GlobalWindow()])
    timer, _ = harness.run('b1', [Elements(data=harness.data('b1', [seed]),
                                           timers=harness.timers('b1'))])
    assert timer, 'the seed set no release timer'
    partial = WindowedValue((0, (0, np.array([0]), np.array([3]))),
                            Timestamp(micros=(START + STEP) * 10**6 - 1), [GlobalWindow()])
    if together:
        messages = [Elements(data=harness.data('b2', [partial]),
                             timers=harness.timers('b2', timer))]
    else:
        messages = [Elements(data=harness.data('b2', [partial], last=False)),
                    Elements(data=harness.data('b2')[1:], timers=harness.timers('b2', timer))]
    _, outputs = harness.run('b2', messages)
    dead = [o for o in outputs if isinstance(o, DeadLetter)]
    releases = dict(o for o in outputs if not isinstance(o, DeadLetter))  # key: (step, value)
    return releases, dead


def test_data_before_its_timer_in_separate_messages_is_counted(monkeypatch):
    releases, dead = step0(monkeypatch, together=False)
    assert dead == []
    assert set(releases) == {'a', 'b'}


def test_data_with_its_timer_in_one_message_is_released_first_and_dead_lettered(monkeypatch):
    apart, _ = step0(monkeypatch, together=False)
    together, dead = step0(monkeypatch, together=True)
    assert [(d.stage, d.reason.split(' (')[0], d.record) for d in dead] == [
        ('ReleaseNoisyValues', 'late: step 0 was already released',
         "{'key': 'a', 'step': 0, 'value': 3}")]
    # Same noise (same key and address): the one release differs by exactly the 3 records.
    assert apart['b'] == together['b']
    assert apart['a'][0] == together['a'][0] == 0
    assert apart['a'][1] - together['a'][1] == 3.0
