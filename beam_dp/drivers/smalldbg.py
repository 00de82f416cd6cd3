"""The drivers (pure, no Beam) of SmallDBG and ERMG: the ``BBEngine`` of the growing-database loop
(``beam_dp.drivers.growing``) around ``beam_dp.mechanisms.smalldb.smalldbg`` /
``beam_dp.mechanisms.ermg.ermg``, under a name of their own, plus the public view of an
instance's current release (the synthetic database / the model), which is post-processing.

``run_instance(engine, items, rng, label)`` over a whole stream gives exactly what the Beam job
gives under the same noise (the replay parity tests); the loop adds nothing else.
"""

from typing import Any, Optional

from beam_dp.drivers.growing import BBEngine
from beam_dp.mechanisms.bb_scheduler import BBImprover
from beam_dp.mechanisms.bb_scheduler import BBScheduler
from beam_dp.mechanisms.bb_scheduler import BBState

__all__ = [
    'ERMG_NAME',
    'SMALLDBG_NAME',
    'current_release',
    'ermg_engine',
    'smalldbg_engine',
]

SMALLDBG_NAME = 'smalldbg'
ERMG_NAME = 'ermg'


def smalldbg_engine(mechanism: BBScheduler) -> BBEngine:
    """The loop engine of one SmallDBG instance (records cut at epoch starts)."""
    return BBEngine(mechanism, SMALLDBG_NAME)


def ermg_engine(mechanism: BBImprover) -> BBEngine:
    """The loop engine of one ERMG instance (one lazy run per size, at query times)."""
    return BBEngine(mechanism, ERMG_NAME)


def current_release(state: Optional[BBState]) -> Any:
    """The instance's current public release (``SyntheticDatabase`` / ``ERMModel``), or None
    before the first run. Public: it is the black box's output."""
    return None if state is None else state.output
