"""Test helpers for users of beam_dp: ``replay``, the one reference of every family (a driver
driven exactly as the Beam job's release loop drives it)."""

# The package exports what ``beam_dp.testing.replay`` exports (its ``__all__``).
from beam_dp.testing.replay import *  # noqa: F401,F403  pylint: disable=wildcard-import
from beam_dp.testing.replay import __all__  # noqa: F401
