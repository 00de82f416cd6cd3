"""The mechanism contract of DESIGN.md, as test classes every mechanism's tests subclass.

* ``MechanismContract``: what every mechanism satisfies. Its parameters are a frozen dataclass
  (the mechanism object itself) validated in ``__post_init__`` (a bad parameter raises
  ``InvalidParamsError`` naming it); ``init_state()`` is immutable and deterministic; no
  operation mutates the state it is given; a seeded run is reproducible; the mechanism and its
  states survive a pickle round trip (a restored worker continues bit-identically); it declares
  a privacy cost the accountant accepts, and a budget smaller than that cost refuses.
* ``ContinualMechanismContract``: ``step(state, value, rng) -> (release, state)`` over
  ``inputs()``; ``CounterContract`` adds exact prefix sums at zero noise.
* ``InteractiveMechanismContract``: ``add_data`` / ``answer`` over ``events()``.

A subclass builds its mechanism with ``make(**overrides)`` and says what it does with
``script()``: a list of operations ``op(mechanism, state, rng) -> (output, new_state)``.
``tests/mechanisms/test_contract_all.py`` checks that every mechanism class exported by
``beam_dp.mechanisms`` is made by some subclass.
"""

import dataclasses
import math
import pickle

import numpy as np
import pytest

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.accounting import PrivacyCost
from beam_dp.errors import BudgetExceededError
from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms.base import ContinualMechanism
from beam_dp.mechanisms.base import InteractiveMechanism

__all__ = [
    'ContinualMechanismContract',
    'CounterContract',
    'InteractiveMechanismContract',
    'MechanismContract',
    'step_op',
]

#: Bad values tried for every parameter of these names that the mechanism under test sets.
_BAD_VALUES = {
    'epsilon': (0.0, -1.0, math.nan, math.inf),
    'rho': (0.0, -1.0, math.nan),
    'delta': (-0.1, math.nan),
    'beta': (-0.1, 1.5, math.nan),
    'alpha': (0.0, -0.5, math.nan),
    'n': (0, -3),
    'domain_size': (0, -1),
    'horizon': (0, -1),
    'dimension': (0, -1),
    'max_partitions': (0, -1),
}


