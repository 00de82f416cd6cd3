"""The mechanism contract (tests/mechanisms/contract.py) on every mechanism of beam_dp.mechanisms.

The counters run it in their own test files (test_binary_tree.py, test_infinite_counter.py,
test_blt.py, test_kary_tree.py: k-ary tree and per-step noise; test_balanced_tree.py,
test_unbounded_tree.py);
every other mechanism runs it here, and ``test_every_mechanism_runs_the_contract`` fails when a
mechanism is exported without a contract subclass.
"""

import dataclasses
import importlib
import inspect
import os
import pkgutil

import numpy as np
import pytest

import beam_dp.mechanisms
from beam_dp.mechanisms import AboveThresholdGrowing
from beam_dp.mechanisms import BBImprover
from beam_dp.mechanisms import BBScheduler
from beam_dp.mechanisms import BLTCounter
from beam_dp.mechanisms import BalancedTreeCounter
from beam_dp.mechanisms import ContinualKeySelection
from beam_dp.mechanisms import FullyDynamicCounter
from beam_dp.mechanisms import GaussianThresholdSelection
from beam_dp.mechanisms import KaryTreeCounter
from beam_dp.mechanisms import LaplaceQueryVector
from beam_dp.mechanisms import LaplaceThresholdSelection
from beam_dp.mechanisms import NodeMechanism
from beam_dp.mechanisms import NumericAboveThresholdGrowing
from beam_dp.mechanisms import NumericSparseGrowing
from beam_dp.mechanisms import PerStepCounter
from beam_dp.mechanisms import PMWG
from beam_dp.mechanisms import PrivateMultiplicativeWeights
from beam_dp.mechanisms import SparseCounter
from beam_dp.mechanisms import SparseVector
from beam_dp.mechanisms import StaticPMWBox
from beam_dp.mechanisms import TimePartitioner
from beam_dp.mechanisms import TruncatedGeometricSelection
from beam_dp.mechanisms import TwoStreamCounter
from beam_dp.mechanisms import Update
from beam_dp.mechanisms.boost import BoostRequest
from beam_dp.mechanisms.boost import TreePMWBypass
from beam_dp.mechanisms.erm import DPFTRL
from beam_dp.mechanisms.erm import PSGD
from beam_dp.mechanisms.erm import BinaryLogistic
from beam_dp.mechanisms.erm import DyadicERMSchedule
from beam_dp.mechanisms.erm import ERMRelease
from beam_dp.mechanisms.erm import clip_features
from beam_dp.mechanisms.growing_svt import PowerNoise
from beam_dp.queries import LinearQuery
from tests.mechanisms import contract
from tests.mechanisms.contract import ContinualMechanismContract
from tests.mechanisms.contract import InteractiveMechanismContract
from tests.mechanisms.contract import MechanismContract

DOMAIN = 8
QUERIES = tuple(LinearQuery.range(DOMAIN, a, a + 3) for a in range(5))


def _records(size, offset=0):
    return [(offset + i * 3) % DOMAIN for i in range(size)]


