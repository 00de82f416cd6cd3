"""Test helpers for users of beam_dp (parity references)."""

from beam_dp.testing.reference import reference_releases

__all__ = [
    'reference_releases',
]
