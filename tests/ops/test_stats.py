"""Tests for rlrun.ops.stats: explained_variance against the formula computed with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlrun.ops import explained_variance


def numpy_explained_variance(predicted: np.ndarray, target: np.ndarray) -> float:
    """1 - Var[y - y_hat] / Var[y] with numpy's population variances (the ratio does not depend on the ddof)."""
    return 1.0 - np.var(target - predicted) / np.var(target)


@pytest.mark.parametrize("n", [2, 7, 1000])
def test_matches_the_numpy_formula(n):
    rng = np.random.default_rng(n)
    target = rng.normal(3.0, 2.0, n)
    predicted = target + rng.normal(0.0, 1.0, n)
    got = explained_variance(torch.as_tensor(predicted), torch.as_tensor(target))
    assert isinstance(got, float)
    assert got == pytest.approx(numpy_explained_variance(predicted, target), rel=1e-9, abs=1e-12)


def test_hand_worked():
    """y = [1, 2, 3, 4] (var 1.25, population), y_hat = [1, 2, 3, 2]: y - y_hat = [0, 0, 0, 2], var 0.75;
    ev = 1 - 0.75 / 1.25 = 0.4. A perfect fit gives 1, the mean as a constant prediction 0, a negated target
    (var of 2y = 5) -3."""
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(torch.tensor([1.0, 2.0, 3.0, 2.0]), y) == pytest.approx(0.4)
    assert explained_variance(y, y) == 1.0
    assert explained_variance(torch.full((4,), 2.5), y) == pytest.approx(0.0, abs=1e-7)
    assert explained_variance(-y, y) == pytest.approx(-3.0)


def test_any_shape_counts_items():
    """[T, B] inputs count as T * B items, as the flattened ones do."""
    g = torch.Generator().manual_seed(0)
    target, predicted = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    assert explained_variance(predicted, target) == explained_variance(predicted.flatten(), target.flatten())


@pytest.mark.parametrize("target", [torch.full((6,), 3.0), torch.tensor([1.5])], ids=["constant", "single"])
def test_nan_where_the_target_does_not_vary(target):
    assert math.isnan(explained_variance(torch.zeros_like(target), target))
