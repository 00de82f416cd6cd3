"""The mechanism contract of ``HierarchicalHistogramCounter`` (a vector counter over keys × M
leaf buckets that runs a keyed counter over the tree's nodes and releases consistent leaves);
its algebra (consistency = least squares, closed-form prefix variances) is tested in
``tests/drivers/test_quantiles.py``."""

import numpy as np
import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import KaryTreeCounter
from beam_dp.mechanisms import HierarchicalHistogramCounter
from beam_dp.mechanisms import PerStepCounter
from tests.mechanisms.contract import CounterContract


class TestHierarchicalHistogramContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(inner=PerStepCounter(epsilon=1.0, l1_sensitivity=3.0), branching=2,
                      depth=2, dimension=8)
        kwargs.update(overrides)
        return HierarchicalHistogramCounter(**kwargs)

    def make_noise_free(self):
        return self.make(inner=PerStepCounter(epsilon=1e7, l1_sensitivity=3.0))

    def inputs(self):
        return [np.array([t % 3, 1, 0, 5 * (t % 2), 0, 0, 2, t % 4]) for t in range(24)]


class TestHierarchicalHistogramOnKaryTreeContract(CounterContract):

    def make(self, **overrides):
        kwargs = dict(inner=KaryTreeCounter(rho=0.5, horizon=16, k=3, l1_sensitivity=2.0,
                                            l2_sensitivity=2.0 ** 0.5),
                      branching=3, depth=1, dimension=6)
        kwargs.update(overrides)
        return HierarchicalHistogramCounter(**kwargs)

    def make_noise_free(self):
        return self.make(inner=KaryTreeCounter(rho=1e14, horizon=16, k=3, l1_sensitivity=2.0,
                                               l2_sensitivity=2.0 ** 0.5))

    def inputs(self):
        return [np.array([t % 3, 1, 0, 2, t % 2, 1]) for t in range(16)]


@pytest.mark.parametrize('kwargs,word', [(dict(branching=1), 'branching'),
                                         (dict(depth=0), 'depth'),
                                         (dict(dimension=7), 'multiple')])
def test_bad_parameters_are_named(kwargs, word):
    params = dict(inner=PerStepCounter(epsilon=1.0), branching=2, depth=2, dimension=8)
    params.update(kwargs)
    with pytest.raises(InvalidParamsError, match=word):
        HierarchicalHistogramCounter(**params)
