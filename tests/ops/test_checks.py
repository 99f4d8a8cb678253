"""Tests for rlrun.ops.checks: the argument checks of the ops name the argument and the expected shape."""

from __future__ import annotations

import pytest
import torch

from rlrun.ops.checks import check_shape, check_tensor, check_time_major


def test_check_tensor():
    x = torch.zeros(2)
    assert check_tensor("x", x) is x
    with pytest.raises(TypeError, match="rewards must be a torch.Tensor, got list"):
        check_tensor("rewards", [1.0])


def test_check_time_major_returns_t_and_b():
    assert check_time_major("rewards", torch.zeros(5, 3)) == (5, 3)
    with pytest.raises(ValueError, match=r"rewards must have shape \[T, B\] .* got shape \(5,\)"):
        check_time_major("rewards", torch.zeros(5))


def test_check_shape_names_the_reference():
    check_shape("values", torch.zeros(5, 3), (5, 3), "rewards")
    with pytest.raises(ValueError, match=r"values must have shape \[T, B\] = \(5, 3\) \(matching rewards\), "
                                         r"got shape \(5, 2\)"):
        check_shape("values", torch.zeros(5, 2), (5, 3), "rewards")
    with pytest.raises(ValueError, match=r"bootstrap_value must have shape \[B\] = \(3,\)"):
        check_shape("bootstrap_value", torch.zeros(4), (3,), "rewards.shape[1]")
