"""Tests for rlrun.ops.time_major: flatten_time on tensors and nests."""

from __future__ import annotations

import torch

from rlrun.ops import flatten_time


def test_row_t_times_b_plus_b_is_step_t_of_copy_b():
    T, B = 3, 4
    x = torch.arange(T * B * 2, dtype=torch.float32).reshape(T, B, 2)
    flat = flatten_time(x)
    assert flat.shape == (T * B, 2)
    for t in range(T):
        for b in range(B):
            assert torch.equal(flat[t * B + b], x[t, b])


def test_rank_two_becomes_rank_one():
    x = torch.tensor([[1, 2], [3, 4], [5, 6]])
    assert torch.equal(flatten_time(x), torch.tensor([1, 2, 3, 4, 5, 6]))


def test_nests_keep_their_structure_and_container_types():
    """Dicts, tuples and lists are rebuilt as they were, every leaf flattened alone (image leaves keep [C, H, W])."""
    T, B = 2, 3
    nest = {"image": torch.zeros(T, B, 1, 4, 4, dtype=torch.uint8),
            "pair": (torch.ones(T, B), [torch.arange(T * B).reshape(T, B, 1)])}
    flat = flatten_time(nest)
    assert set(flat) == {"image", "pair"}
    assert flat["image"].shape == (T * B, 1, 4, 4) and flat["image"].dtype == torch.uint8
    assert isinstance(flat["pair"], tuple) and isinstance(flat["pair"][1], list)
    assert flat["pair"][0].shape == (T * B,)
    assert torch.equal(flat["pair"][1][0], torch.arange(T * B).reshape(T * B, 1))
