"""One gradient step of a ``torch.optim`` optimizer on a computed loss (:func:`optimizer_step`: zero_grad,
backward, clip, step), the optimizer module that takes it on a loss callable (:class:`GradientStep`), and
target-network :class:`Synchronization`."""

from __future__ import annotations

import copy
from typing import Any, Callable, ClassVar, Iterable

import torch
from torch import nn

from rlrun.components.base import Component, api

OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "rmsprop": torch.optim.RMSprop,
              "adamw": torch.optim.AdamW}


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, max_grad_norm: float | None = None) -> dict:
    """Back-propagate ``loss`` into the parameters of ``optimizer`` (their old gradients dropped), clip the global
    L2 norm of their gradient to ``max_grad_norm`` (None: no clipping) and step. Returns ``{"loss": detached loss}``
    and, with clipping, ``"grad_norm"`` (the norm before clipping)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    info = {"loss": loss.detach()}
    if max_grad_norm is not None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        info["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
    return info


class GradientStep(Component):
    """One gradient step of a ``torch.optim`` optimizer on the loss ``loss_fn()`` returns: the plain step as an
    optimizer module, for an owner that drives a module chosen by name from config (TRPO's ``algo.policy_update``)
    or composes it (:class:`~rlrun.components.optimizers.MultiStep`)."""

    step_inputs: ClassVar[tuple[str, ...]] = ("loss_fn",)
    """What ``step`` takes, declared (as by every optimizer module) so an owner can drive a module chosen by name
    from config: ``loss_fn() -> (loss, info)``."""

    def __init__(self, optimizer: str = "adam", lr: float = 1e-3, max_grad_norm: float | None = None,
                 name: str | None = None, **optimizer_kwargs: Any) -> None:
        """``optimizer``: one of adam, sgd, rmsprop, adamw; ``lr``: learning rate (per gradient step);
        ``max_grad_norm``: clip the global L2 norm of the gradient to this (None = no clipping);
        ``optimizer_kwargs``: passed to the torch optimizer (e.g. ``eps``, ``betas``)."""
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
        """Call ``loss_fn() -> (loss, info)``, back-propagate, clip, step; return ``info`` with ``"loss"`` (and
        ``"grad_norm"``, the norm before clipping, when ``max_grad_norm`` is set)."""
        if self.optimizer is None:
            raise RuntimeError(f"{self.name}: attach() the parameters before step()")
        loss, info = loss_fn()
        info.update(optimizer_step(self.optimizer, loss, self.max_grad_norm))
        return info

    def get_extra_state(self) -> Any:
        return {"optimizer": self.optimizer.state_dict() if self.optimizer is not None else None}

    def set_extra_state(self, state: Any) -> None:
        if state.get("optimizer") is not None and self.optimizer is not None:
            # A deep copy: torch's Optimizer.load_state_dict keeps same-device tensors as they are, so loading the
            # live state of another GradientStep (in memory, not from a file) would share its moment tensors.
            self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))


class Synchronization(Component):
    """Target-network sync: hard copy every ``every`` calls of ``step`` (tau = 1) or Polyak with ``tau`` < 1."""

    step_inputs: ClassVar[tuple[str, ...]] = ("source", "target")
    """What ``step`` takes, declared (as by every optimizer module) so an owner can drive a module chosen by name
    from config: the source and the target module."""

    def __init__(self, every: int = 1, tau: float = 1.0, name: str | None = None) -> None:
        """``every``: calls of ``step`` between hard copies (used when ``tau`` = 1; the unit is whatever the caller
        calls ``step`` per, DQN: gradient steps); ``tau``: Polyak coefficient, the share of the source mixed into
        the target's parameters on every call (1 = hard copies); Polyak averages parameters and copies buffers."""
        super().__init__(name or "target_sync")
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {tau}")
        self.every, self.tau = max(int(every), 1), float(tau)
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.built = True
        # (source, target) -> their parameter and buffer lists: walking both modules on every Polyak call cost
        # ~10% of a small SAC update (benchmarks/learner_throughput.py). Parameters keep their identity through
        # .to(), load_state_dict and optimizer steps, so the lists stay valid; a changed count rebuilds them.
        self._tensors: dict[tuple[int, int], tuple[list, list, list, list]] = {}

    def _pairs(self, source: nn.Module, target: nn.Module) -> tuple[list, list, list, list]:
        key = (id(source), id(target))
        cached = self._tensors.get(key)
        if cached is None or len(cached[0]) != sum(1 for _ in source.parameters()):
            sp_, tp = list(source.parameters()), list(target.parameters())
            sb, tb = list(source.buffers()), list(target.buffers())
            if len(sp_) != len(tp) or len(sb) != len(tb):
                raise ValueError(f"{self.name}: source and target have different parameters or buffers")
            cached = self._tensors[key] = (sp_, tp, sb, tb)
        return cached

    @api
    @torch.no_grad()
    def step(self, source: nn.Module, target: nn.Module) -> bool:
        """Count one call; sync ``target`` from ``source`` when due. Returns whether it synced."""
        self.calls += 1
        if self.tau < 1.0:
            s_params, t_params, s_bufs, t_bufs = self._pairs(source, target)
            torch._foreach_lerp_(t_params, s_params, self.tau)
            for s, t in zip(s_bufs, t_bufs, strict=True):
                t.copy_(s)
            return True
        if int(self.calls) % self.every == 0:
            target.load_state_dict(source.state_dict())
            return True
        return False
