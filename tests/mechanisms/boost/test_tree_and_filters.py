"""Spec 002 §10 criteria 16-19 (filters), 20-22 (tree), the overlapping trees of Thm A.8, the
persistent map and the exact-cache keys."""

import itertools
import pickle

import numpy as np
import pytest

from beam_dp.errors import InvalidRecordError
from beam_dp.mechanisms.boost import tree
from beam_dp.mechanisms.boost.cache import CachedResult
from beam_dp.mechanisms.boost.cache import PMap
from beam_dp.mechanisms.boost.cache import canonical_query_key
from beam_dp.mechanisms.boost.cache import reusable
from beam_dp.mechanisms.boost.filters import BlockFilters
from beam_dp.mechanisms.boost.filters import RenyiFilters
from beam_dp.queries import LinearQuery


def _min_cover_size(a, b):
    """Brute force: the fewest disjoint dyadic intervals whose union is [a, b] (DP on prefix)."""
    best = {a - 1: 0}
    for end in range(a, b + 1):
        best[end] = min(best[start - 1] + 1 for start in range(a, end + 1)
                        if tree.is_dyadic(start, end))
    return best[b]


def test_split_query_minimal_exact_cover_brute_force():                    # criterion 20
    for t in (1, 2, 5, 16, 64):
        for a, b in itertools.combinations_with_replacement(range(t), 2):
            cover = tree.split_query(a, b)
            assert all(tree.is_dyadic(x, y) for x, y in cover)
            blocks = [i for x, y in cover for i in range(x, y + 1)]
            assert blocks == list(range(a, b + 1))                    # disjoint, exact, ordered
            assert len(cover) == _min_cover_size(a, b)


def test_split_query_examples():
    assert tree.split_query(0, 49) == [(0, 31), (32, 47), (48, 49)]
    assert tree.split_query(2, 4) == [(2, 3), (4, 4)]
    with pytest.raises(InvalidRecordError):
        tree.split_query(3, 2)


def test_overlapping_trees_thm_a8():
    t = 8
    assert tree.tree_split(3, 9, t) == [(0, 3, 3), (0, 4, 7), (0, 8, 9)]
    assert tree.tree_split(9, 12, t) == [(1, 9, 9), (1, 10, 11), (1, 12, 12)]
    for a in range(40):
        for b in range(a, a + t):
            cover = tree.tree_split(a, b, t)
            kappa = a // t
            assert all(k == kappa and kappa * t <= x <= y <= (kappa + 2) * t - 1
                       for k, x, y in cover)
            assert all(tree.is_dyadic(x, y, kappa * t) for _, x, y in cover)
    with pytest.raises(InvalidRecordError):
        tree.tree_split(0, 8, t)


def test_aggregate_is_n_weighted():                                         # criterion 21
    assert tree.aggregate([0.2, 0.6], [300, 100]) == pytest.approx(0.3)
    assert tree.aggregate([0.5], [7]) == 0.5
    with pytest.raises(InvalidRecordError):
        tree.aggregate([0.1], [0])


def test_largest_contiguous_run():                                          # criterion 22
    assert tree.largest_contiguous_run([True, False, True, True], [4, 2, 1, 1]) == (0, 1)
    assert tree.largest_contiguous_run([True, False, True, True], [1, 2, 1, 1]) == (2, 4)
    assert tree.largest_contiguous_run([True, False, True], [2, 1, 2]) == (0, 1)   # leftmost tie
    assert tree.largest_contiguous_run([False, False], [1, 1]) == (0, 0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        ready = list(rng.integers(0, 2, 8).astype(bool))
        i, j = tree.largest_contiguous_run(ready, [1] * 8)
        assert all(ready[i:j])


def test_previous_leaf():
    nodes = [(0, 0, 0), (0, 2, 2), (0, 0, 1), (1, 9, 9)]
    assert tree.previous_leaf(nodes, (0, 3, 3)) == (0, 2, 2)
    assert tree.previous_leaf(nodes, (1, 10, 10)) == (1, 9, 9)
    assert tree.previous_leaf(nodes, (0, 0, 0)) is None


def test_filter_refuses_iff_over_capacity():                               # criteria 16, 17
    f = BlockFilters(1.0)
    f = f.charge({0: 0.6})
    assert f.charge({0: 0.4}) is not None
    assert f.charge({0: 0.41}) is None
    rng = np.random.default_rng(1)
    for _ in range(300):
        cost = float(rng.uniform(0, 0.3))
        new = f.charge({0: cost})
        assert (new is None) == (f.spent(0) + cost > 1.0 + 1e-9)
        f = new or f
        assert f.spent(0) <= 1.0 + 1e-9


def test_multi_block_charge_is_all_or_nothing():                           # criterion 18
    f = BlockFilters(1.0).charge({0: 0.9, 1: 0.1})
    assert f.charge({0: 0.2, 1: 0.2, 2: 0.2}) is None
    assert f.consumed == {0: 0.9, 1: 0.1}
    g = f.charge({1: 0.2, 2: 0.2})
    assert g.consumed == {0: 0.9, 1: 0.30000000000000004, 2: 0.2}


def test_live_mechanism_survives_refusals():                               # criterion 19 (Alg. 3)
    f = BlockFilters(1.0).start('sv', {0: 0.9})
    assert f.is_live('sv')
    assert f.start('sv2', {0: 0.2}) is None        # a new SV is refused ...
    assert f.charge({0: 0.5}) is None              # ... and so is a Laplace answer ...
    assert f.is_live('sv')                         # ... while the live SV keeps running
    assert not f.halt('sv').is_live('sv')


def test_renyi_filter_for_all_orders_rule():
    f = RenyiFilters((2.0, 8.0), (1.0, 1.0))
    f = f.charge({0: (0.9, 0.2)})
    assert f.charge({0: (0.5, 0.5)}) is not None    # order 8 still fits
    assert f.charge({0: (0.5, 0.9)}) is None        # every order exceeds


def test_pmap_is_persistent_and_picklable():
    a = PMap()
    b = a.set('x', 1)
    c = b.set('y', 2).set('x', 3)
    assert 'x' not in a and b.get('x') == 1 and c.get('x') == 3 and len(c) == 2
    assert pickle.loads(pickle.dumps(c)) == c


def test_canonical_query_key_is_semantic():
    r = LinearQuery.range(8, 2, 5)
    vec = LinearQuery.from_vector([0, 0, 1, 1, 1, 0, 0, 0], query_id='other')
    assert canonical_query_key(r) == canonical_query_key(vec)
    assert canonical_query_key(r) != canonical_query_key(LinearQuery.range(8, 2, 6))


def test_cached_node_reuse_needs_small_enough_noise():
    assert reusable(CachedResult(0.1, 0.01, 'R3'), 0.02)
    assert not reusable(CachedResult(0.1, 0.03, 'R3'), 0.02)
    assert not reusable(CachedResult(0.1, 0.0, 'R1'), 0.02)
    assert not reusable(None, 0.02)
