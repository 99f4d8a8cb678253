"""Segment trees over priorities, vectorised over batches of indices with numpy.

The data structure behind proportional prioritised replay (Schaul, Quan, Antonoglou & Silver, "Prioritized
Experience Replay", ICLR 2016, Sec. 3.3 and Appendix B.2.1: "a 'sum-tree' data structure, where every node is the
sum of its children, with the priorities as the leaf nodes"). A :class:`SumSegmentTree` gives the total priority
mass and finds, for a value ``v`` in ``[0, total)``, the item whose prefix-sum interval contains ``v``, in
``O(log capacity)``; a :class:`MinSegmentTree` gives the smallest priority (for the largest importance weight).

Layout: the tree is one flat array of ``2 * size`` entries where ``size`` is ``capacity`` rounded up to a power of
two; node ``i`` has children ``2i`` and ``2i + 1``, the root is node 1 and leaf ``j`` is node ``size + j``.
Leaves ``capacity .. size - 1`` (padding) hold the neutral element (0 for a sum, +inf for a min) and cannot be set.

Every operation takes a whole batch of indices or values at once: setting ``k`` leaves updates each tree level
with one fancy-indexing expression (``O(k log size)`` work, ``O(log size)`` numpy calls, a few per level: these
calls, not the arithmetic, are the cost of a prioritised replay's inserts and updates), and
``find_prefixsum_idx`` descends all values in lock step. The trees are plain numpy (float64) and live on the CPU
whatever the device of the memory that owns them.
"""

from __future__ import annotations

import numpy as np


class SegmentTree:
    """A complete binary tree whose inner nodes hold ``operation`` of their children.

    Args:
        capacity: number of leaves a user may set (items); rounded up to a power of two internally.
        operation: associative binary numpy ufunc (``np.add``, ``np.minimum``); its ``reduce`` combines children.
        neutral: the operation's neutral element, held by unset leaves (0 for a sum, +inf for a min).
    """

    def __init__(self, capacity: int, operation: np.ufunc, neutral: float) -> None:
        if isinstance(capacity, bool) or int(capacity) != capacity or capacity <= 0:
            raise ValueError(f"segment tree capacity must be a positive integer, got {capacity!r}")
        self.capacity = int(capacity)
        self.size = 1 << (self.capacity - 1).bit_length()  # leaves, a power of two >= capacity
        self.depth = self.size.bit_length() - 1  # levels below the root
        self.operation = operation
        self.neutral = float(neutral)
        self.tree = np.full(2 * self.size, self.neutral, dtype=np.float64)

    # ------------------------------------------------------------------ leaves

    def _indices(self, indices: np.ndarray | list[int] | int) -> np.ndarray:
        idx = np.asarray(indices)
        if idx.dtype == np.bool_ or not (np.issubdtype(idx.dtype, np.integer) or idx.size == 0):
            raise TypeError(f"segment tree indices must be integers, got dtype {idx.dtype}")
        idx = idx.astype(np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.capacity):
            bad = idx[(idx < 0) | (idx >= self.capacity)][0]
            raise IndexError(f"segment tree index {bad} is out of range [0, {self.capacity})")
        return idx

    def set(self, indices: np.ndarray | list[int] | int, values: np.ndarray | list[float] | float) -> None:
        """Set leaves ``indices`` to ``values`` (broadcast) and update their ancestors.

        If an index occurs more than once, the value at its last occurrence wins (as in a sequential loop).
        """
        idx = self._indices(indices)
        vals = np.broadcast_to(np.asarray(values, dtype=np.float64), np.asarray(indices).shape).reshape(-1)
        if idx.size == 0:
            return
        if idx.size > 1:  # keep each index's last occurrence: numpy does not promise an order for repeated indices
            idx, first = np.unique(idx[::-1], return_index=True)
            vals = vals[::-1][first]
        nodes = idx + self.size
        self.tree[nodes] = vals
        children = self.tree.reshape(-1, 2)  # row p: the children 2p and 2p + 1 of node p
        for _ in range(self.depth):
            # A parent of several updated nodes appears several times; each copy computes the same value.
            nodes = nodes >> 1
            self.tree[nodes] = self.operation.reduce(children[nodes], axis=1)

    def get(self, indices: np.ndarray | list[int] | int) -> np.ndarray:
        """The leaf values at ``indices`` (float64, shape of ``indices``)."""
        shape = np.shape(indices)
        return self.tree[self._indices(indices) + self.size].reshape(shape)

    __setitem__ = set
    __getitem__ = get

    def reduce(self) -> float:
        """``operation`` over all leaves (the root)."""
        return float(self.tree[1])

    def leaves(self) -> np.ndarray:
        """A copy of the ``capacity`` settable leaves."""
        return self.tree[self.size:self.size + self.capacity].copy()

    def __len__(self) -> int:
        return self.capacity


