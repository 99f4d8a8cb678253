"""Synchronous data-parallel learner update (RLgraph's multi-GPU strategy): split the update batch into
``num_replicas`` shards, compute each shard's loss and gradient on its replica, average the gradients (weighted
by shard size, so a mean-reduced loss gives the full-batch gradient), clip, and take one optimizer step.

This is ``device=replicas``; it also carries the update's autocast precision (``device.precision=bf16``).

Where the replicas run: one after another on the learner's device (the CPU, or the first CUDA device). The
gradient of shard ``i`` is accumulated into the parameters' ``.grad`` with weight ``n_i / N``, which is exactly the
all-reduce-mean of per-replica gradients that DDP performs; running the shards concurrently on one CUDA device
each (``torch.nn.parallel.replicate`` + ``parallel_apply``, or DDP) is not implemented yet, so on several GPUs
this gives the same update without the speed-up.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np
import torch


def split_batch(value: Any, n: int) -> list[Any]:
    """``value`` (tensors/arrays nested in dicts, lists, tuples; None leaves) cut into ``n`` shards along dim 0
    (``torch.tensor_split``: sizes differ by at most one)."""
    if isinstance(value, torch.Tensor):
        return list(torch.tensor_split(value, n))
    if isinstance(value, np.ndarray):
        return list(np.array_split(value, n))
    if value is None:
        return [None] * n
    if isinstance(value, dict):
        parts = {k: split_batch(v, n) for k, v in value.items()}
        return [{k: parts[k][i] for k in value} for i in range(n)]
    if isinstance(value, (list, tuple)):
        parts = [split_batch(v, n) for v in value]
        return [type(value)(p[i] for p in parts) for i in range(n)]
    raise TypeError(f"cannot split a {type(value).__name__} across replicas")


def _rows(value: Any) -> int:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return int(value.shape[0])
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else []
    for v in items:
        if v is not None:
            return _rows(v)
    raise ValueError("the batch holds no tensors")


class ReplicatedUpdate:
    """One step of a ``torch.optim`` optimizer over ``num_replicas`` shards of a batch, optionally under autocast."""

    def __init__(self, num_replicas: int = 1, autocast_dtype: torch.dtype | None = None,
                 device_type: str = "cpu") -> None:
        """``num_replicas``: shards per update batch (>= 1); ``autocast_dtype``: e.g. ``torch.bfloat16`` to run each
        loss under ``torch.autocast`` (None = full precision); ``device_type``: autocast's device type."""
        if int(num_replicas) < 1:
            raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
        self.num_replicas, self.autocast_dtype, self.device_type = int(num_replicas), autocast_dtype, device_type

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    def step(self, optimizer: torch.optim.Optimizer, loss_fn: Callable[[Any], tuple[torch.Tensor, dict]], batch: Any,
             max_grad_norm: float | None = None) -> dict:
        """``loss_fn(shard) -> (mean loss, info)``; returns the merged info: ``"loss"`` (the size-weighted mean of
        the shard losses = the full-batch loss), per-item tensors concatenated in batch order, scalars averaged
        by shard size, and ``"grad_norm"`` (the norm before clipping) when ``max_grad_norm`` is set (as
        ``rlrun.components.optimizers.optimizer_step``)."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        total = _rows(batch)
        if total < self.num_replicas:
            raise ValueError(f"a batch of {total} cannot be split across {self.num_replicas} replicas")
        optimizer.zero_grad(set_to_none=True)
        loss_sum: torch.Tensor | None = None
        infos: list[tuple[float, dict]] = []
        for shard in split_batch(batch, self.num_replicas):
            weight = _rows(shard) / total
            with self._autocast():
                loss, info = loss_fn(shard)
            (loss.float() * weight).backward()
            part = loss.detach().float() * weight
            loss_sum = part if loss_sum is None else loss_sum + part
            infos.append((weight, info))
        merged = _merge(infos)
        if max_grad_norm is not None:
            merged["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        optimizer.step()
        merged["loss"] = loss_sum
        return merged


def _merge(infos: list[tuple[float, dict]]) -> dict:
    out: dict[str, Any] = {}
    for key, first in infos[0][1].items():
        values = [info[key] for _, info in infos]
        if isinstance(first, torch.Tensor) and first.dim() > 0:
            out[key] = torch.cat([v.detach() for v in values])
        elif isinstance(first, (torch.Tensor, int, float)) and not isinstance(first, bool):
            weights = [w for w, _ in infos]
            out[key] = sum(w * (v.detach() if isinstance(v, torch.Tensor) else v)
                           for w, v in zip(weights, values, strict=True))
        else:
            out[key] = first
    return out
