"""Adam on torch's fused kernel, without ``torch.optim``'s Python layer: :class:`FusedAdam`.

``torch.optim.Adam(fused=True)`` runs one kernel, ``torch._fused_adam_``, over all parameters; around it,
``torch.optim.Optimizer`` wraps ``__init__``, ``step``, ``zero_grad``, ``state_dict`` and ``load_state_dict`` in
``torch._disable_dynamo`` / ``_use_grad``, which import ``torch._dynamo`` on first use (0.7-1.0 s of a run's
start-up on 2 CPU cores, measured with torch 2.13: a third of the time to the first episode of a CartPole run) and
add ~25 us of Python per step. :class:`FusedAdam` keeps the state in the same places and format
(``param_groups``, ``state[param]`` with ``step`` / ``exp_avg`` / ``exp_avg_sq``, ``state_dict()`` as torch writes
it, so checkpoints load into either) and calls the same kernel with the same arguments: its updates are
bit-identical to ``torch.optim.Adam(fused=True)`` (tests/components/test_fused_adam.py compares them).

``GradientStep("adam", fused=True)`` uses it where :func:`supports` the parameters and settings (floating-point CPU
or CUDA tensors in one param group; betas, eps, weight_decay, amsgrad, maximize); anything else gets
``torch.optim.Adam``.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any, Iterable

import torch
from torch import nn

FUSED_DEVICES = ("cpu", "cuda")
FUSED_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
KWARGS = ("betas", "eps", "weight_decay", "amsgrad", "maximize", "fused")


def supports(params: Iterable[nn.Parameter], **kwargs: Any) -> bool:
    """True when :class:`FusedAdam` takes these parameters and keyword arguments (else use ``torch.optim.Adam``)."""
    params = list(params)
    return (bool(kwargs.get("fused")) and set(kwargs) <= set(KWARGS) and bool(params)
            and all(isinstance(p, torch.Tensor) and p.device.type in FUSED_DEVICES and p.dtype in FUSED_DTYPES
                    and not p.is_sparse for p in params))


class FusedAdam:
    """``torch.optim.Adam(params, fused=True)``'s update, state and ``state_dict`` format, one param group."""

    def __init__(self, params: Iterable[nn.Parameter], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False,
                 fused: bool = True) -> None:
        params = list(params)
        if not fused or not supports(params, fused=True):
            raise ValueError("FusedAdam takes floating-point CPU or CUDA parameters only (use torch.optim.Adam)")
        if not 0.0 <= lr or not 0.0 <= eps or not 0.0 <= weight_decay:
            raise ValueError(f"invalid Adam settings: lr {lr}, eps {eps}, weight_decay {weight_decay}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid Adam betas {betas}")
        # The keys and values of torch.optim.Adam's param group, so that state_dict() matches torch's.
        self.defaults: dict[str, Any] = {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay, "amsgrad": amsgrad,
            "maximize": maximize, "foreach": None, "capturable": False, "differentiable": False, "fused": True,
            "decoupled_weight_decay": False}
        self.param_groups: list[dict[str, Any]] = [{"params": params, **self.defaults}]
        self.state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)

    # ------------------------------------------------------------ torch.optim.Optimizer's interface

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """One Adam step on every parameter that has a gradient (as ``torch.optim.Adam.step``)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            by_device: dict[tuple[torch.device, torch.dtype], list[list[torch.Tensor]]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients")
                state = self.state[p]
                if not state:  # as Adam's _init_group with fused=True: a float32 step counter on the param's device
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                lists = by_device.setdefault((p.device, p.dtype), [[], [], [], [], [], []])
                lists[0].append(p)
                lists[1].append(p.grad)
                lists[2].append(state["exp_avg"])
                lists[3].append(state["exp_avg_sq"])
                if group["amsgrad"]:
                    lists[4].append(state["max_exp_avg_sq"])
                lists[5].append(state["step"])
            lr = group["lr"]
            lr = float(lr) if not isinstance(lr, torch.Tensor) or lr.device.type == "cpu" else lr
            beta1, beta2 = group["betas"]
            for params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps in by_device.values():
                torch._foreach_add_(steps, 1)
                torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
                                   amsgrad=group["amsgrad"], lr=lr, beta1=float(beta1), beta2=float(beta2),
                                   weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
                                   grad_scale=None, found_inf=None)
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``, torch's format (the state
        tensors themselves, not copies, as torch returns them)."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: v for p, v in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state written by :meth:`state_dict` or by ``torch.optim.Adam`` (fused or not): the moments are cast
        to each parameter's dtype and device, the step counter to float32 on the parameter's device."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, saved in zip(self.param_groups, saved_groups, strict=True):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        params = {i: p for mine, saved in zip(self.param_groups, saved_groups, strict=True)
                  for i, p in zip(saved["params"], mine["params"], strict=True)}
        state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
        for i, values in state_dict["state"].items():
            if i not in params:
                continue
            p = params[i]
            state[p] = {k: (v.to(dtype=torch.float32, device=p.device) if k == "step"
                            else v.to(dtype=p.dtype, device=p.device)) if isinstance(v, torch.Tensor)
                        else copy.deepcopy(v) for k, v in values.items()}
        self.state = state
        self.param_groups = [{**{k: v for k, v in saved.items() if k != "params"}, "params": mine["params"]}
                             for mine, saved in zip(self.param_groups, saved_groups, strict=True)]