class SumSegmentTree(SegmentTree):
    """Leaves hold non-negative priorities; inner nodes hold sums (Schaul et al. 2016, App. B.2.1).

    Args:
        capacity: number of items (leaves); rounded up to a power of two internally.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.add, 0.0)

    def set(self, indices: np.ndarray | list[int] | int, values: np.ndarray | list[float] | float) -> None:
        vals = np.asarray(values, dtype=np.float64)
        if vals.size and not (np.all(np.isfinite(vals)) and vals.min() >= 0):
            bad = vals[~(np.isfinite(vals) & (vals >= 0))][:3]
            raise ValueError(f"sum-tree priorities must be finite and >= 0, got {bad}")
        super().set(indices, vals)

    __setitem__ = set

    def sum(self) -> float:
        """The total mass: sum of all leaves."""
        return self.reduce()

    def find_prefixsum_idx(self, values: np.ndarray | list[float] | float) -> np.ndarray:
        """For each ``v``, the smallest item ``i`` with ``p_0 + ... + p_i > v`` (int64, shape of ``values``).

        Equals ``np.searchsorted(np.cumsum(p), v, side="right")`` for ``0 <= v < sum()``: item ``i`` is chosen for
        ``v`` in ``[cumsum[i-1], cumsum[i])``, so a value exactly on a boundary goes to the right-hand item and an
        item with priority 0 is never chosen. A ``v >= sum()`` (floating-point round-off when the caller scales a
        uniform draw by the total) gives the last item with positive priority instead of running off the end.

        Raises:
            ValueError: if a value is negative or not finite, or the tree holds no mass (``sum() == 0``).
        """
        vals = np.asarray(values, dtype=np.float64)
        shape = vals.shape
        v = vals.reshape(-1).copy()
        if v.size and not (np.all(np.isfinite(v)) and v.min() >= 0):
            raise ValueError(f"prefix sums must be finite and >= 0, got {v[~(np.isfinite(v) & (v >= 0))][:3]}")
        if not self.sum() > 0:
            raise ValueError("cannot search a sum tree whose priorities are all 0")
        node = np.ones(v.shape, dtype=np.int64)
        for _ in range(self.depth):
            left = 2 * node
            left_mass = self.tree[left]
            # Go right when v is at or past the left subtree's mass, unless the right subtree is empty (which only
            # happens through round-off or v >= sum(): then stay in the last subtree that has mass).
            go_right = (v >= left_mass) & (self.tree[left + 1] > 0)
            v = np.where(go_right, v - left_mass, v)
            node = left + go_right
        return (node - self.size).reshape(shape)


class MinSegmentTree(SegmentTree):
    """Leaves hold priorities; inner nodes hold minima (unset leaves are +inf).

    Args:
        capacity: number of items (leaves); rounded up to a power of two internally.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, np.inf)

    def min(self) -> float:
        """The smallest leaf (+inf when no leaf was set)."""
        return self.reduce()
