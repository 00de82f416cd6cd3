"""Pure drivers (no Beam): per family, exactly what its DoFns call — key layout, step clock,
quantisation, costs and the shard state machines. Driving one in a notebook gives exactly what
the Beam job gives under the same seed."""

from beam_dp.drivers.bounds import BoundsChooser
from beam_dp.drivers.clock import StepClock
from beam_dp.drivers.keyed import KeyLayout
from beam_dp.drivers.keyed import KeyedReleaseDriver
from beam_dp.drivers.keyed import PublicShardState
from beam_dp.drivers.private_keys import PrivateKeys
from beam_dp.drivers.private_keys import PrivateKeysShard
from beam_dp.drivers.private_keys import PrivateKeysShardState

__all__ = [
    'BoundsChooser',
    'KeyLayout',
    'KeyedReleaseDriver',
    'PrivateKeys',
    'PrivateKeysShard',
    'PrivateKeysShardState',
    'PublicShardState',
    'StepClock',
]
