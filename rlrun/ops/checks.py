"""Argument checks of the ops in :mod:`rlrun.ops` (returns, V-trace): tensors of the time-major ``[T, B]`` layout
and shapes that must match it, with errors that name the argument."""

from __future__ import annotations

import torch

__all__ = ["check_shape", "check_tensor", "check_time_major"]


def check_tensor(name: str, x: object) -> torch.Tensor:
    """Check that ``x`` is a tensor and return it."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def check_time_major(name: str, x: object) -> tuple[int, int]:
    """Check that ``x`` is a 2-D ``[T, B]`` tensor and return ``(T, B)``."""
    x = check_tensor(name, x)
    if x.dim() != 2:
        raise ValueError(
            f"{name} must have shape [T, B] (2-D, time-major), got shape {tuple(x.shape)}"
        )
    return int(x.shape[0]), int(x.shape[1])


def check_shape(name: str, x: object, expected: tuple[int, ...], ref: str) -> None:
    """Check that ``x`` has exactly shape ``expected`` (derived from argument ``ref``)."""
    x = check_tensor(name, x)
    if tuple(x.shape) != tuple(expected):
        dims = "[T, B]" if len(expected) == 2 else "[B]"
        raise ValueError(
            f"{name} must have shape {dims} = {tuple(expected)} (matching {ref}), "
            f"got shape {tuple(x.shape)}"
        )
