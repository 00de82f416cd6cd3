"""The mechanism contract: every mechanism is a pure state machine.

* The mechanism object is a frozen dataclass of its parameters, validated in ``__post_init__``.
* ``init_state()`` returns an immutable state; no method mutates a state in place.
* A continual mechanism has ``step(state, value, rng) -> (release, new_state)``: it consumes one
  step's already-bounded input and returns that step's release.
* An interactive mechanism has ``add_data(state, ..., rng)`` and
  ``answer(state, query, rng) -> (answer, new_state)``.
* ``privacy_cost()`` is the cost for one privacy unit whose contribution is bounded as the
  mechanism declares (its sensitivity parameters); the accountant composes it.
* ``rng`` is a ``beam_dp.noise.RandomSource``; nothing else is random.
"""

import typing
from typing import Any, Protocol, Tuple

from beam_dp.accounting import PrivacyCost
from beam_dp.noise import RandomSource

__all__ = [
    'ContinualMechanism',
    'InteractiveMechanism',
]

State = typing.TypeVar('State')


@typing.runtime_checkable
class ContinualMechanism(Protocol):
    """A continual-release mechanism: one release per step, on a data-independent schedule."""

    def init_state(self) -> Any:
        ...

    def step(self, state: Any, value: Any, rng: RandomSource) -> Tuple[Any, Any]:
        ...

    def privacy_cost(self) -> PrivacyCost:
        ...


@typing.runtime_checkable
class InteractiveMechanism(Protocol):
    """An interactive mechanism: data arrives with ``add_data``, queries get ``answer``."""

    def init_state(self) -> Any:
        ...

    def add_data(self, state: Any, data: Any, rng: RandomSource) -> Any:
        ...

    def answer(self, state: Any, query: Any, rng: RandomSource) -> Tuple[Any, Any]:
        ...

    def privacy_cost(self) -> PrivacyCost:
        ...
