"""The benchmark's release check (benchmarks/throughput_sidebyside/release_check.py) counts
releases per step exactly: releases, keys released once, missing, more than once, whatever the
split of the inputs into bundles and merges."""

import os
import sys

import numpy as np
from hypothesis import given, settings, strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'benchmarks', 'throughput_sidebyside'))

from release_check import CountPerKeyIndex  # noqa: E402  pylint: disable=wrong-import-position

KEYS = 37


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, KEYS - 1), max_size=60), max_size=6),
       st.integers(0, 5))
def test_counts_per_key_index_are_exact_across_bundles_and_merges(parts, singles):
    fn = CountPerKeyIndex(KEYS)
    accs = []
    for part in parts:
        acc = fn.create_accumulator()
        for index in part[:singles]:
            acc = fn.add_input(acc, index)
        accs.append(fn.add_inputs(acc, part[singles:]))
    merged = fn.merge_accumulators(accs) if accs else fn.create_accumulator()
    if len(accs) > 2:        # a merge of merges is the same
        merged = fn.merge_accumulators([fn.merge_accumulators(accs[:2]),
                                        fn.merge_accumulators(accs[2:])])
    flat = [i for part in parts for i in part]
    counts = np.bincount(np.asarray(flat, dtype=np.int64), minlength=KEYS)
    assert fn.extract_output(merged) == (len(flat), int((counts == 1).sum()),
                                         int((counts == 0).sum()), int((counts > 1).sum()))


def test_a_doubled_firing_shows_as_keys_released_more_than_once():
    fn = CountPerKeyIndex(KEYS)
    firing = list(range(10))
    acc = fn.merge_accumulators([fn.add_inputs(fn.create_accumulator(), range(KEYS)),
                                 fn.add_inputs(fn.create_accumulator(), firing)])
    assert fn.extract_output(acc) == (KEYS + 10, KEYS - 10, 0, 10)
