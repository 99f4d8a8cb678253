"""Adam as ``torch.optim.Adam`` computes it, held without ``torch.optim.Optimizer``: :class:`Adam`, the agents'
optimizer where the optimizer is not the algorithmic choice.

Why not ``torch.optim.Adam`` itself: building or stepping any ``torch.optim`` optimizer imports ``torch._dynamo``
(its methods are wrapped in ``torch._disable_dynamo``), and once a process has imported it, a training loop of small
networks runs slower throughout, PPO on MuJoCo among them; the same import added alone to a run that builds no
``torch.optim`` optimizer slows it as much (figures: benchmarks/results/adam-without-dynamo-import.md). This class calls
the update ``torch.optim.Adam.step`` calls, the public functional ``torch.optim.adam.adam`` (with ``fused=True``: one
kernel over all parameters), on the state ``torch.optim.Adam`` keeps, and reads and writes that state in its
``state_dict`` format, so a checkpoint loads into either; the tests compare the two step by step.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import torch
from torch import nn
from torch.optim.adam import adam as adam_update


class Adam:
    """``torch.optim.Adam(params, lr, betas, eps, weight_decay, fused)`` in one parameter group: the same
    ``param_groups`` (a learning-rate schedule sets ``param_groups[0]["lr"]``), ``state``, ``step``, ``zero_grad``,
    ``state_dict`` and ``load_state_dict``."""

    def __init__(self, params: Iterable[nn.Parameter], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, fused: bool = False) -> None:
        """``fused``: one kernel over all parameters (CPU and CUDA floating-point tensors); else the implementation
        torch.optim.Adam picks by default. The update rule is the same."""
        if lr < 0.0 or eps < 0.0 or weight_decay < 0.0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"invalid Adam settings: lr {lr}, betas {betas}, eps {eps}, weight_decay {weight_decay}")
        # torch.optim.Adam's group keys, so that state_dict() is the one it writes
        self.defaults: dict[str, Any] = {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay, "amsgrad": False,
            "maximize": False, "foreach": None, "capturable": False, "differentiable": False, "fused": fused,
            "decoupled_weight_decay": False}
        self.param_groups: list[dict[str, Any]] = [{"params": list(params), **self.defaults}]
        self.state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step on every parameter that has a gradient."""
        for group in self.param_groups:
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:  # as torch.optim.Adam's first step: a float32 step counter on the parameter's device
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if not params:
                continue
            beta1, beta2 = group["betas"]
            adam_update(params, grads, exp_avgs, exp_avg_sqs, [], steps, foreach=None, fused=group["fused"] or None,
                        amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
                        weight_decay=group["weight_decay"], eps=group["eps"], maximize=False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.detach_().zero_()

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``, torch's format."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": [index.setdefault(id(p), len(index)) for p in group["params"]]})
        return {"state": {index[id(p)]: v for p, v in self.state.items() if id(p) in index}, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` or ``torch.optim.Adam`` wrote: the moments in each parameter's dtype and
        device, the step counters in float32 on it (copies: the given state is not shared)."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups) or any(
                len(mine["params"]) != len(saved["params"])
                for mine, saved in zip(self.param_groups, saved_groups, strict=True)):
            raise ValueError("the optimizer state holds other parameters than this optimizer's")
        params = {i: p for mine, saved in zip(self.param_groups, saved_groups, strict=True)
                  for i, p in zip(saved["params"], mine["params"], strict=True)}
        state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
        for i, values in state_dict["state"].items():
            p = params[i]
            state[p] = {k: v.to(dtype=torch.float32 if k == "step" else p.dtype, device=p.device, copy=True)
                        for k, v in values.items()}
        self.state = state
        self.param_groups = [{**{k: v for k, v in saved.items() if k != "params"}, "params": mine["params"]}
                             for mine, saved in zip(self.param_groups, saved_groups, strict=True)]
