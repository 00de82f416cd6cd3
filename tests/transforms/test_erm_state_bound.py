"""Spec 003 §12 C13 / trap T9 on the Beam shell: the state the 'TrainBlocks' DoFn stores per
stream (its ReadModifyWrite ``StreamState`` cell, its Bag of pending records and the finished
flag, each encoded with the DoFn's own PickleCoder) does not grow with the number of blocks
beyond the schedule's bound. The DoFn is the one of the built graph, pickled and set up as a
worker gets it, driven by ``tests.fuzz.harness.Harness`` (records through ``process``, the
release timer fired by the watermark), so what is measured is what a runner would persist.

Bounded: ``SlidingWindowERM`` (≤ w + w0 records), ``ContinualERM(max_level=K)``
(≤ 2^{K+1}·B blocks) and ``ContinualERM(algorithm='dp_ftrl')`` (no raw record outlives its
block; the counter's state for the known horizon, one live ledger interval). Control: ``ContinualERM`` without ``max_level`` keeps every prefix, and
the same measurement sees it grow (so the test can fail)."""

import random

import pytest
from apache_beam.coders import PickleCoder

from beam_dp import ContinualERM
from beam_dp import PrivacyBudget
from beam_dp import SlidingWindowERM
from tests.fuzz.harness import Harness
from tests.fuzz.harness import stage_fn

STEP = 10
N_MAX = 4
BLOCKS = 64                      # N = 16 blocks, then 4N = 64
COMMON = dict(start=0, step=STEP, end=STEP * BLOCKS, public_streams=['a'], num_classes=3,
              feature_dim=2, records_per_block=N_MAX, mu=0.5, passes=1,
              budget=PrivacyBudget(epsilon=2.0), testing_seed=5)


def stored_bytes(transform, blocks):
    """Bytes of the DoFn's state after each block's release (every cell and bag item)."""
    harness = Harness(stage_fn(transform, 'TrainBlocks'), 'a')
    coder = PickleCoder()
    driver = transform.driver
    rng = random.Random(0)
    harness.element(('a', None))                      # the stream's seed at start
    sizes = []
    for block in range(blocks):
        for i in range(N_MAX + 2):                    # more than n_max: subsampled
            item = (block, (rng.uniform(-1, 1), rng.uniform(-1, 1)), i % 3)
            harness.element(('a', item), driver.block_start(block) + 1)
        harness.advance_to(driver.release_time(block))
        state = harness.states['stream_state'].read()
        assert state.next_block == block + 1 and harness.states['pending'].read() == []
        sizes.append(sum(len(coder.encode(x)) for cell in harness.states.values()
                         for x in (cell.read() if isinstance(cell.read(), list)
                                   else [cell.read()])))
    assert len([o for o in harness.outputs if hasattr(o, 'weights')]) > blocks // 2
    return sizes


def grows(sizes, n):
    """Max stored bytes over blocks (n, 4n] relative to the max over the first n blocks."""
    return max(sizes[n:4 * n]) / max(sizes[:n])


@pytest.mark.parametrize('make', [
    lambda: SlidingWindowERM(levels=3, **COMMON),
    lambda: ContinualERM(blocks_per_base=2, max_level=1, **COMMON),
    lambda: ContinualERM(blocks_per_base=2, max_level=1, update_mu=2.0, **COMMON),
    lambda: ContinualERM(algorithm='dp_ftrl', **{k: v for k, v in COMMON.items()
                                                  if k != 'passes'}),
], ids=['sliding', 'continual_capped', 'continual_capped_update_mu', 'dp_ftrl'])
def test_dofn_state_does_not_grow_with_the_number_of_blocks(make):
    sizes = stored_bytes(make(), BLOCKS)
    # ids such as 'a4:small:t63' gain a digit or two: a few bytes, nothing proportional to t.
    assert grows(sizes, BLOCKS // 4) <= 1.03, (max(sizes[:16]), max(sizes[16:]))


def test_uncapped_continual_release_state_grows_and_the_measure_sees_it():
    sizes = stored_bytes(ContinualERM(blocks_per_base=2, **COMMON), BLOCKS)
    assert grows(sizes, BLOCKS // 4) > 2.0
