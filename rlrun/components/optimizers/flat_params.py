"""Parameters as one flat vector: reading, writing and differentiating them that way (the trust-region steps
and evolution strategies work on flat vectors)."""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


def flat(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


@torch.no_grad()
def set_flat(params: list[nn.Parameter], vector: torch.Tensor) -> None:
    """Write a flat vector into the parameters, in place (optimizers and views keep their references)."""
    offset = 0
    for p in params:
        n = p.numel()
        p.copy_(vector[offset:offset + n].view_as(p))
        offset += n


def flat_grad(output: torch.Tensor, params: list[nn.Parameter], create_graph: bool = False,
              retain_graph: bool | None = None) -> torch.Tensor:
    """Gradient of a scalar ``output`` with respect to ``params`` as one flat vector (zeros where unused)."""
    grads = torch.autograd.grad(output, params, create_graph=create_graph, retain_graph=retain_graph,
                                allow_unused=True)
    return flat(torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True))
