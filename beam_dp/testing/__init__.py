"""Test helpers for users of beam_dp: ``replay``, the one reference of every family (a driver
driven exactly as the Beam job's release loop drives it)."""

from beam_dp.testing.replay import Element
from beam_dp.testing.replay import Replayed
from beam_dp.testing.replay import Watermark
from beam_dp.testing.replay import key_events
from beam_dp.testing.replay import keyed_events
from beam_dp.testing.replay import release_table
from beam_dp.testing.replay import replay
from beam_dp.testing.replay import stream_events

__all__ = [
    'Element',
    'Replayed',
    'Watermark',
    'key_events',
    'keyed_events',
    'release_table',
    'replay',
    'stream_events',
]
