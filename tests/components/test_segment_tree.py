"""Tests for rlrun.components.segment_tree against deliberately naive numpy references.

Reference for the sum tree: ``np.cumsum`` of the leaves and ``np.searchsorted(side="right")`` (the smallest ``i``
with ``cumsum[i] > v``); for the min tree: ``np.min`` over the set leaves. Neither calls the tree.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlrun.components.segment_tree import MinSegmentTree, SumSegmentTree


def ref_find(priorities: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.cumsum(priorities), values, side="right")


@pytest.mark.parametrize("capacity", [1, 2, 5, 8, 13, 64, 100])
def test_random_batches_match_naive_reference(capacity):
    rng = np.random.default_rng(capacity)
    tree_sum, tree_min = SumSegmentTree(capacity), MinSegmentTree(capacity)
    ref = np.zeros(capacity)
    ref_set = np.full(capacity, np.inf)
    assert tree_sum.size >= capacity and tree_sum.size & (tree_sum.size - 1) == 0
    for _ in range(20):
        k = int(rng.integers(1, 2 * capacity + 1))  # batches with repeated indices too
        idx = rng.integers(0, capacity, size=k)
        # Integer-valued priorities, a quarter of them 0: sums are exact in float64, boundaries are hit exactly.
        vals = rng.integers(0, 10, size=k).astype(np.float64) * (rng.random(k) > 0.25)
        tree_sum[idx] = vals
        tree_min[idx] = vals
        for i, v in zip(idx, vals, strict=True):  # sequential semantics: the last write to an index wins
            ref[i] = v
            ref_set[i] = v
        np.testing.assert_array_equal(tree_sum.leaves(), ref)
        np.testing.assert_array_equal(tree_sum[np.arange(capacity)], ref)
        assert tree_sum.sum() == ref.sum()
        assert tree_min.min() == ref_set.min()
        for tree, op in ((tree_sum, np.add), (tree_min, np.minimum)):  # every inner node, not just the root
            inner = tree.tree[1:tree.size]
            np.testing.assert_array_equal(inner, op(tree.tree[2::2], tree.tree[3::2]))
        if ref.sum() > 0:
            cum = np.cumsum(ref)
            # uniform values, every boundary cumsum[i] exactly, and 0
            values = np.concatenate([rng.random(50) * ref.sum(), cum[cum < ref.sum()], [0.0]])
            np.testing.assert_array_equal(tree_sum.find_prefixsum_idx(values), ref_find(ref, values))


def test_boundaries_and_zero_priorities_hand_worked():
    """priorities [1, 0, 2, 0, 3] (capacity 5, padded to 8): cumsum [1, 1, 3, 3, 6].

    v in [0, 1) -> item 0; v in [1, 3) -> item 2 (item 1 has no mass); v in [3, 6) -> item 4.
    A value exactly on a boundary goes right: 1 -> 2, 3 -> 4. Values at or past the total (6, 7) give the last item
    with mass (4), not a padding leaf.
    """
    tree = SumSegmentTree(5)
    assert tree.size == 8
    tree[np.arange(5)] = [1.0, 0.0, 2.0, 0.0, 3.0]
    values = np.array([0.0, 0.999, 1.0, 2.5, 3.0, 5.999, 6.0, 7.0])
    np.testing.assert_array_equal(tree.find_prefixsum_idx(values), [0, 0, 2, 2, 4, 4, 4, 4])
    assert tree.sum() == 6.0


def test_zero_priorities_at_the_ends_are_never_chosen():
    """priorities [0, 0, 5, 0] : every v in [0, 5] and beyond gives item 2."""
    tree = SumSegmentTree(4)
    tree[[2]] = [5.0]
    np.testing.assert_array_equal(tree.find_prefixsum_idx([0.0, 2.5, 4.999, 5.0, 100.0]), [2, 2, 2, 2, 2])


def test_min_tree_unset_is_inf_and_follows_updates():
    tree = MinSegmentTree(3)
    assert tree.min() == np.inf
    tree[[0, 1, 2]] = [3.0, 1.0, 2.0]
    assert tree.min() == 1.0
    tree[[1]] = [5.0]
    assert tree.min() == 2.0
    tree[[0, 2]] = [0.0, 7.0]
    assert tree.min() == 0.0


def test_find_preserves_shape_and_scalar():
    tree = SumSegmentTree(4)
    tree[[0, 1, 2, 3]] = [1.0, 1.0, 1.0, 1.0]
    assert tree.find_prefixsum_idx(np.array([[0.5, 1.5], [2.5, 3.5]])).tolist() == [[0, 1], [2, 3]]
    assert int(tree.find_prefixsum_idx(2.0)) == 2


def test_errors():
    tree = SumSegmentTree(3)
    with pytest.raises(ValueError, match="all 0"):
        tree.find_prefixsum_idx([0.0])
    with pytest.raises(IndexError, match=r"index 3 is out of range \[0, 3\)"):
        tree[[3]] = [1.0]  # a padding leaf
    with pytest.raises(IndexError):
        tree[[-1]] = [1.0]
    with pytest.raises(ValueError, match=">= 0"):
        tree[[0]] = [-1.0]
    with pytest.raises(ValueError, match=">= 0"):
        tree[[0]] = [np.nan]
    tree[[0]] = [1.0]
    with pytest.raises(ValueError, match=">= 0"):
        tree.find_prefixsum_idx([-0.5])
    with pytest.raises(ValueError, match="positive integer"):
        SumSegmentTree(0)
