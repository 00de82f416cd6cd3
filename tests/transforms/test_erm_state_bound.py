"""Spec 003 §12 C13 / trap T9 on the Beam shell: the state the 'TrainBlocks' DoFn stores per
stream (its ReadModifyWrite ``StreamState`` cell and its Bag of pending records, both encoded
with the DoFn's own PickleCoder) does not grow with the number of blocks beyond the schedule's
bound. The DoFn is driven directly (``process`` per record, the release timer per block, fake
state cells), so what is measured is exactly what a runner would persist.

Bounded: ``SlidingWindowERM`` (≤ w + w0 records) and ``ContinualERM(max_level=K)``
(≤ 2^{K+1}·B blocks). Control: ``ContinualERM`` without ``max_level`` keeps every prefix, and
the same measurement sees it grow (so the test can fail)."""

import random

import pytest
from apache_beam.coders import PickleCoder
from apache_beam.utils.timestamp import Timestamp

from beam_dp import ContinualERM
from beam_dp import PrivacyBudget
from beam_dp import SlidingWindowERM
from beam_dp.transforms.erm import _TrainBlocksFn

STEP = 10
N_MAX = 4
BLOCKS = 64                      # N = 16 blocks, then 4N = 64
COMMON = dict(start=0, step=STEP, end=STEP * BLOCKS, public_streams=['a'], num_classes=3,
              feature_dim=2, records_per_block=N_MAX, mu=0.5, passes=1,
              budget=PrivacyBudget(epsilon=2.0), testing_seed=5, label='ERM')


class Cell:
    """A ReadModifyWrite cell or a timer, as a runner would hold it."""

    def __init__(self):
        self.value = None

    def read(self):
        return self.value

    def write(self, value):
        self.value = value

    set = write

    def clear(self):
        self.value = None


class Bag:
    def __init__(self):
        self.items = []

    def read(self):
        return list(self.items)

    def add(self, item):
        self.items.append(item)

    def clear(self):
        self.items = []


def stored_bytes(fn_transform, blocks):
    """Bytes of the DoFn's state after each block (cell + bag, PickleCoder-encoded)."""
    fn = _TrainBlocksFn(fn_transform.driver, fn_transform.label, fn_transform.rng, 2.0, 3)
    fn.setup()
    coder = PickleCoder()
    state, pending, finished, timer, end = Cell(), Bag(), Cell(), Cell(), Cell()
    rng = random.Random(0)
    sizes = []
    for block in range(blocks):
        for i in range(N_MAX + 2):                    # more than n_max: subsampled
            item = (block, (rng.uniform(-1, 1), rng.uniform(-1, 1)), i % 3)
            list(fn.process(('a', item), stream_state=state, pending=pending,
                            release_timer=timer, end_timer=end))
        fired = Timestamp(micros=fn_transform.driver.release_time(block))
        list(fn.release(key='a', fired=fired, stream_state=state, pending=pending,
                        finished=finished, release_timer=timer))
        assert state.value.next_block == block + 1 and pending.read() == []
        sizes.append(len(coder.encode(state.value))
                     + sum(len(coder.encode(x)) for x in pending.read()))
    return sizes


def grows(sizes, n):
    """Max stored bytes over blocks (n, 4n] relative to the max over the first n blocks."""
    return max(sizes[n:4 * n]) / max(sizes[:n])


@pytest.mark.parametrize('make', [
    lambda: SlidingWindowERM(levels=3, **COMMON),
    lambda: ContinualERM(blocks_per_base=2, max_level=1, **COMMON),
    lambda: ContinualERM(blocks_per_base=2, max_level=1, update_mu=2.0, **COMMON),
], ids=['sliding', 'continual_capped', 'continual_capped_update_mu'])
def test_dofn_state_does_not_grow_with_the_number_of_blocks(make):
    transform = make()
    sizes = stored_bytes(transform, BLOCKS)
    # ids such as 'a4:small:t63' gain a digit or two: a few bytes, nothing proportional to t.
    assert grows(sizes, BLOCKS // 4) <= 1.03, (max(sizes[:16]), max(sizes[16:]))


def test_uncapped_continual_release_state_grows_and_the_measure_sees_it():
    sizes = stored_bytes(ContinualERM(blocks_per_base=2, **COMMON), BLOCKS)
    assert grows(sizes, BLOCKS // 4) > 2.0