def _growing_events(n):
    """A query before n records (refused), n records, then queries interleaved with growth."""
    events = [('data', _records(n // 2)), ('query', QUERIES[0]), ('data', _records(n - n // 2))]
    for i, query in enumerate(QUERIES):
        events += [('query', query), ('data', _records(n // 3, offset=i))]
    return events


def _static_events(n):
    """A query before n records (refused), then exactly n records and queries."""
    return ([('data', _records(n // 2)), ('query', QUERIES[0]), ('data', _records(n - n // 2))]
            + [('query', q) for q in QUERIES])


# -- continual mechanisms (step) ---------------------------------------------------------------

class TestSparseVectorContract(ContinualMechanismContract):

    def make(self, **overrides):
        return SparseVector(**{**dict(epsilon=1.0, threshold=60.0), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'threshold': float('inf')}, 'threshold'),
                                           ({'monotone': 1}, 'monotone')]

    def inputs(self):
        return [0, 3, 1, 0, 5, 2, 0, 1]


class TestContinualKeySelectionContract(ContinualMechanismContract):

    def make(self, **overrides):
        return ContinualKeySelection(**{**dict(epsilon=1.0, delta=1e-3), **overrides})

    def inputs(self):
        return [0, 2, 1, 0, 4, 30, 0, 1, 2]


class TestTimePartitionerContract(ContinualMechanismContract):

    def make(self, **overrides):
        return TimePartitioner(**{**dict(epsilon=2.0, beta=0.1, c_theta=0.5,
                                         max_segment_ticks=5), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'c_theta': 0.0}, 'c_theta'),
                                           ({'max_segment_ticks': 0}, 'max_segment_ticks'),
                                           ({'skip_ahead': 'yes'}, 'skip_ahead')]

    def inputs(self):
        return [3, 0, 9, 1, 0, 0, 12, 4, 0, 2, 7, 0]


class TestSparseCounterContract(ContinualMechanismContract):

    def make(self, **overrides):
        return SparseCounter(**{**dict(epsilon=2.0, c_theta=1.0, dimension=2,
                                       max_segment_ticks=4), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'partition_fraction': 1.5}, 'partition_fraction'),
                                           ({'estimator': 'best'}, 'estimator')]

    def inputs(self):
        return [(t % 3, 2 * (t % 2)) for t in range(12)]


def _dynamic_updates():
    """Insertions of records 0..8 over the first ticks, then deletions of some of them."""
    ticks = [[Update(i, +1, i % 2) for i in range(3)], [Update(3, +1, 1), Update(4, +1, 0)],
             [], [Update(5, +1, 1), Update(0, -1, 0)], [Update(6, +1, 0)],
             [Update(1, -1, 1), Update(3, -1, 1)], [], [Update(7, +1, 1)], [Update(4, -1, 0)]]
    return ticks


class TestTwoStreamCounterContract(ContinualMechanismContract):

    def make(self, **overrides):
        return TwoStreamCounter(**{**dict(epsilon=4.0, c_theta=0.5, dimension=2,
                                          max_segment_ticks=3), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'partition_fraction': 0.0}, 'partition_fraction')]

    def inputs(self):
        return _dynamic_updates()


class TestFullyDynamicCounterContract(ContinualMechanismContract):

    def make(self, **overrides):
        return FullyDynamicCounter(**{**dict(epsilon=8.0, c_theta=0.3, dimension=2,
                                             max_segment_ticks=2), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'partition_fraction': 1.0}, 'partition_fraction'),
                                           ({'debug': 'on'}, 'debug')]

    def inputs(self):
        return _dynamic_updates()


class TestNodeMechanismContract(MechanismContract):
    """A node of the fully dynamic counter: built on its records, then stepped with deletions."""

    def make(self, **overrides):
        return NodeMechanism(**{**dict(epsilon=1.0, beta=0.1, dimension=2), **overrides})

    def initial_state(self, mech, rng):
        return mech.build(1, {i: i % 2 for i in range(12)}, rng)

    def script(self):
        deletions = [{0: 0}, {}, {1: 1, 2: 0}, {3: 1}, {}, {4: 0, 5: 1, 6: 0}, {7: 1}]
        return [lambda mech, state, rng, d=d: mech.step(state, d, rng) for d in deletions]


# -- one-shot key selection rules (stateless) ----------------------------------------------------

class _SelectionRuleContract(MechanismContract):
    rule = None

    def make(self, **overrides):
        return self.rule(**{**dict(epsilon=1.0, delta=1e-4, max_partitions=2), **overrides})

    def initial_state(self, mech, rng):
        return None

    def script(self):
        return [lambda mech, state, rng, n=n: (mech.select(n, rng), state)
                for n in (0, 1, 3, 10, 25, 60)]


class TestTruncatedGeometricSelectionContract(_SelectionRuleContract):
    rule = TruncatedGeometricSelection


class TestLaplaceThresholdSelectionContract(_SelectionRuleContract):
    rule = LaplaceThresholdSelection


class TestGaussianThresholdSelectionContract(_SelectionRuleContract):
    rule = GaussianThresholdSelection


# -- interactive mechanisms (add_data / answer) ------------------------------------------------

class TestPMWContract(InteractiveMechanismContract):

    def make(self, **overrides):
        return PrivateMultiplicativeWeights(**{**dict(epsilon=1.0, alpha=0.3, n=40,
                                                      domain_size=DOMAIN), **overrides})

    def events(self):
        return _static_events(40)


class TestPMWGContract(InteractiveMechanismContract):

    def make(self, **overrides):
        return PMWG(**{**dict(epsilon=1.0, alpha=0.3, n=40, domain_size=DOMAIN), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'alpha': 1.5}, 'alpha'), ({'p': -1.0}, 'p')]

    def events(self):
        return _growing_events(40)


class _GrowingSVTContract(InteractiveMechanismContract):
    mechanism = None
    extra = {}

    def make(self, **overrides):
        return self.mechanism(**{**dict(threshold=0.4, noise=PowerNoise(1.0), n=30,
                                        domain_size=DOMAIN), **self.extra, **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'threshold': float('nan')}, 'threshold')]

    def events(self):
        return _growing_events(30)


class TestAboveThresholdGrowingContract(_GrowingSVTContract):
    mechanism = AboveThresholdGrowing


class TestNumericAboveThresholdGrowingContract(_GrowingSVTContract):
    mechanism = NumericAboveThresholdGrowing


class TestNumericSparseGrowingContract(_GrowingSVTContract):
    mechanism = NumericSparseGrowing
    extra = {'max_halts': 3}

    def invalid_params(self):
        return super().invalid_params() + [({'max_halts': 0}, 'max_halts')]


class TestBBSchedulerContract(InteractiveMechanismContract):

    def make(self, **overrides):
        return BBScheduler(**{**dict(mechanism=LaplaceQueryVector(QUERIES), epsilon=1.0,
                                     beta=0.05, n=200, domain_size=DOMAIN), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'mechanism': object()}, 'mechanism')]

    def events(self):
        return _growing_events(200)


class TestBBImproverContract(InteractiveMechanismContract):

    def make(self, **overrides):
        return BBImprover(**{**dict(mechanism=StaticPMWBox(domain_size=DOMAIN, g=2.0),
                                    epsilon=0.9, delta=1e-6, beta=0.05, n=20,
                                    domain_size=DOMAIN), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'epsilon': 1.0}, 'epsilon'), ({'c': 11.0}, 'c')]

    def events(self):
        return _growing_events(20)


