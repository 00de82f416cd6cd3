"""The contract every continual mechanism passes (subclass ``ContinualMechanismContract``)."""

import pickle

import numpy as np

from beam_dp import noise
from beam_dp.accounting import BudgetAccountant
from beam_dp.accounting import PrivacyBudget
from beam_dp.mechanisms.base import ContinualMechanism


def _arrays(state):
    return {k: np.array(v, copy=True) for k, v in vars(state).items()
            if isinstance(v, np.ndarray)}


class ContinualMechanismContract:
    """Subclasses define ``make(**overrides)`` (a noisy mechanism), ``make_noise_free()`` (ε huge)
    and ``inputs()`` (a list of step values)."""

    def make(self, **overrides):
        raise NotImplementedError

    def make_noise_free(self):
        raise NotImplementedError

    def inputs(self):
        raise NotImplementedError

    def test_satisfies_protocol(self):
        assert isinstance(self.make(), ContinualMechanism)

    def test_is_frozen(self):
        m = self.make()
        try:
            m.epsilon = 123.0
        except Exception:  # dataclasses.FrozenInstanceError
            return
        raise AssertionError('mechanism params must be frozen')

    def test_init_state_is_deterministic(self):
        m = self.make()
        a, b = m.init_state(), m.init_state()
        assert pickle.dumps(a) == pickle.dumps(b)

    def test_step_does_not_mutate_its_input_state(self):
        m = self.make()
        state = m.init_state()
        rng = noise.seeded(0)
        for value in self.inputs()[:20]:
            before = _arrays(state)
            dump = pickle.dumps(state)
            _, new_state = m.step(state, value, rng)
            assert pickle.dumps(state) == dump
            for name, array in _arrays(state).items():
                np.testing.assert_array_equal(array, before[name])
                assert not getattr(state, name).flags.writeable
            state = new_state

    def test_zero_noise_gives_exact_prefix_sums(self):
        m = self.make_noise_free()
        state = m.init_state()
        rng = noise.seeded(1)
        total = 0
        for value in self.inputs():
            total = total + np.asarray(value)
            release, state = m.step(state, value, rng)
            np.testing.assert_allclose(release, total, atol=1e-6)

    def test_seeded_runs_are_reproducible(self):
        m = self.make()

        def run():
            state, out, rng = m.init_state(), [], noise.seeded(42)
            for value in self.inputs():
                release, state = m.step(state, value, rng)
                out.append(np.asarray(release).tolist())
            return out
        assert run() == run()

    def test_privacy_cost_is_accepted_by_the_accountant(self):
        m = self.make()
        cost = m.privacy_cost()
        budget = PrivacyBudget(rho=cost.rho) if cost.is_zcdp else PrivacyBudget(epsilon=cost.epsilon)
        BudgetAccountant(budget).spend(type(m).__name__, cost)

    def test_state_pickles(self):
        m = self.make()
        state = m.init_state()
        rng = noise.seeded(3)
        for value in self.inputs()[:9]:
            _, state = m.step(state, value, rng)
        clone = pickle.loads(pickle.dumps(state))
        a, _ = m.step(state, self.inputs()[0], noise.seeded(9))
        b, _ = m.step(clone, self.inputs()[0], noise.seeded(9))
        np.testing.assert_array_equal(a, b)
