"""Named exceptions of beam_dp.

Every error a user can trigger by a bad argument is a ``ValueError`` or ``TypeError`` subclass
with a message naming the class, the argument and the value; budget problems raise
``BudgetExceededError`` while the pipeline is being built, before any data is read.
"""

__all__ = [
    'BeamDpError',
    'BudgetExceededError',
    'InvalidParamsError',
    'InvalidRecordError',
    'UnsupportedMechanismError',
]


class BeamDpError(Exception):
    """Base class of every beam_dp error."""


class InvalidParamsError(BeamDpError, ValueError):
    """A mechanism or transform was constructed with an invalid parameter."""


class BudgetExceededError(BeamDpError, ValueError):
    """The privacy costs requested from a budget exceed it (raised at pipeline construction)."""


class InvalidRecordError(BeamDpError, ValueError):
    """A record cannot be processed; transforms route it to their dead-letter output."""


class UnsupportedMechanismError(BeamDpError, ValueError):
    """A mechanism was asked for a guarantee or an operation it does not provide."""