class TestTreePMWBypassContract(InteractiveMechanismContract):
    """Boost (spec 002): blocks are sealed by ``add_data``, queries name a window of blocks."""

    def make(self, **overrides):
        return TreePMWBypass(**{**dict(domain_size=DOMAIN, alpha=0.2, beta=0.05,
                                       epsilon_budget=5.0, window_bound=4), **overrides})

    def invalid_params(self):
        return super().invalid_params() + [({'epsilon_budget': 0.0}, 'epsilon_budget'),
                                           ({'window_bound': 3}, 'window_bound'),
                                           ({'mode': 'exact'}, 'mode')]

    def events(self):
        def block(i):
            return np.bincount(_records(30, offset=i), minlength=DOMAIN)
        return [('data', block(0)), ('query', BoostRequest(QUERIES[0], 0, 0, 'a')),
                ('data', block(1)), ('query', BoostRequest(QUERIES[1], 0, 1, 'b')),
                ('query', BoostRequest(QUERIES[1], 0, 1, 'c')), ('data', block(2)),
                ('query', BoostRequest(QUERIES[2], 1, 2, 'd')),
                ('query', BoostRequest(QUERIES[3], 0, 5, 'e'))]


class TestERMReleaseContract(ContinualMechanismContract):
    """Continual private ERM (spec 003): one step closes a block of at most n_max records."""

    def make(self, **overrides):
        return ERMRelease(**{**dict(schedule=DyadicERMSchedule(blocks_per_base=2, epsilon=1.0),
                                     psgd=PSGD(BinaryLogistic(clip_norm=1.0), mu=1.0, passes=1),
                                     records_per_block=6, feature_dim=3), **overrides})

    def invalid_params(self):
        return [({'records_per_block': 0}, 'records_per_block'),
                ({'feature_dim': -1}, 'feature_dim'), ({'psgd': 'sgd'}, 'psgd'),
                ({'schedule': object()}, 'schedule')]

    def inputs(self):
        gen = np.random.default_rng(4)
        return [(clip_features(gen.normal(size=(6, 3)), 1.0), gen.integers(0, 2, 6))
                for _ in range(6)]


