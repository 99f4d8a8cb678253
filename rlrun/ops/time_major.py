"""Reshapes of time-major nests: rollouts laid out ``[T, B, ...]`` (time first, then the env copies), as leaves of
dicts, tuples and lists of tensors (a nested observation space's batches).

Pure functions; they return views where ``reshape`` can.
"""

from __future__ import annotations

from typing import Any

__all__ = ["flatten_time"]


def flatten_time(x: Any) -> Any:
    """``[T, B, ...]`` -> ``[T * B, ...]`` leafwise (dicts, tuples and lists of tensors): row ``t * B + b`` of the
    result is ``[t, b]`` of the rollout (C order, as ``SampleBatch`` rows are step-major). What a learner does to a
    rollout before minibatching it or passing it through a feed-forward network."""
    if isinstance(x, dict):
        return {k: flatten_time(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(flatten_time(v) for v in x)
    return x.reshape(-1, *x.shape[2:])
