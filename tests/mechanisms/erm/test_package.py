"""The ERM package: public names, the mechanism contract (its layers: tests/test_layers.py)."""

import dataclasses

import pytest

from beam_dp.errors import InvalidParamsError
from beam_dp.mechanisms import erm
from beam_dp.mechanisms.base import ContinualMechanism


def test_all_names_resolve_and_are_sorted():
    assert list(erm.__all__) == sorted(erm.__all__)
    for name in erm.__all__:
        assert hasattr(erm, name), name


def test_params_are_frozen_and_release_is_a_continual_mechanism():
    loss = erm.SoftmaxCrossEntropy(clip_norm=1.0, num_classes=3)
    psgd = erm.PSGD(loss, mu=1.0)
    mech = erm.ERMRelease(erm.SlidingWindowChain(3, 1.0), psgd, 4, 3)
    assert isinstance(mech, ContinualMechanism)
    assert mech.privacy_cost().epsilon == 1.0
    for obj in (loss, psgd, mech, mech.schedule, erm.DyadicERMSchedule(2, 1.0),
                erm.ContinualReleaseSchedule(2, 1.0), erm.IndependentBlocks(1.0)):
        assert dataclasses.is_dataclass(obj) and type(obj).__dataclass_params__.frozen
    with pytest.raises(InvalidParamsError, match='no finite privacy cost'):
        erm.ERMRelease(erm.NaivePerRound(1.0), psgd, 4, 3).privacy_cost()


@pytest.mark.parametrize('make,name', [
    (lambda: erm.SoftmaxCrossEntropy(clip_norm=0.0), 'clip_norm'),
    (lambda: erm.BinaryLogistic(num_classes=3), 'num_classes'),
    (lambda: erm.PSGD(erm.BinaryLogistic(), mu=-1.0), 'mu'),
    (lambda: erm.PSGD(erm.BinaryLogistic(), mu=1.0, passes=0), 'passes'),
    (lambda: erm.ERMRelease(erm.IndependentBlocks(1.0), erm.PSGD(erm.BinaryLogistic(), mu=1.0),
                            0, 3), 'records_per_block'),
    (lambda: erm.ContinualReleaseSchedule(4, 1.0, base_fraction=1.5), 'base_fraction'),
    (lambda: erm.SlidingWindowChain(3, float('inf'), sampling=True), 'sampling'),
])
def test_bad_parameters_raise_naming_the_argument(make, name):
    with pytest.raises(InvalidParamsError, match=name):
        make()
