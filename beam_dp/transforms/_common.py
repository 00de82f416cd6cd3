"""Transitional: the shared helpers moved to ``beam_dp.transforms.shell``; this module only
re-exports them for the families not yet ported to the shell (delete it once none imports it)."""

from beam_dp.transforms.shell import DEAD_LETTER
from beam_dp.transforms.shell import ContinualOutputs
from beam_dp.transforms.shell import dead_letter
from beam_dp.transforms.shell import to_micros

__all__ = [
    'ContinualOutputs',
    'DEAD_LETTER',
    'dead_letter',
    'to_micros',
]
