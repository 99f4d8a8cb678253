"""Plain torch layers inside components, called as the functions their ``forward`` runs.

nn.Module's call path (``_wrapped_call_impl`` -> ``_call_impl``, its hook checks) costs ~1.3 us per layer, a third of
a small MLP's forward at acting sizes (CartPole's 4-64-64-2 Q-network at batch 8: 21 us through ``nn.Sequential``,
14 us as the same ``F.linear``/``relu`` calls). :func:`apply` runs ``nn.Linear``, ``nn.ReLU``, ``nn.Tanh`` and
``nn.ELU`` as exactly those functions on the layer's own parameters (the same operations, so the same values and
gradients), and goes through the module's ``__call__`` where anything could observe the difference: hooks on the
layer (or, for an ``nn.Sequential``, on the sequence), global module hooks, or a tracer recording
(``torch.jit.trace``, TensorBoard's ``add_graph``). Any other module is called as usual. The components' own calls
take the same shortcut (:meth:`rlrun.components.base.Component.__call__`).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from rlrun.components.base import global_module_hooks_present

_FUNCTIONS: dict[type, Callable[[Any, torch.Tensor], torch.Tensor]] = {
    nn.Linear: lambda m, x: F.linear(x, m.weight, m.bias),
    nn.ReLU: lambda m, x: F.relu(x, inplace=m.inplace),
    nn.Tanh: lambda m, x: torch.tanh(x),
    nn.ELU: lambda m, x: F.elu(x, m.alpha, m.inplace),
}


def _hooked(m: nn.Module) -> bool:
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks)


def apply(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``module(x)`` for a layer or an ``nn.Sequential`` of layers, without nn.Module's call path where nothing
    hooks or traces it (module docstring)."""
    if global_module_hooks_present() or torch._C._get_tracing_state() or _hooked(module):
        return module(x)
    if type(module) is nn.Sequential:
        for layer in module:
            fn = _FUNCTIONS.get(type(layer))
            x = layer(x) if fn is None or _hooked(layer) else fn(layer, x)
        return x
    fn = _FUNCTIONS.get(type(module))
    return module(x) if fn is None else fn(module, x)