class TestDPFTRLContract(ContinualMechanismContract):
    """DP-FTRL over blocks (the ERM option ``algorithm='dp_ftrl'``): one step closes a block."""

    def make(self, **overrides):
        return DPFTRL(**{**dict(loss=BinaryLogistic(clip_norm=1.0), records_per_block=6,
                                feature_dim=3, epsilon=50.0, horizon=6), **overrides})

    def invalid_params(self):
        return [({'records_per_block': 0}, 'records_per_block'),
                ({'feature_dim': -1}, 'feature_dim'), ({'loss': 'logistic'}, 'loss'),
                ({'epsilon': float('inf')}, 'epsilon'), ({'mu': -1.0}, 'mu'),
                ({'learning_rate': 0.0}, 'learning_rate'), ({'horizon': 0}, 'horizon')]

    def inputs(self):
        gen = np.random.default_rng(5)
        return [(clip_features(gen.normal(size=(6, 3)), 1.0), gen.integers(0, 2, 6))
                for _ in range(6)]


# -- coverage ------------------------------------------------------------------------------------

def _exported_mechanism_classes():
    """Every class exported by beam_dp.mechanisms (and its subpackages) that declares a privacy
    cost: a mechanism in the sense of DESIGN.md."""
    modules = [beam_dp.mechanisms]
    for info in pkgutil.iter_modules(beam_dp.mechanisms.__path__):
        if info.ispkg:
            modules.append(importlib.import_module(f'beam_dp.mechanisms.{info.name}'))
    found = set()
    for module in modules:
        for name in getattr(module, '__all__', ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and callable(
                    getattr(obj, 'privacy_cost', None)):
                found.add(obj)
    return found


def _contract_subclasses():
    pending, out = [contract.MechanismContract], []
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if sub.__name__.startswith('Test'):
                out.append(sub)
    return out


def test_every_mechanism_runs_the_contract():
    importlib.import_module('tests.mechanisms.test_binary_tree')
    importlib.import_module('tests.mechanisms.test_infinite_counter')
    importlib.import_module('tests.mechanisms.test_blt')
    importlib.import_module('tests.mechanisms.test_kary_tree')
    importlib.import_module('tests.mechanisms.test_balanced_tree')
    importlib.import_module('tests.mechanisms.test_unbounded_tree')
    importlib.import_module('tests.mechanisms.test_contribution_histogram')
    importlib.import_module('tests.mechanisms.test_hierarchical_histogram')
    importlib.import_module('tests.mechanisms.test_window')
    importlib.import_module('tests.mechanisms.test_banded')
    importlib.import_module('tests.mechanisms.test_banded_inverse')
    covered = {type(cls().make()) for cls in _contract_subclasses()}
    exported = _exported_mechanism_classes()
    assert len(exported) >= 22
    assert {BLTCounter, KaryTreeCounter, PerStepCounter, BalancedTreeCounter} <= exported
    missing = sorted(c.__name__ for c in exported - covered)
    assert not missing, f'mechanisms without a contract test: {missing}'


@dataclasses.dataclass(frozen=True)
class _ProbeState:
    counts: np.ndarray


@dataclasses.dataclass(frozen=True)
class _InPlaceCounter:
    """A deliberately broken mechanism: it updates its state in place."""
    epsilon: float = 1.0

    def init_state(self):
        return _ProbeState(np.zeros(2))

    def step(self, state, value, rng):
        del rng
        state.counts[0] += value      # the bug the contract must catch
        return float(state.counts[0]), state


class _InPlaceProbe(ContinualMechanismContract):

    def make(self, **overrides):
        return _InPlaceCounter(**overrides)

    def inputs(self):
        return [1, 2, 3]


def test_contract_catches_a_mutating_mechanism():
    """The contract has power: a mechanism that updates its state in place fails it."""
    with pytest.raises(AssertionError, match='mutated its input state'):
        _InPlaceProbe().test_operations_do_not_mutate_their_input_state()


@dataclasses.dataclass(frozen=True)
class _UnseededCounter:
    """A deliberately broken mechanism: its noise ignores the rng it is given."""
    epsilon: float = 1.0

    def init_state(self):
        return _ProbeState(np.zeros(1))

    def step(self, state, value, rng):
        del rng
        total = state.counts + value
        total.setflags(write=False)
        return float(total[0]) + int.from_bytes(os.urandom(2), 'big'), _ProbeState(total)


class _UnseededProbe(_InPlaceProbe):

    def make(self, **overrides):
        return _UnseededCounter(**overrides)


def test_contract_catches_noise_outside_the_rng():
    with pytest.raises(AssertionError):
        _UnseededProbe().test_seeded_runs_are_reproducible()
    _UnseededProbe().test_operations_do_not_mutate_their_input_state()   # the rest holds

