"""Optimizer modules (TensorForce 0.3's idea): an optimization strategy is a component, and the loss is a callable.

``GradientStep.step(loss_fn)`` calls ``loss_fn()`` -> ``(loss, info)``, back-propagates, clips and steps a
``torch.optim`` optimizer over the parameters it was given at build time. Its state (the torch optimizer's moments
and step counts) is part of the component's ``state_dict`` and so of every checkpoint.

``Synchronization`` keeps a target copy of a module in step with its source: a hard copy every ``every`` calls, or
Polyak averaging with coefficient ``tau`` on every call.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn

from rlrun.components.base import Component, api

OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "rmsprop": torch.optim.RMSprop,
              "adamw": torch.optim.AdamW}


class GradientStep(Component):
    def __init__(self, optimizer: str = "adam", lr: float = 1e-3, max_grad_norm: float | None = None,
                 name: str | None = None, **optimizer_kwargs: Any) -> None:
        super().__init__(name or "optimizer")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer '{optimizer}' is not one of {', '.join(OPTIMIZERS)}")
        self.optimizer_name, self.lr, self.max_grad_norm = optimizer, lr, max_grad_norm
        self.optimizer_kwargs = optimizer_kwargs
        self.optimizer: torch.optim.Optimizer | None = None
        self._params: list[nn.Parameter] = []

    def attach(self, parameters: Iterable[nn.Parameter]) -> "GradientStep":
        """Set the parameters this module optimises (called by the owner in its build step)."""
        self._params = [p for p in parameters if p.requires_grad]
        self.optimizer = OPTIMIZERS[self.optimizer_name](self._params, lr=self.lr, **self.optimizer_kwargs)
        self.built = True
        return self

    @api
    def step(self, loss_fn: Callable[[], tuple[torch.Tensor, dict]]) -> dict:
        if self.optimizer is None:
            raise RuntimeError(f"{self.name}: attach() the parameters before step()")
        loss, info = loss_fn()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm is not None:
            info["grad_norm"] = torch.nn.utils.clip_grad_norm_(self._params, self.max_grad_norm)
        self.optimizer.step()
        info["loss"] = loss.detach()
        return info

    def get_extra_state(self) -> Any:
        return {"optimizer": self.optimizer.state_dict() if self.optimizer is not None else None}

    def set_extra_state(self, state: Any) -> None:
        if state.get("optimizer") is not None and self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])


class Synchronization(Component):
    """Target-network sync: hard copy every ``every`` calls of ``step`` (tau = 1) or Polyak with ``tau`` < 1."""

    def __init__(self, every: int = 1, tau: float = 1.0, name: str | None = None) -> None:
        super().__init__(name or "target_sync")
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau}")
        self.every, self.tau = max(int(every), 1), float(tau)
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.built = True

    @api
    @torch.no_grad()
    def step(self, source: nn.Module, target: nn.Module) -> bool:
        """Count one call; sync ``target`` from ``source`` when due. Returns whether it synced."""
        self.calls += 1
        if self.tau < 1.0:
            for s, t in zip(source.parameters(), target.parameters()):
                t.lerp_(s, self.tau)
            return True
        if int(self.calls) % self.every == 0:
            target.load_state_dict(source.state_dict())
            return True
        return False