def _arrays(value, seen=None):
    """Every numpy array reachable from ``value`` (dataclass fields, tuples, dicts)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, (tuple, list, frozenset, set)):
        children = list(value)
    elif isinstance(value, dict):
        children = list(value.keys()) + list(value.values())
    else:
        return []
    return [a for c in children for a in _arrays(c, seen)]


def step_op(value):
    """The operation 'one step of a continual mechanism with ``value``'."""
    return lambda mech, state, rng: mech.step(state, value, rng)


class MechanismContract:
    """Subclasses define ``make(**overrides)`` and ``script()``."""

    def make(self, **overrides):
        raise NotImplementedError

    def script(self):
        raise NotImplementedError

    def initial_state(self, mech, rng):
        """The state the script starts from (``init_state()``; None for a stateless rule)."""
        del rng
        return mech.init_state()

    def invalid_params(self):
        """``(overrides, parameter name)`` pairs that must raise ``InvalidParamsError``.

        Default: the bad values of ``_BAD_VALUES`` for every such parameter the mechanism sets
        (not None); a subclass adds the mechanism's own.
        """
        mech = self.make()
        return [({f.name: bad}, f.name) for f in dataclasses.fields(mech)
                if f.name in _BAD_VALUES and getattr(mech, f.name) is not None
                for bad in _BAD_VALUES[f.name]]

    # -- running the script ---------------------------------------------------------------------

    def run(self, mech, seed, start=0, state=None):
        """(outputs, states) of ``script()[start:]`` from ``state`` (default: the initial
        state), with ``noise.seeded(seed)``; checks that no operation mutates its input state
        and, from the initial state, that every state it returns holds read-only arrays (not
        from a state restored from a pickle: numpy does not keep the flag)."""
        rng = noise.seeded(seed)
        fresh = state is None
        if fresh:
            state = self.initial_state(mech, rng)
        outputs, states = [], [state]
        for op in self.script()[start:]:
            before = pickle.dumps(state)
            output, new_state = op(mech, state, rng)
            assert pickle.dumps(state) == before, f'{type(mech).__name__} mutated its input state'
            for array in _arrays(new_state) if fresh else ():
                assert not array.flags.writeable, f'{type(mech).__name__}: writeable state array'
            outputs.append(output)
            states.append(new_state)
            state = new_state
        return outputs, states

    # -- the contract ---------------------------------------------------------------------------

    def test_params_are_a_frozen_dataclass(self):
        mech = self.make()
        assert dataclasses.is_dataclass(mech) and type(mech).__dataclass_params__.frozen
        for field in dataclasses.fields(mech):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(mech, field.name, getattr(mech, field.name))

    def test_bad_params_raise_at_construction_naming_the_parameter(self):
        cases = self.invalid_params()
        assert cases, 'no invalid parameters to try'
        for overrides, name in cases:
            with pytest.raises(InvalidParamsError, match=name):
                self.make(**overrides)

    def test_init_state_is_immutable_and_deterministic(self):
        mech = self.make()
        a = self.initial_state(mech, noise.seeded(0))
        b = self.initial_state(mech, noise.seeded(0))
        assert pickle.dumps(a) == pickle.dumps(b)
        if a is None:       # a stateless rule
            return
        assert dataclasses.is_dataclass(a) and type(a).__dataclass_params__.frozen, type(a)
        for array in _arrays(a):
            assert not array.flags.writeable

    def test_operations_do_not_mutate_their_input_state(self):
        outputs, states = self.run(self.make(), seed=5)
        assert len(outputs) == len(self.script()) >= 3
        if states[0] is not None:
            assert any(pickle.dumps(s) != pickle.dumps(states[0]) for s in states[1:]), \
                'the script never changes the state'

    def test_seeded_runs_are_reproducible(self):
        mech = self.make()
        first, _ = self.run(mech, seed=42)
        again, _ = self.run(mech, seed=42)
        assert pickle.dumps(first) == pickle.dumps(again)

    def test_pickle_round_trip_continues_bit_identically(self):
        mech = self.make()
        clone = pickle.loads(pickle.dumps(mech))
        assert clone == mech
        half = len(self.script()) // 2
        _, states = self.run(mech, seed=3)
        restored = pickle.loads(pickle.dumps(states[half]))
        expected, _ = self.run(mech, seed=11, start=half, state=states[half])
        actual, _ = self.run(clone, seed=11, start=half, state=restored)
        assert pickle.dumps(actual) == pickle.dumps(expected)

    def test_declares_its_privacy_cost(self):
        mech = self.make()
        cost = mech.privacy_cost()
        assert isinstance(cost, PrivacyCost)
        assert cost.epsilon > 0 or cost.rho > 0
        declared = getattr(mech, 'epsilon', None)
        if declared is not None and not cost.is_zcdp:
            assert cost.epsilon <= declared * (1 + 1e-12)
        if cost.is_zcdp:
            exact, smaller = PrivacyBudget(rho=cost.rho), PrivacyBudget(rho=cost.rho / 2)
        else:
            exact = PrivacyBudget(epsilon=cost.epsilon, delta=cost.delta)
            smaller = PrivacyBudget(epsilon=cost.epsilon / 2, delta=cost.delta)
        BudgetAccountant(exact).spend(type(mech).__name__, cost)
        with pytest.raises(BudgetExceededError):
            BudgetAccountant(smaller).spend(type(mech).__name__, cost)


class ContinualMechanismContract(MechanismContract):
    """A continual mechanism: subclasses define ``inputs()`` (one value per step)."""

    def inputs(self):
        raise NotImplementedError

    def script(self):
        return [step_op(value) for value in self.inputs()]

    def test_satisfies_protocol(self):
        assert isinstance(self.make(), ContinualMechanism)


class CounterContract(ContinualMechanismContract):
    """A continual counter: also ``make_noise_free()`` (ε huge), whose releases are the exact
    prefix sums of ``inputs()``."""

    def make_noise_free(self):
        raise NotImplementedError

    def test_zero_noise_gives_exact_prefix_sums(self):
        mech = self.make_noise_free()
        state = mech.init_state()
        rng = noise.seeded(1)
        total = 0
        for value in self.inputs():
            total = total + np.asarray(value)
            release, state = mech.step(state, value, rng)
            np.testing.assert_allclose(release, total, atol=1e-6)


class InteractiveMechanismContract(MechanismContract):
    """An interactive mechanism: subclasses define ``events()``, a list of ``('data', batch)``
    and ``('query', query)``."""

    def events(self):
        raise NotImplementedError

    def script(self):
        ops = []
        for kind, payload in self.events():
            if kind == 'data':
                ops.append(lambda mech, state, rng, batch=payload: (
                    None, mech.add_data(state, batch, rng)))
            elif kind == 'query':
                ops.append(lambda mech, state, rng, query=payload: mech.answer(state, query, rng))
            else:
                raise ValueError(f'unknown event kind {kind!r}')
        return ops

    def test_satisfies_protocol(self):
        assert isinstance(self.make(), InteractiveMechanism)
